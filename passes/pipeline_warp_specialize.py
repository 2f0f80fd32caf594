"""Warp specialization of the loops the TMA unit fills (`pipeline`'s option `warp_specialize`):
a producer warpgroup issues every step's copies, the kernel's warps only compute.

What `pipeline` makes of such a loop without it: the copies of step i + S - 2 (or S - 1) are
issued by one thread of the computing warps after step i's wgmma; a block-wide `tile.barrier`
each step tells that thread that every warp is past its reads of the slot refilled next; a
GEMM's copies run only S - 2 steps ahead, because the slot of step i - 1 may still be read by
the wgmma left in flight. With warp specialization (`tilec.dialects.warp_specialize` shows
the IR):

* a **producer** region on a warpgroup of its own walks the steps: it waits on the stage's
  *empty* mbarrier (released by the consumers), arms its *full* mbarrier and issues the copies
  -- so copies run as far ahead as the stages allow, with no block-wide barrier in the loop;
* the **consumer** region is the loop as it was, less its copies and the barrier after its
  wait, plus one `tile.mbarrier_arrive` a step on the empty mbarrier of the previous step's
  slot, once every wgmma that read it is waited for: a GEMM's chain left in flight releases
  it after the next issue (`wgmma.wait_group 1`), a loop whose wgmmas are all waited for
  within their step (attention's two dots) at the top of the next step; then the epilogue;
* `setmaxnreg` moves registers from the producer (40 a thread) to the consumers, whose
  accumulators need them; the kernel keeps the blocks an SM its stages were chosen for
  (`tilec.min_blocks_per_sm`, so that the launch bounds leave each block its share).

Several TMA loops in a row (attention's main loop and the tail `mask-bounds` splits off, and
the causal diagonal) share one protocol: the later loops fill the first loop's buffers and
arrive on its mbarriers (`_aliases`: the same tensors into buffers of the same shape), and
their steps are counted on from loop to loop (`step_base`), so the producer walks every loop's
steps in order and a stage is refilled only once the step that last read it, in whichever
loop, released it.

The kernel's body is split around the loops (`_partition`): scalar arithmetic on values every
warp has (program ids, tile offsets, the loops' bounds) stays before the op -- the producer's
copies need it --; the copies before each loop and the drains between loops go; everything
else -- tiles, the staging of a loop-invariant operand (attention's q: its store, the
consumers' barrier, its read into fragments), the epilogue -- is the consumers' (only their
warps have the tiles' layouts; a `tile.barrier` there is the consumers' named barrier). A
buffer the consumers fill themselves gets bytes of its own when shared memory is planned
again: it is live while the producer copies.

When (`warp_specialize_blocker`): sm_90a, loops directly in the kernel's body whose copies the
TMA unit makes, each feeding a wgmma dot and starting by waiting on its stage's mbarrier, a
wgmma chain left in flight only with `tilec.dots_in_flight` (its wait would otherwise be at the
barrier the consumers no longer have), the copies' operands computed by every warp, and enough
registers for the consumers. With pipeline's option `persistent` both regions walk the output
tiles (`_walk_tiles`), every loop of a tile in turn (attention's main loop and its tail), the
producer running into the next tile while the consumers run this tile's epilogue; consumers
that stage a tile themselves (attention's q) meet at a barrier before each tile's. Option values: -1 where allowed, 0 never, 1 required (an error says
why not), 2 (the default, `AS_PLANNED`) where tiling tiled the kernel for a producer warpgroup
(its option `producer`: attention at d128, where the dots bound the loop), else never. The
interpreter runs the regions as coroutines and checks the mbarrier protocol
(`tilec.interp.warp_specialize`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tilec.diagnostics import TileError
from tilec.dialects import arith, scf, shared
from tilec.dialects import tma as TM
from tilec.dialects.builtin import PERSISTENT_ATTRIBUTE, PRODUCER_ATTRIBUTE, FuncOp, ReturnOp
from tilec.dialects.warp_specialize import WarpSpecializeOp
from tilec.ir.attributes import IntegerAttr, StringAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Block, Operation, OpResult, Region, Value
from tilec.ir.types import SharedType, TileType, i64, index
from tilec.lowering.layouts import element_bytes
from tilec.lowering.wgmma import carried_in_flight, chained_wgmma_slots, is_wgmma_dot
from tilec.passes.occupancy import REGISTERS_PER_SM
from tilec.passes.pipeline_persistent import (
    PipelinedLoop,
    TileWalk,
    rebase_steps,
    tile_walk,
    trip_count,
    walk_loop,
)
from tilec.passes.pipeline_staged_tma import (
    StagedCopy,
    copy_by_producer,
    staged_copies,
)
from tilec.passmanager import PassContext

__all__ = [
    "AS_PLANNED",
    "PRODUCER_REGISTERS",
    "PRODUCER_WARPS",
    "PRODUCER_WARPS_ATTRIBUTE",
    "as_planned",
    "specialize_warps",
    "warp_specialize_blocker",
    "warp_specialize_kernel",
]

# pipeline's warp_specialize and pingpong: as tiling planned (`PRODUCER_ATTRIBUTE`), else never.
AS_PLANNED = 2


def as_planned(kernel: FuncOp, options: Any) -> Any:
    """pipeline's `options` for `kernel`, with warp_specialize and pingpong left at
    `AS_PLANNED` resolved: -1 (where allowed) in a kernel that tiling tiled for a producer
    warpgroup (`PRODUCER_ATTRIBUTE`) -- and warp_specialize also where clusters are asked for
    (option `cluster`) --, else 0."""
    planned = -1 if PRODUCER_ATTRIBUTE in kernel.attributes else 0
    resolved = {
        name: planned
        for name in ("warp_specialize", "pingpong")
        if getattr(options, name) == AS_PLANNED
    }
    if options.cluster > 1 and options.warp_specialize == AS_PLANNED:
        resolved["warp_specialize"] = -1  # clusters release their stages through a producer's
    return replace(options, **resolved)


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
    blocks: int = 1,
    staged_tma: int = -1,
) -> bool:
    """pipeline's option `warp_specialize` on the kernel's TMA loops (`made`), with persistent blocks
    walking the tiles when `persistent` is the loop option `persistent` chose; whether the
    kernel was specialized. `blocks`: the blocks an SM holds that the stages were chosen for
    (`tilec.min_blocks_per_sm` when the kernel has it): the specialized kernel's launch bounds
    keep them (`tilec.min_blocks_per_sm`), with a producer warpgroup in each. `staged_tma`:
    pipeline's option of that name (passes/pipeline_staged_tma.py)."""
    if option not in (-1, 0, 1):
        raise TileError(f"pipeline: option warp_specialize must be -1, 0 or 1, got {option}")
    if option == 0:
        return False
    if persistent is not None and not any(p.loop is persistent for p in made):
        why = "its persistent loop's copies are not made by the TMA unit"
    else:
        why = warp_specialize_blocker(kernel, made, blocks)
    if why:
        if option == 1:
            raise TileError(f"pipeline: option warp_specialize = 1, but {why}", kernel.loc)
        planned = PRODUCER_ATTRIBUTE in kernel.attributes
        ctx.remark(
            kernel,
            f"not warp-specialized: {why}"
            + (
                "; tiling chose the tiles for a producer warpgroup, and without one they are "
                "slow (tiling's option producer = 0 chooses tiles for the warps alone)"
                if planned
                else ""
            ),
        )
        return False
    planned = blocks
    blocks = _specialized_blocks(kernel, made, planned)
    if blocks > 1 and "tilec.min_blocks_per_sm" not in kernel.attributes:
        kernel.attributes["tilec.min_blocks_per_sm"] = IntegerAttr(blocks)
        why = (
            "as the stages were chosen for"
            if blocks == planned
            else f"not the {planned} the stages were chosen for, whose consumers would lack "
            "registers"
        )
        ctx.remark(
            kernel,
            f"{blocks} blocks an SM, {why} (tilec.min_blocks_per_sm), with a producer "
            f"warpgroup each; the launch bounds keep each thread to "
            f"{REGISTERS_PER_SM // (blocks * _threads(kernel)) // 8 * 8} registers, the "
            f"consumers take {_consumer_registers(_warps(kernel), blocks)} back with setmaxnreg",
        )
    specialize_warps(kernel, made, ctx, persistent=persistent is not None, staged_tma=staged_tma)
    return True


