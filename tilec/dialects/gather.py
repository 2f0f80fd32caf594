"""Gathers and scatters: tensor accesses whose elements along one dimension come from an
integer tile (`tile.gather`, `tile.scatter`; docs/language.md, "Gathers and scatters").

    %rows = tile.gather %table[%c0, %c0], %ids axis 0 : !tile.tensor<VxDxbf16>, tile<BMxi32> -> tile<BMxBDxbf16>
    tile.scatter %out[%c0, %c0], %ids axis 0, %v : !tile.tensor<VxDxf32>, tile<BMxi32>, tile<BMxBDxf32>

Like `tile.load`/`tile.store` they take one offset per view dimension and a tile of the view's
rank; along the gathered dimension `axis` the element index of lane `i` is
`offsets[axis] + indices[i]` instead of `offsets[axis] + i`. The index tile (i32 or i64) is

* 1-D, of the tile's size along `axis`: one index per row (column, ...) shared by the other
  dimensions (an embedding's rows: `table[ids[tm], :]`); or
* of the tile's own shape: one index per element (`x[tm, cols]` with `cols: i32[BM, BK]`).

Every other dimension is accessed as `tile.load` does: from its offset, masked against its
extent. Along `axis`, an index outside `0 <= index < extent` is *out of range*: the
interpreter reports it (the kernel, the index, where it is); compiled code treats the element
like one outside the view (a gather reads `padding`, a scatter skips it), unless compiled
with `TILEC_CHECK_BOUNDS=1`, which reports the first bad index and stops the kernel
(`tilec.lowering.gather`). Lanes where the optional `mask` is false are neither read nor
checked. Two lanes of a scatter that write one element store one of their values (which one
is unspecified, as in torch's `index_put_`).

These are separate ops, not operands of `tile.load`/`tile.store`, so that the passes that
plan rectangles (smem-placement's staging, pipeline's `cp.async` streams, tiling's dot
operands) never take a gathered region for one: they see only loads. `vectorize` widens the
contiguous last dimension of a gather that does not gather along it.
"""

from __future__ import annotations

from tilec.ir.attributes import ArrayAttr, BoolAttr, FloatAttr, IntegerAttr
from tilec.ir.constraints import BOOL_LIKE, INDEX, TENSOR, TILE
from tilec.ir.core import Attr, Operand, Operation, Pure, Result, Value, register_op
from tilec.ir.folding import check_constant_fits
from tilec.ir.types import FloatType, IntegerType, TileType, Type

__all__ = [
    "BINCOUNT_ELEMENTS",
    "BincountOp",
    "GatherOp",
    "ScatterOp",
    "accessed_type",
    "check_index_tile",
    "index_is_per_row",
]

INDEX_ELEMENTS = (IntegerType(32), IntegerType(64))

_VECTOR_DOC = "elements per memory access along the last dimension (vectorize); default 1"
_IN_BOUNDS_DOC = (
    "per dimension, true where the tile is known to lie inside the view's extent (vectorize; "
    "never the gathered dimension)"
)


def index_is_per_row(indices: Type) -> bool:
    """Whether a gather's index tile is 1-D (one index per position along its axis)."""
    return isinstance(indices, TileType) and indices.rank == 1


def accessed_type(op: Operation) -> TileType:
    """The tile a gather reads or a scatter writes."""
    return op.result.type if isinstance(op, GatherOp) else op.value.type


def check_index_tile(
    op: Operation, view: Value, offsets: list[Value], indices: Value, axis: int, tile: Type
) -> None:
    """The verifier of an access indexed by a tile along `axis` (gathers, scatters, and any
    other op that reads or writes a gathered region, such as an atomic on one): the access's
    rank, element and mask rules are `tile.load`'s; the index tile is an integer tile, 1-D of
    the accessed tile's size along `axis`, or of its shape."""
    from tilec.dialects.tile import _check_access, dims_match, shapes_match

    what = "result" if isinstance(op, GatherOp) else "value"
    _check_access(op, view, offsets, tile, what)
    if not 0 <= axis < view.type.rank:
        raise op.error(f"axis {axis} is out of range for {view.type}")
    t = indices.type
    if not isinstance(t, TileType) or t.element not in INDEX_ELEMENTS:
        raise op.error(f"indices must be a tile of i32 or i64, got {t}")
    if t.rank == 1:
        if not dims_match(t.shape[0], tile.shape[axis]):
            raise op.error(f"1-D indices {t} must have the size of dim {axis} of the {what} {tile}")
    elif not shapes_match(t.shape, tile.shape):
        raise op.error(f"indices {t} must be 1-D or have the shape of the {what} {tile}")


def _check_flags(op: Operation, rank: int, axis: int) -> None:
    in_bounds = op.attributes.get("in_bounds")
    if in_bounds is None:
        return
    flags = in_bounds.elements
    if len(flags) != rank or not all(isinstance(f, BoolAttr) for f in flags):
        raise op.error(f"in_bounds must hold {rank} booleans, one per dimension of the view")
    if flags[axis].value:
        raise op.error(f"in_bounds cannot promise the gathered dim {axis}: its indices decide")


