"""The `pipeline` pass: loops that stream tiles from global memory into shared memory copy them
asynchronously, several iterations ahead, into multi-slot buffers (software pipelining).

Before (what `smem-placement` leaves), one tile per iteration goes through a one-slot buffer:

    scf.for %k = %lb to %ub step %st {
      %a = tile.load %A[%row, %k]
      tile.barrier
      tile.store_shared %a_smem[%c0], %a
      tile.barrier
      %a_op = tile.load_shared %a_smem[%c0]
      ...
    }

After, with S stages (`examples/ir/matmul_pipelined.tir` is the shape):

    tile.async_copy %A[%row, %lb], %a_smem[%c0]                    // prologue: steps 0..S-2
    tile.async_commit
    ...
    scf.for %k = %lb to %ub step %st {
      tile.async_wait S-2                                          // step i has landed
      tile.barrier                                                 // visible; slot i-1 free
      %i = (%k - %lb) / %st
      tile.async_copy %A[%row, %k + (S-1) * %st], %a_smem[(%i + S-1) % S]
      tile.async_commit
      %a_op = tile.load_shared %a_smem[%i % S]
      ...
    }
    tile.async_wait 0
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tilec.diagnostics import TileError
from tilec.dialects import arith, scf, shared
from tilec.dialects import tile as T
from tilec.dialects import tma as TM
from tilec.dialects.builtin import WALK_ATTRIBUTE, FuncOp
from tilec.ir.attributes import ArrayAttr, IntegerAttr, StringAttr, UnitAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Operation, OpResult, Value
from tilec.ir.folding import constant_value
from tilec.ir.types import SharedType, i64
from tilec.lowering.shared_memory import slot_bytes
from tilec.lowering.tma import box_plan, folded_plan
from tilec.lowering.wgmma import chained_wgmma_slots, is_wgmma_dot
from tilec.passes.loop_slices import affine_in_iv, defined_inside, recompute_slice
from tilec.passes.occupancy import (
    SM_SHARED_SM90,
)
from tilec.passes.pipeline_cluster import (
    AUTOMATIC,
    announce_cluster,
    cluster_kernel,
    resolve_cluster_defaults,
)
from tilec.passes.pipeline_in_flight import leave_in_flight
from tilec.passes.pipeline_occupancy import MAX_DEFAULT_STAGES, _planned_blocks, choose_stages
from tilec.passes.pipeline_persistent import (
    WITH_CLUSTERS,
    PipelinedLoop,
    persist,
    persistent_loop,
    reserve_epilogue,
)
from tilec.passes.pipeline_pingpong import schedule_pingpong
from tilec.passes.pipeline_staged_tma import check_option as check_staged_tma
from tilec.passes.pipeline_tma import (
    TMA_ARCHES,
    planned_buffer,
    straddling_rows,
    tma_blocker,
)
from tilec.passes.pipeline_warp_specialize import AS_PLANNED, as_planned, warp_specialize_kernel
from tilec.passes.register_prefetch import CHAINED, check_choice, prefetch_registers
from tilec.passes.smem_placement import (
    SHARED_LIMIT_SM90,
    apply_shared_plan,
    check_shared_plan,
    plan_shared_memory,
    remove_redundant_barriers,
)
from tilec.passes.specialize import parse_assignments
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["MAX_DEFAULT_STAGES", "Pipeline"]


@register_pass
class Pipeline(Pass):
    """Turns tiles loaded in a loop and stored into shared memory into asynchronous copies
    issued `num_stages - 1` iterations ahead into `num_stages`-slot buffers.

    A stream is a `tile.store_shared %buf[%c0], %v` directly in an `scf.for` body where `%buf`
    has one slot and is used only in that body, and `%v` is a `tile.load` in the same body,
    used only by the store, with padding 0 (a copy fills zeros), from a view defined outside
    the loop, at offsets affine in the induction variable (and a mask computed from it and
    loop-invariant values). Each stream's buffer gets `num_stages` slots; a prologue before the
    loop copies steps 0..S-2; each iteration waits until its step has landed
    (`tile.async_wait S-2`), synchronizes (`tile.barrier`: the copies are visible, and the slot
    read in the previous iteration is free), copies step i+S-1 into that slot, commits one
    group, and reads slot i % S. Copies past the last step read nothing outside the view and
    are never read. After the loop, `tile.async_wait 0`, and a barrier when later code uses
    shared memory; barriers left with nothing to order are removed. `range()` loops
    (`scf.is_range_loop`) are left alone: their bounds need not be tile offsets, so a copy
    ahead could name an index no iteration uses. Offsets are planned again
    (`smem-placement`'s plan) and checked against `shared_limit`.
    Stages: the kernel's pin `tilec.num_stages` (`@kernel(stages=...)`), else the option
    `num_stages`, else (0) for a kernel with `tilec.estimated_registers` (tiling's mma.sync
    model) the stages that keep the most copies in flight per SM (`pipeline_occupancy.choose_stages`),
    else the most stages, up to 4, whose buffers fit `shared_limit`; 1 leaves
    the loops as they are. A loop nested in another loop (an expert's K loop in a range() loop
    over experts) is pipelined anew on every run: the run's last copies land at its
    `async_wait 0`, and the prologue's barrier, kept in a loop body (the previous run read
    the slots), orders the next run's copies after those reads.
    A loop whose wgmma dot updates its carried accumulator in place (a GEMM's chain,
    `chained_wgmma_slots`) may leave one wgmma group in flight across the back edge (option
    `dots_in_flight`; -1, the default: when the S-2 steps its copies then run ahead still
    cover a copy's latency, `wgmma_model.lead_covers_latency`): the loop gets `tilec.dots_in_flight = 1`, the
    lowering waits for the previous iteration's group after issuing the next
    (`wgmma.wait_group 1`) instead of before the barrier, and the copies run S-2 steps ahead,
    so that none fills the slot the running group reads (the interpreter's race check holds
    that slot until the group is waited for).
    On sm_90a (option `arch`), a loop whose every stream fills a wgmma operand buffer from an
    argument its specialization describes copies by the TMA unit instead (option `tma`;
    `passes/pipeline_tma.py` says when): a buffer of one mbarrier a stage, initialized before
    the prologue's barrier; per step an expect of the step's bytes and one `tile.tma_copy` a
    stream, predicated on the step being one the loop runs; the body waits on its slot's
    phase `(i / S) % 2` and then synchronizes (the slot refilled next is free); after the
    loop a barrier and `tile.mbarrier_inval` (docs/passes.md, "Copies by the TMA unit").
    Loops that load tiles straight into registers instead get the next iteration's loads at the
    top of the body, the tiles carried round the loop (option `register_prefetch`, the model
    and the stages pin in `passes/register_prefetch.py`; remark "2 stages in registers: ...").
    Remarks: the stages and why, each stream, groups in flight, how the copies are made and
    why not by the TMA unit, and why each store into shared memory in a loop is not one.
    """

    name = "pipeline"
    summary = "Multi-buffer global->shared copies in loops (cp.async, prologue, waits)"

    @dataclass
    class Options:
        num_stages: int = option(
            0, "slots per streamed buffer; 0: the most (up to 4) that fit; 1: no pipelining"
        )
        shared_limit: int = option(
            SHARED_LIMIT_SM90, "shared memory per block in bytes (sm_90: 227 KiB)"
        )
        dots_in_flight: int = option(
            -1,
            "wgmma groups a GEMM loop leaves running across the back edge (0 or 1; -1: 1 when "
            "the S-2 steps its copies then run ahead cover a copy's latency): with 1, each iteration "
            "waits for the previous iteration's wgmmas after issuing its own, and copies run "
            "S-2 steps ahead (the slot the running wgmma reads stays untouched)",
        )
        tma: int = option(
            -1,
            "copies by the TMA unit on mbarriers (sm_90a): -1 where every stream of a loop can "
            "be (passes/pipeline_tma.py says when), 0 never (cp.async), 1 required (an error "
            "names the stream that cannot)",
        )
        persistent: int = option(
            WITH_CLUSTERS,
            "persistent blocks (sm_90a, a kernel whose one main loop the TMA unit fills): -1 "
            "where the kernel allows (passes/pipeline_persistent.py says when), 0 never, 1 "
            "required (an error says why not), 2 (the default) as -1 where the kernel is "
            "clustered (a clustered block's barriers and launch are then paid once, not a "
            "tile), else 0",
        )
        warp_specialize: int = option(
            AS_PLANNED,
            "a producer warpgroup issues the TMA copies of a loop while the kernel's warps "
            "compute (sm_90a; passes/pipeline_warp_specialize.py says when): -1 where allowed, "
            "0 never, 1 required (an error says why not), 2 (the default) where tiling tiled "
            "the kernel for one (its option producer: attention at d128), else never",
        )
        pingpong: int = option(
            AS_PLANNED,
            "in a warp-specialized kernel of two or more consumer warpgroups, they take turns "
            "issuing the first wgmma of each step of loops with several (attention's q @ k.T), "
            "so one's softmax runs while another's dots do (passes/pipeline_pingpong.py): -1 "
            "where allowed, 0 never, 1 required, 2 (the default) where tiling tiled the kernel "
            "for a producer warpgroup",
        )
        staged_tma: int = option(
            -1,
            "in a warp-specialized kernel, a tile the consumers would stage before the loops "
            "(attention's q) is copied by the producer's TMA unit on an mbarrier of its own "
            "(passes/pipeline_staged_tma.py): -1 where allowed, 0 never, 1 required",
        )
        cluster: int = option(
            AUTOMATIC,
            "blocks a cluster (sm_90a, a warp-specialized GEMM; passes/pipeline_cluster.py): "
            "2 two blocks of neighbouring row tiles share the operand tile both read by TMA "
            "multicast (an error says why not; implies warp_specialize where that is left at "
            "its default), 1 none, -1 (the default) 2 where the shared operand's rows straddle "
            "128-byte lines (cluster_motive: the TMA unit's requests are the bound), else 1",
        )
        arch: str = option(
            "", "the target architecture (the compiler sets it when lowering; '': unknown)"
        )
        register_prefetch: int = option(
            CHAINED,
            "loops that load tiles into registers issue the next iteration's loads before "
            "this iteration's compute, carrying the tiles (passes/register_prefetch.py): -1 "
            "where the model says it keeps more bytes in flight per SM, 0 never, 1 wherever a "
            "load can move a step ahead, 2 (the default) only where a loop's loads are read "
            "through another load (a block table's page, a bag's row: two round trips an "
            "iteration) or the grid leaves each block alone on its SM (extents known; "
            "elsewhere the model is not yet right, see register_prefetch.py); a kernel's "
            "stages pin wins (1 off, 2 or more on)",
        )
        extents: str = option(
            "",
            "known extents (or size classes) of dimensions, e.g. N=256, as tiling's option: a "
            "loop within one step of its extent runs once and is not prefetched",
        )
        sm_count: int = option(
            132,
            "SMs of the GPU (132 on the H100 and H200): a grid of at most this many blocks "
            "leaves each alone on its SM (register_prefetch)",
        )
        sm_shared: int = option(
            SM_SHARED_SM90,
            "shared memory per SM in bytes (sm_90: 228 KiB), shared by the blocks a kernel's "
            "tilec.min_blocks_per_sm asks for (each also holds 1 KiB the driver reserves)",
        )

    def run(self, module: Operation, ctx: PassContext) -> None:
        for name in ("persistent", "warp_specialize", "pingpong"):
            allowed = (-1, 0, 1, WITH_CLUSTERS if name == "persistent" else AS_PLANNED)
            if getattr(self.options, name) not in allowed:
                raise TileError(
                    f"pipeline: option {name} must be {', '.join(map(str, allowed[:-1]))} or "
                    f"{allowed[-1]}, got {getattr(self.options, name)}"
                )
        if self.options.num_stages < 0:
            raise TileError(
                f"pipeline: option num_stages must be 0 (automatic) or at least 1, "
                f"got {self.options.num_stages}"
            )
        check_choice(self.options.register_prefetch)
        check_staged_tma(self.options.staged_tma)
        extents = parse_assignments(self.options.extents, "extents", self.name)
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            _pipeline_kernel(kernel, self.options, ctx)
            prefetch_registers(
                kernel, self.options.register_prefetch, extents, ctx, self.options.sm_count
            )


@dataclass
class _Stream:
    """One tile a loop loads and stores into a one-slot shared buffer."""

    loop: scf.ForOp
    store: shared.StoreSharedOp
    load: T.LoadOp
    alloc: shared.AllocSharedOp
    recompute: list[Operation]  # body ops the offsets and mask need, in order


def _pipeline_kernel(kernel: FuncOp, options: Pipeline.Options, ctx: PassContext) -> None:
    streams: list[_Stream] = []
    for loop in [op for op in kernel.walk() if isinstance(op, scf.ForOp)]:
        streams += _find_streams(loop, ctx)
    if not streams:
        return
    cluster_required = options.cluster != AUTOMATIC
    walk_planned = WALK_ATTRIBUTE in kernel.attributes and options.warp_specialize == AS_PLANNED
    options = as_planned(kernel, resolve_cluster_defaults(kernel, streams, options, ctx))
    limit = options.shared_limit
    persistent, reserve = None, 0
    if options.persistent != 0 and options.arch in TMA_ARCHES and options.tma != 0:
        loops = list({id(s.loop): s.loop for s in streams}.values())
        copies = next((w for w in (tma_blocker(kernel, s, 2) for s in streams) if w), "")
        persistent = persistent_loop(
            kernel, loops, copies, options.persistent, ctx, options.warp_specialize != 0
        )
    if persistent is not None:
        found = reserve_epilogue(
            kernel,
            persistent,
            lambda kept: choose_stages(kernel, [s.alloc for s in streams], options, kept)[0],
            options.persistent,
            ctx,
        )
        persistent, reserve = (None, 0) if found is None else (persistent, found)
    if walk_planned and persistent is None and options.cluster <= 1:
        # The producer was planned for the walk (wgmma_model.walk_clocks): without it, no gain.
        options = replace(options, warp_specialize=0)
        ctx.remark(
            kernel,
            "no producer warpgroup: tiling planned one for persistent blocks walking the tiles, "
            "which this kernel does not take (the remark above says why)",
        )
    stages, why = choose_stages(kernel, [s.alloc for s in streams], options, reserve)
    ctx.remark(kernel, f"{stages} stage{'s' if stages != 1 else ''}: {why}")
    if stages == 1:
        return
    if stages > 1:
        grown = {id(s.alloc): stages for s in streams}
        plan = plan_shared_memory(kernel, grown)
        pinned = "tilec.num_stages" in kernel.attributes
        check_shared_plan(
            kernel,
            plan,
            limit,
            "option shared_limit of pipeline",
            f"use fewer stages: {stages} are "
            + (
                "pinned by the kernel (@kernel(stages=...), --stages)"
                if pinned
                else "set by the option num_stages of pipeline (0 picks the most that fit)"
            )
            + "; or smaller tiles",
        )
    by_loop: dict[int, list[_Stream]] = {}
    for s in streams:
        by_loop.setdefault(id(s.loop), []).append(s)
    if options.dots_in_flight not in (-1, 0, 1):
        raise TileError(
            f"pipeline: option dots_in_flight must be -1 (automatic), 0 or 1, got "
            f"{options.dots_in_flight}"
        )
    if options.tma not in (-1, 0, 1):
        raise TileError(f"pipeline: option tma must be -1 (automatic), 0 or 1, got {options.tma}")
    made: list[PipelinedLoop] = []
    for loop_streams in by_loop.values():
        tma = _tma_choice(kernel, loop_streams, stages, options, ctx)
        in_flight = options.dots_in_flight
        if (
            in_flight == -1
            and tma
            and options.warp_specialize != 0
            and chained_wgmma_slots(loop_streams[0].loop)
        ):
            # A warp-specialized loop releases each stage once the next wgmma is issued, and
            # its producer runs S - 1 steps ahead, not S - 2: the group stays in flight.
            in_flight = 1
        pipelined = _pipeline_loop(kernel, loop_streams, stages, in_flight, ctx, tma)
        if pipelined is not None:
            made.append(pipelined)
    remove_redundant_barriers(kernel)
    if persistent is not None:  # the tile walk counts whole clusters (pipeline_cluster.py)
        announce_cluster(kernel, options.cluster)
    specialized = warp_specialize_kernel(
        kernel,
        made,
        options.warp_specialize,
        persistent,
        ctx,
        blocks=_planned_blocks(kernel, options),
        staged_tma=options.staged_tma,
    )
    schedule_pingpong(kernel, specialized, options.pingpong, ctx)
    cluster_kernel(kernel, specialized, options.cluster, ctx, required=cluster_required)
    if persistent is not None and not specialized:
        chosen = next((p for p in made if p.loop is persistent), None)
        if len(made) > 1:  # several loops are walked only by a producer and its consumers
            why = "its several TMA loops are walked only by a producer warpgroup and consumers"
            if options.persistent == 1:
                raise TileError(f"pipeline: option persistent = 1, but {why}", kernel.loc)
            ctx.remark(kernel, f"not persistent: {why} (the remark above says why not)")
        else:
            persist(kernel, persistent, chosen, reserve, options.persistent, ctx)
    plan = plan_shared_memory(kernel)
    check_shared_plan(
        kernel, plan, limit, "option shared_limit of pipeline", "use fewer stages or smaller tiles"
    )
    apply_shared_plan(kernel, plan, ctx, limit)


# ---------------------------------------------------------------------------------------------
# Finding streams


def _find_streams(loop: scf.ForOp, ctx: PassContext) -> list[_Stream]:
    body = loop.body.block
    stores = [op for op in body.ops if isinstance(op, shared.StoreSharedOp)]
    if not stores:
        return []
    if scf.is_range_loop(loop):
        for store in stores:
            ctx.remark(
                store,
                "not pipelined: a range() loop (copies issued ahead of it would read at "
                "indices of iterations that may not run)",
            )
        return []
    streams = []
    for store in stores:
        found = _stream(loop, store)
        if isinstance(found, str):
            ctx.remark(store, f"not pipelined: {found}")
        else:
            streams.append(found)
    return streams


def _stream(loop: scf.ForOp, store: shared.StoreSharedOp) -> _Stream | str:
    """The stream `store` is part of, or why it is not one."""
    body = loop.body.block
    buffer = store.buffer
    if not (isinstance(buffer, OpResult) and isinstance(buffer.op, shared.AllocSharedOp)):
        return "the buffer is not a tile.alloc_shared"
    alloc = buffer.op
    if buffer.type.shape[0] != 1:
        return f"the buffer has {buffer.type.shape[0]} slots already"
    slot = constant_value(store.slot)
    if not (isinstance(slot, IntegerAttr) and slot.value == 0):
        return "the store's slot is not the constant 0"
    writes = [u for u in buffer.uses if not isinstance(u, shared.LoadSharedOp)]
    if writes != [store] or any(u.parent is not body for u in buffer.uses):
        return "the buffer is used outside this loop's body or written elsewhere"
    value = store.value
    if not (isinstance(value, OpResult) and isinstance(value.op, T.LoadOp)):
        what = value.op.name if isinstance(value, OpResult) else "a block argument"
        return f"the stored value is not loaded from global memory (it comes from {what})"
    load = value.op
    if load.parent is not body:
        return "the tile.load is not in this loop's body"
    if value.uses != [store]:
        return "the loaded tile has other uses"
    padding = load.attributes.get("padding")
    if padding is not None and padding.value != 0:
        return f"the load pads with {padding}; an asynchronous copy fills zeros"
    if defined_inside(load.view, loop):
        return "the tensor view is not defined outside the loop"
    view_rank, tile_rank = load.view.type.rank, load.result.type.rank
    if view_rank != tile_rank:
        return (
            f"the load reads a rank-{tile_rank} tile from a rank-{view_rank} view; a copy "
            "needs one dimension per view dimension"
        )
    for i, offset in enumerate(load.offsets):
        if not affine_in_iv(offset, loop):
            return f"offset {i} of the load is not affine in the induction variable"
    roots = list(load.offsets) + ([load.mask] if load.mask is not None else [])
    recompute = recompute_slice(roots, loop)
    if isinstance(recompute, str):
        return recompute
    return _Stream(loop, store, load, alloc, recompute)


# ---------------------------------------------------------------------------------------------
# Rewriting one loop


def _tma_choice(
    kernel: FuncOp, streams: list[_Stream], stages: int, options: Pipeline.Options, ctx: PassContext
) -> bool:
    """Whether the loop of `streams` copies by the TMA unit (option `tma`), with a remark."""
    loop = streams[0].loop
    if options.tma == 0:
        if options.arch in TMA_ARCHES:
            ctx.remark(loop, "copies by cp.async: option tma = 0")
        return False
    if options.arch not in TMA_ARCHES:
        if options.tma == 1:
            raise TileError(
                f"pipeline: option tma = 1 needs the TMA unit of {', '.join(TMA_ARCHES)}, not "
                f"{options.arch or 'an unknown architecture'}",
                loop.loc,
            )
        return False
    blockers = [(s, tma_blocker(kernel, s, stages)) for s in streams]
    blocked = [(s, why) for s, why in blockers if why]
    if blocked:
        text = "; ".join(f"{_stream_name(s)}: {why}" for s, why in blocked)
        if options.tma == 1:
            raise TileError(
                f"pipeline: option tma = 1, but the TMA unit cannot copy {text}",
                blocked[0][0].load.loc,
                hint="give the tensor 16-byte aligned rows (strides multiples of 16 bytes), "
                "or leave tma automatic (-1) so such streams keep cp.async",
            )
        ctx.remark(loop, f"copies by cp.async, not the TMA unit: {text}")
        return False
    parts = []
    for s in streams:
        planned = planned_buffer(s, stages)
        box, boxes = box_plan(planned)  # type: ignore[misc]
        shape = "x".join(map(str, box))
        count = f"{len(boxes)} boxes" if len(boxes) > 1 else "one box"
        folded = folded_plan(planned)
        if folded is not None:
            per = "one box" if len(folded[1]) == 1 else f"{len(folded[1])} boxes"
            rows = planned.shape[1]
            parts.append(
                f"{_stream_name(s)} in {per} of {'x'.join(map(str, folded[0]))} for a whole "
                f"tile of {rows} rows (a 5-D map that folds its interleaved 8-row groups), "
                f"else {count} of {shape}"
            )
            continue
        parts.append(f"{_stream_name(s)} in {count} of {shape}")
    step_bytes = _step_bytes(streams)
    ctx.remark(
        loop,
        "copies by the TMA unit (option tma): " + ", ".join(parts) + f"; thread 0 issues "
        f"them and each stage's mbarrier expects their {step_bytes} bytes; tensor maps from "
        "the arguments' shapes and strides (docs/abi.md)",
    )
    for s in streams:
        note = straddling_rows(kernel, s.load.view)
        if note:
            ctx.remark(loop, f"performance: {note}")
    return True


def _stream_name(s: _Stream) -> str:
    view = s.load.view
    name = getattr(view, "name_hint", None) or "a view"
    buffer = s.alloc.result.name_hint
    return f"{name} -> %{buffer}" if buffer else name


def _step_bytes(streams: list[_Stream]) -> int:
    """The bytes one step's copies bring: a slot of each stream's buffer."""
    return sum(slot_bytes(s.alloc.result.type) for s in streams)


def _pipeline_loop(
    kernel: FuncOp,
    streams: list[_Stream],
    stages: int,
    in_flight: int,
    ctx: PassContext,
    tma: bool = False,
) -> PipelinedLoop | None:
    """Pipeline `streams`' loop; for copies by the TMA unit, what `make_persistent` needs."""
    loop = streams[0].loop
    # With a wgmma chain left in flight across the back edge, iteration i's copies may not
    # fill the slot iteration i-1's wgmmas still read: they run S-2 steps ahead, not S-1.
    chained = leave_in_flight(
        kernel, loop, stages, in_flight, {id(st.store) for st in streams}, ctx
    )
    lead = stages - 2 if chained else stages - 1
    if chained:
        loop.attributes[scf.DOTS_IN_FLIGHT_ATTRIBUTE] = IntegerAttr(1)
        ctx.remark(
            loop,
            "1 wgmma group left in flight across iterations: each waits for the previous "
            f"iteration's after issuing its own; copies {lead} step{'s' if lead > 1 else ''} "
            "ahead",
        )
    iv = loop.induction_var
    step_type = loop.lower.type
    before = Builder.before_op(loop)

    def constant(b: Builder, value: int, name: str | None = None) -> Value:
        c = b.create(arith.ConstantOp, value=IntegerAttr(value), result_types=[step_type]).result
        c.name_hint = name
        return c

    for s in streams:
        slot = s.alloc.result.type
        s.alloc.result.type = SharedType((stages, *slot.shape[1:]), slot.element, slot.layout)

    # Prologue: steps 0..S-2 into slots 0..S-2, one group each. The barrier orders the copies
    # after earlier uses of the same bytes (removed when there are none). With the TMA unit:
    # the stages' mbarriers, initialized before that barrier (which publishes them); each
    # step's copies arrive on its slot's barrier, and only steps inside the loop are copied.
    barriers = None
    if tma:
        entry = Builder.at_start(kernel.body.block, loop.loc)
        barriers = entry.create(
            shared.AllocSharedOp, result_types=[SharedType((stages, 1), i64)]
        ).result
        barriers.name_hint = "stage_barriers"
        before.create(TM.MbarrierInitOp, barriers=barriers, arrivals=IntegerAttr(1))
    published = before.create(shared.BarrierOp)
    step_bytes = _step_bytes(streams)
    for j in range(lead):
        if j == 0:
            iv_j = loop.lower
        else:
            offset = before.create(arith.MulIOp, lhs=loop.step, rhs=constant(before, j)).result
            iv_j = before.create(arith.AddIOp, lhs=loop.lower, rhs=offset).result
        slot_j = constant(before, j)
        if barriers is not None:
            _tma_step(before, streams, iv_j, slot_j, barriers, step_bytes)
            continue
        for s in streams:
            _copy(before, s, iv_j, slot_j)
        before.create(shared.AsyncCommitOp)
    distance = before.create(arith.MulIOp, lhs=loop.step, rhs=constant(before, lead)).result
    distance.name_hint = "prefetch_distance"
    top_ops = list(loop.parent.ops)
    prologue = top_ops[top_ops.index(published) + 1 : top_ops.index(loop)]

    # The body: wait for step i, synchronize, read slot i % S, copy step i+S-1 into the slot
    # that iteration i-1 read.
    body = loop.body.block
    top = Builder.at_start(body, loop.loc)
    if barriers is None:
        top.create(shared.AsyncWaitOp, pending=lead - 1)
        top.create(shared.BarrierOp)
    since = top.create(arith.SubIOp, lhs=iv, rhs=loop.lower).result
    step_index = top.create(arith.DivSIOp, lhs=since, rhs=loop.step).result
    step_index.name_hint = "step_index"
    count = constant(top, stages, "num_stages")
    slot = top.create(arith.RemSIOp, lhs=step_index, rhs=count).result
    slot.name_hint = "slot"
    if barriers is not None:
        # Step i is on its slot's barrier in phase i / S (parity (i / S) % 2).
        round_ = top.create(arith.DivSIOp, lhs=step_index, rhs=count).result
        phase = top.create(arith.RemSIOp, lhs=round_, rhs=constant(top, 2)).result
        phase.name_hint = "phase"
        top.create(TM.MbarrierWaitOp, barriers=barriers, slot=slot, phase=phase)
        top.create(shared.BarrierOp)  # every thread is past its reads of the slot refilled next
    ahead = top.create(arith.AddIOp, lhs=step_index, rhs=constant(top, lead)).result
    slot_ahead = top.create(arith.RemSIOp, lhs=ahead, rhs=count).result
    slot_ahead.name_hint = "slot_ahead"
    iv_ahead = top.create(arith.AddIOp, lhs=iv, rhs=distance).result
    iv_ahead.name_hint = f"{iv.name_hint or 'iv'}_ahead"
    # A wgmma dot reads shared memory asynchronously: the copies go after it, to be issued
    # while the tensor cores work (the slot they fill was last read an iteration ago, before
    # the barrier); other loops copy where the tile was stored.
    after_dot = any(is_wgmma_dot(op) for op in body.ops)
    last_copy = None
    if barriers is not None:
        anchor = loop.yield_op if after_dot else streams[0].store
        _tma_step(Builder.before_op(anchor), streams, iv_ahead, slot_ahead, barriers, step_bytes)
    for s in streams:
        if barriers is None:
            anchor = loop.yield_op if after_dot else s.store
            last_copy = _copy(Builder.before_op(anchor), s, iv_ahead, slot_ahead)
        for use in list(s.alloc.result.uses):
            if isinstance(use, shared.LoadSharedOp):
                use.set_operand(1, slot)
        s.store.erase()
        s.load.erase()
        ctx.remark(
            s.alloc,
            f"{stages} slots: copies run {lead} step{'s' if lead > 1 else ''} ahead of their use",
        )
    if last_copy is not None:
        Builder.after_op(last_copy).create(shared.AsyncCommitOp)

    # After the loop: the last copies (past the end, never read) land before the bytes are
    # reused; a barrier when later code touches shared memory. With the TMA unit every copy
    # issued was waited for; once every thread is past its last wait the barriers are
    # invalidated, so that their bytes may be reused.
    after = Builder.after_op(loop)
    if barriers is not None:
        ends = [after.create(shared.BarrierOp), after.create(TM.MbarrierInvalOp, barriers=barriers)]
    else:
        after.create(shared.AsyncWaitOp, pending=0)
    if _shared_memory_used_after(kernel, loop):
        after.create(shared.BarrierOp)
    if barriers is None:
        return None
    return PipelinedLoop(loop, stages, step_index, prologue, ends)


def _copy(b: Builder, s: _Stream, iv_value: Value, slot: Value) -> Operation:
    """An async copy of `s`'s tile for the iteration whose induction variable is `iv_value`."""
    mapping: dict[Value, Value] = {s.loop.induction_var: iv_value}
    for op in s.recompute:
        b.insert(op.clone(mapping))
    load = s.load
    mask = mapping.get(load.mask, load.mask) if load.mask is not None else None
    return b.create(
        shared.AsyncCopyOp,
        view=load.view,
        offsets=[mapping.get(v, v) for v in load.offsets],
        buffer=s.alloc.result,
        slot=slot,
        mask=mask,
        loc=load.loc,
    )


def _tma_step(
    b: Builder,
    streams: list[_Stream],
    iv_value: Value,
    slot: Value,
    barriers: Value,
    step_bytes: int,
) -> None:
    """The copies of one step by the TMA unit, into `slot`, arriving on that slot's barrier,
    issued only when the step is one the loop runs (`iv_value` < its upper bound). The
    streams' buffers have their stages already."""
    loop = streams[0].loop
    inside = b.create(
        arith.CmpIOp, predicate=StringAttr("slt"), lhs=iv_value, rhs=loop.upper
    ).result
    b.create(
        TM.MbarrierExpectOp,
        barriers=barriers,
        slot=slot,
        pred=inside,
        bytes=IntegerAttr(step_bytes),
    )
    for s in streams:
        mapping: dict[Value, Value] = {s.loop.induction_var: iv_value}
        for op in s.recompute:
            b.insert(op.clone(mapping))
        t = s.alloc.result.type
        box = box_plan(t)[0]  # type: ignore[index]
        fold = {"folded": UnitAttr()} if folded_plan(t) is not None else {}
        b.create(
            TM.TmaCopyOp,
            view=s.load.view,
            offsets=[mapping.get(v, v) for v in s.load.offsets],
            buffer=s.alloc.result,
            slot=slot,
            barriers=barriers,
            barrier_slot=slot,
            pred=inside,
            box=ArrayAttr(tuple(IntegerAttr(d) for d in box)),
            **fold,
            loc=s.load.loc,
        )


def _shared_memory_used_after(kernel: FuncOp, loop: Operation) -> bool:
    ops = list(kernel.walk())
    end = ops.index(list(loop.walk())[-1])
    accesses = (shared.StoreSharedOp, shared.LoadSharedOp, shared.AsyncCopyOp, TM.TmaCopyOp)
    return any(isinstance(op, accesses) for op in ops[end + 1 :])
