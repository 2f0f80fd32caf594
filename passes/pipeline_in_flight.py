"""Whether `pipeline` leaves a wgmma group in flight across a loop's back edge (option
`dots_in_flight`; docs/passes.md, "Groups in flight"), and why not where it does not.

A loop whose wgmma dot updates its accumulator in place (`chained_wgmma_slots`) may leave the
last group running into the next iteration, its copies then running S-2 steps ahead instead of
S-1. Never where the next step would overwrite what the running group reads: shared memory the
loop's warps store themselves, or an A held in registers that the loop computes each step
(`a.T @ b`'s `ldmatrix.trans` fragments: undefined in the PTX ISA, and ptxas before CUDA 13.3
may give the next step's fragments the same registers). Automatic (-1): also only where the
S-2 steps still cover a copy's latency (`wgmma_model.lead_covers_latency`). Each refusal is
remarked on the loop.
"""

from __future__ import annotations

from tilec.dialects import scf, shared
from tilec.dialects.builtin import FuncOp
from tilec.dialects.tile import DotOperandLayout
from tilec.lowering.wgmma import chained_wgmma_slots
from tilec.passes.loop_slices import defined_inside
from tilec.passes.wgmma_model import COPY_LATENCY_CLOCKS, lead_covers_latency
from tilec.passmanager import PassContext

__all__ = ["leave_in_flight"]


def leave_in_flight(
    kernel: FuncOp,
    loop: scf.ForOp,
    stages: int,
    in_flight: int,
    streamed: set[int],
    ctx: PassContext,
) -> bool:
    """Whether `loop` (pipelined with `stages`, its streams' stores the ops `streamed` names by
    id) leaves one wgmma group in flight, by option `in_flight` (-1, 0, 1) and the rules
    above; remarks why not."""
    chained = in_flight != 0 and bool(chained_wgmma_slots(loop))
    written = _written_by_warps(loop, streamed)
    if in_flight == 1 and not chained:
        ctx.remark(loop, "dots_in_flight: no wgmma chain in this loop to leave in flight")
    elif chained and written is not None:
        # Each step's store would overwrite what the group left in flight still reads.
        ctx.remark(
            loop,
            f"no wgmma group left in flight: the loop writes shared memory itself ('{written}'), "
            "which a wgmma still in flight would be reading",
        )
        chained = False
    elif chained and (held := _registers_a_step_writes(loop)):
        # wgmma reads a register A while it runs: the next step's fragments would overwrite
        # registers the group left in flight still reads (the PTX ISA leaves that undefined;
        # ptxas before 13.3 does not keep them apart).
        ctx.remark(
            loop,
            f"no wgmma group left in flight: its A ('{held}') is in registers, loaded each "
            "step, which the next step would overwrite while the group still reads them",
        )
        chained = False
    elif chained and in_flight == 1 and stages < 3:
        ctx.remark(loop, f"dots_in_flight needs 3 stages or more, not {stages}: left at 0")
        chained = False
    elif chained and in_flight == -1:
        why = _why_not_in_flight(kernel, loop, stages)
        if why:
            ctx.remark(loop, f"no wgmma group left in flight: {why}")
            chained = False
    return chained


def _written_by_warps(loop: scf.ForOp, streamed: set[int]) -> str | None:
    """The name of an op by which the loop's threads will still write shared memory
    themselves after pipelining (a `tile.store_shared` that is not one of the streams' stores,
    which become copies: an operand no copy can fill, such as A read along a strided K), or
    None."""
    for op in loop.walk():
        if isinstance(op, shared.StoreSharedOp) and id(op) not in streamed:
            return op.name
    return None


def _registers_a_step_writes(loop: scf.ForOp) -> str:
    """The name of the A operand of a chained wgmma dot of `loop` held in registers
    (`#dot_operand` version 2) and computed inside the loop, or "": a staged A (attention's q,
    read into registers once before the loop) is never rewritten while a group runs."""
    for j in chained_wgmma_slots(loop):
        dot = loop.yield_op.operands[j].op
        a = dot.a
        layout = a.type.layout
        if isinstance(layout, DotOperandLayout) and layout.version == 2 and defined_inside(a, loop):
            return a.name_hint or "A"
    return ""


def _why_not_in_flight(kernel: FuncOp, loop: scf.ForOp, stages: int) -> str:
    """Why `dots_in_flight` (automatic) leaves the wgmma chain of `loop` waiting each step,
    or "": with a group in flight the copies run S-2 steps ahead, and those steps must cover
    a copy's latency (`wgmma_model.lead_covers_latency`, for the blocks an SM holds)."""
    if stages < 3:
        return f"with {stages} stages its copies would run {stages - 2} steps ahead"
    dot = loop.yield_op.operands[chained_wgmma_slots(loop)[0]].op
    (bm, bn), bk = dot.result.type.shape, dot.a.type.shape[1]
    blocks = kernel.attributes.get("tilec.min_blocks_per_sm")
    resident = int(blocks.value) if blocks is not None else 1
    lead = stages - 2
    if lead_covers_latency(bm, bn, bk, lead, resident, dot.a.type.element.width // 8):
        return ""
    return (
        f"its copies would run {lead} step{'s' if lead > 1 else ''} of {bm}x{bn}x{bk} ahead "
        f"({resident} block{'s' if resident > 1 else ''} an SM), less than a copy's latency "
        f"of {COPY_LATENCY_CLOCKS} clocks (passes/wgmma_model.py)"
    )
