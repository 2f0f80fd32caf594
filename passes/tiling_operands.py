"""What the `tiling` pass (passes/tiling.py) asks of a kernel's dots and their operands: where
an operand comes from (a load, an accumulator, a transpose), whether it is streamed through the
loop or loop-invariant, which loads several dots share, and which dots the tensor-core paths
take (mma.sync, wgmma, int8, f8) or refuse, with the reason. The search (passes/tiling_search.py)
and the block order (passes/tiling_order.py) read them; docs/passes.md is the contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tilec.dialects import arith, scf
from tilec.dialects import math as mathd
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import ArrayAttr
from tilec.ir.core import BlockArgument, Operation, OpResult, Value
from tilec.ir.types import TileType, bf16, f16, f32, i8, i32
from tilec.lowering.abi import argument_name, kernel_specialization
from tilec.lowering.layouts import element_bytes

if TYPE_CHECKING:
    from tilec.passes.tiling_search import TiledDot

__all__ = [
    "StoredForm",
    "drops_leading_ones",
    "eight_bit_wgmma_problem",
    "either_of",
    "from_accumulator",
    "int8_b_reads",
    "int8_byte_copies",
    "int8_mma_problem",
    "is_f8_dot",
    "is_mma_dot",
    "k_major",
    "loop_invariant_operand",
    "m_major_a",
    "operand_load",
    "pitched_operands",
    "program_axes",
    "scattered_operands",
    "shared_operand_loads",
    "stored_form",
    "streamed_operand",
]


def operand_load(v: Value) -> T.LoadOp | None:
    """The `tile.load` a dot operand is (a cast, transpose, reshape or select of), if any."""
    while isinstance(v, OpResult):
        op = v.op
        if isinstance(op, T.LoadOp):
            return op
        if not isinstance(op, (T.CastOp, T.TransposeOp, T.ReshapeOp, T.SelectOp)):
            return None
        v = op.operands[1] if isinstance(op, T.SelectOp) else op.operands[0]
    return None


def program_axes(v: Value) -> set[int]:
    """The grid axes whose `tile.program_id` the scalar `v` is computed from."""
    axes: set[int] = set()
    seen: set[int] = set()
    stack = [v]
    while stack:
        v = stack.pop()
        if id(v) in seen or not isinstance(v, OpResult):
            continue
        seen.add(id(v))
        if isinstance(v.op, T.ProgramIdOp):
            axes.add(v.op.axis)
        elif not v.op.regions:
            stack.extend(v.op.operands)
    return axes


def k_major(b: Value) -> bool:
    """Whether a dot's right operand is loaded transposed (`k[tn, :].T`: stored [N, K])."""
    transposed = False
    while isinstance(b, OpResult) and not isinstance(b.op, T.LoadOp):
        if isinstance(b.op, T.TransposeOp):
            transposed = not transposed
        b = b.op.operands[1] if isinstance(b.op, T.SelectOp) else b.op.operands[0]
    return transposed


def m_major_a(dot: T.DotOp) -> bool:
    """Whether a `wgmma` dot reads its A M-major by a descriptor: A stored [K, M] (the
    transpose of a tile loaded as its tensor holds it, `stored_form`) of 16-bit elements
    (wgmma transposes no 8-bit operand). Its accumulator then keeps wgmma's own row order
    (`MmaLayout.natural_rows`), so that the copies write A as the tensor holds it."""
    a = dot.a.type
    if not (isinstance(a, TileType) and a.element in (f16, bf16)):
        return False
    stored = stored_form(dot.a)
    return stored.transposed and operand_load(stored.value) is not None


def from_accumulator(v: Value) -> bool:
    """Whether `v` is computed, through elementwise ops, from a `tile.dot`'s result."""
    seen: set[int] = set()
    stack = [v]
    while stack:
        v = stack.pop()
        if id(v) in seen or not isinstance(v, OpResult):
            continue
        seen.add(id(v))
        op = v.op
        if isinstance(op, T.DotOp):
            return True
        if isinstance(op, (T.CastOp, T.SelectOp, T.ConvertLayoutOp, T.BroadcastOp)) or (
            type(op).__module__ in (arith.__name__, mathd.__name__)
        ):
            stack.extend(x for x in op.operands if isinstance(x.type, TileType))
    return False