def _specialized_blocks(kernel: FuncOp, loops: list[PipelinedLoop], planned: int) -> int:
    """The blocks an SM a specialized kernel asks for: `tilec.min_blocks_per_sm` when the kernel
    pins it, else the most, up to `planned` (what the stages were chosen for), whose consumers
    get the registers their loops need once each block also holds a producer warpgroup."""
    pinned = kernel.attributes.get("tilec.min_blocks_per_sm")
    if pinned is not None:
        return int(pinned.value)
    warps = _warps(kernel)
    needed = max(_registers_needed(p.loop, warps) for p in loops)
    for blocks in range(planned, 1, -1):
        if _consumer_registers(warps, blocks) >= needed:
            return blocks
    return 1


def _warps(kernel: FuncOp) -> int:
    return int(kernel.attributes["tilec.num_warps"].value)


def _threads(kernel: FuncOp) -> int:
    """A specialized block's threads: the consumers' and the producer's warpgroup."""
    return (_warps(kernel) + PRODUCER_WARPS) * _WARP


def warp_specialize_blocker(
    kernel: FuncOp, made: list[PipelinedLoop] | PipelinedLoop | None, blocks: int = 1
) -> str:
    """Why the TMA loops `made` (in the kernel's order) cannot be warp-specialized ("" when
    they can), `blocks` blocks an SM (`tilec.min_blocks_per_sm` when the kernel has it)."""
    loops = [made] if isinstance(made, PipelinedLoop) else list(made or [])
    if not loops:
        return "no loop's copies are made by the TMA unit"
    if PERSISTENT_ATTRIBUTE in kernel.attributes:
        return "the kernel has persistent blocks"
    for pipelined in loops:
        loop = pipelined.loop
        if loop.parent is not kernel.body.block:
            return "its loop is nested in other control flow"
        if not any(is_wgmma_dot(op) for op in loop.body.walk()):
            return "its loop feeds no wgmma dot"
        if carried_in_flight(loop) and (
            scf.dots_in_flight(loop) != 1 or not chained_wgmma_slots(loop)
        ):
            return (
                "its loop's wgmma chain is waited for at the next iteration's barrier "
                "(dots_in_flight = 0), which the consumers no longer have"
            )
        if _wait_of(loop) is None:
            return "its loop does not start by waiting on its stage's mbarrier"
    aliases = _aliases(loops)
    if isinstance(aliases, str):
        return aliases
    parts = _partition(kernel, loops)
    if isinstance(parts, str):
        return parts
    warps = _warps(kernel)
    blocks = _specialized_blocks(kernel, loops, blocks)
    registers = _consumer_registers(warps, blocks)
    needed = max(_registers_needed(p.loop, warps) for p in loops)
    if registers < needed:
        return (
            f"its consumers would get {registers} registers a thread (with a producer "
            f"warpgroup in each of {blocks} block(s) an SM), fewer than the "
            f"~{needed} their accumulators, held operands and descriptors need"
        )
    return ""


