"""Copies by the tensor memory accelerator and the mbarriers that track them (sm_90a).

`tma` (passes/tma.py) turns a pipelined loop's `tile.async_copy` streams into copies that one
thread of the block asks the TMA unit for, each completing on an *mbarrier* of its stage
instead of a cp.async group. The barriers are one 8-byte slot per stage of a shared buffer:

    %bars = tile.alloc_shared : !smem<3x1xi64>                // one mbarrier per stage
    tile.mbarrier_init %bars {arrivals = 1}                   // every slot, phase 0
    tile.barrier                                              // the block sees them
    tile.mbarrier_expect %bars[%s], pred %p {bytes = 49152}   // the phase's bytes
    tile.tma_copy %A[%m, %k], %a_smem[%s], %bars[%s], pred %p {box = [8, 64]}
    ...
    tile.mbarrier_wait %bars[%s], %phase                      // step landed, visible
    %a = tile.load_shared %a_smem[%s]
    ...
    tile.barrier
    tile.mbarrier_inval %bars                                 // the bytes may be reused

* An mbarrier goes through phases 0, 1, 2, ...; a phase completes when it has had its
  `arrivals` arrivals and every byte it expects has landed. `tile.mbarrier_expect` is one
  arrival that also announces `bytes` more to land in the current phase (PTX
  `mbarrier.arrive.expect_tx`); a `tile.tma_copy` lands its slot's bytes on the barrier it
  names (`complete_tx`). Both are issued by one thread, and only when `pred` (if given) is
  true.
* `tile.mbarrier_wait %bars[%s], %phase` waits until the phase of parity `%phase` (0 or 1)
  has completed -- the hardware's `try_wait.parity`, which returns at once when the current
  phase has the other parity. Waiting on the right phase makes the copies that completed it
  visible to every waiting thread: no `tile.barrier` is needed to read them.
* Outside the view, elements are written as zero (the TMA unit fills them), as
  `tile.async_copy` does. `box` is the box of the tensor map the copy uses, in the view's
  dimension order; the lowering covers the slot with boxes of it (`tilec.lowering.tma`).
* Writing a slot follows `tile.async_copy`'s rules (never while it is read or in flight).

In a kernel that runs in thread-block clusters (`tilec.cluster`, passes/pipeline_cluster.py)
the blocks of a cluster share tiles and barriers:

    tile.mbarrier_init %empty {arrivals = 2, warps = 8}       // both blocks' consumers
    tile.cluster_barrier                                      // every block sees every init
    ...
    tile.tma_copy %B[%k, %n], %b_smem[%s], %full[%s] {box = [64, 64], multicast = 2}
    tile.mbarrier_arrive %empty[%s] {cluster = 2}             // in each block of the cluster
    ...
    tile.cluster_barrier                                      // no block still uses another's
    tile.mbarrier_inval %full

* `multicast = C`: the block of rank r in its cluster of C (`cluster_rank`) copies part r of
  C of the tile (`multicast_part`: along the slot's last dimension when that is C or more
  boxes wide, else along its rows) into the slot of *every* block of the cluster, landing the
  part's bytes on each one's mbarrier `barriers[barrier_slot]`. Every block of the cluster
  issues the copy with the same offsets, so each gets the whole tile, and each block's
  barrier expects the whole tile's bytes.
* `tile.mbarrier_arrive {cluster = C}` arrives once on the mbarrier at its slot in each block
  of the cluster (a block releasing a stage that the others' multicasts refill).
* `tile.cluster_barrier`: every thread of every block of the cluster arrives and waits; it
  makes the mbarrier inits before it visible to the cluster (a copy or arrival from another
  block may only reach a barrier after one), and no block leaves while another may still
  arrive on its barriers or write its slots.

The interpreter checks the protocol: a wait on a phase that no arrival or copy can complete
(it would hang), bytes that do not match the expectation, an arrival on a phase that already
had all of its, a read of a slot whose copy is still in flight (a wait on the wrong phase
returns early), and a slot reused before its readers released it.
"""

from __future__ import annotations

from tilec.ir.attributes import ArrayAttr, IntegerAttr, UnitAttr
from tilec.ir.constraints import BOOL_LIKE, INDEX, SHARED, TENSOR
from tilec.ir.core import Attr, Operand, Operation, register_op
from tilec.ir.types import IntegerType, SharedType, TensorType

__all__ = [
    "ClusterBarrierOp",
    "MbarrierArriveOp",
    "MbarrierExpectOp",
    "MbarrierInitOp",
    "MbarrierInvalOp",
    "MbarrierWaitOp",
    "TmaCopyOp",
    "cluster_rank",
    "is_barrier_buffer",
    "multicast_part",
]


def is_barrier_buffer(t: object) -> bool:
    """Whether `t` is a buffer of mbarriers: `!smem<S x 1 x i64>`, one 8-byte barrier a slot."""
    return (
        isinstance(t, SharedType)
        and t.rank == 2
        and t.shape[1] == 1
        and isinstance(t.element, IntegerType)
        and t.element.width == 64
    )


