"""Shared memory and asynchronous copies: the ops of the pipelined levels (`tile.*` names).

Software pipelining (Stage E) turns a loop that loads tiles from global memory into one that
copies them, several iterations ahead, into a multi-buffered shared allocation and reads them
from there. These ops say exactly that, with the semantics of NVIDIA's `cp.async`:

    %buf = tile.alloc_shared : !smem<3xBKxBNxf16>            // 3 stages of one BKxBN tile
    tile.async_copy %B[%k, %col], %buf[%slot] : !tile.tensor<KxNxf16>, !smem<3xBKxBNxf16>
    tile.async_commit                                         // close the open copy group
    tile.async_wait 1                                         // ≤ 1 committed group in flight
    tile.barrier                                              // every thread of the block
    %b = tile.load_shared %buf[%slot] : !smem<3xBKxBNxf16> -> tile<BKxBNxf16>

* `tile.async_copy` starts copying one tile (the buffer's shape without its first, stage
  dimension) from a tensor view into slot `%slot`. Elements outside the view (or masked off)
  are written as zeros. The copy joins the block's open copy group and has not landed yet.
* `tile.async_commit` closes the open group; `tile.async_wait N` blocks until at most `N`
  committed groups are still in flight (copies not yet committed are not waited for).
* A landed copy is visible to the thread that issued it. Other threads of the block see it —
  and see `tile.store_shared` writes — only after a `tile.barrier`; and a slot that some
  thread has read may be written again only after a `tile.barrier`.

The reference interpreter (`tilec.interp`) enforces these rules and reports a race, with the
op's location, when a pipelined kernel breaks one — so a wrong pipeline fails on the CPU.
"""

from __future__ import annotations

from tilec.ir.attributes import IntegerAttr, UnitAttr
from tilec.ir.constraints import BOOL_LIKE, INDEX, SHARED, TENSOR, TILE
from tilec.ir.core import Attr, Operand, Operation, Result, register_op
from tilec.ir.types import SharedType, TileType

__all__ = [
    "AllocSharedOp",
    "AsyncCommitOp",
    "AsyncCopyOp",
    "AsyncWaitOp",
    "BarrierOp",
    "LoadSharedOp",
    "StoreSharedOp",
    "read_type",
    "slot_type",
]


def slot_type(buffer: SharedType) -> TileType:
    """The tile held by one stage (slot) of a shared buffer."""
    return TileType(buffer.shape[1:], buffer.element)


def read_type(buffer: SharedType, transposed: bool = False) -> TileType:
    """The tile `tile.load_shared` reads from one slot of `buffer`: the slot without its
    leading size-1 dimensions (kept at rank 2 at least), transposed when `transposed`."""
    shape = tuple(buffer.shape[1:])
    while len(shape) > 2 and shape[0] == 1:
        shape = shape[1:]
    if transposed:
        shape = shape[::-1]
    return TileType(shape, buffer.element)


def _check_buffer(op: Operation, buffer_type: SharedType) -> None:
    if buffer_type.rank < 2:
        raise op.error(
            f"buffer {buffer_type} needs a stage dimension and at least one tile dimension"
        )


def _check_slot(op: Operation, buffer_type: SharedType, tile_type: TileType, what: str) -> None:
    expected = slot_type(buffer_type)
    if tile_type.shape != expected.shape or tile_type.element != expected.element:
        raise op.error(f"{what} {tile_type} does not match one slot of {buffer_type} ({expected})")


@register_op
class AllocSharedOp(Operation):
    """A shared-memory buffer for the block; its contents start undefined. `offset` (bytes
    from the start of the kernel's shared memory, 16-byte aligned) is where `smem-placement`
    put it; buffers never live at the same time may share bytes."""

    name = "tile.alloc_shared"
    summary = "Allocate a shared-memory buffer (stages first) for the block."
    offset = Attr(IntegerAttr, optional=True, doc="bytes from the start of shared memory")
    result = Result(SHARED)
    assembly_format = "attr-dict `:` type($result)"

    def verify_(self) -> None:
        _check_buffer(self, self.result.type)
        offset = self.attributes.get("offset")
        if offset is not None and (offset.value < 0 or offset.value % 16):
            raise self.error(f"offset must be a non-negative multiple of 16, got {offset.value}")


