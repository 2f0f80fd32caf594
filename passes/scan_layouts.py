"""assign-layouts' rules for scans and arg-reductions (`tile.scan`, `tile.arg_reduce`,
`tile.topk`; tilec.dialects.scan), called from `passes/assign_layouts.py`.

The lowering (`tilec.lowering.scan`) works along the axis in three steps: the elements a thread
holds, then the lanes of its warp (shuffles), then the warps (the scratch shared memory, one
barrier). The operand therefore takes a `#blocked` layout (a slice or a tensor-core
accumulator is converted to the default first), and the default already keeps the scanned
axis inside a warp wherever it can: lanes fill the last dimension first, warps the first, so a
row of up to 32 x 4 elements is scanned without shared memory. The results stay where the
elements were: a scan in its operand's layout, an arg-reduction in the slice of it (each
position held by every thread of its row, as a reduction's), a topk's two results in the
operand's layout with the axis cut to k. Each op gets a remark with its plan.

A scan chains its repeats (`tilec.lowering.scan`): every repeat of a thread's run takes its own
lane step, `log2(lanes) + 2` shuffles, so a layout of one element a thread repeated 32 times
(what an access no 16 bytes align gets: lanes on consecutive elements, so that each warp
instruction reads one span) pays 32 of them -- 224 shuffles a thread for a 1024-wide row,
which is what bounded the running max of 10007-wide bf16 rows at 36% of the copy bandwidth.
A scan along the last axis therefore weighs the layout an aligned row would have (16-byte runs
a thread, `layouts.default` with the widest access) against its operand's: the shuffles each
layout's lane steps take, plus, for the wider one, the exchanges through shared memory that
bring the operand in and (counted too, since a store of the result wants the access's layout
back) the result out -- a store a thread's run of the source, a load a run of the target,
each way. When the wider runs cost less in all, the operand is converted (the remark gives
both counts); the load keeps its coalesced layout and the store converts back
(`assign_layouts._coalesced` counts a run longer than one access as strided).
CUB's block scans transpose a warp-striped load into per-thread runs the same way."""

from __future__ import annotations

from typing import Any

from tilec.dialects import scan as S
from tilec.ir.attributes import BlockedLayout, BoolAttr
from tilec.ir.core import Operation
from tilec.ir.types import TileType
from tilec.lowering.layouts import ThreadMap, slice_layout
from tilec.lowering.scan import scan_plan

__all__ = [
    "SCAN_OPS",
    "SCAN_RUNS_ATTRIBUTE",
    "lane_step_shuffles",
    "lay_out_scan_op",
    "runs_along",
    "scan_plan_text",
]

# On a kernel where a scan's operand could take 16-byte runs: whether one did (the tuner's
# decision `assign-layouts.scan_runs`, read back from it).
SCAN_RUNS_ATTRIBUTE = "tilec.scan_runs"

SCAN_OPS = (S.ScanOp, S.ArgReduceOp, S.TopKOp)


