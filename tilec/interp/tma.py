"""TMA copies and their mbarriers in the interpreter, with the protocol's checks.

The semantics are those `tilec.dialects.tma` states. A buffer of mbarriers (`!smem<Sx1xi64>`)
holds one barrier per slot; the interpreter keeps, per barrier, whether it is initialized and
whether a `tile.barrier` has published that since, how many phases it has completed, and for
its current phase the arrivals (`tile.mbarrier_expect`) and bytes expected so far and the
`tile.tma_copy`s that land on it. A copy is issued like a `tile.async_copy` (same write checks
on its slot, which stays in flight) but lands only at a `tile.mbarrier_wait` that completes
its barrier's phase -- and is then visible to every thread, with no `tile.barrier` needed.

Errors, located at the op:

* a barrier used (expected on, copied to, waited on) before it is initialized, or before a
  `tile.barrier` has made its `tile.mbarrier_init` visible to the block; an init of a buffer
  that is initialized already (no `tile.mbarrier_inval` since);
* an arrival on a phase that has had all of its arrivals already;
* a wait on a phase parity other than 0 or 1;
* a wait on the current phase (the parity of the phases completed so far) that could never
  return: too few arrivals, or fewer bytes landing than the phase expects -- or more bytes
  than it expects (a missing `tile.mbarrier_expect`, or one with too few bytes);
* an invalidation while a barrier still has arrivals or copies pending, or while a thread
  may still be waiting on one (a wait with no `tile.barrier` since).

A wait on the other parity returns at once, as `try_wait.parity` does: the copies stay in
flight, and reading their slot is `tilec.interp.pipeline`'s read of a slot in flight.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects import tma
from tilec.interp.cluster import cluster_of
from tilec.interp.pipeline import (
    SharedBuffer,
    _async,
    _check_write,
    _Copy,
    _release_after_loop,
    _Slot,
    _slot,
    _where,
)
from tilec.interp.semantics import _in_bounds, semantics
from tilec.ir.core import Operation

if TYPE_CHECKING:
    from tilec.interp.machine import BlockState

__all__ = ["Mbarrier", "MbarrierBuffer"]


@dataclass(eq=False)
class Mbarrier:
    """One mbarrier: its phases completed, and what its current phase has had so far."""

    arrivals: int  # arrivals that complete a phase (the init's)
    phase: int = 0  # phases completed since the init
    arrived: list[Operation] = field(default_factory=list)  # this phase's expects
    expected_bytes: int = 0
    copies: list[tuple[_Copy, int]] = field(default_factory=list)  # this phase's, with bytes
    # completed phase -> the slot reads its arrivals released (tile.mbarrier_arrive), for the
    # wait that acquires them; and those of the current phase's arrivals so far
    released: dict[int, list[tuple[_Slot, Operation]]] = field(default_factory=dict)
    releasing: list[tuple[_Slot, Operation]] = field(default_factory=list)

    @property
    def landing_bytes(self) -> int:
        return sum(n for _, n in self.copies)


@dataclass(eq=False)
class MbarrierBuffer:
    """The mbarriers of one buffer of them, and where their init stands."""

    init: Operation | None = None  # the tile.mbarrier_init, while they are initialized
    published: bool = False  # a tile.barrier has run since the init
    cluster_published: bool = False  # a tile.cluster_barrier has run since the init
    # An op of another block of the cluster that reached them with no cluster barrier since
    reached_remotely: Operation | None = None
    barriers: list[Mbarrier] = field(default_factory=list)
    waited: Operation | None = None  # a tile.mbarrier_wait with no tile.barrier since

    def publish(self) -> None:
        """A `tile.barrier`: every thread sees the init, and every wait before it is over."""
        if self.init is not None:
            self.published = True
        self.waited = None


def _state(state: BlockState, buffer: SharedBuffer) -> MbarrierBuffer:
    a = _async(state)
    bars = a.mbarriers.get(id(buffer))
    if bars is None:
        bars = a.mbarriers[id(buffer)] = MbarrierBuffer()
    return bars


def _mbarrier(
    state: BlockState,
    op: Operation,
    buffer: SharedBuffer,
    slot: Any,
    user: BlockState | None = None,
) -> Mbarrier:
    """The initialized, published mbarrier `buffer[slot]` of block `state` that `op` uses --
    run by block `user` when that is another block of its cluster, which needs the init made
    visible to the cluster (`tile.cluster_barrier`)."""
    bars = _state(state, buffer)
    _slot(state, op, buffer, slot)  # in range
    index = int(slot)
    if user is not None and user is not state:
        if bars.init is None or not bars.cluster_published:
            raise user.error(
                op,
                f"reaches mbarrier {index} of block {state.program_id}, whose initialization "
                "no tile.cluster_barrier has made visible to the cluster",
                hint="put a tile.cluster_barrier between tile.mbarrier_init and the first "
                "copy or arrival that reaches another block's barriers",
            )
        bars.reached_remotely = op
        return bars.barriers[index]
    if bars.init is None:
        raise state.error(
            op,
            f"uses mbarrier {index}, which is not initialized",
            hint="initialize the buffer of mbarriers first (tile.mbarrier_init)",
        )
    if not bars.published:
        raise state.error(
            op,
            f"uses mbarrier {index} before a tile.barrier has made its initialization "
            f"({_where(bars.init)}) visible to the block",
            hint="put a tile.barrier between tile.mbarrier_init and the barriers' first use",
        )
    return bars.barriers[index]


def _issued(state: BlockState, op: Operation, pred: Any) -> bool:
    """Whether the thread that issues `op` does so: its `pred` holds (or it has none)."""
    if pred is None:
        return True
    p = np.asarray(pred)
    if p.ndim and p.any() and not p.all():
        raise state.error(
            op,
            "has a predicate tile that differs between its elements: one thread issues the op",
            hint="predicate it on a scalar i1",
        )
    return bool(p.all())


@semantics(tma.MbarrierInitOp)
def _mbarrier_init(state: BlockState, op: Operation, args: list[Any]) -> Any:
    buffer: SharedBuffer = args[0]
    bars = _state(state, buffer)
    if bars.init is not None:
        raise state.error(
            op,
            f"initializes mbarriers that are initialized already ({_where(bars.init)}), with "
            "no tile.mbarrier_inval since",
            hint="invalidate them (tile.mbarrier_inval) before initializing them again",
        )
    bars.init = op
    bars.published = bars.cluster_published = False
    bars.barriers = [Mbarrier(op.arrivals) for _ in buffer.slots]
    return []


@semantics(tma.MbarrierExpectOp)
def _mbarrier_expect(state: BlockState, op: Operation, args: list[Any]) -> Any:
    bar = _arrive(
        state,
        op,
        "one tile.mbarrier_expect per phase and arrival: wait on the phase "
        "(tile.mbarrier_wait) before arming the barrier again",
    )
    if bar is not None:
        bar.expected_bytes += op.bytes
    return []


def _arrive(state: BlockState, op: Operation, hint: str) -> Mbarrier | None:
    """One arrival of `op` (an expect or a plain arrival) on its mbarrier, unless its `pred`
    is false (None then); an arrival on a phase that had all of its is an error."""
    values = state.values
    if not _issued(state, op, values[op.pred] if op.pred is not None else None):
        return None
    index = int(values[op.slot])
    bar = _mbarrier(state, op, values[op.barriers], index)
    _count_arrival(state, op, bar, index, hint)
    return bar


def _count_arrival(state: BlockState, op: Operation, bar: Mbarrier, index: int, hint: str):
    if len(bar.arrived) >= bar.arrivals:
        raise state.error(
            op,
            f"arrives on mbarrier {index}, whose phase {bar.phase} has had all of its "
            f"{bar.arrivals} arrival(s) already ({_where(bar.arrived[-1])}) and has not been "
            "waited on",
            hint=hint,
        )
    bar.arrived.append(op)


@semantics(tma.TmaCopyOp)
def _tma_copy(state: BlockState, op: Operation, args: list[Any]) -> Any:
    values = state.values
    if not _issued(state, op, values[op.pred] if op.pred is not None else None):
        return []
    view = values[op.view]
    offsets = [values[v] for v in op.offsets]
    buffer: SharedBuffer = values[op.buffer]
    shape = buffer.data.shape[1:]
    box = op.box_shape
    if len(box) != len(shape) or any(s % b for s, b in zip(shape, box)):
        raise state.error(
            op,
            f"has the box {list(box)}, which does not tile a slot of {list(shape)}",
            hint="each of the slot's sizes must be a multiple of the box's",
        )
    index = int(values[op.slot])
    tile = np.zeros(shape, buffer.data.dtype)  # outside the view: zero-filled
    inside = _in_bounds(view.shape, offsets, shape)
    if inside is not None:
        where, local = inside
        tile[local] = view.read(where)
    if op.multicast_ctas != 1:
        _multicast(state, op, tile, index)
        return []
    bar = _mbarrier(state, op, values[op.barriers], values[op.barrier_slot])
    s = _slot(state, op, buffer, index)
    _check_write(state, op, s, index)
    copy = _Copy(op, buffer, index, tile)
    s.in_flight = copy
    bar.copies.append((copy, tile.nbytes))  # the whole slot: filled zeros count too
    return []


def _multicast(state: BlockState, op: Operation, tile: np.ndarray, index: int) -> None:
    """This block's part of a multicast copy (`tilec.dialects.tma`) into slot `index` of
    every block of its cluster, its bytes landing on each one's mbarrier."""
    ctas = op.multicast_ctas
    cluster = cluster_of(state, op, ctas)
    part = tma.multicast_part(tuple(tile.shape), op.box_shape, ctas)
    assert not isinstance(part, str), part  # the verifier refuses it
    dim, size = part
    rank = cluster.rank(state)
    region = [slice(None)] * tile.ndim
    region[dim] = slice(rank * size, (rank + 1) * size)
    region_t = tuple(region)
    nbytes = tile[region_t].nbytes
    barrier_slot = state.values[op.barrier_slot]
    for peer in cluster.members:
        buffer: SharedBuffer = _peer_value(state, peer, op, op.buffer)
        bar = _mbarrier(peer, op, _peer_value(state, peer, op, op.barriers), barrier_slot, state)
        s = _slot(state, op, buffer, index)
        pending = s.in_flight
        if (
            pending is not None
            and pending.op is op
            and pending.parts is not None
            and region_t not in pending.parts  # else a second copy of the part: a race
            and len(pending.parts) < ctas
        ):
            pending.parts.append(region_t)  # the other blocks' parts of the same tile
            pending.data[region_t] = tile[region_t]
            copy = pending
        else:
            _check_write(state, op, s, index)
            copy = _Copy(op, buffer, index, np.zeros_like(tile), [region_t])
            copy.data[region_t] = tile[region_t]
            s.in_flight = copy
        bar.copies.append((copy, nbytes))