@dataclass
class _Partition:
    """Where each op of the kernel's body goes when its TMA loops are specialized."""

    hoisted: list[Operation]  # scalar arithmetic after the first loop, moved before the op
    consumer: list[Operation]  # in order: the loops and every op with tiles or effects
    erased: list[Operation]  # the copies before each loop, the drains, later loops' setup


def _partition(kernel: FuncOp, loops: list[PipelinedLoop]) -> _Partition | str:
    """Split the kernel's body around its TMA loops (`loops`, in order): scalar arithmetic on
    values every warp has stays before the op (every warp computes it; the producer's copies
    need it), the loops' copies before them and their drains go (the producer copies, the
    consumers drain once, after the last loop), the barriers that publish the stages'
    mbarriers stay, and everything else -- tiles, stores, the barriers that order them, the
    epilogue -- is the consumers' (only their warps have the tiles' layouts). A string says
    why not: the producer's copies need a value only the consumers compute."""
    block = kernel.body.block
    ops = list(block.ops)
    first = ops.index(loops[0].loop)
    in_loops = {id(p.loop) for p in loops}
    gone: set[int] = set()
    for p in loops:
        gone.update(id(op) for op in p.prologue if isinstance(op, _COPIES))
        gone.update(id(op) for op in p.after)
    full = _wait_of(loops[0].loop).barriers  # type: ignore[union-attr]
    for p in loops[1:]:  # their stages are the first loop's (`_aliases`)
        barriers = _wait_of(p.loop).barriers  # type: ignore[union-attr]
        for use in barriers.uses:
            if isinstance(use, TM.MbarrierInitOp):
                gone.add(id(use))
                at = ops.index(use)
                if at + 1 < len(ops) and isinstance(ops[at + 1], shared.BarrierOp):
                    gone.add(id(ops[at + 1]))  # it published the init
    outside: set[int] = {id(a) for a in kernel.body.block.args}
    parts = _Partition([], [], [])
    for i, op in enumerate(ops):
        if id(op) in gone:
            parts.erased.append(op)
            continue
        if isinstance(op, ReturnOp):
            continue
        if id(op) in in_loops:
            parts.consumer.append(op)
            continue
        scalar = (
            not _has_effects(op)
            and not any(isinstance(r.type, TileType) for r in op.results)
            and all(id(v) in outside for v in op.operands)
        )
        setup = isinstance(op, shared.AllocSharedOp) or (
            i < first
            and (
                (isinstance(op, TM.MbarrierInitOp) and op.barriers is full)
                or (isinstance(op, shared.BarrierOp) and isinstance(ops[i - 1], TM.MbarrierInitOp))
            )
        )
        if setup or scalar:
            outside.update(id(r) for r in op.results)
            if scalar and i > first:
                parts.hoisted.append(op)
            continue
        parts.consumer.append(op)
    for p in loops:
        needed = [p.loop.lower, p.loop.upper, p.loop.step]
        for op in _producer_ops(p):
            needed += [v for v in op.operands if not _defined_in(v, p.loop)]
        for v in needed:
            if id(v) not in outside:
                return (
                    "its copies need a value that only the consumers' warps compute "
                    f"(%{v.name_hint or '?'})"
                )
    return parts


