"""The `tile` dialect: block-level tile operations, the frontend's output.

At this level a kernel is written for one logical thread per block: each value is a scalar or
a whole tile (`tile<BMxBKxf16>`), and tile sizes may still be symbols that tiling later fixes.
Global memory is reached only through tensor views (`!tile.tensor<MxKxf16>`), whose extents
and strides are known at launch. Bounds are handled by the loads and stores themselves:
elements outside a view's runtime extents are never read or written.

    %pid = tile.program_id 0
    %bm = tile.symbol "BM"
    %m = tile.dim %A, 0
    %a = tile.load %A[%row, %k], mask %ok {padding = 0.0} : !tile.tensor<MxKxf16> -> tile<BMxBKxf16>
    %c = tile.dot %a, %b, %acc : tile<BMxBKxf16>, tile<BKxBNxf16>, tile<BMxBNxf32> -> tile<BMxBNxf32>
    %s = tile.reduce sum %c axis 1 : tile<BMxBNxf32> -> tile<BMxf32>
    %z = tile.full 0.0 : tile<BMxBNxf32>
    %i = tile.iota : tile<BNxi32>
    %e = tile.expand_dims %s axis 1 : tile<BMxf32> -> tile<BMx1xf32>
    %w = tile.broadcast %e : tile<BMx1xf32> -> tile<BMxBNxf32>
    %v = tile.splat %x : f32 -> tile<BMxBNxf32>
    %r = tile.reshape %w : tile<BMxBNxf32> -> tile<BNxBMxf32>
    %t = tile.transpose %w perm [1, 0] : tile<BMxBNxf32> -> tile<BNxBMxf32>
    %h = tile.cast %c : tile<BMxBNxf32> -> tile<BMxBNxf16>
    %y = tile.select %mask, %c, %z : tile<BMxBNxf32>
    %l = tile.convert_layout %c : tile<BMxBNxf32, #blocked<...>> -> tile<BMxBNxf32, #mma<...>>
    tile.store %C[%row, %col], %c, mask %mask : !tile.tensor<MxNxf32>, tile<BMxBNxf32>

Shapes are compared dimension by dimension: integers by value, symbols by name (`BM` and `BN`
are different even if tiling later gives them the same value), and `?` matches anything.
Layouts (`tile<128x64xf16, #blocked<...>>`) are part of a tile's type; ops that compute a new
shape do not care which layout their result has, and changing the layout of a value is always
the explicit `tile.convert_layout`.

This module holds the grid queries, memory, compute and value ops, and is the dialect's
public face: it re-exports the layout attributes (`tile_layouts`) and the shape rules and
element-moving ops (`tile_shapes`: broadcast, splat, expand_dims, reshape, transpose,
convert_layout), so `from tilec.dialects import tile as T` reaches every op.
"""

from __future__ import annotations

import numpy as np

from tilec.dialects.tile_layouts import DotOperandLayout, MmaLayout, SharedLayout, SliceLayout
from tilec.dialects.tile_shapes import (
    BroadcastOp,
    ConvertLayoutOp,
    ExpandDimsOp,
    ReshapeOp,
    SplatOp,
    TransposeOp,
    check_axis,
    dims_match,
    same_or_none,
    same_shape_and_element,
    shape_of,
    shape_text,
    shapes_match,
)
from tilec.ir.attributes import (
    ArrayAttr,
    Attribute,
    BoolAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
)
from tilec.ir.constraints import BOOL_LIKE, INDEX, NUMERIC_LIKE, TENSOR, TILE
from tilec.ir.core import (
    Attr,
    ConstantLike,
    Operand,
    Operation,
    Pure,
    Result,
    Value,
    register_op,
)
from tilec.ir.folding import (
    check_constant_fits,
    constant_value,
    from_numpy_scalar,
    numpy_dtype,
    to_numpy_scalar,
)
from tilec.ir.types import (
    SYMBOL_RE,
    Dim,
    FloatType,
    IndexType,
    IntegerType,
    TileType,
    Type,
    element_type,
    f32,
    i1,
    i32,
    index,
    is_scalar,
)