def _peer_value(state: BlockState, peer: BlockState, op: Operation, value: Any) -> Any:
    """What `value` (a buffer `op` names) is in block `peer` of `state`'s cluster."""
    found = peer.values.get(value)
    if found is None:
        raise state.error(
            op,
            f"reaches block {peer.program_id} of its cluster before that block has allocated "
            "the buffer",
            hint="put a tile.cluster_barrier after the allocations and mbarrier inits",
        )
    return found


def _baton(state: BlockState) -> Any:
    """The agents `state` runs among (its regions', or its cluster's), or None."""
    a = _async(state)
    if a.roles is not None:
        return a.roles
    return a.cluster.roles if a.cluster is not None else None


@semantics(tma.MbarrierWaitOp)
def _mbarrier_wait(state: BlockState, op: Operation, args: list[Any]) -> Any:
    buffer: SharedBuffer = args[0]
    index = int(args[1])
    parity = int(args[2])
    bar = _mbarrier(state, op, buffer, index)
    _state(state, buffer).waited = op
    if parity not in (0, 1):
        raise state.error(
            op,
            f"waits on phase parity {parity} of mbarrier {index}: a parity is 0 or 1",
            hint="wait on (phases completed so far) % 2",
        )
    roles = _baton(state)
    if roles is not None:  # another region or block may still complete the phase
        roles.wait_until(lambda: parity != bar.phase % 2 or _completes(bar))
    if parity != bar.phase % 2:
        # try_wait.parity: the phase of the other parity has completed; the reads its
        # arrivals released (tile.mbarrier_arrive) are over for this thread.
        for s, read in bar.released.pop(bar.phase - 1, []):
            if s.read_since_barrier is read:
                s.read_since_barrier = None
        return []
    arrived, landing, expected = len(bar.arrived), bar.landing_bytes, bar.expected_bytes
    where = f"mbarrier {index}, phase {bar.phase} (parity {parity})"
    if landing > expected:
        raise state.error(
            op,
            f"waits on {where}, whose copies bring {landing} bytes, more bytes than the phase "
            f"expects ({expected}, from {arrived} of its {bar.arrivals} arrival(s)): a missing "
            "tile.mbarrier_expect, or one with too few bytes",
            hint="arm the barrier with tile.mbarrier_expect of every byte its copies bring",
        )
    if arrived < bar.arrivals:
        raise state.error(
            op,
            f"would wait forever on {where}: it had {arrived} of its {bar.arrivals} "
            "arrival(s), and no other arrival comes",
            hint="every phase needs its arrivals (tile.mbarrier_expect) before a wait on it",
        )
    if landing < expected:
        raise state.error(
            op,
            f"would wait forever on {where}: it expects {expected} bytes, but its copies "
            f"bring only {landing}",
            hint="the bytes of tile.mbarrier_expect must be those of the phase's tile.tma_copys",
        )
    for copy, _ in bar.copies:
        buffer_of, slot = copy.buffer, copy.slot
        copy.land()
        s = buffer_of.slots[slot]
        s.in_flight = None
        s.written = True
        s.unread_write = copy.op
        s.unpublished_write = None  # the phase's completion makes it visible to every waiter
    if bar.releasing:
        bar.released[bar.phase] = bar.releasing
        bar.releasing = []
    bar.phase += 1
    bar.arrived = []
    bar.expected_bytes = 0
    bar.copies = []
    return []