def streamed_operand(v: Value, dot: Operation) -> bool:
    """Whether `v` is (a cast, transpose or reshape of) a `tile.load` in the dot's loop body:
    such an operand needs one shared buffer per pipeline stage, any other one buffer."""
    loop = dot.parent_op
    load = operand_load(v)
    return isinstance(loop, scf.ForOp) and load is not None and loop.is_ancestor_of(load)


def loop_invariant_operand(v: Value, dot: Operation) -> bool:
    """Whether dot operand `v` is (a cast, transpose or reshape of) a `tile.load` made before
    the loop the dot is in: smem-placement stages it once, before the loop, and the mma.sync
    lowering reads its fragments from there once, into registers held across the loop."""
    loop = dot.parent_op
    load = operand_load(v)
    return isinstance(loop, scf.ForOp) and load is not None and not loop.is_ancestor_of(load)


def shared_operand_loads(dots: list[TiledDot]) -> list[tuple[tuple, int]]:
    """(shape, element bytes) of each `tile.load` in a loop body that operands of several
    dots read (attention's backward reads q by `q @ k.T` and `ds.T @ q`): pipeline copies a
    loaded tile to shared memory asynchronously only when one store reads it, so this one is
    loaded into registers and stays there until the last dot's operand is staged."""
    readers: dict[int, tuple[T.LoadOp, set[int]]] = {}
    for d in dots:
        for index, v in enumerate((d.op.a, d.op.b)):
            if d.streamed[index]:
                load = operand_load(v)
                assert load is not None
                readers.setdefault(id(load), (load, set()))[1].add(id(d.op))
    return [
        (tuple(load.result.type.shape), element_bytes(load.result.type.element))
        for load, ops in readers.values()
        if len(ops) > 1
    ]


def scattered_operands(kernel: FuncOp) -> list[str]:
    """The last strides of dot operands' tensors not known to be 1 (`tilec.unit`, from the
    `assume` pass): such operands are copied one element at a time, each with its own 64-bit
    address, which leaves registers for a smaller accumulator only."""
    unit = {str(x) for x in (kernel.attributes.get("tilec.unit") or ArrayAttr(())).value}
    found: list[str] = []
    for _, view in _loaded_operand_views(kernel):
        stride = f"{argument_name(kernel, view.index)}.stride.{view.type.rank - 1}"
        if stride not in unit and stride not in found:
            found.append(stride)
    return found


def _loaded_operand_views(kernel: FuncOp) -> list[tuple[T.DotOp, BlockArgument]]:
    """(dot, argument) for each operand of the kernel's mma dots that is loaded straight from
    a kernel argument."""
    found = []
    for op in kernel.walk():
        if not (isinstance(op, T.DotOp) and is_mma_dot(op)):
            continue
        for v in (op.a, op.b):
            load = operand_load(v)
            view = load.view if load is not None else None
            if isinstance(view, BlockArgument) and view.owner is kernel.body.block:
                found.append((op, view))
    return found


def int8_byte_copies(kernel: FuncOp) -> list[str]:
    """Why operands of the kernel's int8 mma dots would be copied to shared memory in runs of
    fewer than 8 bytes (`lower_async_copy` copies runs of 4, 8 or 16 bytes, else element by
    element): a view not known to be 16-byte aligned, or a stride other than the last not
    known to be a multiple of 8 (`tilec.divisible`, `tilec.multiples`). A thread then makes
    4 to 16 times the copies of a 16-byte one, each with its own address, so such kernels
    keep smaller tiles (`SCATTERED_ACCUMULATORS`, 32-byte K rows). At 128x128x64 on sm_90a
    ptxas spilled 17 KiB with byte copies, 384 bytes with 4-byte ones, 4 with 8-byte ones;
    at 64x64x32 none."""
    aligned = {str(x) for x in (kernel.attributes.get("tilec.aligned") or ArrayAttr(())).value}
    divisible = {str(x) for x in (kernel.attributes.get("tilec.divisible") or ArrayAttr(())).value}
    multiples = dict(kernel_specialization(kernel).multiples)
    found: list[str] = []
    for op, view in _loaded_operand_views(kernel):
        if op.a.type.element != i8:
            continue
        name = argument_name(kernel, view.index)
        why = [] if name in aligned else [f"{name} not known to be 16-byte aligned"]
        for d in range(view.type.rank - 1):
            stride = f"{name}.stride.{d}"
            if stride not in divisible and multiples.get(stride, 1) < 8:
                why.append(f"{stride} not known to be a multiple of 8")
        found.extend(w for w in why if w not in found)
    return found