__all__ = [
    "REDUCE_KINDS",
    "BroadcastOp",
    "CastOp",
    "ConvertLayoutOp",
    "DimOp",
    "DotOp",
    "DotOperandLayout",
    "ExpandDimsOp",
    "FullOp",
    "IotaOp",
    "LoadOp",
    "MmaLayout",
    "NumProgramsOp",
    "ProgramIdOp",
    "ReduceOp",
    "ReshapeOp",
    "SelectOp",
    "SharedLayout",
    "SliceLayout",
    "SplatOp",
    "StoreOp",
    "SymbolOp",
    "TransposeOp",
]

# ---------------------------------------------------------------------------------------------
# Where this block is


class _GridQuery(Operation):
    axis = Attr(IntegerAttr, doc="grid axis: 0, 1 or 2")
    result = Result(INDEX)
    traits = (Pure,)
    assembly_format = "$axis attr-dict"

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [index]

    def verify_(self) -> None:
        if self.axis not in (0, 1, 2):
            raise self.error(f"axis must be 0, 1 or 2, got {self.axis}")


@register_op
class ProgramIdOp(_GridQuery):
    """This block's coordinate along `axis` (0, 1 or 2) of the launch grid."""

    name = "tile.program_id"
    summary = "This block's coordinate in the launch grid along an axis (0..2)."


@register_op
class NumProgramsOp(_GridQuery):
    """The number of blocks along `axis` of the launch grid."""

    name = "tile.num_programs"
    summary = "The number of blocks in the launch grid along an axis (0..2)."


@register_op
class DimOp(Operation):
    """The runtime extent of dimension `axis` of a tensor view (known at launch)."""

    name = "tile.dim"
    summary = "The runtime extent of one dimension of a tensor view."
    view = Operand(TENSOR)
    axis = Attr(IntegerAttr)
    result = Result(INDEX)
    traits = (Pure,)
    assembly_format = "$view `,` $axis attr-dict"

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [index]

    def verify_(self) -> None:
        check_axis(self, self.view.type.rank)

    def fold(self):
        d = self.view.type.shape[self.axis]
        # A static extent in the view type is a promise about every launch.
        return [IntegerAttr(d)] if isinstance(d, int) else None


@register_op
class SymbolOp(Operation):
    """The value of a symbolic tile size such as `BM` (the names used in tile types).

    Tiling replaces it with a constant once it has chosen the size.
    """

    name = "tile.symbol"
    summary = "The value of a symbolic tile size (replaced by a constant at tiling)."
    symbol = Attr(StringAttr, doc="a symbol name, [A-Z][A-Z0-9_]*")
    result = Result(INDEX)
    traits = (Pure,)
    assembly_format = "$symbol attr-dict"

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [index]

    def verify_(self) -> None:
        if not SYMBOL_RE.fullmatch(self.symbol):
            raise self.error(
                f"'{self.symbol}' is not a symbol name",
                hint="symbols are upper case: [A-Z][A-Z0-9_]*, e.g. BM",
            )


# ---------------------------------------------------------------------------------------------
# Memory


def _check_access(
    op: Operation, view: Value, offsets: list[Value], tile_type: Type, what: str
) -> None:
    view_type = view.type
    if len(offsets) != view_type.rank:
        raise op.error(
            f"needs {view_type.rank} offset(s), one per dimension of {view_type}, "
            f"but has {len(offsets)}"
        )
    if not isinstance(tile_type, TileType):
        raise op.error(f"{what} must be a tile, got {tile_type}")
    if tile_type.rank != view_type.rank:
        raise op.error(f"{what} {tile_type} must have the rank of the view {view_type}")
    if tile_type.element != view_type.element:
        raise op.error(
            f"{what} element type {tile_type.element} differs from the view's {view_type.element}",
            hint="convert with 'tile.cast' first" if what == "value" else None,
        )


def _check_mask(op: Operation, mask: Value | None, shape: tuple[Dim, ...]) -> None:
    if mask is None:
        return
    t = mask.type
    if not (isinstance(t, TileType) and t.element == i1 and shapes_match(t.shape, shape)):
        raise op.error(f"mask must be a tile of i1 shaped {shape_text(shape)}, got {t}")


# Set by the vectorize pass (passes/vectorize.py), read by the lowering.
_VECTOR_DOC = "elements per memory access along the last dimension (vectorize); default 1"
_IN_BOUNDS_DOC = (
    "per dimension, true where the tile is known to lie inside the view's extent (vectorize): "
    "no bounds check there; the interpreter checks the promise"
)
_FRAME_DOC = (
    "the access's row starts, when its tensor is contiguous and 16-byte aligned, at a multiple "
    "of this many elements (align-rows): vectorize may give it runs checked at run time"
)
_CHECKED_DOC = (
    "each run of `vector` elements moves in one access only where its address is aligned and "
    "all its elements are inside (checked at run time), else element by element (vectorize)"
)