def _completes(bar: Mbarrier) -> bool:
    """Whether a wait on `bar`'s current phase would complete it now."""
    return len(bar.arrived) >= bar.arrivals and bar.landing_bytes >= bar.expected_bytes


@semantics(tma.MbarrierArriveOp)
def _mbarrier_arrive(state: BlockState, op: Operation, args: list[Any]) -> Any:
    hint = (
        "one arrival per phase: the phase must be waited on (its stage refilled) before the "
        "next release"
    )
    # The reads this region has finished (no dot still holds them) are released with it.
    released = [
        (s, s.read_since_barrier)
        for buffer in _async(state).buffers
        for s in buffer.slots
        if s.read_since_barrier is not None and s.held_by is None
    ]
    if op.cluster_ctas == 1:
        bars = [_arrive(state, op, hint)]
    else:  # the barrier at this slot in every block of the cluster
        values = state.values
        if not _issued(state, op, values[op.pred] if op.pred is not None else None):
            return []
        index = int(values[op.slot])
        bars = []
        for peer in cluster_of(state, op, op.cluster_ctas).members:
            bar = _mbarrier(peer, op, _peer_value(state, peer, op, op.barriers), index, state)
            _count_arrival(state, op, bar, index, hint)
            bars.append(bar)
    for bar in bars:
        if bar is None:
            continue
        bar.releasing += released
        if len(bar.arrived) == bar.arrivals and not bar.expected_bytes and not bar.copies:
            bar.released[bar.phase] = bar.releasing  # no bytes to land: it completes now
            bar.releasing = []
            bar.phase += 1
            bar.arrived = []
    return []


