"""Warp specialization of a GEMM loop the TMA unit fills (`pipeline`'s option `warp_specialize`):
a producer warpgroup issues every step's copies, the kernel's warps only compute.

What `pipeline` makes of such a loop without it: the copies of step i + S - 2 are issued by one
thread of the computing warps after step i's wgmma; a block-wide `tile.barrier` each step tells
that thread that every warp is past its reads of the slot refilled next; and the copies run
only S - 2 steps ahead, because the slot of step i - 1 may still be read by the wgmma left in
flight. With warp specialization (`tilec.dialects.warp_specialize` shows the IR):

* a **producer** region on a warpgroup of its own walks the steps: it waits on the stage's
  *empty* mbarrier (released by the consumers), arms its *full* mbarrier and issues the copies
  -- so copies run as far ahead as the stages allow (S - 1 steps beyond the one being read),
  with no block-wide barrier in the loop;
* the **consumer** region is the loop as it was, less its copies and its barrier, plus one
  `tile.mbarrier_arrive` a step on the empty mbarrier of the previous step's slot (the wgmma
  that read it has been waited for: `wgmma.wait_group 1` after the next issue), and the
  epilogue;
* `setmaxnreg` moves registers from the producer (40 a thread) to the consumers, whose
  accumulators need them.

Kernel ops before the loop that compute tiles (the accumulator's zeros, a bias loaded once) go
into the consumer region: only the consumers' warps have those layouts. Scalar arithmetic
(program ids, tile offsets) stays before the op, computed by every warp.

When (`warp_specialize_blocker`): sm_90a, the loop's copies by the TMA unit, its wgmma chain
left in flight (`tilec.dots_in_flight`), the loop directly in the kernel's body and the only
pipelined one, and nothing before it with effects. With pipeline's option `persistent` both
regions walk the output tiles (`_walk_tiles`), the producer running into the next tile while
the consumers run this tile's epilogue. Option values: -1
where allowed, 0 never (the default until measured faster on the H200), 1 required (an error
says why not). The interpreter runs the regions as coroutines and checks the mbarrier protocol
(`tilec.interp.warp_specialize`).
"""

from __future__ import annotations

from tilec.diagnostics import TileError
from tilec.dialects import arith, scf, shared
from tilec.dialects import tma as TM
from tilec.dialects.builtin import PERSISTENT_ATTRIBUTE, FuncOp, ReturnOp
from tilec.dialects.warp_specialize import WarpSpecializeOp
from tilec.ir.attributes import IntegerAttr, StringAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Block, Operation, OpResult, Region, Value
from tilec.ir.types import SharedType, TileType, i64, index
from tilec.lowering.wgmma import chained_wgmma_slots
from tilec.passes.occupancy import REGISTERS_PER_SM
from tilec.passes.pipeline_persistent import (
    PipelinedLoop,
    TileWalk,
    rebase_steps,
    tile_walk,
    trip_count,
    walk_loop,
)
from tilec.passmanager import PassContext

__all__ = [
    "PRODUCER_REGISTERS",
    "PRODUCER_WARPS",
    "PRODUCER_WARPS_ATTRIBUTE",
    "specialize_warps",
    "warp_specialize_blocker",
    "warp_specialize_kernel",
]

PRODUCER_WARPS = 4  # one warpgroup: setmaxnreg works on whole warpgroups
PRODUCER_REGISTERS = 40  # a thread that only computes addresses and issues copies
PRODUCER_WARPS_ATTRIBUTE = "tilec.producer_warps"
_WARP = 32


def warp_specialize_kernel(
    kernel: FuncOp,
    made: list[PipelinedLoop],
    option: int,
    persistent: scf.ForOp | None,
    ctx: PassContext,
) -> bool:
    """pipeline's option `warp_specialize` on the kernel's TMA loops (`made`), with persistent blocks
    walking the tiles when `persistent` is the loop option `persistent` chose; whether the
    kernel was specialized."""
    if option not in (-1, 0, 1):
        raise TileError(f"pipeline: option warp_specialize must be -1, 0 or 1, got {option}")
    if option == 0:
        return False
    if persistent is not None and not any(p.loop is persistent for p in made):
        why = "its persistent loop's copies are not made by the TMA unit"
    elif len(made) != 1:
        why = (
            "no loop's copies are made by the TMA unit" if not made else "it has several TMA loops"
        )
    else:
        why = warp_specialize_blocker(kernel, made[0])
    if why:
        if option == 1:
            raise TileError(f"pipeline: option warp_specialize = 1, but {why}", kernel.loc)
        ctx.remark(kernel, f"not warp-specialized: {why}")
        return False
    specialize_warps(kernel, made[0], ctx, persistent=persistent is not None)
    return True


