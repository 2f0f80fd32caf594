"""Shared memory and asynchronous copies in the interpreter, with their race checks.

The semantics are those `tilec.dialects.shared` states (cp.async's): a `tile.async_copy` does
not land when it is issued but when a `tile.async_wait` covers its group; data in shared
memory becomes visible to the block's other threads only at a `tile.barrier`; and a slot that
a thread has read may be overwritten only after a barrier. The interpreter runs one logical
thread per block, so it cannot *see* another thread read stale data — instead it tracks, per
slot, the facts that decide whether any thread could, and reports every access that depends on
luck as a race, located at the op:

* reading a slot while a copy into it is in flight (the read would see old data);
* reading a slot written since the last barrier (other threads' parts are not visible yet);
* reading a slot that was never written;
* writing a slot (copy or store) while a copy into it is in flight;
* writing a slot that was read since the last barrier (other threads may still be reading);
* writing a slot whose data has not been read yet (that data would be lost), unless it landed
  at the wait that follows a loop, from the loop or its prologue (a prefetch past its end);
* writing a slot a tensor-core dot may still be reading: in a loop whose `tilec.dots_in_flight`
  is N (`pipeline`'s option: wgmma groups left running across the back edge), the slots a
  dot reads stay held until N later dots of the loop have been issued (the wait for the
  group comes after the next dot's issue), or the loop ends; then, as any read, until a
  barrier.

`tilec.interp.tma` adds the copies of the tensor memory accelerator, which land on an mbarrier
instead of a copy group, on the same slots and with the same write checks.

So a pipeline with too few waits, a missing barrier, or a prefetch distance that reaches a
stage still in use fails here, on the CPU, before it reaches a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects import scf, shared
from tilec.dialects import tile as tile_ops
from tilec.dialects.tma import TmaCopyOp
from tilec.interp.numerics import dtype_of
from tilec.interp.semantics import SEMANTICS, _in_bounds, semantics
from tilec.ir.core import Operation

if TYPE_CHECKING:
    from tilec.interp.machine import BlockState

__all__ = ["AsyncState", "SharedBuffer"]


@dataclass(eq=False)
class _Copy:
    op: Operation
    buffer: SharedBuffer
    slot: int
    data: np.ndarray
    # The parts of the slot it writes (a cluster's multicast copies, each block's part:
    # tilec.interp.tma); None: the whole slot.
    parts: list[tuple[slice, ...]] | None = None

    def land(self) -> None:
        """Write the copied data into its slot."""
        if self.parts is None:
            self.buffer.data[self.slot] = self.data
        for part in self.parts or ():
            self.buffer.data[self.slot][part] = self.data[part]


@dataclass(eq=False)
class _Slot:
    written: bool = False
    in_flight: _Copy | None = None
    unread_write: Operation | None = None  # wrote data that no read has consumed yet
    unpublished_write: Operation | None = None  # wrote since the last barrier
    read_since_barrier: Operation | None = None
    read_in: str | None = None  # the region of a tile.warp_specialize that read it
    fenced_in: str | None = None  # the region whose barrier has ordered that read since
    held_by: _HeldRead | None = None  # read by a dot that may still be in flight


@dataclass(eq=False)
class _HeldRead:
    """A slot read for a dot left in flight: `group` is the dot's issue count in its loop."""

    read: Operation  # the tile.load_shared
    dot: Operation
    slot: _Slot
    group: int


@dataclass(eq=False)
class SharedBuffer:
    """One `tile.alloc_shared`: its contents (stages first) and the state of each slot."""

    data: np.ndarray
    slots: list[_Slot]


@dataclass(eq=False)
class AsyncState:
    """A block's copies in flight: the open group, and committed groups oldest first."""

    open_group: list[_Copy] = field(default_factory=list)
    committed: list[list[_Copy]] = field(default_factory=list)
    buffers: list[SharedBuffer] = field(default_factory=list)
    dots_issued: dict[int, int] = field(default_factory=dict)  # loop id -> dots issued so far
    held: list[_HeldRead] = field(default_factory=list)
    # id of a buffer of mbarriers -> the state of its barriers (tilec.interp.tma)
    mbarriers: dict[int, Any] = field(default_factory=dict)
    # The regions of a running tile.warp_specialize (tilec.interp.warp_specialize), or None
    roles: Any = None
    # The cluster the block runs in (tilec.interp.cluster), or None
    cluster: Any = None


