"""Lowering of atomics (`tilec.dialects.atomic`): one predicated PTX `atom` (or `red`) per
element, issued by the element's unique owner.

Per slot of the value's layout a thread computes the element's address and whether it is
inside the view's extents and the mask (the same `_access` as `tile.store`), and only the
unique owner of an element issues its operation: a layout that replicates elements (a
broadcast, a slice, a tile smaller than the block) would otherwise add them once per copy.

    @p red.relaxed.gpu.global.add.f32 [addr], v;             old values unused
    mov.b32 old, 0;  @p atom.relaxed.gpu.global.add.f32 old, [addr], v;
    mov.b32 old, 0;  @p atom.relaxed.gpu.global.cas.b32 old, [addr], cmp, v;

`tile.atomic_scatter` takes its addresses and predicates from the gathers' `gathered_access`:
each thread holds the indices of its own rows (assign-layouts lays the index tile out so), and
an element's address is base + (offset + index) * stride along the gathered dimension; an
out-of-range index clears the element's predicate, as do the extents and the mask. Repeated
indices are separate `red`s, so all of them count.

`red` is used when nothing reads the result and the memory order is one `red` has (`relaxed`,
`release`); otherwise `atom`. When the result is used and the layout replicates, the owners
write the old values to the shared scratch and every thread reads its copies back after a
barrier (`exchange.op_scratch_bytes` sizes it). Float max/min have no PTX `atom` (ptxas 12.9:
integers, and 16-bit floats on sm_90, only): a value whose sign bit is clear is combined by a
signed integer max (min) of its bits, one whose sign bit is set by an unsigned integer min
(max) -- IEEE totalOrder, as the interpreter computes. `bf16` add needs sm_90 (`check_arch`).
Element types: add `.u32 .u64 .f32 .f64 .noftz.f16 .noftz.bf16` (integer add wraps, so one
unsigned form serves signed values), max/min `.s32 .s64`, cas `.b32 .b64`.

A float add whose old values nobody reads, with `vector = v` from the vectorize pass, is one
vector `red` per run of v elements on sm_90 (`red.relaxed.gpu.global.add.v4.f32`,
`red.relaxed.gpu.global.add.noftz.v8.bf16`: PTX 8.1): 16 bytes an instruction, where one
element each made an embedding backward's bf16 scatter-add issue eight times the reductions.
Older targets take the scalar form.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tilec.diagnostics import TileError
from tilec.dialects import atomic as A
from tilec.dialects import gather as G
from tilec.ir.core import Operation
from tilec.ir.types import FloatType, IntegerType, TileType
from tilec.lowering.exchange import thread_map
from tilec.lowering.gather import gathered_access
from tilec.lowering.layouts import row_major_strides
from tilec.lowering.llvm_types import register_kind
from tilec.lowering.memory import vector_slots

__all__ = ["LOWERINGS", "check_arch"]

I1 = ir.IntType(1)
I32 = ir.IntType(32)
GLOBAL_PTR = ir.PointerType(addrspace=1)
SHARED_PTR = ir.PointerType(addrspace=3)

RMW_OPS = (A.AtomicRMWOp, A.AtomicScatterOp)

# Architectures whose PTX has no bf16 atom/red (ptxas: "requires .target sm_90 or higher").
_NO_BF16_ATOMICS = ("sm_80", "sm_86", "sm_89")


def check_arch(module: Operation, arch: str) -> None:
    """A located error for an atomic the architecture has no instruction for."""
    if arch not in _NO_BF16_ATOMICS:
        return
    for op in module.walk():
        if isinstance(op, RMW_OPS) and op.view.type.element == FloatType("bf16"):
            raise TileError(
                f"atomic add of bf16 needs sm_90 or later; {arch} has no bf16 atomics",
                op.loc,
                hint="accumulate in an f32 tensor (atomic_add of f32), or compile for sm_90a",
            )


def _ptx_type(kind: str, element: Any) -> str:
    if isinstance(element, FloatType):
        if element.name in ("f16", "bf16"):
            return f"noftz.{element.name}"
        return element.name
    width = element.width
    return {"add": "u", "max": "s", "min": "s", "cas": "b"}[kind] + str(width)


def _asm(result: ir.IntType | None, registers: list[ir.IntType], letters: list[str], text: str):
    """An inline-PTX call: `$0` the result (when there is one), then the address, the
    registers, and the predicate last."""
    operands = [GLOBAL_PTR, *registers, I1]
    constraints = ["l", *letters, "b"]
    if result is not None:
        constraints.insert(0, "=" + letters[-1])
    return ir.InlineAsm(
        ir.FunctionType(result or ir.VoidType(), operands),
        text,
        ",".join([*constraints, "~{memory}"]),
        side_effect=True,
    )


def _operation(
    lowering: Any, instruction: str, width: int, pointer, registers, predicate, want_old: bool
) -> ir.Value | None:
    """One predicated `red` (want_old False) or `atom` of `registers` at `pointer`."""
    reg = ir.IntType(width)
    letter = register_kind(IntegerType(width))[0]
    n = len(registers)
    if not want_old:
        places = ", ".join(f"${i + 1}" for i in range(n))
        text = f"@${n + 1} red.{instruction} [$0], {places};"
        lowering.b.call(_asm(None, [reg] * n, [letter] * n, text), [pointer, *registers, predicate])
        return None
    places = ", ".join(f"${i + 2}" for i in range(n))
    text = f"mov.b{width} $0, 0;\n\t@${n + 2} atom.{instruction} $0, [$1], {places};"
    call = _asm(reg, [reg] * n, [letter] * n, text)
    return lowering.b.call(call, [pointer, *registers, predicate])


def lower_atomic(lowering: Any, op: Operation) -> list[Any]:
    b = lowering.b
    t: TileType = op.value.type
    element = t.element
    width = element.width
    m = thread_map(t)
    if isinstance(op, A.AtomicScatterOp):
        pointers, predicates = gathered_access(lowering, op, t)
    else:
        pointers, predicates = lowering._access(op, t)
    owner = lowering.unique_owner(m)
    true = ir.Constant(I1, 1)
    predicates = [
        (owner if p is None else p if owner is None else b.and_(p, owner)) or true
        for p in predicates
    ]
    kind = op.kind if isinstance(op, RMW_OPS) else "cas"
    sem = A.memory_order(op)
    used = op.result.has_uses
    # `red` has only the relaxed and release orders; an unused acquire takes `atom`.
    want_old = used or sem not in ("relaxed", "release")
    scope = f"{sem}.gpu.global"
    bits = ir.IntType(width)

    def as_bits(v: ir.Value) -> ir.Value:
        return lowering._to_bits(v, bits, element) if isinstance(element, FloatType) else v

    values = [as_bits(v) for v in lowering.values[op.value]]
    olds: list[ir.Value] = []
    vector = op.attributes.get("vector")
    if vector is not None and vector.value > 1 and not want_old and _has_vector_red(lowering):
        _vector_reds(lowering, m, vector.value, scope, element, pointers, predicates, values)
        return [None]
    if kind == "cas":
        compares = [as_bits(v) for v in lowering.values[op.compare]]
        for pointer, c, v, q in zip(pointers, compares, values, predicates):
            instruction = f"{scope}.cas.{_ptx_type(kind, element)}"
            olds.append(_operation(lowering, instruction, width, pointer, [c, v], q, True))
    elif kind == "add" or not isinstance(element, FloatType):
        instruction = f"{scope}.{kind}.{_ptx_type(kind, element)}"
        for pointer, v, q in zip(pointers, values, predicates):
            olds.append(_operation(lowering, instruction, width, pointer, [v], q, want_old))
    else:
        # Float max/min as integer max/min of the bits: signed where the value's sign bit is
        # clear, unsigned with the other extreme where it is set (module docstring).
        other = "min" if kind == "max" else "max"
        positive = f"{scope}.{kind}.s{width}"
        negative = f"{scope}.{other}.u{width}"
        zero = ir.Constant(bits, 0)
        for pointer, v, q in zip(pointers, values, predicates):
            sign = b.icmp_signed("<", v, zero)
            on_positive = b.and_(q, b.not_(sign))
            on_negative = b.and_(q, sign)
            old_positive = _operation(
                lowering, positive, width, pointer, [v], on_positive, want_old
            )
            old_negative = _operation(
                lowering, negative, width, pointer, [v], on_negative, want_old
            )
            olds.append(None if not want_old else b.select(sign, old_negative, old_positive))
    if not used:
        return [None]
    result = [lowering._from_bits(x, element) for x in olds]
    if owner is not None:
        # Only the owners got the old values: they hand them to the copies.
        lowering.before_scratch_write(op)
        lowering.write_tile(t, result)
        lowering.barrier()
        flats = lowering.flat_indices(m, row_major_strides(t.shape))
        result = [lowering.scratch_load(element, f) for f in flats]
        lowering.after_scratch_read(op)
    return [result]


def _has_vector_red(lowering: Any) -> bool:
    """Whether the target has vector `red` (sm_90 and later; PTX 8.1)."""
    return lowering.arch not in _NO_BF16_ATOMICS


def _vector_reds(
    lowering: Any, m: Any, v: int, scope: str, element: FloatType, pointers, predicates, values
) -> None:
    """One predicated vector `red.add` per run of `v` slots along the last dimension (the
    vectorize pass proved each run's address aligned to its bytes and one predicate right for
    the whole run): `red.relaxed.gpu.global.add.v4.f32`, `....add.noftz.v8.bf16`."""
    width = element.width
    reg = ir.IntType(width)
    letter = register_kind(IntegerType(width))[0]
    noftz = "noftz." if width == 16 else ""
    instruction = f"red.{scope}.add.{noftz}v{v}.{element.name}"
    places = ", ".join(f"${i + 1}" for i in range(v))
    text = f"@${v + 1} {instruction} [$0], {{{places}}};"
    asm = _asm(None, [reg] * v, [letter] * v, text)
    for s in vector_slots(m.counts, m.dims[-1].offsets, v):
        lowering.b.call(asm, [pointers[s], *values[s : s + v], predicates[s]])


def lower_bincount(lowering: Any, op: Operation) -> list[Any]:
    """`tile.bincount` in the kernel's shared scratch: the bins zeroed by the result's unique
    owners, a barrier, each lane's value added to its bin by a predicated `red.shared.add`
    (by the indices' unique owners, where the mask holds and the index is in `[0, P)`), a
    barrier, and every thread reads its elements of the result back."""
    b = lowering.b
    result: TileType = op.result.type
    element = result.element
    bins = result.shape[0]
    zero = ir.Constant(lowering.memory_type(element), 0)
    lowering.before_scratch_write(op)
    lowering.write_tile(result, [zero] * thread_map(result).num_slots)
    lowering.barrier()
    m = thread_map(op.indices.type)
    owner = lowering.unique_owner(m)
    indices = lowering.values[op.indices]
    values = lowering.values[op.values]
    masks = lowering.values[op.mask] if op.mask is not None else [None] * len(indices)
    width = element.width
    kind = "f32" if isinstance(element, FloatType) else "u32"
    bits = ir.IntType(width)
    asm = ir.InlineAsm(
        ir.FunctionType(ir.VoidType(), [SHARED_PTR, bits, I1]),
        f"@$2 red.shared.add.{kind} [$0], $1;",
        "l,r,b,~{memory}",
        side_effect=True,
    )
    for index, value, mask in zip(indices, values, masks):
        index = b.trunc(index, I32) if index.type.width > 32 else index
        inside = b.icmp_unsigned("<", index, ir.Constant(I32, bins))  # negatives wrap high
        predicate = inside if owner is None else b.and_(inside, owner)
        if mask is not None:
            predicate = b.and_(predicate, mask)
        # An index outside the bins is clamped to bin 0 for the address; its lane is off.
        address = lowering.scratch_pointer(element, b.select(inside, index, ir.Constant(I32, 0)))
        if isinstance(element, FloatType):
            value = b.bitcast(value, bits)
        b.call(asm, [address, value, predicate])
    lowering.barrier()
    flats = lowering.flat_indices(thread_map(result), row_major_strides(result.shape))
    counts = [lowering.scratch_load(element, f) for f in flats]
    lowering.after_scratch_read(op)
    return [counts]


LOWERINGS = {
    A.AtomicRMWOp: lower_atomic,
    A.AtomicCasOp: lower_atomic,
    A.AtomicScatterOp: lower_atomic,
    G.BincountOp: lower_bincount,
}
