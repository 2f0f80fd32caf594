"""Split reductions: the ops that combine partial results across blocks (`tile.*` names).

`split-reduction` (passes/split_reduction.py) gives a reduction kernel one more grid axis, the
split axis: each of its S blocks reduces a contiguous chunk of the loop, and the S partial
results of one output tile are combined by whichever of those blocks finishes last. Two hidden
kernel parameters hold what they share (docs/abi.md): the *workspace*, an array of slots of
`slot_bytes` bytes each, one per (block of the other axes, split), and the *counters*, one
32-bit ticket counter per block of the other axes, zero between launches.

    tile.workspace_store %acc, slot %i offset 0 slot_bytes 256 : tile<64xf32>
    %last = tile.last_arrival counter %b arrivals %S
    %q = tile.workspace_read slot %j offset 0 slot_bytes 256 : tile<64xf32>
    %p = tile.workspace_load slots %first count %n offset 0 slot_bytes 256 {padding = 0.0} : tile<32x64xf32>

A split *scan* (a loop that also stores what its carried values have reached: a cumulative
sum) has every block wait for the partials of the chunks before its own, so its blocks take
their chunks in the order they arrive and tell each other when a partial is written, through
more words of the counters:

    %k = tile.split_ticket counter %t arrivals %S
    tile.publish counter %f
    tile.wait_published counters %first count %k
    tile.clear_counters counters %first count %S

* `tile.workspace_store` writes a tile, row-major, at byte `offset` of slot `slot`.
* `tile.last_arrival` takes a ticket on counter `counter`: true in exactly one of the
  `arrivals` blocks that take one, the last to arrive, which also puts the counter back to 0
  (so the next launch finds it zeroed). Every `tile.workspace_store` the other blocks made
  before their ticket is visible to the block that gets true, after it (release/acquire at
  GPU scope: `tilec/lowering/split.py` says how).
* `tile.workspace_read` reads back, in its own layout, the tile one `tile.workspace_store`
  wrote at `offset` of slot `slot`: the combine of partials too large to read several slots
  a round (a GEMM's accumulator tile), one slot after another.
* `tile.workspace_load` reads rows `first, first + 1, ...` of its result from consecutive
  slots (the tile one `tile.workspace_store` of the remaining shape wrote at `offset`); rows
  at or past `count` are not read and take `padding` (the combine's identity).
* `tile.split_ticket` takes a ticket on counter `counter`: the i-th of the `arrivals` blocks
  that take one gets i - 1 (0, 1, ..., arrivals - 1), and the last puts the counter back to 0.
  A block that got ticket k runs after every block that got a smaller one has started, so
  it may wait for them (forward progress: they wait only for smaller tickets still).
* `tile.publish` sets counter `counter` to 1 after every workspace store the block made
  before it (release at GPU scope); `tile.wait_published` waits until counters
  `first .. first + count - 1` are all set, after which the stores published before them are
  visible to the block (acquire); `tile.clear_counters` sets counters `first .. first +
  count - 1` back to 0 (plain stores: the next launch, in stream order, sees them).

The interpreter (`tilec.interp.semantics`) runs blocks one after another, so a ticket is a
count there; it reports a load of a slot no block of this launch wrote.
"""

from __future__ import annotations

from tilec.ir.attributes import BoolAttr, FloatAttr, IntegerAttr
from tilec.ir.constraints import INDEX, TILE
from tilec.ir.core import Attr, Operand, Operation, Result, register_op
from tilec.ir.folding import check_constant_fits
from tilec.ir.types import TileType, i1, index

__all__ = [
    "ClearCountersOp",
    "LastArrivalOp",
    "PublishOp",
    "SplitTicketOp",
    "WaitPublishedOp",
    "WorkspaceLoadOp",
    "WorkspaceReadOp",
    "WorkspaceStoreOp",
    "tile_bytes",
]


