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
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tilec.ir.attributes import (
    ArrayAttr,
    Attribute,
    BoolAttr,
    FloatAttr,
    IntegerAttr,
    ParametricAttr,
    StringAttr,
    parametric_attr,
)
from tilec.ir.constraints import BOOL_LIKE, INDEX, NUMERIC_LIKE, SCALAR, TENSOR, TILE
from tilec.ir.core import (
    Attr,
    ConstantLike,
    Operand,
    Operation,
    OpResult,
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
    ShapedType,
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
# Layout attributes (the blocked layout lives in tilec.ir.attributes)


@parametric_attr
@dataclass(frozen=True, slots=True)
class MmaLayout(ParametricAttr):
    """The accumulator layout of tensor-core instructions (`mma.sync`, `wgmma`).

    `version`: 2 for Ampere `mma.sync`, 3 for Hopper `wgmma`; `warps_per_cta`: how the block's
    warps tile the accumulator; `instr_shape`: one instruction's M, N, K (e.g. 16, 8, 16).
    """

    mnemonic: ClassVar[str] = "mma"
    version: int
    warps_per_cta: tuple[int, ...]
    instr_shape: tuple[int, ...]


@parametric_attr
@dataclass(frozen=True, slots=True)
class SharedLayout(ParametricAttr):
    """A swizzled shared-memory layout (XOR swizzle against bank conflicts).

    Rows of `vec` contiguous elements are XOR-ed with `(row / per_phase) % max_phase`;
    `order` lists dimensions from fastest- to slowest-varying. `vec = 1, max_phase = 1` is no
    swizzle.
    """

    mnemonic: ClassVar[str] = "shared"
    vec: int
    per_phase: int
    max_phase: int
    order: tuple[int, ...]
    # wgmma operands (`tilec.lowering.wgmma`): `interleave = 2` stores the slot's 8-row
    # group L of G at position 2 (L mod G/2) + L div G/2, the row order of a wgmma accumulator
    # whose warps hold 8-row groups G/2 apart; `col_block = n` stores the last dimension in
    # blocks of n elements, each block holding every row (the N-major operand's 128-byte atoms).
    interleave: int = 1
    col_block: int = 0


@parametric_attr
@dataclass(frozen=True, slots=True)
class DotOperandLayout(ParametricAttr):
    """An operand of a tensor-core `tile.dot`, held in registers as `mma.sync` fragments.

    `index` 0 is the left operand (M x K), 1 the right one (K x N); `warps_per_cta` are those
    of the dot's `#mma` accumulator. Each warp holds the rows of A (columns of B) that its
    accumulator elements need, for all of K, as m16n8k16 fragments in the register order
    `tilec.lowering.tensorcore` documents.
    """

    mnemonic: ClassVar[str] = "dot_operand"
    index: int
    warps_per_cta: tuple[int, ...]
    # 3: the operand of a `wgmma` dot, read by the tensor cores from its shared buffer (the
    # value is that buffer's slot, no registers).
    version: int = 2


@parametric_attr
@dataclass(frozen=True, slots=True)
class SliceLayout(ParametricAttr):
    """The `parent` layout with dimension `dim` removed (Triton's slice layout).

    A tile of rank r-1 in `#slice<dim = d, parent = P>` is held as a tile of rank r in `P` with
    a size-1 dimension inserted at `d`: each element is held by every thread that held its row
    (or column) of the parent, i.e. replicated over the lanes and warps that `P` spreads along
    `d`. A reduction along `d` leaves its result here, and `tile.expand_dims` at `d` gives back
    `P`, so a reduced value is broadcast back without moving between threads.
    `tilec.lowering.layouts.ThreadMap` states the arithmetic.
    """

    mnemonic: ClassVar[str] = "slice"
    dim: int
    parent: Attribute


# ---------------------------------------------------------------------------------------------
# Shape helpers


def shape_of(t: Type) -> tuple[Dim, ...]:
    """The shape of a tile (or view); `()` for a scalar."""
    return t.shape if isinstance(t, ShapedType) else ()


def dims_match(a: Dim, b: Dim) -> bool:
    """Whether two dimensions are the same size: equal, or either unknown (`?`)."""
    return a == b or a is None or b is None


def shapes_match(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> bool:
    return len(a) == len(b) and all(dims_match(x, y) for x, y in zip(a, b))


def _shape_text(shape: tuple[Dim, ...]) -> str:
    return "x".join("?" if d is None else str(d) for d in shape) or "scalar"


def _same_shape_and_element(a: Type, b: Type) -> bool:
    return shapes_match(shape_of(a), shape_of(b)) and element_type(a) == element_type(b)


def _splat_constant(v: Value, t: Type) -> Attribute | None:
    """The constant that `v` holds in every element, as an attribute of `t`'s element type
    (None if `v` is not a constant or the value cannot be represented exactly)."""
    attr = constant_value(v)
    if attr is None:
        return None
    if isinstance(element_type(t), FloatType) and isinstance(attr, FloatAttr):
        return attr  # as it is (also for bf16, which numpy may lack)
    # Normalize the rest: integers wrap into range, i1 becomes a bool, and an integer constant
    # of a float type (arith.constant allows it) rounds as the element type does.
    x = to_numpy_scalar(attr, t)
    return None if x is None else from_numpy_scalar(x, t)


def _same_or_none(value: Value, t: Type) -> list[Attribute | Value] | None:
    return [value] if value.type == t else None


def _fold_rearrangement(op: Operation) -> list[Attribute | Value] | None:
    """The fold of an op that only moves `op.input`'s elements around (splat, broadcast,
    expand_dims, reshape, transpose, convert_layout): the input itself when the type does not
    change, the constant when the input is a constant tile or scalar."""
    same = _same_or_none(op.input, op.result.type)
    if same is not None:
        return same
    c = _splat_constant(op.input, op.result.type)
    return None if c is None else [c]


def _check_axis(op: Operation, rank: int, *, inserting: bool = False) -> int:
    """`op`'s `axis` attribute, checked against `rank` (an op that inserts a dimension may
    also name the position after the last one)."""
    axis = op.attributes["axis"].value
    last = rank if inserting else rank - 1
    if not 0 <= axis <= last:
        raise op.error(f"axis {axis} is out of range for rank {rank} (expected 0..{last})")
    return axis


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
        _check_axis(self, self.view.type.rank)

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
        raise op.error(f"mask must be a tile of i1 shaped {_shape_text(shape)}, got {t}")


# Set by the vectorize pass (passes/vectorize.py), read by the lowering.
_VECTOR_DOC = "elements per memory access along the last dimension (vectorize); default 1"
_IN_BOUNDS_DOC = (
    "per dimension, true where the tile is known to lie inside the view's extent (vectorize): "
    "no bounds check there; the interpreter checks the promise"
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
            raise self.error(f"element type {a.element} is not supported (f16, bf16, f32, f64, i8)")
        if acc.element != expected_acc:
            raise self.error(
                f"accumulator must be {expected_acc} for {a.element} operands, got {acc.element}"
            )
        (m, k), (k2, n), (m2, n2) = a.shape, b.shape, acc.shape
        if not dims_match(k, k2):
            raise self.error(
                f"'a' is {_shape_text(a.shape)} and 'b' is {_shape_text(b.shape)}: "
                f"K differs ({k} vs {k2})"
            )
        if not (dims_match(m, m2) and dims_match(n, n2)):
            raise self.error(
                f"accumulator must be {_shape_text((m, n))} (M of 'a' x N of 'b'), "
                f"got {_shape_text(acc.shape)}"
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
        axis = _check_axis(self, t.rank)
        expected = self.reduced_type(t, axis)
        if not _same_shape_and_element(self.result.type, expected) or (
            is_scalar(expected) != is_scalar(self.result.type)
        ):
            raise self.error(
                f"reducing {t} along axis {axis} gives {expected}, but the result is "
                f"{self.result.type}"
            )


# ---------------------------------------------------------------------------------------------
# Shapes


@register_op
class BroadcastOp(Operation):
    """Stretch the size-1 dimensions of a tile to the result's sizes (same rank)."""

    name = "tile.broadcast"
    summary = "Broadcast size-1 dimensions of a tile to larger sizes (same rank)."
    input = Operand(TILE)
    result = Result(TILE)
    traits = (Pure,)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        src, dst = self.input.type, self.result.type
        if src.element != dst.element:
            raise self.error(f"element type changes from {src.element} to {dst.element}")
        if src.rank != dst.rank:
            raise self.error(
                f"cannot broadcast {src} to {dst}: ranks differ",
                hint="add dimensions with 'tile.expand_dims' first",
            )
        for i, (s, d) in enumerate(zip(src.shape, dst.shape)):
            if s != 1 and not dims_match(s, d):
                raise self.error(
                    f"cannot broadcast {src} to {dst}: dimension {i} is {s}, not 1 or {d}"
                )

    def fold(self):
        return _fold_rearrangement(self)


@register_op
class SplatOp(Operation):
    """A tile whose every element is the scalar `input`."""

    name = "tile.splat"
    summary = "A tile filled with a scalar value."
    input = Operand(SCALAR)
    result = Result(TILE)
    traits = (Pure,)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        if self.result.type.element != self.input.type:
            raise self.error(
                f"result element type {self.result.type.element} must be the scalar's type "
                f"{self.input.type}"
            )

    def fold(self):
        return _fold_rearrangement(self)


@register_op
class ExpandDimsOp(Operation):
    """Insert a dimension of size 1 at `axis` (0..rank)."""

    name = "tile.expand_dims"
    summary = "Insert a size-1 dimension at an axis."
    input = Operand(TILE)
    axis = Attr(IntegerAttr)
    result = Result(TILE)
    traits = (Pure,)
    assembly_format = "$input `axis` $axis attr-dict `:` type($input) `->` type($result)"

    @staticmethod
    def expanded_type(t: TileType, axis: int) -> TileType:
        if not 0 <= axis <= t.rank:
            raise ValueError(f"axis {axis} is out of range for {t}")
        return TileType((*t.shape[:axis], 1, *t.shape[axis:]), t.element)

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [cls.expanded_type(operands[0].type, attributes["axis"].value)]

    def verify_(self) -> None:
        t = self.input.type
        axis = _check_axis(self, t.rank, inserting=True)
        expected = self.expanded_type(t, axis)
        if not _same_shape_and_element(self.result.type, expected):
            raise self.error(
                f"inserting axis {axis} into {t} gives {expected}, but the result is "
                f"{self.result.type}"
            )

    def fold(self):
        return _fold_rearrangement(self)


def _element_counts_match(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> bool:
    if all(isinstance(d, int) for d in (*a, *b)):
        return math.prod(a) == math.prod(b)  # type: ignore[arg-type]
    # With symbols the sizes are unknown: require the same dimensions, regrouped only by
    # adding or removing 1s (BMx1xBN <-> BMxBN), which is what the frontend produces.
    return Counter(d for d in a if d != 1) == Counter(d for d in b if d != 1)


@register_op
class ReshapeOp(Operation):
    """Reinterpret a tile's elements (in row-major order) with another shape of the same size.

    With symbolic sizes the two shapes must have the same dimensions other than 1s.
    """

    name = "tile.reshape"
    summary = "Give a tile another shape with the same number of elements (row-major)."
    input = Operand(TILE)
    result = Result(TILE)
    traits = (Pure,)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        src, dst = self.input.type, self.result.type
        if src.element != dst.element:
            raise self.error(f"element type changes from {src.element} to {dst.element}")
        if not _element_counts_match(src.shape, dst.shape):
            raise self.error(
                f"cannot reshape {_shape_text(src.shape)} to {_shape_text(dst.shape)}: "
                "the number of elements differs"
            )

    def fold(self):
        return _fold_rearrangement(self)


@register_op
class TransposeOp(Operation):
    """Permute a tile's dimensions: result dimension `i` is input dimension `perm[i]`."""

    name = "tile.transpose"
    summary = "Permute the dimensions of a tile (result dim i = input dim perm[i])."
    input = Operand(TILE)
    perm = Attr(ArrayAttr)
    result = Result(TILE)
    traits = (Pure,)
    assembly_format = "$input `perm` $perm attr-dict `:` type($input) `->` type($result)"

    @staticmethod
    def transposed_type(t: TileType, perm: tuple[int, ...]) -> TileType:
        if sorted(perm) != list(range(t.rank)):
            raise ValueError(f"{list(perm)} is not a permutation of the dimensions of {t}")
        return TileType(tuple(t.shape[p] for p in perm), t.element)

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [cls.transposed_type(operands[0].type, attributes["perm"].value)]

    def verify_(self) -> None:
        t = self.input.type
        perm = self.attributes["perm"]
        if not all(type(e) is IntegerAttr for e in perm.elements) or sorted(self.perm) != list(
            range(t.rank)
        ):
            raise self.error(f"perm {perm} is not a permutation of 0..{t.rank - 1}")
        expected = self.transposed_type(t, self.perm)
        if not _same_shape_and_element(self.result.type, expected):
            raise self.error(
                f"transposing {t} by {perm} gives {expected}, but the result is {self.result.type}"
            )

    def fold(self):
        perm = self.perm
        if list(perm) == list(range(len(perm))):
            return _same_or_none(self.input, self.result.type)
        inner = self.input
        if isinstance(inner, OpResult) and isinstance(inner.op, TransposeOp):
            inner_perm = inner.op.perm
            # result dim i = inner input dim inner_perm[perm[i]]: identity means undone.
            if all(inner_perm[p] == i for i, p in enumerate(perm)):
                return _same_or_none(inner.op.input, self.result.type)
        # Not `_fold_rearrangement`: a square tile's transpose has its input's type and is
        # still a transpose. Only a constant tile is its own transpose.
        c = _splat_constant(self.input, self.result.type)
        return None if c is None else [c]


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

    Float narrowing rounds to nearest even; float to integer truncates toward zero and
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
        same = _same_or_none(self.input, self.result.type)
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
                f"({_shape_text(shape_of(t))})"
            )

    def fold(self):
        if self.true_value is self.false_value:
            return [self.true_value]
        c = constant_value(self.condition)
        if c is None:
            return None
        return [self.true_value if c.value else self.false_value]


@register_op
class ConvertLayoutOp(Operation):
    """The same tile held in another layout (moves data between threads, maybe via shared
    memory). Shape and element type do not change."""

    name = "tile.convert_layout"
    summary = "Change the layout of a tile (same shape and element type)."
    input = Operand(TILE)
    result = Result(TILE)
    traits = (Pure,)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        src, dst = self.input.type, self.result.type
        if src.shape != dst.shape or src.element != dst.element:
            raise self.error(
                f"may change only the layout, got {src} -> {dst}",
                hint="use 'tile.cast' for the element type, 'tile.reshape' for the shape",
            )

    def fold(self):
        same = _same_or_none(self.input, self.result.type)
        if same is not None:
            return same
        inner = self.input
        if isinstance(inner, OpResult) and isinstance(inner.op, ConvertLayoutOp):
            same = _same_or_none(inner.op.input, self.result.type)
            if same is not None:
                return same
        return _fold_rearrangement(self)
