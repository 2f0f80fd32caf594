"""The `tile` dialect's shape rules and the ops that only move elements around.

The helpers compare shapes dimension by dimension (integers by value, symbols by name, `?`
matches anything) and check axes; every op of the dialect uses them. The ops here change a
tile's shape or layout but not its elements: broadcast, splat, expand_dims, reshape,
transpose and convert_layout, which all fold the same way (to the input when the type does
not change, to the constant when the input is one). `tilec.dialects.tile` re-exports them.
"""

from __future__ import annotations

import math
from collections import Counter

from tilec.ir.attributes import ArrayAttr, Attribute, FloatAttr, IntegerAttr
from tilec.ir.constraints import SCALAR, TILE
from tilec.ir.core import Attr, Operand, Operation, OpResult, Pure, Result, Value, register_op
from tilec.ir.folding import constant_value, from_numpy_scalar, to_numpy_scalar
from tilec.ir.types import Dim, FloatType, ShapedType, TileType, Type, element_type

__all__ = [
    "BroadcastOp",
    "ConvertLayoutOp",
    "ExpandDimsOp",
    "ReshapeOp",
    "SplatOp",
    "TransposeOp",
    "check_axis",
    "dims_match",
    "same_or_none",
    "same_shape_and_element",
    "shape_of",
    "shape_text",
    "shapes_match",
]

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


def shape_text(shape: tuple[Dim, ...]) -> str:
    return "x".join("?" if d is None else str(d) for d in shape) or "scalar"


def same_shape_and_element(a: Type, b: Type) -> bool:
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


def same_or_none(value: Value, t: Type) -> list[Attribute | Value] | None:
    return [value] if value.type == t else None


def _fold_rearrangement(op: Operation) -> list[Attribute | Value] | None:
    """The fold of an op that only moves `op.input`'s elements around (splat, broadcast,
    expand_dims, reshape, transpose, convert_layout): the input itself when the type does not
    change, the constant when the input is a constant tile or scalar."""
    same = same_or_none(op.input, op.result.type)
    if same is not None:
        return same
    c = _splat_constant(op.input, op.result.type)
    return None if c is None else [c]


def check_axis(op: Operation, rank: int, *, inserting: bool = False) -> int:
    """`op`'s `axis` attribute, checked against `rank` (an op that inserts a dimension may
    also name the position after the last one)."""
    axis = op.attributes["axis"].value
    last = rank if inserting else rank - 1
    if not 0 <= axis <= last:
        raise op.error(f"axis {axis} is out of range for rank {rank} (expected 0..{last})")
    return axis


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
        axis = check_axis(self, t.rank, inserting=True)
        expected = self.expanded_type(t, axis)
        if not same_shape_and_element(self.result.type, expected):
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
                f"cannot reshape {shape_text(src.shape)} to {shape_text(dst.shape)}: "
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
        if not same_shape_and_element(self.result.type, expected):
            raise self.error(
                f"transposing {t} by {perm} gives {expected}, but the result is {self.result.type}"
            )

    def fold(self):
        perm = self.perm
        if list(perm) == list(range(len(perm))):
            return same_or_none(self.input, self.result.type)
        inner = self.input
        if isinstance(inner, OpResult) and isinstance(inner.op, TransposeOp):
            inner_perm = inner.op.perm
            # result dim i = inner input dim inner_perm[perm[i]]: identity means undone.
            if all(inner_perm[p] == i for i, p in enumerate(perm)):
                return same_or_none(inner.op.input, self.result.type)
        # Not `_fold_rearrangement`: a square tile's transpose has its input's type and is
        # still a transpose. Only a constant tile is its own transpose.
        c = _splat_constant(self.input, self.result.type)
        return None if c is None else [c]


@register_op
class ConvertLayoutOp(Operation):
    """The same tile held in another layout (moves data between threads, maybe via shared
    memory). Shape and element type do not change."""

    name = "tile.convert_layout"
    summary = "Change the layout of a tile (same shape and element type)."
    input = Operand(TILE)
    result = Result(TILE)
    chunks = Attr(
        IntegerAttr,
        optional=True,
        doc="exchange the tile through shared memory in this many pieces of its rows "
        "(dimension 0), each through the same scratch (a power of two; the lowering's choice "
        "of scratch size, not a change of meaning: tilec.lowering.exchange.chunk_slots)",
    )
    traits = (Pure,)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        src, dst = self.input.type, self.result.type
        if src.shape != dst.shape or src.element != dst.element:
            raise self.error(
                f"may change only the layout, got {src} -> {dst}",
                hint="use 'tile.cast' for the element type, 'tile.reshape' for the shape",
            )
        chunks = self.attributes.get("chunks")
        if chunks is not None:
            n = chunks.value
            rows = src.shape[0] if len(src.shape) >= 2 else None
            if rows is None or n < 1 or n & (n - 1) or (isinstance(rows, int) and rows % n):
                raise self.error(
                    f"chunks must be a power of two dividing the rows of a tile of 2 or more "
                    f"dimensions ({rows}), got {n}"
                )

    def fold(self):
        same = same_or_none(self.input, self.result.type)
        if same is not None:
            return same
        inner = self.input
        if isinstance(inner, OpResult) and isinstance(inner.op, ConvertLayoutOp):
            same = same_or_none(inner.op.input, self.result.type)
            if same is not None:
                return same
        return _fold_rearrangement(self)