def tile_bytes(t: TileType) -> int:
    """The bytes a tile of `t` takes in a workspace slot (i1 as one byte per element)."""
    size = 1
    for d in t.shape:
        size *= d  # type: ignore[operator]
    width = getattr(t.element, "width", 64)
    return size * max(width // 8, 1)


def _check_slot(op: Operation, t: TileType, what: str) -> None:
    if not t.is_static:
        raise op.error(f"{what} {t} must have a static shape (run tiling first)")
    offset, slot_bytes = op.attributes["offset"].value, op.attributes["slot_bytes"].value
    if offset < 0 or offset % 4:
        raise op.error(f"offset must be a non-negative multiple of 4, got {offset}")
    if offset + tile_bytes(t) > slot_bytes:
        raise op.error(
            f"{what} {t} at offset {offset} needs {offset + tile_bytes(t)} bytes, more than a "
            f"slot's {slot_bytes}"
        )


@register_op
class WorkspaceStoreOp(Operation):
    """Write a tile (row-major) at byte `offset` of workspace slot `slot`."""

    name = "tile.workspace_store"
    summary = "Write a block's partial result into a slot of the split workspace."
    value = Operand(TILE)
    slot = Operand(INDEX)
    offset = Attr(IntegerAttr, doc="bytes from the start of the slot")
    slot_bytes = Attr(IntegerAttr, doc="bytes of one slot")
    assembly_format = (
        "$value `,` `slot` $slot `offset` $offset `slot_bytes` $slot_bytes attr-dict "
        "`:` type($value)"
    )

    def verify_(self) -> None:
        _check_slot(self, self.value.type, "value")


@register_op
class WorkspaceReadOp(Operation):
    """Read back the tile (row-major) at byte `offset` of workspace slot `slot`: what one
    `tile.workspace_store` of the result's shape wrote there."""

    name = "tile.workspace_read"
    summary = "Read one block's partial result back from a slot of the split workspace."
    slot = Operand(INDEX)
    offset = Attr(IntegerAttr, doc="bytes from the start of the slot")
    slot_bytes = Attr(IntegerAttr, doc="bytes of one slot")
    result = Result(TILE)
    assembly_format = (
        "`slot` $slot `offset` $offset `slot_bytes` $slot_bytes attr-dict `:` type($result)"
    )

    def verify_(self) -> None:
        _check_slot(self, self.result.type, "result")


@register_op
class WorkspaceLoadOp(Operation):
    """Read consecutive slots `first, first + 1, ...` as the rows of the result (each row the
    tile a `tile.workspace_store` wrote at `offset`); rows at or past `count` take `padding`."""

    name = "tile.workspace_load"
    summary = "Read partial results from consecutive slots of the split workspace."
    first = Operand(INDEX)
    count = Operand(INDEX)
    offset = Attr(IntegerAttr, doc="bytes from the start of each slot")
    slot_bytes = Attr(IntegerAttr, doc="bytes of one slot")
    padding = Attr((FloatAttr, IntegerAttr, BoolAttr), doc="the value of rows past count")
    result = Result(TILE)
    assembly_format = (
        "`slots` $first `count` $count `offset` $offset `slot_bytes` $slot_bytes attr-dict "
        "`:` type($result)"
    )

    def verify_(self) -> None:
        t = self.result.type
        if t.rank < 2:
            raise self.error(f"result {t} needs a slot dimension and at least one more")
        _check_slot(self, TileType(t.shape[1:], t.element), "a row of the result")
        check_constant_fits(self, self.attributes["padding"], t.element, "padding")


@register_op
class LastArrivalOp(Operation):
    """A ticket on counter `counter`: true in the last of `arrivals` blocks (which resets the
    counter to 0); the workspace writes of the others are visible to that block after it."""

    name = "tile.last_arrival"
    summary = "Take a ticket on a split counter; true in the last block to arrive."
    counter = Operand(INDEX)
    count = Operand(INDEX)
    result = Result()
    assembly_format = "`counter` $counter `arrivals` $count attr-dict"

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [i1]


@register_op
class SplitTicketOp(Operation):
    """A ticket on counter `counter`: 0 for the first of `arrivals` blocks to take one, 1 for
    the next, ...; the last resets the counter to 0. A split scan's chunk is its ticket."""

    name = "tile.split_ticket"
    summary = "Take a numbered ticket on a split counter (arrival order, from 0)."
    counter = Operand(INDEX)
    count = Operand(INDEX)
    result = Result()
    assembly_format = "`counter` $counter `arrivals` $count attr-dict"

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [index]


@register_op
class PublishOp(Operation):
    """Set counter `counter` to 1, after (release) the block's workspace stores before it."""

    name = "tile.publish"
    summary = "Mark a split partial written: its counter set to 1, release at GPU scope."
    counter = Operand(INDEX)
    assembly_format = "`counter` $counter attr-dict"


@register_op
class WaitPublishedOp(Operation):
    """Wait until counters `first .. first + count - 1` are all set (acquire): the
    workspace stores published before them are then visible to the block."""

    name = "tile.wait_published"
    summary = "Wait for split partials: spin until a range of counters is set (acquire)."
    first = Operand(INDEX)
    count = Operand(INDEX)
    assembly_format = "`counters` $first `count` $count attr-dict"


@register_op
class ClearCountersOp(Operation):
    """Set counters `first .. first + count - 1` back to 0 for the next launch."""

    name = "tile.clear_counters"
    summary = "Reset a range of split counters to 0 (for the next launch)."
    first = Operand(INDEX)
    count = Operand(INDEX)
    assembly_format = "`counters` $first `count` $count attr-dict"
