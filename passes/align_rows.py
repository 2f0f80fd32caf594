"""The `align-rows` pass: a block that owns one row of an awkward width reads it from an
aligned start.

A kernel whose blocks each own one whole row (tiles `1 x BN` of a whole dimension N, as
softmax, layer norm and RMSNorm take when rows are long) can move its row in 16-byte runs
only where the row's first element is 16-byte aligned, that is when N is a multiple of
V = 16 / element bytes. At N = 3077 f16, seven rows in eight start elsewhere, and `vectorize`
leaves every access at 2 bytes: eight instructions, eight addresses and eight bounds
predicates where one would do.

This pass rotates the block's column frame: position j of every `[..., BN]` tile holds
column (j - s) mod BN instead of column j, where

    s = (start of the row, in elements) mod V

is how far the row starts past the previous 16-byte boundary when its tensor is 16-byte
aligned and its rows lie N elements apart (row r of a 2-D view starts at r * N). The row's
loads and stores take offset -s along the last dimension: the s positions before the row's
first element are outside the view, so loads give their padding there and stores skip them,
as the original does for its positions past N. Every `tile.iota` of the frame -- the column
indices that the frontend compares with N for masks, and that `offsets()` yields -- becomes
`(iota - s) & (BN - 1)`. Positions j < s then stand for columns BN - s + j >= N, padding in
the original as well, so every tile of the kernel is the original's rotated by s:
element-wise ops, masks and reductions (whose order is unspecified) see the same values.
Where N + s would pass BN the shift is clamped to BN - N, which keeps the rotation exact
(those rows are simply not aligned).

It marks the row accesses of 2-D or higher views `frame = V`: `vectorize` gives them runs of
V elements checked at run time (a run whose address is aligned and whose elements are all
inside the view moves in one access, any other one element at a time), since neither the
alignment nor the bounds is known when the kernel is compiled. `assign-layouts` reads the
same width (`vectorize.widths_before_layouts`) and gives each thread V consecutive elements.
A rank-1 operand of the row (a weight vector `w[:]`) is rotated too but keeps its own,
unaligned, accesses.

Applies to a kernel (after `tiling`, before `assign-layouts`) whose top-level block holds no
loops or branches, whose tiles all have size 1 in every dimension but the last, which is 1 or
the one power of two BN, whose `[.., BN]` loads and stores are of views whose last extent is
the kernel's whole dimension (`tilec.whole_dims`) at offset 0, and whose ops are `arith`,
`math` and the tile ops that do not move elements between positions (no scans, dots,
gathers, reshapes, atomics or random numbers). Left alone, with a remark, when the extent is
known to be a multiple of V (every row aligned already) or no row view has a unit last stride.

**Off by default: measured slower.** On the H200 (2026-12-04, torch.compile and Triton in
the same run) every odd-width row kernel tried ran slower rotated: softmax 4096 x 5003 f32
0.067 ms against 0.060 unrotated, softmax_f16 8192 x 3077 0.048 against 0.040, RMSNorm
4096 x 5001 bf16 0.058 against 0.044, layer norm 6000 x 3001 f16 0.067 against 0.046. ncu on
the first: 7% more instructions executed (the per-run checks and both paths' set-up cost more
than the 16-byte accesses save), and ptxas's registers over an occupancy cliff (67 against 64
at 512 threads: one block an SM instead of two). What these kernels lose is elsewhere:
Triton's kernel of the same shape (one row a program, the same padded tile, one-element
accesses) reaches 82% of copy on the first, with 40 registers and two thirds of tilec's
instructions -- tilec's bounds checks, 64-bit and repeated per access, are the lead
(docs/benchmarks.md). `align-rows{enable=true}` (`--pass-option
align-rows.enable=true`) turns it on.

Writes `tilec.row_frame = V` on a rewritten kernel. Option `enable` (false, the default:
leave every kernel alone; `--disable align-rows` does the same). Reorders float reductions (checked with
a tolerance by translation validation). Remarks: per kernel rewritten, the frame and why;
per kernel with a whole row left alone, why.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects import arith
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp, ReturnOp
from tilec.ir.attributes import FloatAttr, IntegerAttr
from tilec.ir.builder import Builder
from tilec.ir.core import BlockArgument, Operation, OpResult, Value
from tilec.ir.types import IndexType, TileType
from tilec.lowering.abi import kernel_specialization
from tilec.lowering.layouts import element_bytes
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["FRAME_ATTR", "AlignRows"]

# The attribute on a row access: the run, in elements, its frame starts at a multiple of.
FRAME_ATTR = "frame"

# Tile ops that keep every element at its position (or reduce over positions): a rotation of
# their operands rotates their results.
_POSITIONAL = (
    T.FullOp,
    T.SplatOp,
    T.BroadcastOp,
    T.ExpandDimsOp,
    T.ReduceOp,
    T.CastOp,
    T.SelectOp,
    T.IotaOp,
    T.LoadOp,
    T.StoreOp,
    T.DimOp,
    T.ProgramIdOp,
    T.NumProgramsOp,
    ReturnOp,
)


@register_pass
class AlignRows(Pass):
    """Rotates a one-row block's column frame so that its row starts on a 16-byte boundary.

    See the module docstring for the rewrite, why it is exact, and the kernels it applies to.
    """

    name = "align-rows"
    summary = "Read a block's row of an awkward width from a 16-byte aligned start"
    exact = False  # reductions over the rotated row add in another order

    @dataclass
    class Options:
        enable: bool = option(
            False,
            "rotate one-row blocks onto aligned starts (off by default: measured slower, see "
            "the module docstring)",
        )

    def run(self, module: Operation, ctx: PassContext) -> None:
        if not self.options.enable:
            return
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            kernel.attributes.pop("tilec.row_frame", None)
            whole = kernel.attributes.get("tilec.whole_dims")
            if whole is None or len(whole.value) != 1:
                continue
            plan = _plan(kernel, str(whole.value[0]), ctx)
            if plan is not None:
                _rewrite(kernel, plan, ctx)


@dataclass
class _Plan:
    dim: str  # the whole dimension's extent symbol
    size: int  # BN
    run: int  # V
    rows: list[Operation]  # loads and stores of [.., BN] tiles
    iotas: list[T.IotaOp]
    lead: Operation  # the row access whose row start defines the shift


def _plan(kernel: FuncOp, dim: str, ctx: PassContext) -> _Plan | None:
    """What to rewrite in `kernel`, or None (with a remark where a whole row is left alone)."""
    block = kernel.body.block
    sizes: set[int] = set()
    rows: list[Operation] = []
    iotas: list[T.IotaOp] = []
    for op in block.ops:
        if op.regions:
            return _leave(ctx, kernel, f"{op.name} (a loop or a branch) in the kernel")
        if not (isinstance(op, _POSITIONAL) or op.name.split(".")[0] in ("arith", "math")):
            return _leave(ctx, kernel, f"{op.name} moves elements between positions")
        for v in [*op.operands, *op.results]:
            t = v.type
            if not isinstance(t, TileType):
                continue
            if not t.is_static or any(d != 1 for d in t.shape[:-1]):
                return None  # more than one row a block: no single frame
            if t.shape[-1] != 1:
                sizes.add(t.shape[-1])
        if isinstance(op, T.IotaOp):
            iotas.append(op)
        if isinstance(op, (T.LoadOp, T.StoreOp)):
            t = op.result.type if isinstance(op, T.LoadOp) else op.value.type
            if t.shape[-1] == 1:
                continue
            view = op.view
            if str(view.type.shape[-1]) != dim or not _is_zero(op.offsets[-1]):
                return _leave(ctx, kernel, f"an access of {_name(view)} is not along the row")
            if not (isinstance(view, BlockArgument) and view.block is block):
                return None
            rows.append(op)
    if len(sizes) != 1 or not rows:
        return None
    size = sizes.pop()
    if size & (size - 1):
        return None
    spec = kernel_specialization(kernel)
    leads = [
        op
        for op in rows
        if op.view.type.rank >= 2
        and f"{_name(op.view)}.stride.{op.view.type.rank - 1}" in spec.unit
    ]
    if not leads:
        return _leave(ctx, kernel, "no row view is known to have a unit last stride")
    run = max(16 // element_bytes(op.view.type.element) for op in leads)
    lead = leads[0]
    axis = lead.view.type.rank - 1
    if spec.multiple(f"{_name(lead.view)}.extent.{axis}") >= run:
        return _leave(ctx, kernel, f"{dim} is a known multiple of {run}: every row starts aligned")
    if size < run:
        return None
    return _Plan(dim, size, run, rows, iotas, lead)


def _leave(ctx: PassContext, kernel: FuncOp, why: str) -> None:
    ctx.remark(kernel, f"rows not rotated: {why}")
    return None


def _rewrite(kernel: FuncOp, plan: _Plan, ctx: PassContext) -> None:
    block = kernel.body.block
    lead = plan.lead
    rank = lead.view.type.rank
    # The shift is computed after the last of the lead's row offsets is defined.
    anchor: Operation | None = None
    for v in lead.offsets[:-1]:
        if (
            isinstance(v, OpResult)
            and v.op.parent is block
            and (anchor is None or block.ops.index(v.op) > block.ops.index(anchor))
        ):
            anchor = v.op
    b = Builder.after_op(anchor) if anchor is not None else Builder.at_start(block)
    index = IndexType()

    def constant(n: int) -> Value:
        return b.create(arith.ConstantOp, value=IntegerAttr(n), result_types=[index]).result

    def binary(cls, lhs: Value, rhs: Value) -> Value:
        return b.create(cls, lhs=lhs, rhs=rhs, result_types=[lhs.type]).results[0]

    # The row's first element, as a contiguous tensor of the lead's extents places it.
    extents = {d: b.create(T.DimOp, view=lead.view, axis=d).result for d in range(1, rank)}
    start = lead.offsets[0]
    for d in range(1, rank - 1):
        start = binary(arith.AddIOp, binary(arith.MulIOp, start, extents[d]), lead.offsets[d])
    start = binary(arith.MulIOp, start, extents[rank - 1])
    raw = binary(arith.AndIOp, start, constant(plan.run - 1))
    room = binary(arith.SubIOp, constant(plan.size), extents[rank - 1])
    shift = binary(arith.MaxSIOp, constant(0), binary(arith.MinSIOp, raw, room))
    negative = binary(arith.SubIOp, constant(0), shift)

    # Ops before the shift that depend on the frame move after it, in order.
    position = {op: i for i, op in enumerate(block.ops)}
    here = position.get(b.anchor, len(block.ops)) if b.anchor is not None else len(block.ops)
    framed: set[Operation] = set(plan.rows) | set(plan.iotas)
    moved = []
    for op in list(block.ops):
        if position.get(op, here) >= here:
            break
        if op in framed or any(isinstance(v, OpResult) and v.op in framed for v in op.operands):
            framed.add(op)
            moved.append(op)
    for op in moved:
        op.detach()
        b.insert(op)

    for iota in plan.iotas:
        t = iota.result.type
        after = Builder.after_op(iota)
        s = shift
        if t.element != index:
            s = after.create(arith.IndexCastOp, input=shift, result_types=[t.element]).result
        splat = after.create(T.SplatOp, input=s, result_types=[t]).result
        mask = after.create(T.FullOp, value=IntegerAttr(plan.size - 1), result_types=[t]).result
        moved_iota = after.create(arith.SubIOp, lhs=iota.result, rhs=splat, result_types=[t])
        rotated = after.create(
            arith.AndIOp, lhs=moved_iota.results[0], rhs=mask, result_types=[t]
        ).results[0]
        iota.result.replace_uses_if(rotated, lambda user, m=moved_iota: user is not m)
    framed_rows = []
    for op in plan.rows:
        op.set_operand(1 + len(op.offsets) - 1, negative)
        if op.view.type.rank >= 2:
            op.attributes[FRAME_ATTR] = IntegerAttr(plan.run)
            framed_rows.append(_name(op.view))
    kernel.attributes["tilec.row_frame"] = IntegerAttr(plan.run)
    element = 16 // plan.run
    ctx.remark(
        kernel,
        f"rows rotated onto 16-byte starts: {plan.dim} is not known to be a multiple of "
        f"{plan.run}, so a row starts up to {plan.run - 1} elements past a 16-byte boundary; "
        f"each block reads its row from that boundary (offset -(row start mod {plan.run}) along "
        f"the row, column indices rotated by the same amount within the {plan.size}-wide tile) "
        f"so that {', '.join(sorted(set(framed_rows)))} move in checked runs of "
        f"{plan.run} x {element} bytes",
    )


def _is_zero(v: Value) -> bool:
    if isinstance(v, OpResult) and isinstance(v.op, arith.ConstantOp):
        value = v.op.attributes["value"]
        return not isinstance(value, FloatAttr) and value.value == 0
    return False


def _name(view: Value) -> str:
    return getattr(view, "name_hint", None) or "a view"