def warp_specialize_blocker(kernel: FuncOp, pipelined: PipelinedLoop | None) -> str:
    """Why the loop `pipelined` cannot be warp-specialized ("" when it can)."""
    if pipelined is None:
        return "its copies are not made by the TMA unit"
    loop = pipelined.loop
    if PERSISTENT_ATTRIBUTE in kernel.attributes:
        return "the kernel has persistent blocks"
    if loop.parent is not kernel.body.block:
        return "its loop is nested in other control flow"
    if scf.dots_in_flight(loop) != 1 or not chained_wgmma_slots(loop):
        return "its loop leaves no wgmma chain in flight"
    if _wait_of(loop) is None:
        return "its loop does not start by waiting on its stage's mbarrier"
    warps = int(kernel.attributes["tilec.num_warps"].value)
    registers = _consumer_registers(warps, _blocks_per_sm(kernel))
    needed = _registers_needed(loop, warps)
    if registers < needed:
        return (
            f"its consumers would get {registers} registers a thread (with a producer "
            f"warpgroup in each of {_blocks_per_sm(kernel)} block(s) an SM), fewer than the "
            f"~{needed} their accumulators and descriptors need"
        )
    prologue = set(map(id, pipelined.prologue))
    for op in _before(kernel, loop):
        if id(op) in prologue or isinstance(op, _SETUP) or not _has_effects(op):
            continue
        return f"'{op.name}' before the loop has effects (every warp would run it)"
    return ""


