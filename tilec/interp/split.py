"""The semantics of split reductions (`tilec.dialects.split`) in the interpreter.

The interpreter runs the blocks of the grid one after another, so the tickets of
`tile.last_arrival` need no atomics: a count per counter, kept with the workspace in the
`Launch` (`SplitState`). What it checks, at the op that breaks it: a `tile.workspace_load` or
`tile.workspace_read` of
a slot that no block of this launch wrote, a counter taken more times than its arrivals, a
wait for a partial no block published before (on the GPU it would wait forever: a block that
runs after it cannot publish first), and (at the end of the launch) a counter that was not put
back to 0, which on the GPU would leave the next launch's tickets and flags wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects import split
from tilec.interp.numerics import dtype_of
from tilec.interp.semantics import _concrete_shape, element_constant, semantics
from tilec.ir.core import Operation

if TYPE_CHECKING:
    from tilec.interp.machine import BlockState

__all__ = ["DEFAULT_SPLIT", "SplitState"]

# The split count the interpreter launches a split kernel with unless told otherwise: more
# than one, so that every run exercises the partials and their combine (and 3 is no power of
# two, so chunks of the loop come out uneven).
DEFAULT_SPLIT = 3


@dataclass
class SplitState:
    """One launch's workspace (slot, byte offset) -> the tile written there, and counters."""

    workspace: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    counters: dict[int, int] = field(default_factory=dict)
    taken_by: dict[int, Operation] = field(default_factory=dict)

    def unreset(self) -> tuple[int, int, Operation] | None:
        """A counter left above 0 at the end of a launch: (counter, value, its op)."""
        for counter, value in self.counters.items():
            if value:
                return counter, value, self.taken_by[counter]
        return None


def _state(state: BlockState) -> SplitState:
    return state.launch.split_state


@semantics(split.WorkspaceStoreOp)
def _workspace_store(state: BlockState, op: Operation, args: list[Any]) -> Any:
    value, slot = args
    _state(state).workspace[(int(slot), op.offset)] = np.array(value, copy=True)
    return []


@semantics(split.LastArrivalOp)
def _last_arrival(state: BlockState, op: Operation, args: list[Any]) -> Any:
    counter, count = int(args[0]), int(args[1])
    split_state = _state(state)
    taken = split_state.counters.get(counter, 0) + 1
    if taken > count:
        raise state.error(op, f"took ticket {taken} on counter {counter}, of {count} arrivals")
    split_state.taken_by[counter] = op
    last = taken == count
    split_state.counters[counter] = 0 if last else taken
    return np.bool_(last)


@semantics(split.WorkspaceReadOp)
def _workspace_read(state: BlockState, op: Operation, args: list[Any]) -> Any:
    slot = int(args[0])
    written = _state(state).workspace.get((slot, op.offset))
    if written is None:
        raise state.error(
            op, f"reads slot {slot} (offset {op.offset}), which no block of this launch wrote"
        )
    return np.array(written, copy=True)


@semantics(split.WorkspaceLoadOp)
def _workspace_load(state: BlockState, op: Operation, args: list[Any]) -> Any:
    first, count = int(args[0]), int(args[1])
    t = op.result.type
    shape = _concrete_shape(state, op, t)
    dtype = dtype_of(t)
    result = np.full(shape, element_constant(op.attributes["padding"].value, dtype), dtype)
    workspace = _state(state).workspace
    for row in range(min(shape[0], max(count, 0))):
        written = workspace.get((first + row, op.offset))
        if written is None:
            raise state.error(
                op,
                f"reads slot {first + row} (offset {op.offset}), which no block of this "
                "launch wrote",
            )
        result[row] = written.reshape(shape[1:])  # a slot holds its tile's elements row-major
    return result


@semantics(split.SplitTicketOp)
def _split_ticket(state: BlockState, op: Operation, args: list[Any]) -> Any:
    counter, count = int(args[0]), int(args[1])
    split_state = _state(state)
    ticket = split_state.counters.get(counter, 0)
    if ticket >= count:
        raise state.error(op, f"took ticket {ticket + 1} on counter {counter}, of {count} arrivals")
    split_state.taken_by[counter] = op
    split_state.counters[counter] = 0 if ticket + 1 == count else ticket + 1
    return np.int64(ticket)


@semantics(split.PublishOp)
def _publish(state: BlockState, op: Operation, args: list[Any]) -> Any:
    counter = int(args[0])
    split_state = _state(state)
    split_state.counters[counter] = 1
    split_state.taken_by[counter] = op
    return []


@semantics(split.WaitPublishedOp)
def _wait_published(state: BlockState, op: Operation, args: list[Any]) -> Any:
    first, count = int(args[0]), int(args[1])
    counters = _state(state).counters
    for counter in range(first, first + max(count, 0)):
        if not counters.get(counter):
            raise state.error(
                op,
                f"waits for counter {counter}, which no block before it published: on the GPU "
                "it would wait forever",
            )
    return []


@semantics(split.ClearCountersOp)
def _clear_counters(state: BlockState, op: Operation, args: list[Any]) -> Any:
    first, count = int(args[0]), int(args[1])
    counters = _state(state).counters
    for counter in range(first, first + max(count, 0)):
        counters[counter] = 0
    return []