def _defined_in(value: Value, loop: scf.ForOp) -> bool:
    """Whether `value` is defined in `loop` (its body's arguments or ops)."""
    if value in loop.body.block.args:
        return True
    return isinstance(value, OpResult) and value.op.parent is loop.body.block


def _producer_ops(pipelined: PipelinedLoop) -> list[Operation]:
    """The ops of the loop's body the producer runs: the step arithmetic before its wait and
    the copies ahead with the arithmetic they need."""
    loop = pipelined.loop
    body = list(loop.body.block.ops)
    wait = _wait_of(loop)
    assert wait is not None
    copies = [op for op in body if isinstance(op, _COPIES)]
    return body[: body.index(wait)] + _slice(loop, copies, {_ahead_iv(copies[0]), copies[0].slot})


def _aliases(loops: list[PipelinedLoop]) -> dict[Value, Value] | str:
    """Later loops' stage mbarriers and buffers as the first loop's: one protocol runs through
    all the loops (steps counted on from loop to loop), so the bytes of slot s are released
    and refilled in one order. A string says why not (their copies differ)."""
    first = loops[0]
    first_copies = [op for op in first.loop.body.walk() if isinstance(op, TM.TmaCopyOp)]
    mapping: dict[Value, Value] = {}
    for p in loops[1:]:
        if p.stages != first.stages:
            return "its TMA loops have different numbers of stages"
        copies = [op for op in p.loop.body.walk() if isinstance(op, TM.TmaCopyOp)]
        if len(copies) != len(first_copies) or any(
            a.view is not b.view or a.buffer.type != b.buffer.type
            for a, b in zip(copies, first_copies)
        ):
            return "its TMA loops copy into buffers of different shapes or from different tensors"
        mapping[_wait_of(p.loop).barriers] = _wait_of(first.loop).barriers  # type: ignore[union-attr]
        for a, b in zip(copies, first_copies):
            mapping[a.buffer] = b.buffer
    return mapping