def _async(state: BlockState) -> AsyncState:
    if state.async_state is None:
        state.async_state = AsyncState()
    return state.async_state


def _where(op: Operation) -> str:
    return f"'{op.name}' at {op.loc}" if op.loc.known else f"'{op.name}'"


def _wait_hint(copy: Operation, cp_async: str) -> str:
    """How to wait for the copy `copy`: `cp_async` for a `tile.async_copy`, or for a
    `tile.tma_copy`, the phase of its mbarrier."""
    if isinstance(copy, TmaCopyOp):
        return (
            "wait on the phase of its mbarrier that the copy completes (tile.mbarrier_wait, "
            "with that phase's parity)"
        )
    return cp_async


def _slot(state: BlockState, op: Operation, buffer: SharedBuffer, slot: Any) -> _Slot:
    index = int(slot)
    if not 0 <= index < len(buffer.slots):
        raise state.error(
            op,
            f"uses slot {index} of a buffer with {len(buffer.slots)} slots (0..{len(buffer.slots) - 1})",
        )
    return buffer.slots[index]


def _check_write(state: BlockState, op: Operation, s: _Slot, index: int) -> None:
    if s.held_by is not None:
        raise state.error(
            op,
            f"writes slot {index}, which the tensor-core dot {_where(s.held_by.dot)} may "
            "still be reading: its loop leaves dots in flight (tilec.dots_in_flight), and "
            "that dot's group has not been waited for",
            hint="with dots in flight, copies may run at most stages - 2 steps ahead",
        )
    if s.in_flight is not None:
        raise state.error(
            op,
            f"writes slot {index} while an asynchronous copy into it "
            f"({_where(s.in_flight.op)}) is still in flight",
            hint=_wait_hint(s.in_flight.op, "wait for that copy (tile.async_wait)")
            + " before reusing the slot",
        )
    roles = state.async_state.roles if state.async_state is not None else None
    if s.read_since_barrier is not None and not (
        roles is not None and s.fenced_in is not None and s.fenced_in == roles.running
    ):
        specialized = roles is not None
        raise state.error(
            op,
            f"writes slot {index}, which was read ({_where(s.read_since_barrier)}) with no "
            + (
                "release since (tile.mbarrier_arrive, then a wait on its phase)"
                if specialized
                else "tile.barrier since"
            )
            + ": other threads may still be reading it",
            hint="the consumers release a stage once the dots reading it are waited for, and "
            "the producer waits for that release before refilling it"
            if specialized
            else "put a tile.barrier between the last read of the slot and this write",
        )
    if s.unread_write is not None:
        raise state.error(
            op,
            f"overwrites slot {index} before the data written into it "
            f"({_where(s.unread_write)}) was read",
            hint="the pipeline reuses a stage too early: use more stages or prefetch less far",
        )


@semantics(shared.AllocSharedOp)
def _alloc_shared(state: BlockState, op: Operation, args: list[Any]) -> Any:
    t = op.result.type
    shape = state.launch.shape(t)
    if None in shape:
        raise state.error(op, f"needs the size of every dimension of {t}, but one is '?'")
    buffer = SharedBuffer(np.zeros(shape, dtype_of(t)), [_Slot() for _ in range(shape[0])])
    _async(state).buffers.append(buffer)
    return buffer


@semantics(shared.AsyncCopyOp)
def _async_copy(state: BlockState, op: Operation, args: list[Any]) -> Any:
    values = state.values
    view = values[op.view]
    offsets = [values[v] for v in op.offsets]
    buffer: SharedBuffer = values[op.buffer]
    index = int(values[op.slot])
    s = _slot(state, op, buffer, index)
    _check_write(state, op, s, index)
    shape = buffer.data.shape[1:]
    tile = np.zeros(shape, buffer.data.dtype)  # out of bounds and masked off: zero-filled
    inside = _in_bounds(view.shape, offsets, shape)
    if inside is not None:
        box, local = inside
        tile[local] = view.read(box)
    if op.mask is not None:
        tile = np.where(values[op.mask], tile, tile.dtype.type(0))
    copy = _Copy(op, buffer, index, tile)
    s.in_flight = copy
    _async(state).open_group.append(copy)
    return []