def _check_in_bounds(op: Operation, rank: int) -> None:
    in_bounds = op.attributes.get("in_bounds")
    if in_bounds is None:
        return
    flags = in_bounds.elements
    if len(flags) != rank or not all(isinstance(f, BoolAttr) for f in flags):
        raise op.error(f"in_bounds must hold {rank} booleans, one per dimension of the view")


@register_op
class LoadOp(Operation):
    """Load the tile whose shape is the result type from a tensor view.

    The tile starts at element `offsets` (one index per view dimension). Elements outside the
    view's runtime extents are not read and take `padding` (default 0); where the optional
    i1 `mask` is false they also take `padding`.
    """

    name = "tile.load"
    summary = "Load a tile from a tensor view at element offsets (out of bounds: padding)."
    view = Operand(TENSOR)
    offsets = Operand(INDEX, variadic=True)
    mask = Operand(BOOL_LIKE, optional=True)
    padding = Attr((FloatAttr, IntegerAttr, BoolAttr), optional=True, doc="default 0")
    vector = Attr(IntegerAttr, optional=True, doc=_VECTOR_DOC)
    in_bounds = Attr(ArrayAttr, optional=True, doc=_IN_BOUNDS_DOC)
    frame = Attr(IntegerAttr, optional=True, doc=_FRAME_DOC)
    checked = Attr(BoolAttr, optional=True, doc=_CHECKED_DOC)
    result = Result(TILE)
    assembly_format = (
        "$view `[` $offsets `]` (`,` `mask` $mask)? attr-dict `:` type($view) `->` type($result)"
    )

    def verify_(self) -> None:
        _check_access(self, self.view, self.offsets, self.result.type, "result")
        _check_mask(self, self.mask, self.result.type.shape)
        _check_in_bounds(self, self.view.type.rank)
        padding = self.attributes.get("padding")
        if padding is not None:
            check_constant_fits(self, padding, self.result.type.element, "padding")


@register_op
class StoreOp(Operation):
    """Store a tile into a tensor view at element `offsets`.

    Only elements inside the view's runtime extents (and where the optional `mask` is true)
    are written. The value's element type must be the view's: the frontend inserts casts.
    """

    name = "tile.store"
    summary = "Store a tile into a tensor view at element offsets (in-bounds elements only)."
    view = Operand(TENSOR)
    offsets = Operand(INDEX, variadic=True)
    value = Operand(TILE)
    mask = Operand(BOOL_LIKE, optional=True)
    vector = Attr(IntegerAttr, optional=True, doc=_VECTOR_DOC)
    in_bounds = Attr(ArrayAttr, optional=True, doc=_IN_BOUNDS_DOC)
    frame = Attr(IntegerAttr, optional=True, doc=_FRAME_DOC)
    checked = Attr(BoolAttr, optional=True, doc=_CHECKED_DOC)
    assembly_format = (
        "$view `[` $offsets `]` `,` $value (`,` `mask` $mask)? attr-dict "
        "`:` type($view) `,` type($value)"
    )

    def verify_(self) -> None:
        _check_access(self, self.view, self.offsets, self.value.type, "value")
        _check_mask(self, self.mask, self.value.type.shape)
        _check_in_bounds(self, self.view.type.rank)


# ---------------------------------------------------------------------------------------------
# Compute

# Element types a dot takes, and the accumulator each needs.
_DOT_ACCUMULATORS: dict[Type, Type] = {
    FloatType("f8e4m3"): f32,
    FloatType("f8e5m2"): f32,
    FloatType("f16"): f32,
    FloatType("bf16"): f32,
    f32: f32,
    FloatType("f64"): FloatType("f64"),
    IntegerType(8): i32,
}