def specialize_warps(
    kernel: FuncOp, pipelined: PipelinedLoop, ctx: PassContext, persistent: bool = False
) -> None:
    """Rewrite `kernel` around its pipelined loop (`warp_specialize_blocker` allows it) into
    a producer and a consumer region (the module docstring), with a remark; with
    `persistent`, each region walks the output tiles (`persistent_blocker` allows it)."""
    loop = pipelined.loop
    walk = tile_walk(kernel, loop.loc) if persistent else None
    stages = pipelined.stages
    block = kernel.body.block
    wait = _wait_of(loop)
    assert wait is not None
    full = wait.barriers
    body = list(loop.body.block.ops)
    at_wait = body.index(wait)
    step_ops = body[:at_wait]  # the step index, slot and phase
    barrier = body[at_wait + 1] if at_wait + 1 < len(body) else None
    ahead_copies = [op for op in body if isinstance(op, (TM.MbarrierExpectOp, TM.TmaCopyOp))]
    warps = int(kernel.attributes["tilec.num_warps"].value)

    # The empty mbarriers: one a stage, completed by one arrival of every consumer warp.
    entry = Builder.at_start(block, loop.loc)
    empty = entry.create(shared.AllocSharedOp, result_types=[SharedType((stages, 1), i64)]).result
    empty.name_hint = "empty_barriers"
    init = next(
        u for u in full.uses if isinstance(u, TM.MbarrierInitOp)
    )  # before the barrier that publishes it
    Builder.after_op(init).create(
        TM.MbarrierInitOp,
        barriers=empty,
        arrivals=IntegerAttr(1),
        warps=IntegerAttr(warps),
    )

    # The op, where the loop was.
    producer_block, consumer_block = Block(), Block()
    registers = _consumer_registers(warps, _blocks_per_sm(kernel))
    Builder.before_op(loop).create(
        WarpSpecializeOp,
        producer=Region([producer_block]),
        consumer=Region([consumer_block]),
        producer_warps=IntegerAttr(PRODUCER_WARPS),
        producer_registers=IntegerAttr(PRODUCER_REGISTERS),
        consumer_registers=IntegerAttr(registers),
    )

    # Producer: every step's copies, once the stage is released.
    p = Builder.at_end(producer_block, loop.loc)
    steps = p.create(
        scf.ForOp,
        lower=loop.lower,
        upper=loop.upper,
        step=loop.step,
        inits=[],
        body=Region([Block([loop.induction_var.type])]),
    )
    k = steps.body.block.args[0]
    k.name_hint = loop.induction_var.name_hint
    w = Builder.at_end(steps.body.block, loop.loc)
    mapping: dict[Value, Value] = {loop.induction_var: k}
    for op in step_ops:
        w.insert(op.clone(mapping))
    slot, phase = mapping[wait.slot], mapping[wait.phase]
    producer_steps = mapping[pipelined.step_index]
    one = w.create(arith.ConstantOp, value=IntegerAttr(1), result_types=[index]).result
    released = w.create(arith.SubIOp, lhs=one, rhs=phase).result  # the phase before
    released.name_hint = "released_phase"
    w.create(TM.MbarrierWaitOp, barriers=empty, slot=slot, phase=released)
    first = ahead_copies[0]
    ahead_iv = _ahead_iv(first)
    ahead_slot = first.slot
    copy_map: dict[Value, Value] = {ahead_iv: k, ahead_slot: slot}
    copies = _slice(loop, ahead_copies, {ahead_iv, ahead_slot})
    for op in copies:
        w.insert(op.clone(copy_map))
    w.create(scf.YieldOp, values=[])
    p.create(scf.YieldOp, values=[])

    # Consumer: the loop without its copies or barrier, releasing each step's slot once the
    # next step's wgmma is issued (the one before it is then waited for). The index
    # arithmetic of the copies ahead is left to dce.
    for op in reversed(copies):
        op.erase()
    if isinstance(barrier, shared.BarrierOp):
        barrier.erase()
    r = Builder.before_op(loop.yield_op)
    step_index = pipelined.step_index
    count = r.create(arith.ConstantOp, value=IntegerAttr(stages), result_types=[index]).result
    back = r.create(arith.ConstantOp, value=IntegerAttr(stages - 1), result_types=[index]).result
    previous = r.create(
        arith.RemSIOp,
        lhs=r.create(arith.AddIOp, lhs=step_index, rhs=back).result,
        rhs=count,
    ).result
    previous.name_hint = "released_slot"
    zero = r.create(arith.ConstantOp, value=IntegerAttr(0), result_types=[index]).result
    has_previous = r.create(
        arith.CmpIOp, predicate=StringAttr("sgt"), lhs=step_index, rhs=zero
    ).result
    r.create(TM.MbarrierArriveOp, barriers=empty, slot=previous, pred=has_previous)

    # What goes into the consumer region: tiles computed before the loop, the loop, and
    # everything after it but the return and the pipeline's drain (made anew inside).
    prologue = set(map(id, pipelined.prologue))
    after = set(map(id, pipelined.after))
    moved = [
        op
        for op in _before(kernel, loop)
        if id(op) not in prologue and any(isinstance(r.type, TileType) for r in op.results)
    ]
    ops = list(block.ops)
    epilogue = [
        op
        for op in ops[ops.index(loop) + 1 :]
        if id(op) not in after and not isinstance(op, ReturnOp)
    ]
    c = Builder.at_end(consumer_block, loop.loc)
    for op in moved:
        op.detach()
        c.insert(op)
    loop.detach()
    c.insert(loop)
    # The consumers' last reads of the stages are over; every mbarrier op of the producer
    # came before the last wait: the barriers' bytes may go to the epilogue's scratch.
    c.create(shared.BarrierOp)
    drain = [
        c.create(TM.MbarrierInvalOp, barriers=full),
        c.create(TM.MbarrierInvalOp, barriers=empty),
    ]
    for op in epilogue:
        op.detach()
        c.insert(op)
    c.create(scf.YieldOp, values=[])

    # The prologue's copies are the producer's now, and the drain is the consumers'.
    for op in reversed(pipelined.prologue):
        if isinstance(op, (TM.MbarrierExpectOp, TM.TmaCopyOp)):
            op.erase()  # their index arithmetic is left to dce
    for op in reversed(pipelined.after):
        op.erase()
    if walk is not None:
        per_tile = walk.per_tile(_before(kernel, producer_block.parent_op))
        _walk_tiles(producer_block, walk, per_tile, steps, producer_steps, [])
        _walk_tiles(consumer_block, walk, per_tile, loop, pipelined.step_index, drain)
    kernel.attributes[PRODUCER_WARPS_ATTRIBUTE] = IntegerAttr(PRODUCER_WARPS)
    if walk is not None:
        ctx.remark(
            kernel,
            "persistent blocks: as many blocks as the GPU holds walk the output tiles; the "
            "producer runs ahead into the next tile while the consumers run this tile's "
            "epilogue",
        )
    ctx.remark(
        kernel,
        f"warp-specialized: a producer warpgroup ({PRODUCER_WARPS} warps, "
        f"{PRODUCER_REGISTERS} registers a thread) issues every step's TMA copies up to "
        f"{stages - 1} steps ahead, waiting on a stage's empty mbarrier; the {warps} consumer "
        f"warps ({registers} registers) run the wgmma loop with no block-wide barrier, "
        "releasing each stage once its wgmma is waited for, and the epilogue",
    )


