"""Consumer warpgroups that take turns (`pipeline`'s option `pingpong`).

A warp-specialized kernel (passes/pipeline_warp_specialize.py) whose consumers are two or more
warpgroups runs each of them through the same loops, free of block-wide barriers. Left alone,
they drift in and out of step: when they compute their softmax at the same time, the tensor
cores idle. FlashAttention-3's answer is a schedule: the warpgroups take turns issuing a step's
first wgmma, in a ring, so that while one computes the softmax of its step the next one's
dots run. Here each consumer loop with two or more wgmma dots (attention's `q @ k.T` and
`p @ v`) gets `tilec.pingpong`; the lowering (`tilec.lowering.wgmma`) then wraps the loop's
first wgmma: warpgroup g waits on named barrier 2 + g (`bar.sync`, 256 threads: its own 128
and the 128 of the warpgroup before it), issues, and hands the turn to warpgroup g + 1
(`bar.arrive` on its barrier) before waiting for its own result. The last warpgroup gives
the first its first turn when the consumer region starts, and the first takes the last turn
back when it ends, so every barrier's arrivals are matched.

The turns need every warpgroup to run each marked loop the same number of times: the loops
are in the consumer region's body (no branch around them), and their bounds are block-wide
(computed before the region by every warp). A loop with one wgmma dot (a GEMM's chain) is
left alone: its warpgroups overlap their mainloops without turns.

When: a warp-specialized kernel with at least two consumer warpgroups and a consumer loop of
two or more wgmma dots. Option values: -1 where allowed, 0 never, 1 required (an error says
why not), 2 (the default) where tiling tiled the kernel for a producer warpgroup (measured on
the H200 at d128: 1% faster than consumers running free, docs/benchmarks.md). The interpreter runs the consumers as
one region, so the turns order nothing it sees: the schedule changes no result.
"""

from __future__ import annotations

from tilec.diagnostics import TileError
from tilec.dialects import scf
from tilec.dialects.builtin import FuncOp
from tilec.dialects.warp_specialize import (
    FIRST_TURN_BARRIER,
    PINGPONG_ATTRIBUTE,
    WarpSpecializeOp,
)
from tilec.ir.attributes import IntegerAttr
from tilec.lowering.wgmma import is_wgmma_dot
from tilec.passmanager import PassContext

__all__ = ["pingpong_blocker", "schedule_pingpong"]

_WARPGROUP = 4


def schedule_pingpong(kernel: FuncOp, specialized: bool, option: int, ctx: PassContext) -> bool:
    """pipeline's option `pingpong` on `kernel` (`specialized`: whether it was warp-specialized);
    whether its loops take turns."""
    if option not in (-1, 0, 1):
        raise TileError(f"pipeline: option pingpong must be -1, 0 or 1, got {option}")
    if option == 0:
        return False
    why = pingpong_blocker(kernel, specialized)
    if why:
        if option == 1:
            raise TileError(f"pipeline: option pingpong = 1, but {why}", kernel.loc)
        ctx.remark(kernel, f"no pingpong: {why}")
        return False
    loops = _turn_loops(kernel)
    for loop in loops:
        loop.attributes[PINGPONG_ATTRIBUTE] = IntegerAttr(1)
    groups = int(kernel.attributes["tilec.num_warps"].value) // _WARPGROUP
    ctx.remark(
        kernel,
        f"pingpong: the {groups} consumer warpgroups take turns issuing the first wgmma of each "
        f"step of {len(loops)} loop{'s' if len(loops) > 1 else ''} (named barriers "
        f"{FIRST_TURN_BARRIER}..{FIRST_TURN_BARRIER + groups - 1}), so that one's softmax runs "
        "while the next one's dots do",
    )
    return True


def pingpong_blocker(kernel: FuncOp, specialized: bool) -> str:
    """Why `kernel`'s consumer warpgroups cannot take turns ("" when they can)."""
    if not specialized:
        return "the kernel is not warp-specialized (its warps meet at block-wide barriers)"
    warps = int(kernel.attributes["tilec.num_warps"].value)
    if warps % _WARPGROUP or warps // _WARPGROUP < 2:
        return f"its {warps} consumer warps are not two or more warpgroups"
    if not _turn_loops(kernel):
        return "no consumer loop has two or more wgmma dots (a GEMM's warpgroups need no turns)"
    return ""


def _turn_loops(kernel: FuncOp) -> list[scf.ForOp]:
    """The loops in the consumer region's body (or in a persistent walk's over the tiles,
    which every warpgroup runs alike) with two or more wgmma dots in their body."""
    region = next((op for op in kernel.walk() if isinstance(op, WarpSpecializeOp)), None)
    if region is None:
        return []
    return [
        op
        for op in region.consumer.walk()
        if isinstance(op, scf.ForOp) and sum(is_wgmma_dot(d) for d in op.body.block.ops) >= 2
    ]