@register_op
class DotOp(Operation):
    """`a @ b + acc`: a matrix product of an MxK and a KxN tile, accumulated into MxN `acc`.

    `a` and `b` have the same element type (f16, bf16, f32, f64 or i8); the accumulator is f32,
    or f64 for f64 and i32 for i8. The result has the accumulator's type. The products are
    summed in the accumulator's type, in an unspecified order.
    """

    name = "tile.dot"
    summary = "Matrix product of two tiles accumulated into a third (a @ b + acc)."
    a = Operand(TILE)
    b = Operand(TILE)
    acc = Operand(TILE)
    result = Result(TILE)
    traits = (Pure,)
    assembly_format = (
        "$a `,` $b `,` $acc attr-dict `:` type($a) `,` type($b) `,` type($acc) `->` type($result)"
    )

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [operands[2].type]

    def verify_(self) -> None:
        a, b, acc = self.a.type, self.b.type, self.acc.type
        for label, t in (("a", a), ("b", b), ("acc", acc)):
            if t.rank != 2:
                raise self.error(f"operand '{label}' must be a 2-D tile, got {t}")
        if a.element != b.element:
            raise self.error(
                f"'a' and 'b' must have the same element type, got {a.element} and {b.element}"
            )
        expected_acc = _DOT_ACCUMULATORS.get(a.element)
        if expected_acc is None:
            raise self.error(
                f"element type {a.element} is not supported (f8e4m3, f8e5m2, f16, bf16, f32, f64, i8)"
            )
        if acc.element != expected_acc:
            raise self.error(
                f"accumulator must be {expected_acc} for {a.element} operands, got {acc.element}"
            )
        (m, k), (k2, n), (m2, n2) = a.shape, b.shape, acc.shape
        if not dims_match(k, k2):
            raise self.error(
                f"'a' is {shape_text(a.shape)} and 'b' is {shape_text(b.shape)}: "
                f"K differs ({k} vs {k2})"
            )
        if not (dims_match(m, m2) and dims_match(n, n2)):
            raise self.error(
                f"accumulator must be {shape_text((m, n))} (M of 'a' x N of 'b'), "
                f"got {shape_text(acc.shape)}"
            )
        if self.result.type != acc:
            raise self.error(f"result type {self.result.type} must be the accumulator's type {acc}")


REDUCE_KINDS = ("sum", "max", "min", "prod")


@register_op
class ReduceOp(Operation):
    """Combine the elements of a tile along `axis` with `kind` (sum, max, min, prod).

    The result drops that axis; reducing a 1-D tile gives a scalar. Float max/min return NaN
    if any element is NaN; integer max/min are signed.
    """

    name = "tile.reduce"
    summary = "Reduce a tile along one axis (sum, max, min, prod); the axis is dropped."
    kind = Attr(StringAttr, choices=REDUCE_KINDS)
    input = Operand(TILE)
    axis = Attr(IntegerAttr)
    result = Result(NUMERIC_LIKE)
    traits = (Pure,)
    assembly_format = "$kind $input `axis` $axis attr-dict `:` type($input) `->` type($result)"

    @staticmethod
    def reduced_type(t: TileType, axis: int) -> Type:
        """The type of reducing `t` along `axis` (a scalar when `t` is 1-D)."""
        if not 0 <= axis < t.rank:
            raise ValueError(f"axis {axis} is out of range for {t}")
        shape = t.shape[:axis] + t.shape[axis + 1 :]
        return TileType(shape, t.element) if shape else t.element

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [cls.reduced_type(operands[0].type, attributes["axis"].value)]

    def verify_(self) -> None:
        t = self.input.type
        axis = check_axis(self, t.rank)
        expected = self.reduced_type(t, axis)
        if not same_shape_and_element(self.result.type, expected) or (
            is_scalar(expected) != is_scalar(self.result.type)
        ):
            raise self.error(
                f"reducing {t} along axis {axis} gives {expected}, but the result is "
                f"{self.result.type}"
            )


# ---------------------------------------------------------------------------------------------
# Values


@register_op
class FullOp(Operation):
    """A tile with every element equal to `value` (a float for float tiles)."""

    name = "tile.full"
    summary = "A constant tile: every element is the same value."
    value = Attr((FloatAttr, IntegerAttr, BoolAttr))
    result = Result(TILE)
    traits = (Pure, ConstantLike)
    assembly_format = "$value attr-dict `:` type($result)"

    def verify_(self) -> None:
        check_constant_fits(self, self.attributes["value"], self.result.type.element, "value")

    def fold(self):
        return [self.attributes["value"]]


