"""Lowering of `tile.warp_specialize` and `tile.mbarrier_arrive` (sm_90a).

The block has the kernel's computing warps first (`KernelABI.num_warps`, whose layouts every
tile has) and the producer's warpgroup after them (`KernelABI.producer_warps`). The op
branches on the warp index:

    producer (warps W .. W+3):  setmaxnreg.dec 40; warp W alone runs the producer region (its
                                one elected thread issues the copies), the other three are done
    consumers (warps 0 .. W-1): setmaxnreg.inc R; the consumer region, where `tile.barrier`
                                is `bar.sync 1, 32 W` (the consumers' named barrier)

Both paths join after the op. In the producer region the lowering's warp index counts from
the producer's first warp, and `tilec.lowering.tma`'s thread-issued ops elect a lane of the
producer's warp that runs them. `tile.mbarrier_arrive` is an `mbarrier.arrive` by lane 0 of every warp of its
region (after the warp's own `wgmma.wait_group`, which the whole warp executes): a stage is
released by 8 arrivals, not 256 atomic updates of one word; `tile.mbarrier_init`'s `warps`
makes those one arrival of the barrier's count. With `{cluster = C}` each of those lanes arrives
on the barrier at the slot in every block of the cluster (`tilec.lowering.cluster`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from tilec.dialects import tma as M
from tilec.dialects.warp_specialize import (
    FIRST_TURN_BARRIER,
    PINGPONG_ATTRIBUTE,
    WarpSpecializeOp,
)
from tilec.ir.core import Operation
from tilec.lowering.cluster import arrive_in_cluster, check_cluster_size
from tilec.lowering.layouts import WARP_SIZE
from tilec.lowering.shared_memory import _asm, _i32

if TYPE_CHECKING:
    from tilec.lowering.llvm import _KernelLowering

__all__ = ["CONSUMER_BARRIER", "LOWERINGS", "lower_mbarrier_arrive", "lower_warp_specialize"]

CONSUMER_BARRIER = 1  # the named barrier of the consumer warps (0 is the block's)


def lower_warp_specialize(k: _KernelLowering, op: Operation) -> None:
    assert isinstance(op, WarpSpecializeOp)
    b = k.b
    consumers = k.abi.num_warps
    producer_bb = k.fn.append_basic_block("producer")
    issuing_bb = k.fn.append_basic_block("producer.issue")
    consumer_bb = k.fn.append_basic_block("consumer")
    join = k.fn.append_basic_block("specialized.end")
    # Branches on the uniform warp index keep the producer's copies in uniform registers (on
    # `tid / 32` ptxas wrapped each of bmm's 20 copies a step in a loop over the lanes).
    warp = k.uniform_warp()
    b.cbranch(b.icmp_unsigned(">=", warp, _i32(consumers)), producer_bb, consumer_bb)

    saved = k.warp, k.barrier_scope, list(k.unfenced_reads)
    b.position_at_end(producer_bb)
    _asm(k, ir.VoidType(), [], f"setmaxnreg.dec.sync.aligned.u32 {op.producer_registers};", "")
    k.warp = k.prologue.sub(warp, _i32(consumers))  # the producer's own warp index
    b.cbranch(b.icmp_unsigned("==", k.warp, _i32(0)), issuing_bb, join)
    b.position_at_end(issuing_bb)
    k.barrier_scope = None
    k.elect_in_warp = True
    k.block(op.producer.block)
    k.elect_in_warp = False
    b.branch(join)

    k.warp, k.unfenced_reads = saved[0], list(saved[2])
    b.position_at_end(consumer_bb)
    _asm(k, ir.VoidType(), [], f"setmaxnreg.inc.sync.aligned.u32 {op.consumer_registers};", "")
    k.barrier_scope = (CONSUMER_BARRIER, consumers * WARP_SIZE)
    turns = _takes_turns(op)
    if turns:
        _turn(k, "bar.arrive", consumers // 4 - 1)  # the last warpgroup gives the first its turn
    k.block(op.consumer.block)
    if turns:
        _turn(k, "bar.sync", 0)  # and the first takes the last turn back: no arrival left over
    b.branch(join)

    k.warp, k.barrier_scope = saved[0], saved[1]
    k.unfenced_reads = []
    b.position_at_end(join)


def _takes_turns(op: WarpSpecializeOp) -> bool:
    """Whether the consumers' loops take turns (passes/pipeline_pingpong.py)."""
    # In the consumer region's body, or in a persistent walk's over the tiles.
    return any(PINGPONG_ATTRIBUTE in loop.attributes for loop in op.consumer.walk())


def _turn(k: _KernelLowering, instruction: str, group: int) -> None:
    """`instruction` (bar.arrive or bar.sync) on warpgroup 0's turn barrier, by warpgroup
    `group` of the consumers only."""
    b = k.b
    then = k.fn.append_basic_block(f"pingpong.{instruction.split('.')[1]}")
    done = k.fn.append_basic_block(f"pingpong.{instruction.split('.')[1]}.done")
    b.cbranch(b.icmp_unsigned("==", b.lshr(k.warp, _i32(2)), _i32(group)), then, done)
    b.position_at_end(then)
    _asm(k, ir.VoidType(), [], f"{instruction} {FIRST_TURN_BARRIER}, 256;", "~{memory}")
    b.branch(done)
    b.position_at_end(done)


def lower_mbarrier_arrive(k: _KernelLowering, op: Operation) -> None:
    from tilec.lowering.tma import _barrier_address, _pred

    barriers = k.values[op.barriers]
    address = _barrier_address(k, barriers, k.values[op.slot])
    pred = _pred(k, op)
    b = k.b

    blocks = op.cluster_ctas
    if blocks > 1:
        check_cluster_size(k, op, blocks)

    def emit() -> None:
        if blocks > 1:  # the slot is released in every block whose multicasts refill it
            arrive_in_cluster(k, address, blocks)
            return
        _asm(
            k,
            ir.VoidType(),
            [address],
            "mbarrier.arrive.shared::cta.b64 _, [$0];",
            "r,~{memory}",
        )

    lane0 = b.icmp_unsigned("==", k.lane, _i32(0))
    then = k.fn.append_basic_block("mbarrier.arrive")
    done = k.fn.append_basic_block("mbarrier.arrived")
    b.cbranch(b.and_(lane0, pred) if pred is not None else lane0, then, done)
    b.position_at_end(then)
    emit()
    b.branch(done)
    b.position_at_end(done)


LOWERINGS = {
    WarpSpecializeOp: lower_warp_specialize,
    M.MbarrierArriveOp: lower_mbarrier_arrive,
}
