"""Lowering of `tile.gather` and `tile.scatter` (`tilec.dialects.gather`).

Each thread computes the addresses of the elements it holds as for `tile.load`, except along
the gathered dimension, where the element index is `offset + index`: with a 1-D index tile
laid out as the slice of the access's layout along that dimension (assign-layouts), the
thread holds the index of each of its rows, so it multiplies each by the stride once and
reuses the product for every element of the row; a vectorized access (the contiguous last
dimension, `vector` from vectorize) still moves 16 bytes per row run. An index tile of the
access's shape gives each element its own.

Out-of-range indices (`index < 0` or `>= extent`, compared unsigned as the extents are) make
the element's predicate false: a gather reads `padding` there, a scatter does not write. With
`TILEC_CHECK_BOUNDS=1` in the environment when the kernel is compiled, each access also
checks its indices: the first thread of the launch to find a bad one prints the kernel, the
tensor, the index, its position in the index tile and the block (`vprintf`), and every thread
that finds one stops the kernel with `__assertfail` (CUDA_ERROR_ASSERT, which the runtime
reports as a `GPUError` that says so).
"""

from __future__ import annotations

import os
from typing import Any

from llvmlite import ir

from tilec.dialects.gather import GatherOp, ScatterOp, index_is_per_row
from tilec.ir.attributes import Attribute
from tilec.ir.core import Operation
from tilec.ir.types import TileType
from tilec.lowering.exchange import thread_map
from tilec.lowering.layouts import SliceLayout
from tilec.lowering.llvm_types import constant, memory_type, register_kind

__all__ = [
    "CHECK_BOUNDS_VARIABLE",
    "check_bounds_requested",
    "gathered_access",
    "index_layout",
    "lower_gather",
    "lower_scatter",
]

CHECK_BOUNDS_VARIABLE = "TILEC_CHECK_BOUNDS"
REPORTED_SYMBOL = "tilec_bounds_reported"
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
GENERIC_PTR = ir.PointerType()
GLOBAL_PTR = ir.PointerType(addrspace=1)


def check_bounds_requested() -> bool:
    """Whether kernels compiled now check their gathers' indices (`TILEC_CHECK_BOUNDS=1`)."""
    return os.environ.get(CHECK_BOUNDS_VARIABLE, "") not in ("", "0")


def index_layout(layout: Attribute, axis: int, indices: TileType, rank: int) -> Attribute:
    """Where a gather of `rank` dimensions in `layout` wants its index tile: a 1-D one as the
    slice of `layout` along `axis` (every other dimension removed, so each thread holds the
    indices of its own rows), one of the access's shape in `layout` itself."""
    if not index_is_per_row(indices) or rank == 1:
        return layout
    for d in reversed(range(rank)):
        if d != axis:
            layout = SliceLayout(d, layout)
    return layout