@register_op
class IotaOp(Operation):
    """The 1-D tile `0, 1, ..., n-1` (n: the result's size), of an integer element type."""

    name = "tile.iota"
    summary = "The 1-D integer tile 0, 1, ..., n-1."
    result = Result(TILE)
    traits = (Pure,)
    assembly_format = "attr-dict `:` type($result)"

    def verify_(self) -> None:
        t = self.result.type
        if t.rank != 1:
            raise self.error(f"result must be a 1-D tile, got {t}")
        if not isinstance(t.element, (IntegerType, IndexType)) or t.element == i1:
            raise self.error(f"result element type must be an integer wider than i1, got {t}")


def fold_cast(attr: Attribute, source: Type, target: Type) -> Attribute | None:
    """`attr` (an element of `source`) converted as `tile.cast` does to an element of
    `target`, or None when that is not exactly computable here (or undefined)."""
    src, dst = element_type(source), element_type(target)
    x = to_numpy_scalar(attr, src)
    if x is None or numpy_dtype(dst) is None:
        return None
    if isinstance(src, FloatType) and not isinstance(dst, FloatType):
        if dst == i1:
            return BoolAttr(bool(x != 0))
        if not np.isfinite(x):
            return None  # undefined: the hardware saturates, a fold must not guess
        truncated = int(x)  # toward zero
        info = np.iinfo(numpy_dtype(dst))
        if not info.min <= truncated <= info.max:
            return None
        return IntegerAttr(truncated)
    if not isinstance(src, FloatType) and isinstance(dst, FloatType) and abs(int(x)) >= 2**53:
        return None  # numpy would round twice (through f64)
    with np.errstate(all="ignore"):
        y = np.asarray(x).astype(numpy_dtype(dst))[()]
    return from_numpy_scalar(y, dst)


@register_op
class CastOp(Operation):
    """Convert each element to another element type (tiles of the same shape, or scalars).

    Float narrowing rounds to nearest even (to f8 it also saturates: beyond the largest finite
    value, and inf, give the largest finite value of the sign; NaN stays NaN); float to integer truncates toward zero and
    saturates to the integer's range (NaN gives 0, as `cvt.rzi` does); integer to integer sign-extends or wraps; to i1 means `!= 0`, from i1
    gives 0 or 1.
    """

    name = "tile.cast"
    summary = "Elementwise conversion to another element type (same shape)."
    input = Operand(NUMERIC_LIKE)
    result = Result(NUMERIC_LIKE)
    traits = (Pure,)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        src, dst = self.input.type, self.result.type
        if isinstance(src, TileType) != isinstance(dst, TileType) or not shapes_match(
            shape_of(src), shape_of(dst)
        ):
            raise self.error(
                f"input and result must have the same shape, got {src} and {dst}",
                hint="a cast only changes the element type",
            )

    def fold(self):
        same = same_or_none(self.input, self.result.type)
        if same is not None:
            return same
        c = constant_value(self.input)
        if c is None:
            return None
        folded = fold_cast(c, self.input.type, self.result.type)
        return None if folded is None else [folded]


@register_op
class SelectOp(Operation):
    """Elementwise choice: `true_value` where `condition` holds, else `false_value`.

    `condition` is an i1 tile of the values' shape (or a scalar i1 with scalar values).
    """

    name = "tile.select"
    summary = "Elementwise choice between two tiles by an i1 tile."
    condition = Operand(BOOL_LIKE)
    true_value = Operand(NUMERIC_LIKE)
    false_value = Operand(NUMERIC_LIKE)
    result = Result(NUMERIC_LIKE)
    traits = (Pure,)
    assembly_format = "$condition `,` $true_value `,` $false_value attr-dict `:` type($result)"

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [operands[1].type]

    def verify_(self) -> None:
        t = self.true_value.type
        if not (t == self.false_value.type == self.result.type):
            raise self.error(
                "both values and the result must have the same type, got "
                f"{t}, {self.false_value.type} -> {self.result.type}"
            )
        if not shapes_match(shape_of(self.condition.type), shape_of(t)) or (
            isinstance(self.condition.type, TileType) != isinstance(t, TileType)
        ):
            raise self.error(
                f"condition {self.condition.type} must have the shape of the values "
                f"({shape_text(shape_of(t))})"
            )

    def fold(self):
        if self.true_value is self.false_value:
            return [self.true_value]
        c = constant_value(self.condition)
        if c is None:
            return None
        return [self.true_value if c.value else self.false_value]