@register_op
class AsyncCopyOp(Operation):
    """Start copying one tile from a tensor view into slot `slot` of a shared buffer.

    Out-of-bounds (and masked-off) elements are written as zero. The copy joins the open
    copy group; it lands when a `tile.async_wait` covers its group.
    """

    name = "tile.async_copy"
    summary = "Asynchronous global->shared copy of one tile into a buffer slot (cp.async)."
    view = Operand(TENSOR)
    offsets = Operand(INDEX, variadic=True)
    buffer = Operand(SHARED)
    slot = Operand(INDEX)
    mask = Operand(BOOL_LIKE, optional=True)
    vector = Attr(
        IntegerAttr, optional=True, doc="elements per cp.async along the last dimension (vectorize)"
    )
    assembly_format = (
        "$view `[` $offsets `]` `,` $buffer `[` $slot `]` (`,` `mask` $mask)? attr-dict "
        "`:` type($view) `,` type($buffer)"
    )

    def verify_(self) -> None:
        view_t, buffer_t = self.view.type, self.buffer.type
        _check_buffer(self, buffer_t)
        tile_t = slot_type(buffer_t)
        if len(self.offsets) != view_t.rank:
            raise self.error(
                f"needs {view_t.rank} offset(s), one per dimension of {view_t}, "
                f"but has {len(self.offsets)}"
            )
        if tile_t.rank != view_t.rank:
            raise self.error(f"a slot of {buffer_t} must have the rank of the view {view_t}")
        if tile_t.element != view_t.element:
            raise self.error(
                f"buffer element type {tile_t.element} differs from the view's {view_t.element}"
            )
        if self.mask is not None:
            mt = self.mask.type
            if not (isinstance(mt, TileType) and mt.shape == tile_t.shape):
                raise self.error(f"mask must be a tile of i1 shaped like one slot, got {mt}")


@register_op
class AsyncCommitOp(Operation):
    """Close the block's open copy group (`cp.async.commit_group`)."""

    name = "tile.async_commit"
    summary = "Close the open group of asynchronous copies."
    assembly_format = "attr-dict"


@register_op
class AsyncWaitOp(Operation):
    """Block until at most `pending` committed copy groups are in flight
    (`cp.async.wait_group`); the copies of every older group have landed."""

    name = "tile.async_wait"
    summary = "Wait until at most N committed copy groups are still in flight."
    pending = Attr(IntegerAttr)
    assembly_format = "$pending attr-dict"

    def verify_(self) -> None:
        if self.pending < 0:
            raise self.error(f"pending must be >= 0, got {self.pending}")


@register_op
class BarrierOp(Operation):
    """Every thread of the block waits here; shared-memory writes before it are visible to
    all threads after it (`bar.sync 0`)."""

    name = "tile.barrier"
    summary = "Synchronize the threads of the block (makes shared-memory writes visible)."
    assembly_format = "attr-dict"


@register_op
class LoadSharedOp(Operation):
    """Read the tile held by slot `slot` of a shared buffer.

    The result is the slot's tile, or (`read_type`) that tile without its leading size-1
    dimensions, and with `transposed` (rank 2 only) its transpose: a dot operand stored as
    its tensor holds it (`b[n, k]` for `a @ b.T`, `a[z, m, k]` of a batch) is read in the
    shape the dot takes, and the lowering reads the stored layout directly (`ldmatrix`
    with or without `.trans`; a `wgmma` descriptor of the other major-ness).
    """

    name = "tile.load_shared"
    summary = "Read one slot of a shared buffer as a tile (optionally squeezed, transposed)."
    buffer = Operand(SHARED)
    slot = Operand(INDEX)
    transposed = Attr(UnitAttr, optional=True, doc="read the rank-2 slot transposed")
    result = Result(TILE)
    assembly_format = "$buffer `[` $slot `]` attr-dict `:` type($buffer) `->` type($result)"

    @property
    def is_transposed(self) -> bool:
        return "transposed" in self.attributes

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [read_type(operands[0].type, "transposed" in attributes)]

    def verify_(self) -> None:
        buffer_t = self.buffer.type
        _check_buffer(self, buffer_t)
        t = self.result.type
        if self.is_transposed and len(read_type(buffer_t).shape) != 2:
            raise self.error(f"only a rank-2 slot can be read transposed, not one of {buffer_t}")
        if self.is_transposed or t.rank != buffer_t.rank - 1:
            expected = read_type(buffer_t, self.is_transposed)
            if t.shape != expected.shape or t.element != expected.element:
                how = "transposed, " if self.is_transposed else ""
                raise self.error(
                    f"result {t} does not match one slot of {buffer_t} read {how}without "
                    f"leading size-1 dimensions ({expected})"
                )
            return
        _check_slot(self, buffer_t, t, "result")


@register_op
class StoreSharedOp(Operation):
    """Write a tile into slot `slot` of a shared buffer."""

    name = "tile.store_shared"
    summary = "Write a tile into one slot of a shared buffer."
    buffer = Operand(SHARED)
    slot = Operand(INDEX)
    value = Operand(TILE)
    assembly_format = (
        "$buffer `[` $slot `]` `,` $value attr-dict `:` type($buffer) `,` type($value)"
    )

    def verify_(self) -> None:
        _check_buffer(self, self.buffer.type)
        _check_slot(self, self.buffer.type, self.value.type, "value")