def _walk_tiles(
    block: Block,
    walk: TileWalk,
    per_tile: list[Operation],
    main: scf.ForOp,
    step_index: Value,
    after: list[Operation],
) -> None:
    """Put the ops of a region's `block` (but `after`, which end it, and its yield) in a walk
    over the output tiles: each tile's values cloned at its coordinates, the step index of
    `main` counted on across tiles (so every stage's mbarrier phases run on), `after` once
    the walk ends."""
    ops = [op for op in block.ops if not isinstance(op, scf.YieldOp) and op not in after]
    loop, t, base = walk_loop(Builder.before_op(ops[0]), walk, main.loc)
    inner = Builder.at_end(loop.body.block, main.loc)
    mapping = dict(zip(walk.first_coords, walk.coordinates(inner, t)))
    for op in per_tile:
        inner.insert(op.clone(mapping))
    here = None
    for op in ops:
        clone = inner.insert(op.clone(mapping))
        if op is main:
            here = clone
    assert here is not None
    rebase_steps(mapping[step_index], base)
    trips = trip_count(inner, here)
    inner.create(scf.YieldOp, values=[inner.create(arith.AddIOp, lhs=base, rhs=trips).result])
    for op in reversed(ops):
        op.erase()


_SETUP = (shared.AllocSharedOp, TM.MbarrierInitOp, shared.BarrierOp)


def _has_effects(op: Operation) -> bool:
    """Whether `op` does more than compute its results (stores, copies, barriers)."""
    from tilec.ir.core import Pure

    if any(isinstance(inner, shared.BarrierOp) for inner in op.walk()):
        return True
    return not all(inner.has_trait(Pure) for inner in op.walk() if inner is not op) or (
        not op.has_trait(Pure) and not isinstance(op, (scf.ForOp, scf.IfOp))
    )


def _before(kernel: FuncOp, loop: Operation) -> list[Operation]:
    ops = list(kernel.body.block.ops)
    return ops[: ops.index(loop)]


def _wait_of(loop: scf.ForOp) -> TM.MbarrierWaitOp | None:
    """The loop's wait on its stage's mbarrier, first of its body but index arithmetic."""
    for op in loop.body.block.ops:
        if isinstance(op, TM.MbarrierWaitOp):
            return op
        if not isinstance(op, (arith.ConstantOp, arith.DivSIOp, arith.RemSIOp, arith.SubIOp)):
            return None
    return None


def _ahead_iv(copy: Operation) -> Value:
    """The induction variable of the step a body copy fetches: the left side of its
    predicate, `iv_ahead < upper`."""
    pred = copy.pred
    assert isinstance(pred, OpResult) and isinstance(pred.op, arith.CmpIOp)
    return pred.op.lhs


def _slice(loop: scf.ForOp, roots: list[Operation], stop: set[Value]) -> list[Operation]:
    """The ops of `loop`'s body that `roots` need (themselves included), in body order, not
    looking through the values of `stop`."""
    body = loop.body.block
    needed: set[int] = set()
    work = list(roots)
    while work:
        op = work.pop()
        if id(op) in needed:
            continue
        needed.add(id(op))
        for v in op.operands:
            if v in stop:
                continue
            if isinstance(v, OpResult) and v.op.parent is body:
                work.append(v.op)
    return [op for op in body.ops if id(op) in needed]


def _blocks_per_sm(kernel: FuncOp) -> int:
    blocks = kernel.attributes.get("tilec.min_blocks_per_sm")
    return int(blocks.value) if blocks is not None else 1


# Registers a consumer thread needs besides its accumulator: wgmma's descriptors, addresses,
# the loop's indices (tiling's wgmma model counts 16 + about 48).
_REGISTERS_BESIDES_ACCUMULATOR = 64


def _registers_needed(loop: scf.ForOp, warps: int) -> int:
    """Accumulator words a consumer thread holds (the chain's tile over the consumers' threads),
    plus what a wgmma loop needs besides."""
    j = chained_wgmma_slots(loop)[0]
    acc = loop.yield_op.operands[j].type
    words = acc.shape[0] * acc.shape[1] // (warps * _WARP)
    return words + _REGISTERS_BESIDES_ACCUMULATOR


def _consumer_registers(warps: int, blocks: int) -> int:
    """The registers a consumer thread may take (`setmaxnreg.inc`) once the producer keeps 40:
    with `setmaxnreg` in a kernel, ptxas gives every thread the most registers the launch
    bounds allow (the SM's 64 Ki over `blocks` blocks of consumers and producer: 168 for
    8 + 4 warps, one block), and the consumers can take only what the producer's warps give
    back (`setmaxnreg.inc` waits for registers otherwise: a hang). A multiple of 8, at most
    256."""
    consumers = warps * _WARP
    producers = PRODUCER_WARPS * _WARP
    start = min(248, REGISTERS_PER_SM // (blocks * (consumers + producers)) // 8 * 8)
    given_back = producers * (start - PRODUCER_REGISTERS)
    return min(256, start + given_back // consumers // 8 * 8)