def scan_plan_text(layout: BlockedLayout, shape: tuple, axis: int) -> str:
    """How the lowering walks `axis` of a tile of `shape` in `layout`, in words."""
    d = ThreadMap(layout, shape).dims[axis]
    spt = min(d.lane_mul, d.size)
    lanes = min(d.lane_mask + 1, max(1, d.size // spt))
    warps = min(d.warp_mask + 1, max(1, d.size // (spt * (d.lane_mask + 1))))
    repeats = max(1, d.size // (spt * lanes * warps))
    where = (
        "no shared memory" if warps == 1 else f"{warps} warps through shared memory (one barrier)"
    )
    return (
        f"axis {axis} ({d.size}): {spt} element(s) a thread x {repeats} repeat(s), "
        f"{lanes} lane(s), {where}"
    )


def lane_step_shuffles(t: TileType, axis: int) -> int:
    """The shuffles a thread's scan of `t` (laid out) takes along `axis` in its lane steps:
    `log2(lanes)` up-shuffles, one for the lanes before and one for the warp's total, once per
    repeat of its run (`tilec.lowering.scan`)."""
    plan = scan_plan(t, axis)
    if plan.lanes == 1:
        return 0
    return plan.repeats * ((plan.lanes - 1).bit_length() + 2)


def runs_along(layout: BlockedLayout, shape: tuple, axis: int) -> BlockedLayout:
    """`layout` with its repeats along `axis` folded into each thread's run: the same lanes
    and warps, each thread holding consecutive elements of the axis instead of elements a
    lane-and-warp span apart. Along any axis but the last the accesses stay as they were
    (a thread's elements of one row are the same run of the last axis), so a load or store
    of the tile is as coalesced in either."""
    d = ThreadMap(layout, shape).dims[axis]
    span = d.lane_mul * (d.lane_mask + 1) * (d.warp_mask + 1)
    repeats = max(1, shape[axis] // span)
    if repeats == 1:
        return layout
    spt = list(layout.size_per_thread)
    spt[axis] *= repeats
    return BlockedLayout(tuple(spt), layout.threads_per_warp, layout.warps_per_cta, layout.order)


def _wider_runs(layouts: Any, op: Operation, source: TileType) -> BlockedLayout | None:
    """A layout of longer runs along the scan's axis -- 16-byte runs along the last axis,
    the repeats folded into each thread's run along another (`runs_along`) -- where its
    shuffles and two exchanges cost less than the operand's shuffles; None to keep the
    operand's layout. Remarks either way when it differs."""
    if not isinstance(op, S.ScanOp):
        return None
    if op.axis == source.rank - 1:
        target = layouts.default(source, widest=True)
    else:
        target = runs_along(source.layout, source.shape, op.axis)
    if target == source.layout:
        return None
    kernel = layouts.kernel
    if not layouts.scan_runs:
        kernel.attributes.setdefault(SCAN_RUNS_ATTRIBUTE, BoolAttr(False))
        return None
    wide = TileType(source.shape, source.element, target)
    now, then = lane_step_shuffles(source, op.axis), lane_step_shuffles(wide, op.axis)
    held = ThreadMap(source.layout, source.shape).counts[op.axis]
    exchanged = 2 * (held // scan_plan(source, op.axis).run + held // scan_plan(wide, op.axis).run)
    cost = f"{now} shuffles a thread in its runs of {scan_plan(source, op.axis).run}"
    if then + exchanged >= now:
        kernel.attributes.setdefault(SCAN_RUNS_ATTRIBUTE, BoolAttr(False))
        if now:
            layouts.ctx.remark(
                op,
                f"kept: {cost}; {_runs_text(op, source)} would take {then} and {exchanged} shared-memory "
                "accesses to exchange the operand and the result",
            )
        return None
    kernel.attributes[SCAN_RUNS_ATTRIBUTE] = BoolAttr(True)
    layouts.ctx.remark(
        op,
        f"operand converted to {_runs_text(op, source)}: {then} shuffles a thread and {exchanged} "
        f"shared-memory accesses to exchange the operand and the result, against {cost}",
    )
    return target


def _runs_text(op: Operation, source: TileType) -> str:
    return "16-byte runs" if op.axis == source.rank - 1 else f"runs along axis {op.axis}"


def lay_out_scan_op(layouts: Any, op: Operation) -> None:
    """Lay out `op`'s operand and results (`layouts`: the assign-layouts walker)."""
    source: TileType = op.input.type
    if not isinstance(source.layout, BlockedLayout):
        layouts.convert(op, 0, layouts.default(source), f"{op.name} operand (#blocked)")
        source = op.input.type
    wider = _wider_runs(layouts, op, source)
    if wider is not None:
        layouts.convert(op, 0, wider, f"{op.name} operand ({_runs_text(op, source)} for the scan)")
        source = op.input.type
    layout = source.layout
    if isinstance(op, S.ArgReduceOp):
        if isinstance(op.result.type, TileType):
            layouts.laid_out(op.result, slice_layout(layout, op.axis))
    else:
        for r in op.results:
            layouts.laid_out(r, layout)
    layouts.ctx.remark(op, scan_plan_text(layout, source.shape, op.axis))
