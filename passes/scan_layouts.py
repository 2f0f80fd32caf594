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
operand's layout with the axis cut to k. Each op gets a remark with its plan."""

from __future__ import annotations

from typing import Any

from tilec.dialects import scan as S
from tilec.ir.attributes import BlockedLayout
from tilec.ir.core import Operation
from tilec.ir.types import TileType
from tilec.lowering.layouts import ThreadMap, slice_layout

__all__ = ["SCAN_OPS", "lay_out_scan_op", "scan_plan_text"]

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


def lay_out_scan_op(layouts: Any, op: Operation) -> None:
    """Lay out `op`'s operand and results (`layouts`: the assign-layouts walker)."""
    source: TileType = op.input.type
    if not isinstance(source.layout, BlockedLayout):
        layouts.convert(op, 0, layouts.default(source), f"{op.name} operand (#blocked)")
        source = op.input.type
    layout = source.layout
    if isinstance(op, S.ArgReduceOp):
        if isinstance(op.result.type, TileType):
            layouts.laid_out(op.result, slice_layout(layout, op.axis))
    else:
        for r in op.results:
            layouts.laid_out(r, layout)
    layouts.ctx.remark(op, scan_plan_text(layout, source.shape, op.axis))