def pitched_operands(kernel: FuncOp) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """`(index, reuse)` for each of the kernel's tensor arguments of two or more dimensions
    (a batch of matrices: `bmm`'s) that it only reads (every
    use a `tile.load` or a `tile.dim`) and reads as an operand of a `tile.dot` (through a cast,
    transpose, reshape or select: `operand_load`): those a launch may copy into a buffer with
    16-byte rows when theirs are not (`tilec.runtime.pitched`), since nothing the kernel
    writes can be seen through them. `reuse`: the named dimensions of the dot's other operand
    that this one lacks (N for A of `a @ b`): across them the product reads this operand
    again, once a tile."""
    found: dict[int, set[str]] = {}
    for op in kernel.walk():
        if not isinstance(op, T.DotOp):
            continue
        views = [getattr(operand_load(v), "view", None) for v in (op.a, op.b)]
        for view, other in ((views[0], views[1]), (views[1], views[0])):
            if isinstance(view, BlockArgument) and view.owner is kernel.body.block:
                mine = _named_dims(view)
                theirs = _named_dims(other) if isinstance(other, Value) else ()
                found.setdefault(view.index, set()).update(d for d in theirs if d not in mine)
    arguments = kernel.body.block.args
    return tuple(
        (i, tuple(sorted(reuse)))
        for i, reuse in sorted(found.items())
        if getattr(arguments[i].type, "rank", 0) >= 2
        and all(isinstance(u, (T.LoadOp, T.DimOp)) for u in arguments[i].uses)
        and all(u.view is arguments[i] for u in arguments[i].uses)
    )


def _named_dims(view: Value) -> tuple[str, ...]:
    shape = getattr(view.type, "shape", ())
    return tuple(d for d in shape if isinstance(d, str))


def is_mma_dot(op: T.DotOp) -> bool:
    """Whether the element types of `op` are ones mma.sync takes: f16/bf16 into f32
    (m16n8k16) or i8 into i32 (m16n8k32; `int8_mma_problem` has its further condition)."""
    a, b, c = op.a.type, op.b.type, op.acc.type
    if a.element != b.element:
        return False
    if is_f8_dot(op):
        return c.element == f32
    return (a.element in (f16, bf16) and c.element == f32) or (a.element == i8 and c.element == i32)


def is_f8_dot(op: T.DotOp) -> bool:
    """Whether `op` multiplies f8 operands (f8e4m3 or f8e5m2): wgmma takes them natively
    (`eight_bit_wgmma_problem`); every other path widens them to f16 first (exactly)."""
    return str(op.a.type.element) in ("f8e4m3", "f8e5m2")


def eight_bit_wgmma_problem(op: T.DotOp) -> str | None:
    """Why `wgmma` cannot take the 8-bit operands (i8, f8) of `op` from shared memory (None:
    it can). Its k32 forms read both operands K-major only -- the transpose bits of the 16-bit
    forms do not exist for 8-bit types -- so A must be stored [M, K] and B stored [N, K] (read
    transposed, `b[tn, tk].T`: the nn.Linear layout)."""
    if _staged_transposed(op.a):
        return "wgmma reads 8-bit operands K-major only, and A is stored [K, M]"
    if not _staged_transposed(op.b):
        return (
            "wgmma reads 8-bit operands K-major only, and B is stored [K, N] (store it [N, K] "
            "and read b[tn, tk].T, as nn.Linear keeps its weight)"
        )
    return None