def cluster_rank(program_id: tuple[int, ...], cluster: tuple[int, ...]) -> int:
    """The rank of the block `program_id` in its cluster of `cluster` blocks a grid axis, as
    the hardware numbers it (`%cluster_ctarank`): axis 0 (x) fastest."""
    rank, scale = 0, 1
    for p, c in zip(program_id, cluster):
        rank += (p % c) * scale
        scale *= c
    return rank


def multicast_part(slot: tuple[int, ...], box: tuple[int, ...], ctas: int) -> tuple[int, int] | str:
    """How a tile of `slot` copied in boxes of `box` is shared out among the `ctas` blocks of
    a cluster: (dimension, elements a part along it) -- the slot's last dimension when it is
    `ctas` or more boxes wide, else its rows -- or why it cannot be (a part must be whole
    boxes)."""
    for dim in (len(slot) - 1, len(slot) - 2):
        if dim >= 0 and slot[dim] % (ctas * box[dim]) == 0:
            return dim, slot[dim] // ctas
    return (
        f"neither its {slot[-1]} columns nor its {slot[-2] if len(slot) > 1 else 1} rows split "
        f"into {ctas} parts of whole boxes of {list(box)}"
    )


def _check_barriers(op: Operation, t: object) -> None:
    if not is_barrier_buffer(t):
        raise op.error(f"needs a buffer of mbarriers (!smem<Sx1xi64>), not {t}")


@register_op
class MbarrierInitOp(Operation):
    """Initialize every mbarrier of `barriers` at phase 0, each expecting `arrivals` arrivals
    a phase (one thread does it; the block sees it after the next `tile.barrier`)."""

    name = "tile.mbarrier_init"
    summary = "Initialize a buffer of mbarriers (phase 0, `arrivals` arrivals a phase)."
    barriers = Operand(SHARED)
    arrivals = Attr(IntegerAttr, doc="arrivals that complete a phase")
    warps = Attr(
        IntegerAttr,
        optional=True,
        doc="warps that make one arrival (tile.mbarrier_arrive: each warp of its region "
        "arrives); absent: one thread does (tile.mbarrier_expect)",
    )
    assembly_format = "$barriers attr-dict `:` type($barriers)"

    @property
    def hardware_arrivals(self) -> int:
        """The count `mbarrier.init` gets: arrivals times the warps that make each."""
        w = self.attributes.get("warps")
        return int(self.arrivals) * (1 if w is None else int(w.value))

    def verify_(self) -> None:
        _check_barriers(self, self.barriers.type)
        if self.arrivals < 1:
            raise self.error(f"arrivals must be at least 1, got {self.arrivals}")
        w = self.attributes.get("warps")
        if w is not None and not 1 <= int(w.value) <= 32:
            raise self.error(f"warps must be in 1..32, got {w.value}")


@register_op
class MbarrierExpectOp(Operation):
    """Arrive once on mbarrier `barriers[slot]` and announce `bytes` more bytes to land in
    its current phase (`mbarrier.arrive.expect_tx`), when `pred` holds (default: always)."""

    name = "tile.mbarrier_expect"
    summary = "Arrive on an mbarrier, expecting `bytes` more to land in its phase."
    barriers = Operand(SHARED)
    slot = Operand(INDEX)
    pred = Operand(BOOL_LIKE, optional=True)
    bytes = Attr(IntegerAttr, doc="bytes the copies of this phase bring")
    assembly_format = "$barriers `[` $slot `]` (`,` `pred` $pred)? attr-dict `:` type($barriers)"

    def verify_(self) -> None:
        _check_barriers(self, self.barriers.type)
        if not 0 < self.bytes < 2**20:
            raise self.error(f"bytes must be in 1..2^20-1 (the tx-count), got {self.bytes}")


@register_op
class MbarrierArriveOp(Operation):
    """Arrive once on mbarrier `barriers[slot]` when `pred` holds (default: always): one
    thread of each warp of the region arrives (`mbarrier.arrive`) once the warp is there,
    which counts as one arrival (the init's `warps`). Everything the region's threads did
    before -- their reads of shared memory, their tensor-core dots waited for -- happens
    before whatever follows a wait that this arrival's phase completes (a consumer releasing
    a stage to its producer)."""

    name = "tile.mbarrier_arrive"
    summary = "Arrive on an mbarrier (each warp of the region, one arrival)."
    barriers = Operand(SHARED)
    slot = Operand(INDEX)
    pred = Operand(BOOL_LIKE, optional=True)
    cluster = Attr(
        IntegerAttr,
        optional=True,
        doc="arrive on the mbarrier at this slot in each of the cluster's `cluster` blocks",
    )
    assembly_format = "$barriers `[` $slot `]` (`,` `pred` $pred)? attr-dict `:` type($barriers)"

    @property
    def cluster_ctas(self) -> int:
        """The blocks whose mbarrier this arrival reaches (1: its own)."""
        c = self.attributes.get("cluster")
        return 1 if c is None else int(c.value)

    def verify_(self) -> None:
        _check_barriers(self, self.barriers.type)
        if not 1 <= self.cluster_ctas <= 16:
            raise self.error(f"cluster must be in 1..16 blocks, got {self.cluster_ctas}")


