"""A tile the consumers would stage themselves, copied by the producer's TMA unit instead
(`pipeline`'s option `staged_tma`, in a warp-specialized kernel).

Attention's q is read from shared memory by every step's `q @ k.T` (tiling's `staged_a`), and
staged once, before the loops. Without this decision the consumer warps stage it: each loads
its part from global memory into registers, stores it into the buffer and meets the others
at a barrier, before the first wgmma can start -- a round trip to global memory on the
critical path of every block, at the moment every block of a wave asks for its first K and V
tiles too, plus the barrier that holds the consumer warpgroups in step. With it, the producer
warpgroup arms an mbarrier of the tile's own and asks the TMA unit for the whole tile first
of all its copies; the consumers only wait on that mbarrier (phase 0) before their first read
of the buffer. The buffer takes the tensor's rank (a slot of leading 1s, as the loops' stages
have), keeps its layout -- the 128-byte swizzle the wgmma descriptors read, rows in the
accumulator's order (`interleave`), one 8-row box per group and column block
(`tilec.lowering.tma.box_plan`) -- and the unit writes zeros past the tensor's end, as the
load's padding did.

When (`staged_copies`, which says why not for each other staging): the staging is a `tile.load` of a kernel argument a tensor map
can describe (`tensor_map_blocker`), unmasked, padded with 0, at offsets every warp has
(program ids, tile offsets: the producer computes them), its tile (reshaped only by dropping
leading 1s) stored into slot 0 of a one-slot buffer that is only read after it, followed by
the consumers' barrier, and the buffer's layout one the TMA unit writes. Not in persistent
blocks: built there (tile i's copy on phase i mod 2, once the consumers released tile i - 1's
on an empty mbarrier of its own) and measured slower (H100, 2026-12-07, B8 H16 S1024 d128:
1.150 of the grid's time against 1.017 with the consumers staging q, and ptxas spilled 12
bytes a consumer thread): the producer's wait for that release holds the next tile's K and V
copies behind the consumers' last step, so persistent blocks keep the consumers' staging.

Measured (H100, 2026-12-07; docs/benchmarks.md "q by the producer's TMA unit"): the
consumers' staging takes 1.043 of this decision's time at B8 H16 S1024 d128, 1.003-1.009 at
the longer suite rows.
Option values: -1 (the default) wherever allowed, 0 never, 1 required (an error says why not).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tilec.diagnostics import TileError
from tilec.dialects import arith, shared
from tilec.dialects import tile as T
from tilec.dialects import tma as TM
from tilec.dialects.arith_folding import int_constant
from tilec.dialects.builtin import FuncOp
from tilec.dialects.tile import SharedLayout
from tilec.ir.attributes import ArrayAttr, FloatAttr, IntegerAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Operation, OpResult, Value
from tilec.ir.types import SharedType, i64, index
from tilec.lowering.layouts import element_bytes
from tilec.lowering.tma import box_plan
from tilec.passes.pipeline_tma import tensor_map_blocker

__all__ = ["ProducerCopies", "StagedCopy", "check_option", "copy_by_producer", "staged_copies"]


@dataclass
class StagedCopy:
    """One tile the consumers stage before the loops: its load, the reshape that drops its
    leading 1s (None when the load has the buffer's rank), the store into the buffer, the
    barrier after it, and the buffer as the TMA unit fills it (`buffer`, `box`)."""

    load: T.LoadOp
    reshape: Operation | None
    store: shared.StoreSharedOp
    barrier: shared.BarrierOp
    alloc: shared.AllocSharedOp
    buffer: SharedType
    box: tuple[int, ...]

    @property
    def bytes(self) -> int:
        return math.prod(self.buffer.shape[1:]) * element_bytes(self.buffer.element)


def staged_copies(
    kernel: FuncOp,
    consumer: list[Operation],
    first_loop: Operation,
    producer_has: Callable[[Value], bool],
) -> tuple[list[StagedCopy], list[str]]:
    """The stagings among the consumers' ops before `first_loop` that the producer can copy,
    and why each other store into shared memory there cannot be. `producer_has(value)`:
    whether the producer's warps have `value` (computed outside the consumers' ops)."""
    found: list[StagedCopy] = []
    why_not: list[str] = []
    ops = consumer[: consumer.index(first_loop)] if first_loop in consumer else consumer
    for i, op in enumerate(ops):
        if not isinstance(op, shared.StoreSharedOp):
            continue
        staged = _staged(kernel, ops, i, producer_has)
        if isinstance(staged, str):
            why_not.append(staged)
        else:
            found.append(staged)
    return found, why_not


def _staged(
    kernel: FuncOp, ops: list[Operation], at: int, producer_has: Callable[[Value], bool]
) -> StagedCopy | str:
    """The staging whose store is `ops[at]`, or why the producer cannot copy it."""
    store: shared.StoreSharedOp = ops[at]  # type: ignore[assignment]
    alloc = store.buffer.op if isinstance(store.buffer, OpResult) else None
    name = f"%{store.buffer.name_hint or '?'}"
    if not isinstance(alloc, shared.AllocSharedOp) or alloc.result.type.shape[0] != 1:
        return f"{name} is not a one-slot buffer"
    value = store.value
    reshape = None
    if isinstance(value, OpResult) and isinstance(value.op, T.ReshapeOp):
        reshape = value.op
        value = reshape.operands[0]
    load = value.op if isinstance(value, OpResult) else None
    if not isinstance(load, T.LoadOp):
        return f"{name} is not filled by a load from a tensor"
    if load.mask is not None:
        return f"{name}'s load is masked (the TMA unit writes whole boxes)"
    padding = load.attributes.get("padding")
    if padding is not None and not (
        isinstance(padding, (FloatAttr, IntegerAttr)) and padding.value == 0
    ):
        return f"{name}'s load pads with {padding} (the TMA unit writes zeros)"
    if any(k in load.attributes for k in ("frame", "checked")):
        return f"{name}'s load is not a plain one"
    if len(load.result.uses) != 1 or (reshape is not None and len(reshape.result.uses) != 1):
        return f"{name}'s tile is used besides its store"
    shape = load.result.type.shape
    slot = alloc.result.type.shape[1:]
    if reshape is not None and (
        tuple(reshape.result.type.shape) != tuple(shape[len(shape) - len(slot) :])
        or any(d != 1 for d in shape[: len(shape) - len(slot)])
    ):
        return f"{name}'s tile is reshaped beyond dropping its leading 1s"
    if int_constant(store.slot) != 0:
        return f"{name}'s store is not into slot 0"
    why = tensor_map_blocker(kernel, load.view)
    if why:
        return f"{name}: {why}"
    if not all(producer_has(v) for v in load.offsets):
        return f"{name}'s offsets are computed by the consumers only"
    barrier = ops[at + 1] if at + 1 < len(ops) else None
    if not isinstance(barrier, shared.BarrierOp):
        return f"{name}'s store is not followed by the consumers' barrier"
    for use in alloc.result.uses:
        if use is store:
            continue
        if not isinstance(use, shared.LoadSharedOp) or use.parent is None:
            return f"{name} is also written or passed on"
        if use in ops and ops.index(use) < at:
            return f"{name} is read before it is staged"
    layout = alloc.result.type.layout
    if not isinstance(layout, SharedLayout):
        return f"{name}'s layout is not a swizzled #shared one"
    rank = len(shape)
    buffer = SharedType(
        (1, *shape),
        alloc.result.type.element,
        SharedLayout(
            layout.vec,
            layout.per_phase,
            layout.max_phase,
            tuple(range(rank - 1, -1, -1)),
            interleave=layout.interleave,
            col_block=layout.col_block,
        ),
    )
    plan = box_plan(buffer)
    if isinstance(plan, str):
        return f"{name}'s slot is not what the TMA unit writes: {plan}"
    return StagedCopy(load, reshape, store, barrier, alloc, buffer, tuple(plan[0]))


@dataclass
class ProducerCopies:
    """What `copy_by_producer` made: the consumers' ops it replaced (to erase once the regions
    are built) and the mbarriers to invalidate with the stages' once the consumers are done."""

    dropped: list[Operation]
    barriers: list[Value]