@register_op
class GatherOp(Operation):
    """Load a tile whose positions along `axis` are the elements `offsets[axis] + indices`.

    Out-of-range indices and masked or out-of-extent lanes read `padding` (default 0); the
    interpreter reports an out-of-range index where the mask holds.
    """

    name = "tile.gather"
    summary = "Load a tile whose rows along `axis` are chosen by an integer tile."
    view = Operand(TENSOR)
    offsets = Operand(INDEX, variadic=True)
    indices = Operand(TILE)
    mask = Operand(BOOL_LIKE, optional=True)
    axis = Attr(IntegerAttr)
    padding = Attr((FloatAttr, IntegerAttr, BoolAttr), optional=True, doc="default 0")
    vector = Attr(IntegerAttr, optional=True, doc=_VECTOR_DOC)
    in_bounds = Attr(ArrayAttr, optional=True, doc=_IN_BOUNDS_DOC)
    result = Result(TILE)
    assembly_format = (
        "$view `[` $offsets `]` `,` $indices `axis` $axis (`,` `mask` $mask)? attr-dict "
        "`:` type($view) `,` type($indices) `->` type($result)"
    )

    def verify_(self) -> None:
        from tilec.dialects.tile import _check_mask

        check_index_tile(self, self.view, self.offsets, self.indices, self.axis, self.result.type)
        _check_mask(self, self.mask, self.result.type.shape)
        _check_flags(self, self.view.type.rank, self.axis)
        padding = self.attributes.get("padding")
        if padding is not None:
            check_constant_fits(self, padding, self.result.type.element, "padding")


@register_op
class ScatterOp(Operation):
    """Store a tile whose positions along `axis` are the elements `offsets[axis] + indices`.

    Out-of-range indices and masked or out-of-extent lanes are not written; the interpreter
    reports an out-of-range index where the mask holds.
    """

    name = "tile.scatter"
    summary = "Store a tile whose rows along `axis` are chosen by an integer tile."
    view = Operand(TENSOR)
    offsets = Operand(INDEX, variadic=True)
    indices = Operand(TILE)
    value = Operand(TILE)
    mask = Operand(BOOL_LIKE, optional=True)
    axis = Attr(IntegerAttr)
    vector = Attr(IntegerAttr, optional=True, doc=_VECTOR_DOC)
    in_bounds = Attr(ArrayAttr, optional=True, doc=_IN_BOUNDS_DOC)
    assembly_format = (
        "$view `[` $offsets `]` `,` $indices `axis` $axis `,` $value (`,` `mask` $mask)? "
        "attr-dict `:` type($view) `,` type($indices) `,` type($value)"
    )

    def verify_(self) -> None:
        from tilec.dialects.tile import _check_mask

        check_index_tile(self, self.view, self.offsets, self.indices, self.axis, self.value.type)
        _check_mask(self, self.mask, self.value.type.shape)
        _check_flags(self, self.view.type.rank, self.axis)


# What a per-block count accumulates: the elements shared memory's `red.add` takes.
BINCOUNT_ELEMENTS = (IntegerType(32), FloatType("f32"))


@register_op
class BincountOp(Operation):
    """Per-block sums of `values` by bin: result element `b` is the sum of the lanes of
    `values` whose `indices` element is `b` (and whose `mask` holds), for `0 <= b < P`, P the
    result's static size. Lanes whose index lies outside `[0, P)` add nothing. Integer sums
    wrap; float sums are added in no fixed order.

    What `privatize-atomics` makes of a histogram's scatter-add: the block counts in shared
    memory (`red.shared.add`) and adds the counts to memory once.
    """

    name = "tile.bincount"
    summary = "Per-block sums of a tile's lanes by an integer tile of bin numbers."
    indices = Operand(TILE)
    values = Operand(TILE)
    mask = Operand(BOOL_LIKE, optional=True)
    result = Result(TILE)
    traits = (Pure,)
    assembly_format = (
        "$indices `,` $values (`,` `mask` $mask)? attr-dict `:` type($indices) `,` "
        "type($values) `->` type($result)"
    )

    def verify_(self) -> None:
        from tilec.dialects.tile import _check_mask, shapes_match

        i, v, r = self.indices.type, self.values.type, self.result.type
        if not isinstance(i, TileType) or i.element not in INDEX_ELEMENTS:
            raise self.error(f"indices must be a tile of i32 or i64, got {i}")
        if not isinstance(v, TileType) or not shapes_match(i.shape, v.shape):
            raise self.error(f"values {v} must have the shape of the indices {i}")
        if v.element not in BINCOUNT_ELEMENTS:
            names = ", ".join(str(t) for t in BINCOUNT_ELEMENTS)
            raise self.error(f"bincount of {v.element} is not supported (supported: {names})")
        _check_mask(self, self.mask, i.shape)
        if not isinstance(r, TileType) or r.rank != 1 or not isinstance(r.shape[0], int):
            raise self.error(f"result {r} must be a 1-D tile of static size (the bins)")
        if r.element != v.element:
            raise self.error(f"result element {r.element} differs from the values' {v.element}")
