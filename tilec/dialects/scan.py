"""Scans and arg-reductions: `tile.scan`, `tile.arg_reduce`, `tile.topk` (`tile.*` names).

    %c = tile.scan sum %x axis 1 : tile<BMxBNxf32> -> tile<BMxBNxf32>
    %i = tile.arg_reduce max %x axis 1 : tile<BMxBNxf32> -> tile<BMxi32>
    %v, %j = tile.topk %x k 2 axis 1 : tile<BMxBNxf32> -> tile<BMx2xf32>, tile<BMx2xi32>

* `tile.scan` is the inclusive scan along `axis` with `kind` (sum, prod, max, min): element i
  is the combination of elements 0..i. Float max/min propagate NaN; integer sums and products
  wrap (two's complement). Shape and element type are the input's.
* `tile.arg_reduce` gives the i32 position along `axis` of the largest (`max`) or smallest
  (`min`) element; the axis is dropped (a 1-D input gives a scalar). Ties go to the first
  position; a NaN counts as larger than every number for `max` and smaller for `min`, so the
  first NaN wins either way (torch's rule).
* `tile.topk` gives the `k` largest elements along `axis` and their i32 positions, sorted
  descending, ties (and NaNs, which rank above every number) by lower position; `axis` of
  the results has size `k`, a power of two (tiles have power-of-two sizes) no larger than the
  axis.

Positions count lanes of the tile from 0: padding lanes are lanes like any other here, so the
frontend replaces them (with the lowest value for `max`/`topk`, the highest for `min`) before
these ops see them (docs/language.md, "Scans and arg-reductions"). The interpreter's numpy
semantics are in `tilec.interp.scan`, the GPU lowering in `tilec.lowering.scan`.
"""

from __future__ import annotations

from tilec.dialects.tile import REDUCE_KINDS, ReduceOp
from tilec.dialects.tile_shapes import check_axis, same_shape_and_element
from tilec.ir.attributes import IntegerAttr, StringAttr
from tilec.ir.constraints import NUMERIC_LIKE, TILE
from tilec.ir.core import Attr, Operand, Operation, Pure, Result, register_op
from tilec.ir.types import FloatType, IntegerType, TileType, Type, element_type, i32, is_scalar

__all__ = ["ARG_REDUCE_KINDS", "MAX_TOPK", "SCAN_KINDS", "ArgReduceOp", "ScanOp", "TopKOp"]

SCAN_KINDS = REDUCE_KINDS
ARG_REDUCE_KINDS = ("max", "min")
MAX_TOPK = 16  # a topk is k rounds of an arg-reduction; beyond 16 a sort would be the tool


def _check_numeric(op: Operation, t: Type) -> None:
    e = element_type(t)
    if not isinstance(e, (FloatType, IntegerType)) or (isinstance(e, IntegerType) and e.width == 1):
        raise op.error(f"needs float or integer elements (not i1), got {t}")


@register_op
class ScanOp(Operation):
    """The inclusive scan of a tile along `axis` with `kind` (sum, prod, max, min).

    Element i along `axis` combines elements 0..i; the result has the input's type. Float
    max/min propagate NaN; integer sum/prod wrap; integer max/min are signed.
    """

    name = "tile.scan"
    summary = "Inclusive prefix scan along one axis (sum, prod, max, min); same type."
    kind = Attr(StringAttr, choices=SCAN_KINDS)
    input = Operand(TILE)
    axis = Attr(IntegerAttr)
    result = Result(TILE)
    traits = (Pure,)
    assembly_format = "$kind $input `axis` $axis attr-dict `:` type($input) `->` type($result)"

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [operands[0].type]

    def verify_(self) -> None:
        t = self.input.type
        check_axis(self, t.rank)
        _check_numeric(self, t)
        if not same_shape_and_element(self.result.type, t):
            raise self.error(f"a scan of {t} gives {t}, but the result is {self.result.type}")


@register_op
class ArgReduceOp(Operation):
    """The i32 position along `axis` of the largest (`max`) or smallest (`min`) element.

    The axis is dropped (a 1-D tile gives a scalar). Ties go to the lowest position; the
    first NaN wins for both kinds (torch's `argmax`/`argmin`)."""

    name = "tile.arg_reduce"
    summary = "Position (i32) of the max or min along one axis; first on ties, NaN wins."
    kind = Attr(StringAttr, choices=ARG_REDUCE_KINDS)
    input = Operand(TILE)
    axis = Attr(IntegerAttr)
    result = Result(NUMERIC_LIKE)
    traits = (Pure,)
    assembly_format = "$kind $input `axis` $axis attr-dict `:` type($input) `->` type($result)"

    @staticmethod
    def index_type(t: TileType, axis: int) -> Type:
        reduced = ReduceOp.reduced_type(t, axis)
        return reduced.with_element(i32) if isinstance(reduced, TileType) else i32

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [cls.index_type(operands[0].type, attributes["axis"].value)]

    def verify_(self) -> None:
        t = self.input.type
        axis = check_axis(self, t.rank)
        _check_numeric(self, t)
        expected = self.index_type(t, axis)
        if not same_shape_and_element(self.result.type, expected) or (
            is_scalar(expected) != is_scalar(self.result.type)
        ):
            raise self.error(
                f"an arg-reduction of {t} along axis {axis} gives {expected}, but the result "
                f"is {self.result.type}"
            )


@register_op
class TopKOp(Operation):
    """The `k` largest elements along `axis`, sorted descending, and their i32 positions.

    Ties go to the lower position; NaN ranks above every number (the first NaN first). Both
    results have the input's shape with `axis` of size `k`: a power of two, at most
    `MAX_TOPK` and at most the axis' size."""

    name = "tile.topk"
    summary = "The k largest elements along one axis, descending, and their i32 positions."
    input = Operand(TILE)
    k = Attr(IntegerAttr)
    axis = Attr(IntegerAttr)
    values = Result(TILE)
    indices = Result(TILE)
    traits = (Pure,)
    assembly_format = (
        "$input `k` $k `axis` $axis attr-dict `:` type($input) `->` type($values) `,` "
        "type($indices)"
    )

    @staticmethod
    def result_shape(t: TileType, k: int, axis: int) -> tuple:
        return (*t.shape[:axis], k, *t.shape[axis + 1 :])

    @classmethod
    def infer_result_types(cls, operands, attributes):
        t = operands[0].type
        shape = cls.result_shape(t, attributes["k"].value, attributes["axis"].value)
        return [TileType(shape, t.element), TileType(shape, i32)]

    def verify_(self) -> None:
        t = self.input.type
        axis = check_axis(self, t.rank)
        _check_numeric(self, t)
        k = self.k
        if not (1 <= k <= MAX_TOPK and k & (k - 1) == 0):
            raise self.error(f"k must be a power of two from 1 to {MAX_TOPK}, got {k}")
        size = t.shape[axis]
        if isinstance(size, int) and k > size:
            raise self.error(f"k = {k} is more than the {size} elements along axis {axis}")
        shape = self.result_shape(t, k, axis)
        for what, result, element in (
            ("values", self.values, t.element),
            ("indices", self.indices, i32),
        ):
            expected = TileType(shape, element)
            if not same_shape_and_element(result.type, expected):
                raise self.error(f"{what} of a top-{k} of {t} are {expected}, not {result.type}")