def int8_mma_problem(op: T.DotOp) -> str | None:
    """Why an i8 dot cannot take mma.sync m16n8k32 (None: it can). Its A must be K-major in
    shared memory: `ldmatrix` (b16) then gives each lane the four consecutive k of a row that
    an s8 A register holds. A stored [K, M] (`a[tk, tm].T`) would need `ldmatrix.trans`, which
    moves 16-bit elements, so a lane would get two rows' bytes: such a dot keeps the FMA path.
    B may be either way round (`tilec.lowering.tensorcore` says how each is read)."""
    if _staged_transposed(op.a):
        return (
            "FMA path: mma.sync m16n8k32 needs an i8 A stored K-major ([M, K]); this one is "
            "stored [K, M] (read transposed), and ldmatrix.trans moves 16-bit elements, not bytes"
        )
    return None


def _staged_transposed(v: Value) -> bool:
    """Whether smem-placement may stage dot operand `v` as the tile it transposes (read back
    `{transposed}`): `v` is, through layout conversions and reshapes, a `tile.transpose`. (The
    lowering refuses an i8 A staged so; this errs towards saying yes.)"""
    while isinstance(v, OpResult) and isinstance(v.op, (T.ConvertLayoutOp, T.ReshapeOp)):
        v = v.op.operands[0]
    return isinstance(v, OpResult) and isinstance(v.op, T.TransposeOp)


def int8_b_reads(dot: T.DotOp) -> str:
    """How an int8 dot's operands are read from shared memory, and what B costs."""
    if _staged_transposed(dot.b):
        return (
            "A and B (stored [N, K], K-major) by ldmatrix.x4, one per m16 tile or pair of n8 "
            "tiles per k-step"
        )
    return (
        "A by ldmatrix.x4; B (stored [K, N], N-major) by ldmatrix.x4.trans of 16-bit pairs of "
        "columns, one per pair of n8 tiles per k-step, and 4 prmt.b32 byte permutes that make "
        "each lane's 4 consecutive k of one column (the pair's columns interleave)"
    )


def either_of(values: list[int]) -> str:
    text = [str(v) for v in values]
    return text[0] if len(text) == 1 else ", ".join(text[:-1]) + " or " + text[-1]


@dataclass
class StoredForm:
    """What a dot operand is written to shared memory as: `value`, which the operand is
    (`chain`, outermost first) a transpose and/or a drop of leading size-1 dimensions of.
    `plane`: `value`'s shape without those dimensions (the 2-D tile the swizzle is for)."""

    value: Value
    transposed: bool
    chain: list[Operation]

    @property
    def plane(self) -> tuple[int, ...]:
        shape = tuple(self.value.type.shape)
        while len(shape) > 2 and shape[0] == 1:
            shape = shape[1:]
        return shape


def stored_form(operand: Value) -> StoredForm:
    """The tile to stage for `operand`: through a `tile.transpose` (perm [1, 0]) and
    `tile.reshape`s that only drop leading size-1 dimensions, each used only on the way to
    the dot, so that a tile loaded as its tensor stores it (`b[tn, tk].T`, `a[z, tm, tk]`)
    goes to shared memory as loaded -- a plain copy, which `pipeline` streams -- and
    `tile.load_shared` does the rest."""
    chain: list[Operation] = []
    v = operand
    transposed = False

    def step(op: Operation) -> None:
        nonlocal v
        chain.append(op)
        v = op.input

    def producer() -> Operation | None:
        return v.op if isinstance(v, OpResult) and len(v.uses) == 1 else None

    # Layout conversions on the way are the store's to do (it writes any layout): a tile
    # loaded before the loop (attention's q) is then staged once, not every iteration.
    while isinstance(producer(), T.ConvertLayoutOp):
        step(producer())
    if isinstance(producer(), T.TransposeOp) and tuple(producer().perm) == (1, 0):
        step(producer())
        transposed = True
    while True:
        op = producer()
        if isinstance(op, T.ConvertLayoutOp) or (
            isinstance(op, T.ReshapeOp) and drops_leading_ones(op)
        ):
            step(op)
        else:
            break
    return StoredForm(v, transposed, chain)


def drops_leading_ones(op: T.ReshapeOp) -> bool:
    src, dst = tuple(op.input.type.shape), tuple(op.result.type.shape)
    extra = len(src) - len(dst)
    return extra > 0 and src[extra:] == dst and all(d == 1 for d in src[:extra])