@register_op
class ClusterBarrierOp(Operation):
    """Every thread of every block of the cluster arrives and waits (`barrier.cluster`): what
    each did before -- mbarrier inits above all -- is visible to all of them after it."""

    name = "tile.cluster_barrier"
    summary = "Synchronize every thread of the blocks of a cluster."
    assembly_format = "attr-dict"


@register_op
class TmaCopyOp(Operation):
    """Copy one tile from a tensor view into slot `slot` of a shared buffer by the TMA unit;
    its bytes land on mbarrier `barriers[barrier_slot]`. Outside the view: zeros. One thread
    issues it, when `pred` holds (default: always). `box`: the tensor map's box (elements
    per view dimension) whose copies cover the slot."""

    name = "tile.tma_copy"
    summary = "Copy one tile global->shared with the TMA unit, completing on an mbarrier."
    view = Operand(TENSOR)
    offsets = Operand(INDEX, variadic=True)
    buffer = Operand(SHARED)
    slot = Operand(INDEX)
    barriers = Operand(SHARED)
    barrier_slot = Operand(INDEX)
    pred = Operand(BOOL_LIKE, optional=True)
    box = Attr(ArrayAttr, doc="the tensor map's box, elements per view dimension")
    folded = Attr(
        UnitAttr,
        optional=True,
        doc="interleaved rows: a whole tile of rows in one 5-D box (tilec.lowering.tma)",
    )
    multicast = Attr(
        IntegerAttr,
        optional=True,
        doc="blocks of the cluster sharing the tile: each copies its part into all of them "
        "(`multicast_part`)",
    )
    assembly_format = (
        "$view `[` $offsets `]` `,` $buffer `[` $slot `]` `,` $barriers `[` $barrier_slot `]` "
        "(`,` `pred` $pred)? attr-dict `:` type($view) `,` type($buffer) `,` type($barriers)"
    )

    @property
    def is_folded(self) -> bool:
        return "folded" in self.attributes

    @property
    def box_shape(self) -> tuple[int, ...]:
        return tuple(int(e.value) for e in self.attributes["box"].elements)

    @property
    def multicast_ctas(self) -> int:
        """The blocks of the cluster that share this tile (1: the block's own copy)."""
        m = self.attributes.get("multicast")
        return 1 if m is None else int(m.value)

    def verify_(self) -> None:
        view_t, buffer_t = self.view.type, self.buffer.type
        _check_barriers(self, self.barriers.type)
        if not isinstance(view_t, TensorType) or len(self.offsets) != view_t.rank:
            raise self.error(f"needs one offset per dimension of {view_t}")
        if buffer_t.rank != view_t.rank + 1:
            raise self.error(f"a slot of {buffer_t} must have the rank of the view {view_t}")
        if buffer_t.element != view_t.element:
            raise self.error(
                f"buffer element type {buffer_t.element} differs from the view's {view_t.element}"
            )
        box = self.box_shape
        if len(box) != view_t.rank or any(not 1 <= b <= 256 for b in box):
            raise self.error(
                f"box {list(box)} must give 1..256 elements for each of the view's {view_t.rank} "
                "dimensions"
            )
        slot = buffer_t.shape[1:]
        if any(isinstance(s, int) and s % b for s, b in zip(slot, box)):
            raise self.error(f"box {list(box)} does not tile a slot of {list(slot)}")
        ctas = self.multicast_ctas
        if ctas != 1:
            if not 2 <= ctas <= 16:
                raise self.error(f"multicast must be in 2..16 blocks, got {ctas}")
            if self.is_folded:
                raise self.error("a folded copy cannot be multicast (its one box is the tile)")
            part = multicast_part(tuple(slot), box, ctas)
            if isinstance(part, str):
                raise self.error(f"cannot share a slot of {list(slot)} among {ctas} blocks: {part}")


@register_op
class MbarrierWaitOp(Operation):
    """Wait until the phase of parity `phase` (0 or 1) of mbarrier `barriers[slot]` has
    completed; the bytes that completed it are then visible to every waiting thread."""

    name = "tile.mbarrier_wait"
    summary = "Wait for an mbarrier's phase of a parity to complete (try_wait.parity)."
    barriers = Operand(SHARED)
    slot = Operand(INDEX)
    phase = Operand(INDEX)
    assembly_format = "$barriers `[` $slot `]` `,` $phase attr-dict `:` type($barriers)"

    def verify_(self) -> None:
        _check_barriers(self, self.barriers.type)


@register_op
class MbarrierInvalOp(Operation):
    """Invalidate every mbarrier of `barriers` (after the block's last wait on them), so that
    their bytes may hold other data."""

    name = "tile.mbarrier_inval"
    summary = "Invalidate a buffer of mbarriers before its bytes are reused."
    barriers = Operand(SHARED)
    assembly_format = "$barriers attr-dict `:` type($barriers)"

    def verify_(self) -> None:
        _check_barriers(self, self.barriers.type)