def specialize_warps(
    kernel: FuncOp,
    made: list[PipelinedLoop] | PipelinedLoop,
    ctx: PassContext,
    persistent: bool = False,
    staged_tma: int = -1,
) -> None:
    """Rewrite `kernel` around its TMA loops `made` (`warp_specialize_blocker` allows them)
    into a producer and a consumer region (the module docstring), with a remark; with
    `persistent`, each region walks the output tiles (`persistent_blocker` allows it).
    `staged_tma`: whether the producer copies what the consumers would stage before the
    loops (pipeline_staged_tma.py; -1 where it can, 0 never, 1 required)."""
    loops = [made] if isinstance(made, PipelinedLoop) else list(made)
    first = loops[0]
    walk = tile_walk(kernel, first.loop.loc) if persistent else None
    stages = first.stages
    block = kernel.body.block
    waits = [_wait_of(p.loop) for p in loops]
    assert all(w is not None for w in waits)
    full = waits[0].barriers  # type: ignore[union-attr]
    warps = int(kernel.attributes["tilec.num_warps"].value)
    aliases = _aliases(loops)
    parts = _partition(kernel, loops)
    assert isinstance(aliases, dict) and isinstance(parts, _Partition)
    staged = _staged_by_producer(kernel, parts, loops[0].loop, staged_tma, persistent, ctx)
    producer_parts = [(p, _producer_ops(p)) for p in loops]
    chains = [bool(carried_in_flight(p.loop)) for p in loops]  # before the barriers go
    for op in parts.hoisted:
        op.move_before(first.loop)

    # The empty mbarriers: one a stage, completed by one arrival of every consumer warp.
    entry = Builder.at_start(block, first.loop.loc)
    empty = entry.create(shared.AllocSharedOp, result_types=[SharedType((stages, 1), i64)]).result
    empty.name_hint = "empty_barriers"
    init = next(u for u in full.uses if isinstance(u, TM.MbarrierInitOp))  # before its barrier
    Builder.after_op(init).create(
        TM.MbarrierInitOp,
        barriers=empty,
        arrivals=IntegerAttr(1),
        warps=IntegerAttr(warps),
    )

    # Steps are counted on from loop to loop: loop j's step i is step base_j + i of the
    # stages' protocol, whose phases then run on.
    b = Builder.before_op(first.loop)
    base: Value | None = None
    steps_of: list[Value] = []
    for j, p in enumerate(loops):
        if j > 0:
            trips = trip_count(b, loops[j - 1].loop)
            base = trips if base is None else b.create(arith.AddIOp, lhs=base, rhs=trips).result
            base.name_hint = "step_base"
            rebase_steps(p.step_index, base)
            steps_of.append(next(iter(p.step_index.uses)).results[0])
        else:
            steps_of.append(p.step_index)

    # The op, where the first loop was.
    producer_block, consumer_block = Block(), Block()
    registers = _consumer_registers(warps, _specialized_blocks(kernel, loops, 1))
    b.create(
        WarpSpecializeOp,
        producer=Region([producer_block]),
        consumer=Region([consumer_block]),
        producer_warps=IntegerAttr(PRODUCER_WARPS),
        producer_registers=IntegerAttr(PRODUCER_REGISTERS),
        consumer_registers=IntegerAttr(registers),
    )

    # Producer: every loop's steps, each step's copies once its stage is released.
    p_builder = Builder.at_end(producer_block, first.loop.loc)
    staged_copies_made = copy_by_producer(staged, init, p_builder, parts.consumer)
    producer_loops = []
    for (p, _), wait in zip(producer_parts, waits):
        producer_loops.append(_producer_loop(p_builder, p, wait, empty, aliases))
    p_builder.create(scf.YieldOp, values=[])

    # Consumers: each loop without its copies or its barrier, releasing each step's stage
    # once every wgmma that read it was waited for (the index arithmetic of the copies
    # ahead is left to dce).
    for (p, _), wait, step, chain in zip(producer_parts, waits, steps_of, chains):
        _consume(p, wait, step, stages, empty, chain)
    for old, new in aliases.items():
        old.replace_all_uses_with(new)

    c = Builder.at_end(consumer_block, first.loop.loc)
    last = loops[-1].loop
    drain: list[Operation] = []
    for op in parts.consumer:
        op.detach()
        c.insert(op)
        if op is last:
            # The consumers' last reads of the stages are over; every mbarrier op of the
            # producer came before the last wait: the barriers' bytes may go to the
            # epilogue's scratch.
            c.create(shared.BarrierOp)
            drain = [
                c.create(TM.MbarrierInvalOp, barriers=barriers)
                for barriers in (full, empty, *staged_copies_made.barriers)
            ]
    c.create(scf.YieldOp, values=[])
    for op in reversed(parts.erased):
        op.erase()  # the copies' index arithmetic is left to dce
    for op in staged_copies_made.dropped:
        op.erase()
    for old in aliases:
        if isinstance(old, OpResult) and isinstance(old.op, shared.AllocSharedOp):
            old.op.erase()
    if walk is not None:
        per_tile = walk.per_tile(_before(kernel, producer_block.parent_op))
        _walk_tiles(producer_block, walk, per_tile, producer_loops, [])
        mains = [(p.loop, p.step_index) for p in loops]
        _walk_tiles(consumer_block, walk, per_tile, mains, drain)
    kernel.attributes[PRODUCER_WARPS_ATTRIBUTE] = IntegerAttr(PRODUCER_WARPS)
    if walk is not None:
        ctx.remark(
            kernel,
            "persistent blocks: as many blocks as the GPU holds walk the output tiles; the "
            "producer runs ahead into the next tile while the consumers run this tile's "
            "epilogue",
        )
    several = (
        f" of {len(loops)} loops, their steps counted on from loop to loop"
        if len(loops) > 1
        else ""
    )
    ctx.remark(
        kernel,
        f"warp-specialized: a producer warpgroup ({PRODUCER_WARPS} warps, "
        f"{PRODUCER_REGISTERS} registers a thread) issues every step's TMA copies{several} up "
        f"to {stages - 1} steps ahead, waiting on a stage's empty mbarrier; the {warps} "
        f"consumer warps ({registers} registers) run the wgmma loop"
        f"{'s' if len(loops) > 1 else ''} with no block-wide barrier, releasing each stage "
        "once every wgmma that read it is waited for, and the epilogue",
    )