def gathered_access(lowering: Any, op: Operation, t: TileType) -> tuple[list, list]:
    """Per slot of an access of `t` indexed by `op.indices` along `op.axis`: the element
    pointer and its predicate (in bounds, index in range, mask), as `_access` gives a load;
    emits the index check when compiled with `TILEC_CHECK_BOUNDS=1`. Any op that reads or
    writes a gathered region (an atomic on one) can use it."""
    b = lowering.b
    view = lowering.values[op.view]
    offsets = [lowering.values[v] for v in op.offsets]
    axis = op.attributes["axis"].value
    promised = op.attributes.get("in_bounds")
    checked = [not x for x in promised.value] if promised is not None else [True] * t.rank
    m = thread_map(t)
    positions = lowering.dim_indices(m)
    index_values = lowering.values[op.indices]
    per_row = index_is_per_row(op.indices.type)
    if per_row and len(index_values) != m.counts[axis]:
        raise ValueError(
            f"{op.name}: the index tile {op.indices.type} is not laid out along dim {axis} of "
            f"{t} (run assign-layouts)"
        )

    def gathered(value: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        index = b.add(offsets[axis], _to_i64(b, value))
        ok = b.icmp_unsigned("<", index, view.extents[axis])  # below 0 is out of range too
        return index, b.mul(index, view.strides[axis]), ok

    addresses: list[list] = []
    inside: list[list] = []
    rows: list[tuple] = []
    for d, indices in enumerate(positions):
        if d == axis:
            rows = [gathered(v) for v in index_values] if per_row else []
            addresses.append([r[1] for r in rows])
            inside.append([r[2] for r in rows])
            continue
        adds, oks = [], []
        for i in indices:
            index = b.add(offsets[d], b.sext(i, I64))
            oks.append(b.icmp_unsigned("<", index, view.extents[d]) if checked[d] else None)
            adds.append(b.mul(index, view.strides[d]))
        addresses.append(adds)
        inside.append(oks)
    masks = lowering.values[op.mask] if op.mask is not None else None
    element = memory_type(t.element)
    pointers, predicates, checks = [], [], []
    checking = check_bounds_requested()
    for slot in range(m.num_slots):
        k = m.slot_multi_index(slot)
        if per_row:
            index, address, in_range = rows[k[axis]]
        else:
            index, address, in_range = gathered(index_values[slot])
        offset, ok = None, in_range
        for d in range(len(k)):
            term = address if d == axis else addresses[d][k[d]]
            offset = term if offset is None else b.add(offset, term)
            q = None if d == axis else inside[d][k[d]]
            ok = ok if q is None else b.and_(ok, q)
        if masks is not None:
            ok = b.and_(ok, masks[slot])
        pointers.append(b.gep(view.pointer, [offset], source_etype=element))
        predicates.append(ok)
        if not checking:
            continue
        if per_row and masks is None:
            if all(kd == 0 for d, kd in enumerate(k) if d != axis):  # once per row
                checks.append((in_range, index, [positions[axis][k[axis]]]))
        else:  # masked-off lanes are not checked
            fine = in_range if masks is None else b.or_(in_range, b.not_(masks[slot]))
            checks.append((fine, index, [positions[d][k[d]] for d in range(len(k))]))
    if checking:
        _check_indices(lowering, op, axis, view, checks)
    return pointers, predicates


def _to_i64(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    return value if value.type == I64 else b.sext(value, I64)


def _check_indices(lowering: Any, op: Operation, axis: int, view: Any, checks: list) -> None:
    """Report the first out-of-range index of this thread and stop the kernel (module doc)."""
    b = lowering.b
    bad_any: ir.Value | None = None
    first_index: ir.Value = ir.Constant(I64, 0)
    first_position: list[ir.Value] = [ir.Constant(I32, 0)] * len(checks[0][2]) if checks else []
    for ok, index, position in reversed(checks):  # the lowest slot wins: it is selected last
        bad = b.not_(ok)
        bad_any = bad if bad_any is None else b.or_(bad_any, bad)
        first_index = b.select(bad, index, first_index)
        first_position = [b.select(bad, p, q) for p, q in zip(position, first_position)]
    if bad_any is None:
        return
    with b.if_then(bad_any, likely=False):
        module = b.module
        flag = _reported_flag(module)
        earlier = b.atomic_rmw("xchg", flag, ir.Constant(I32, 1), "monotonic")
        with b.if_then(b.icmp_unsigned("==", earlier, ir.Constant(I32, 0))):
            kernel = lowering.func.sym_name
            tensor = op.view.name_hint or "tensor"
            where = ", ".join(["%lld"] * len(first_position))
            text = (
                f"tilec: kernel '{kernel}': index %lld at position [{where}] of the index tile "
                f"of {op.name} is out of range for dim {axis} of '{tensor}' (extent %lld), "
                "in block (%lld, %lld, %lld) (TILEC_CHECK_BOUNDS=1)\n"
            )
            block = [lowering._sreg(f"ctaid.{c}") for c in "xyz"]
            _printf(b, text, [first_index, *first_position, view.extents[axis], *block])
        _assert_fail(b, f"index in range ({op.name} of kernel '{lowering.func.sym_name}')")


def _reported_flag(module: ir.Module) -> ir.Value:
    """A global i32 that the first reporting thread sets: one message per launch."""
    flag = module.globals.get(REPORTED_SYMBOL)
    if flag is None:
        flag = ir.GlobalVariable(module, I32, REPORTED_SYMBOL, addrspace=1)
        flag.initializer = ir.Constant(I32, 0)
        flag.linkage = "internal"
        flag.type = GLOBAL_PTR  # opaque, as the rest of the module's pointers
    return flag


def _string(b: ir.IRBuilder, text: str, name: str) -> ir.Value:
    """A generic pointer to a NUL-terminated constant string in global memory."""
    module = b.module
    data = bytearray(text.encode()) + b"\0"
    symbol = f"{name}{len(module.globals)}"
    g = ir.GlobalVariable(module, ir.ArrayType(I8, len(data)), symbol, addrspace=1)
    g.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)
    g.global_constant = True
    g.linkage = "internal"
    g.type = GLOBAL_PTR
    return b.addrspacecast(g, GENERIC_PTR)


def _printf(b: ir.IRBuilder, text: str, values: list[ir.Value]) -> None:
    """`vprintf(text, args)`: the arguments packed as C varargs, each a 64-bit integer."""
    module = b.module
    vprintf = module.globals.get("vprintf")
    if vprintf is None:
        vprintf = ir.Function(module, ir.FunctionType(I32, [GENERIC_PTR, GENERIC_PTR]), "vprintf")
    array = ir.ArrayType(I64, len(values))  # every argument widened to 64 bits (%lld)
    with b.goto_entry_block():
        buffer = b.alloca(array)
    buffer.align = 8
    for i, v in enumerate(values):
        wide = v if v.type == I64 else b.sext(v, I64)
        b.store(wide, b.gep(buffer, [I32(0), I32(i)], inbounds=True))
    b.call(vprintf, [_string(b, text, "tilec_message"), b.addrspacecast(buffer, GENERIC_PTR)])


def _assert_fail(b: ir.IRBuilder, message: str) -> None:
    """`__assertfail`: CUDA's device-side assert (the launch fails with CUDA_ERROR_ASSERT)."""
    module = b.module
    fail = module.globals.get("__assertfail")
    if fail is None:
        fail = ir.Function(
            module,
            ir.FunctionType(ir.VoidType(), [GENERIC_PTR, GENERIC_PTR, I32, GENERIC_PTR, I64]),
            "__assertfail",
        )
    file = _string(b, "tilec", "tilec_file")
    b.call(fail, [_string(b, message, "tilec_assert"), file, I32(0), file, I64(1)])


# -- the ops ----------------------------------------------------------------------------------


def lower_gather(lowering: Any, op: GatherOp) -> list[Any]:
    t = op.result.type
    pointers, predicates = gathered_access(lowering, op, t)
    padding_attr = op.attributes.get("padding")
    padding = 0 if padding_attr is None else padding_attr.value
    other = constant(t.element, int(padding) if isinstance(padding, bool) else padding)
    vector = op.attributes.get("vector")
    if vector is not None and vector.value > 1:
        return [lowering._vector_load(t, vector.value, pointers, predicates, other)]
    return [[lowering._global_load(t.element, p, q, other) for p, q in zip(pointers, predicates)]]


def lower_scatter(lowering: Any, op: ScatterOp) -> None:
    t = op.value.type
    pointers, predicates = gathered_access(lowering, op, t)
    owner = lowering.unique_owner(thread_map(t))
    if owner is not None:
        predicates = [lowering.b.and_(p, owner) for p in predicates]
    values = lowering.values[op.value]
    vector = op.attributes.get("vector")
    if vector is not None and vector.value > 1:
        lowering._vector_store(t, vector.value, pointers, predicates, values)
        return None
    letter, ptx_type, reg = register_kind(t.element)
    asm = ir.InlineAsm(
        ir.FunctionType(ir.VoidType(), [GLOBAL_PTR, reg, I1]),
        f"@$2 st.global.{ptx_type} [$0], $1;",
        f"l,{letter},b",
        side_effect=True,
    )
    for p, v, q in zip(pointers, values, predicates):
        lowering.b.call(asm, [p, lowering._to_bits(v, reg, t.element), q])
    return None