@semantics(shared.AsyncCommitOp)
def _async_commit(state: BlockState, op: Operation, args: list[Any]) -> Any:
    a = _async(state)
    a.committed.append(a.open_group)
    a.open_group = []
    return []


@semantics(shared.AsyncWaitOp)
def _async_wait(state: BlockState, op: Operation, args: list[Any]) -> Any:
    a = _async(state)
    _release_after_loop(state, op)  # the drain after a pipelined loop
    while len(a.committed) > op.pending:
        for copy in a.committed.pop(0):
            buffer, index = copy.buffer, copy.slot
            buffer.data[index] = copy.data
            s = buffer.slots[index]
            s.in_flight = None
            s.written = True
            # The drain after a pipelined loop lands the copies of its prologue and body
            # that fetched for steps past its last (any other would have been waited for by
            # the iteration that read it): overwriting them, as the next run of a nested
            # loop's prologue does, loses nothing.
            s.unread_write = None if _drained_past_the_end(copy.op, op) else copy.op
            s.unpublished_write = copy.op
    return []


def _in_flight_loop(dot: Operation) -> tuple[Operation, int] | None:
    """The loop `dot` is left in flight in, and how many groups it leaves (or None)."""
    loop = dot.parent_op
    pending = scf.dots_in_flight(loop) if loop is not None else 0
    return (loop, pending) if pending >= 1 else None


def _reads_registers_the_loop_writes(dot: Operation, loop: Operation) -> bool:
    """Whether `dot`, a link of `loop`'s accumulator chain (its result only yielded, its
    accumulator the carried value: the dots a loop leaves in flight), reads an A held in
    registers (`#dot_operand` version 2) that the loop's body computes."""
    layout = dot.a.type.layout
    if not (isinstance(layout, tile_ops.DotOperandLayout) and layout.version == 2):
        return False
    result = dot.results[0]
    if not (result.uses and all(isinstance(u, scf.YieldOp) for u in result.uses)):
        return False
    a_op = getattr(dot.a, "op", None)
    while a_op is not None and a_op is not loop:
        a_op = a_op.parent_op
    return a_op is loop


def _release(held: _HeldRead) -> None:
    """The dot's group is complete: the slot is read, as any read until the next barrier."""
    held.slot.held_by = None
    held.slot.read_since_barrier = held.read


_plain_dot = SEMANTICS[tile_ops.DotOp]


@semantics(tile_ops.DotOp)
def _dot(state: BlockState, op: Operation, args: list[Any]) -> Any:
    """The dot's value, and in a loop that leaves dots in flight, the groups its issue
    completes: all but the newest N of the loop's."""
    found = _in_flight_loop(op)
    if found is not None and _reads_registers_the_loop_writes(op, found[0]):
        raise state.error(
            op,
            "is left in flight across iterations (tilec.dots_in_flight) but reads its A from "
            "registers computed each iteration: the next iteration overwrites them while this "
            "dot's group may still be reading them",
            hint="leave no dot in flight where A is in registers (pipeline's dots_in_flight = 0)",
        )
    result = _plain_dot(state, op, args)
    if found is not None and state.async_state is not None:
        loop, pending = found
        a = state.async_state
        issued = a.dots_issued.get(id(loop), 0) + 1
        a.dots_issued[id(loop)] = issued
        for held in [h for h in a.held if h.dot is op and h.group <= issued - pending]:
            a.held.remove(held)
            _release(held)
    return result


def _release_loop(state: BlockState, loop: Operation) -> None:
    """The loop has ended: its last dots are waited for at its exit."""
    a = state.async_state
    if a is None:
        return
    for held in [h for h in a.held if h.dot.parent_op is loop]:
        a.held.remove(held)
        _release(held)
    a.dots_issued.pop(id(loop), None)