def _staged_by_producer(
    kernel: FuncOp,
    parts: _Partition,
    first: scf.ForOp,
    option: int,
    persistent: bool,
    ctx: PassContext,
) -> list[StagedCopy]:
    """The tiles the consumers would stage before `first` that the producer copies instead
    (pipeline_staged_tma.py), with a remark; an error when `option` is 1 and one cannot be."""
    if option == 0:
        return []
    consumer = {id(op) for op in parts.consumer}
    block = kernel.body.block

    def producer_has(v: Value) -> bool:
        if v in block.args:
            return True
        return isinstance(v, OpResult) and v.op.parent is block and id(v.op) not in consumer

    staged, why_not = staged_copies(kernel, parts.consumer, first, producer_has)
    if persistent and staged:
        why_not = [
            "persistent blocks keep the consumers' staging (measured: the producer's wait for "
            "the consumers' release of the tile before's holds the next tile's K and V copies "
            "behind their last step; pipeline_staged_tma.py)"
        ]
        staged = []
    if option == 1 and (why_not or not staged):
        why = "; ".join(why_not) or "the consumers stage no tile before the loops"
        raise TileError(f"pipeline: option staged_tma = 1, but {why}", kernel.loc)
    for s in staged:
        ctx.remark(
            kernel,
            f"%{s.alloc.result.name_hint or '?'} (staged before the loops) is copied by the "
            f"producer's TMA unit, first of its copies ({s.bytes} bytes in boxes of "
            f"{list(s.box)} on an mbarrier of its own); the consumers wait on it instead of "
            "loading it into registers, storing it and meeting at a barrier",
        )
    for why in why_not:
        ctx.remark(kernel, f"the consumers stage a tile themselves: {why}")
    return staged