@semantics(tma.MbarrierInvalOp)
def _mbarrier_inval(state: BlockState, op: Operation, args: list[Any]) -> Any:
    buffer: SharedBuffer = args[0]
    _release_after_loop(state, op)  # the end of a TMA loop: its dots are waited for
    bars = _state(state, buffer)
    if bars.init is None:
        raise state.error(
            op,
            "invalidates mbarriers that are not initialized",
            hint="tile.mbarrier_inval undoes one tile.mbarrier_init",
        )
    for index, bar in enumerate(bars.barriers):
        if bar.copies:
            copy = bar.copies[0][0].op
            raise state.error(
                op,
                f"invalidates mbarrier {index} while a copy that lands on it ({_where(copy)}) "
                f"is in flight (phase {bar.phase})",
                hint="wait for every phase that copies land on before invalidating its "
                "mbarrier (or predicate off the copies past the loop's end)",
            )
        if bar.arrived:
            raise state.error(
                op,
                f"invalidates mbarrier {index}, whose phase {bar.phase} has had an arrival "
                f"({_where(bar.arrived[-1])}) and has not completed",
                hint="wait for every phase that was armed before invalidating its mbarrier",
            )
    if bars.reached_remotely is not None:
        raise state.error(
            op,
            "invalidates mbarriers that another block of the cluster reached "
            f"({_where(bars.reached_remotely)}) with no tile.cluster_barrier since: it may "
            "still be reaching them",
            hint="put a tile.cluster_barrier between the loops and the invalidation",
        )
    if bars.waited is not None:
        raise state.error(
            op,
            f"invalidates mbarriers that a thread may still be waiting on "
            f"({_where(bars.waited)}, with no tile.barrier since)",
            hint="put a tile.barrier between the last tile.mbarrier_wait and the invalidation",
        )
    bars.init = None
    bars.published = bars.cluster_published = False
    bars.barriers = []
    return []