def _release_after_loop(state: BlockState, op: Operation) -> None:
    """When `op` directly follows a loop (the drain of a pipelined loop: `tile.async_wait`,
    or `tile.barrier` and `tile.mbarrier_inval` after a TMA loop), that loop's dots left in
    flight are waited for there."""
    ops = op.parent.ops
    at = ops.index(op)
    if at > 0 and isinstance(ops[at - 1], scf.ForOp):
        _release_loop(state, ops[at - 1])


def _drained_past_the_end(copy: Operation, wait: Operation) -> bool:
    """Whether `wait` directly follows a loop and `copy` is in that loop or before it in the
    same block (its prologue)."""
    ops = wait.parent.ops
    at = ops.index(wait)
    loop = ops[at - 1] if at > 0 else None
    if not isinstance(loop, scf.ForOp):
        return False
    if copy.parent is wait.parent:
        return ops.index(copy) < at - 1
    inside = copy.parent_op
    while inside is not None and inside is not loop:
        inside = inside.parent_op
    return inside is loop


@semantics(shared.BarrierOp)
def _barrier(state: BlockState, op: Operation, args: list[Any]) -> Any:
    if state.async_state is not None:
        _release_after_loop(state, op)
        # In a region of a tile.warp_specialize the barrier is its warps' only: it releases
        # the reads of its own region, none to the other (tilec.interp.warp_specialize).
        roles = state.async_state.roles
        region = roles.running if roles is not None else None
        for buffer in state.async_state.buffers:
            for s in buffer.slots:
                s.unpublished_write = None
                if roles is None:
                    s.read_since_barrier = None
                elif s.read_since_barrier is not None and s.read_in == region:
                    s.fenced_in = region  # ordered before this region's later writes only
        for barriers in state.async_state.mbarriers.values():
            barriers.publish()  # tilec.interp.tma: the block sees inits, waits are over
    return []


@semantics(shared.LoadSharedOp)
def _load_shared(state: BlockState, op: Operation, args: list[Any]) -> Any:
    buffer: SharedBuffer = args[0]
    index = int(args[1])
    s = _slot(state, op, buffer, index)
    if s.in_flight is not None:
        raise state.error(
            op,
            f"reads slot {index} while an asynchronous copy into it "
            f"({_where(s.in_flight.op)}) is still in flight",
            hint=_wait_hint(s.in_flight.op, "wait for the copy's group (tile.async_wait)")
            + " before reading the slot",
        )
    if not s.written:
        raise state.error(op, f"reads slot {index}, which nothing has written")
    if s.unpublished_write is not None:
        raise state.error(
            op,
            f"reads slot {index}, written ({_where(s.unpublished_write)}) with no tile.barrier "
            "since: the parts other threads wrote are not visible yet",
            hint="put a tile.barrier between the write (or the wait) and this read",
        )
    s.unread_write = None
    s.read_since_barrier = op
    roles = state.async_state.roles if state.async_state is not None else None
    s.read_in = roles.running if roles is not None else None
    s.fenced_in = None
    dot = op.result.uses[0] if len(op.result.uses) == 1 else None
    found = _in_flight_loop(dot) if isinstance(dot, tile_ops.DotOp) else None
    if found is not None:
        a = _async(state)
        held = _HeldRead(op, dot, s, a.dots_issued.get(id(found[0]), 0) + 1)
        s.held_by = held
        s.read_since_barrier = None
        a.held.append(held)
    value = buffer.data[index]
    while value.ndim > op.result.type.rank and value.shape[0] == 1:
        value = value[0]  # `read_type`: the leading size-1 dimensions dropped
    return (value.T if "transposed" in op.attributes else value).copy()


@semantics(shared.StoreSharedOp)
def _store_shared(state: BlockState, op: Operation, args: list[Any]) -> Any:
    buffer: SharedBuffer = args[0]
    index = int(args[1])
    s = _slot(state, op, buffer, index)
    _check_write(state, op, s, index)
    buffer.data[index] = args[2]
    s.written = True
    s.unread_write = op
    s.unpublished_write = op
    return []