def _producer_loop(
    b: Builder,
    pipelined: PipelinedLoop,
    wait: TM.MbarrierWaitOp,
    empty: Value,
    aliases: dict[Value, Value],
) -> tuple[scf.ForOp, Value]:
    """The producer's walk over `pipelined`'s steps: wait for the stage's release (the phase
    before the one it fills: on a fresh stage the wait returns at once), then its copies
    (into the first loop's buffers, `aliases`). Returns (the loop, its step index)."""
    loop = pipelined.loop
    steps = b.create(
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
    mapping: dict[Value, Value] = {loop.induction_var: k, **aliases}
    body = list(loop.body.block.ops)
    for op in body[: body.index(wait)]:
        w.insert(op.clone(mapping))
    slot, phase = mapping[wait.slot], mapping[wait.phase]
    one = w.create(arith.ConstantOp, value=IntegerAttr(1), result_types=[index]).result
    released = w.create(arith.SubIOp, lhs=one, rhs=phase).result  # the phase before
    released.name_hint = "released_phase"
    w.create(TM.MbarrierWaitOp, barriers=empty, slot=slot, phase=released)
    ahead = [op for op in body if isinstance(op, _COPIES)]
    copy_map: dict[Value, Value] = {**aliases, _ahead_iv(ahead[0]): k, ahead[0].slot: slot}
    for op in _slice(loop, ahead, {_ahead_iv(ahead[0]), ahead[0].slot}):
        w.insert(op.clone(copy_map))
    w.create(scf.YieldOp, values=[])
    return steps, mapping[pipelined.step_index]


def _consume(
    pipelined: PipelinedLoop,
    wait: TM.MbarrierWaitOp,
    step: Value,
    stages: int,
    empty: Value,
    chain: bool,
) -> None:
    """The consumers' loop: its copies go, and its barriers unless the consumers store into
    shared memory in the loop themselves (a tile staged each step); each step
    releases the stage of the step before (`step` counts on from loop to loop, so the first
    step of a later loop releases the last of the loop before). A wgmma chain in flight
    (`carried_in_flight`) releases it once the next wgmma is issued (whose issue waited for
    the previous group, `wgmma.wait_group 1`; `chain`); a loop whose wgmmas are all waited for within
    their iteration releases it at the top, right after its wait."""
    loop = pipelined.loop
    body = list(loop.body.block.ops)
    ahead = [op for op in body if isinstance(op, _COPIES)]
    for op in reversed(ahead):
        op.erase()
    written = any(isinstance(op, shared.StoreSharedOp) for op in loop.body.walk())
    if not written:
        # The stages' bytes are ordered by the mbarriers alone (the full one makes the copies
        # visible, the empty one keeps the producer off a stage being read); a barrier kept
        # for a staging store the TMA unit replaced orders nothing, and would hold the
        # consumer warpgroups in step with each other.
        for op in body:
            if isinstance(op, shared.BarrierOp):
                op.erase()
    r = Builder.before_op(loop.yield_op) if chain else Builder.after_op(wait)
    count = r.create(arith.ConstantOp, value=IntegerAttr(stages), result_types=[index]).result
    back = r.create(arith.ConstantOp, value=IntegerAttr(stages - 1), result_types=[index]).result
    previous = r.create(
        arith.RemSIOp, lhs=r.create(arith.AddIOp, lhs=step, rhs=back).result, rhs=count
    ).result
    previous.name_hint = "released_slot"
    zero = r.create(arith.ConstantOp, value=IntegerAttr(0), result_types=[index]).result
    has_previous = r.create(arith.CmpIOp, predicate=StringAttr("sgt"), lhs=step, rhs=zero).result
    r.create(TM.MbarrierArriveOp, barriers=empty, slot=previous, pred=has_previous)


def _walk_tiles(
    block: Block,
    walk: TileWalk,
    per_tile: list[Operation],
    mains: list[tuple[scf.ForOp, Value]],
    after: list[Operation],
) -> None:
    """Put the ops of a region's `block` (but `after`, which end it, and its yield) in a walk
    over the output tiles: each tile's values cloned at its coordinates, the step indices of
    its loops `mains` ((loop, step index), in order; later loops count on from the earlier
    ones' steps) counted on across tiles (so every stage's mbarrier phases run on), `after`
    once the walk ends. A region that fills shared
    memory itself outside its loops
    (attention's q, staged by the consumers) first waits at a barrier each tile, so that no
    warp overwrites what another still reads of the tile before."""
    ops = [op for op in block.ops if not isinstance(op, scf.YieldOp) and op not in after]
    loop, t, base = walk_loop(Builder.before_op(ops[0]), walk, mains[0][0].loc)
    inner = Builder.at_end(loop.body.block, mains[0][0].loc)
    in_loops = {id(m) for m, _ in mains}
    if any(
        isinstance(o, shared.StoreSharedOp)
        for op in ops
        if id(op) not in in_loops
        for o in op.walk()
    ):
        inner.create(shared.BarrierOp)
    mapping = dict(zip(walk.first_coords, walk.coordinates(inner, t)))
    for op in per_tile:
        inner.insert(op.clone(mapping))
    clones = {}
    for op in ops:
        clones[id(op)] = inner.insert(op.clone(mapping))
    trips = None
    for main, step_index in mains:
        rebase_steps(mapping[step_index], base)
        count = trip_count(inner, clones[id(main)])
        trips = count if trips is None else inner.create(arith.AddIOp, lhs=trips, rhs=count).result
    assert trips is not None
    inner.create(scf.YieldOp, values=[inner.create(arith.AddIOp, lhs=base, rhs=trips).result])
    for op in reversed(ops):
        op.erase()


_COPIES = (TM.MbarrierExpectOp, TM.TmaCopyOp)


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


# Registers a consumer thread needs besides its accumulators and held fragments: wgmma's
# descriptors, addresses, the loop's indices (tiling's wgmma model counts 16 + about 48).
_REGISTERS_BESIDES_ACCUMULATOR = 64


def _registers_needed(loop: scf.ForOp, warps: int) -> int:
    """Words a consumer thread holds in `loop`: the accumulator of every wgmma dot in it (the
    dot's tile over the consumers' threads), the A fragments its register-A dots read
    (attention's q held across the loop, P computed in it), plus what a wgmma loop needs
    besides."""
    threads = warps * _WARP
    words = 0
    for op in loop.body.walk():
        if not is_wgmma_dot(op):
            continue
        acc = op.result.type
        words += acc.shape[0] * acc.shape[1] * element_bytes(acc.element) // 4 // threads
        a = op.a.type
        if a.layout.version == 2:  # held in registers as A fragments
            words += a.shape[0] * a.shape[1] * element_bytes(a.element) // 4 // threads
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