def copy_by_producer(
    staged: list[StagedCopy], init: Operation, producer: Builder, consumer_ops: list[Operation]
) -> ProducerCopies:
    """Rewrite each staging of `staged`: its buffer takes the tensor's rank, an mbarrier of its
    own is initialized after `init` (an mbarrier init the block's barrier publishes), the
    producer (`producer`: a builder before its first copies) arms it and asks the TMA unit
    for the tile, and the consumers' load, reshape, store and barrier become one wait on its
    phase 0. `consumer_ops` (the consumers' ops, in order) is updated in place."""
    made = ProducerCopies([], [])
    for s in staged:
        at = Builder.before_op(s.alloc)
        buffer = at.create(shared.AllocSharedOp, result_types=[s.buffer]).result
        name = s.alloc.result.name_hint or "staged"
        buffer.name_hint = name
        full = at.create(shared.AllocSharedOp, result_types=[SharedType((1, 1), i64)]).result
        full.name_hint = f"{name}_full"
        made.barriers.append(full)
        Builder.after_op(init).create(TM.MbarrierInitOp, barriers=full, arrivals=IntegerAttr(1))
        zero = producer.create(arith.ConstantOp, value=IntegerAttr(0), result_types=[index]).result
        producer.create(TM.MbarrierExpectOp, barriers=full, slot=zero, bytes=IntegerAttr(s.bytes))
        producer.create(
            TM.TmaCopyOp,
            view=s.load.view,
            offsets=list(s.load.offsets),
            buffer=buffer,
            slot=zero,
            barriers=full,
            barrier_slot=zero,
            box=ArrayAttr(tuple(IntegerAttr(b) for b in s.box)),
        )
        w = Builder.before_op(s.store)
        slot = w.create(arith.ConstantOp, value=IntegerAttr(0), result_types=[index])
        wait = w.create(TM.MbarrierWaitOp, barriers=full, slot=slot.result, phase=slot.result)
        at_store = consumer_ops.index(s.store)
        consumer_ops[at_store : at_store + 1] = [slot, wait]
        s.alloc.result.replace_all_uses_with(buffer)
        made.dropped.append(s.store)
        for op in (s.barrier, s.reshape, s.load):
            if op is not None:
                consumer_ops.remove(op)
                made.dropped.append(op)
        made.dropped.append(s.alloc)
    return made


def check_option(option: int) -> None:
    if option not in (-1, 0, 1):
        raise TileError(f"pipeline: option staged_tma must be -1, 0 or 1, got {option}")
