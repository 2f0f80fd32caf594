"""The `arith` dialect: constants, integer and float arithmetic, comparisons and conversions.

Arithmetic ops work on scalars and, elementwise, on tiles of equal shape (no implicit
broadcasting at this level: the frontend inserts `tile.broadcast`/`tile.splat`).

    %c = arith.constant 1.0 : f32
    %s = arith.addf %a, %b : tile<BMxBNxf32>
    %m = arith.cmpf olt, %a, %b : f32
    %h = arith.truncf %s : tile<BMxBNxf32> -> tile<BMxBNxf16>
"""

from __future__ import annotations

from tilec.ir.attributes import BoolAttr, FloatAttr, IntegerAttr, StringAttr
from tilec.ir.constraints import (
    BOOL_LIKE,
    FLOAT_LIKE,
    INT_LIKE,
    NUMERIC_LIKE,
    SCALAR,
)
from tilec.ir.core import (
    Attr,
    Commutative,
    ConstantLike,
    Operand,
    Operation,
    Pure,
    Result,
    SameOperandsAndResultType,
    register_op,
)
from tilec.ir.types import (
    FloatType,
    IndexType,
    IntegerType,
    TileType,
    Type,
    bit_width,
    element_type,
    i1,
)


@register_op
class ConstantOp(Operation):
    name = "arith.constant"
    summary = "A scalar constant."
    value = Attr((IntegerAttr, FloatAttr, BoolAttr))
    result = Result(SCALAR)
    traits = (Pure, ConstantLike)
    assembly_format = "$value attr-dict `:` type($result)"

    def verify_(self) -> None:
        t = self.result.type
        attr = self.attributes["value"]
        if isinstance(t, FloatType):
            if not isinstance(attr, (FloatAttr, IntegerAttr)) or isinstance(attr, BoolAttr):
                raise self.error(f"value {attr} does not fit type {t}")
        elif isinstance(attr, FloatAttr):
            raise self.error(f"float value {attr} for integer type {t}")
        elif isinstance(t, IntegerType):
            v = int(attr.value)
            if not -(1 << (t.width - 1)) <= v < (1 << t.width) and t.width > 1:
                raise self.error(f"value {v} does not fit in {t}")
            if t.width == 1 and v not in (0, 1, -1):
                raise self.error(f"value {v} does not fit in i1")

    def fold(self):
        return [self.attributes["value"]]


class _Binary(Operation):
    lhs = Operand(NUMERIC_LIKE)
    rhs = Operand(NUMERIC_LIKE)
    result = Result(NUMERIC_LIKE)
    traits = (Pure, SameOperandsAndResultType)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"


class _FloatBinary(_Binary):
    lhs = Operand(FLOAT_LIKE)
    rhs = Operand(FLOAT_LIKE)
    result = Result(FLOAT_LIKE)


class _IntBinary(_Binary):
    lhs = Operand(INT_LIKE)
    rhs = Operand(INT_LIKE)
    result = Result(INT_LIKE)


def _commutative(cls):
    cls.traits = (*cls.traits, Commutative)
    cls._trait_set = frozenset(cls.traits)
    return cls


@register_op
@_commutative
class AddFOp(_FloatBinary):
    name = "arith.addf"
    summary = "Floating-point addition."


@register_op
class SubFOp(_FloatBinary):
    name = "arith.subf"
    summary = "Floating-point subtraction."


@register_op
@_commutative
class MulFOp(_FloatBinary):
    name = "arith.mulf"
    summary = "Floating-point multiplication."


@register_op
class DivFOp(_FloatBinary):
    name = "arith.divf"
    summary = "Floating-point division."


@register_op
class RemFOp(_FloatBinary):
    name = "arith.remf"
    summary = "Floating-point remainder (sign of the dividend, like C fmod)."


@register_op
@_commutative
class MaximumFOp(_FloatBinary):
    name = "arith.maximumf"
    summary = "Larger of two floats; NaN if either is NaN."


@register_op
@_commutative
class MinimumFOp(_FloatBinary):
    name = "arith.minimumf"
    summary = "Smaller of two floats; NaN if either is NaN."


@register_op
@_commutative
class AddIOp(_IntBinary):
    name = "arith.addi"
    summary = "Integer addition (wraps around)."


@register_op
class SubIOp(_IntBinary):
    name = "arith.subi"
    summary = "Integer subtraction (wraps around)."


@register_op
@_commutative
class MulIOp(_IntBinary):
    name = "arith.muli"
    summary = "Integer multiplication (wraps around)."


@register_op
class DivSIOp(_IntBinary):
    name = "arith.divsi"
    summary = "Signed integer division, rounding toward zero."


@register_op
class RemSIOp(_IntBinary):
    name = "arith.remsi"
    summary = "Signed integer remainder (sign of the dividend)."


@register_op
class CeilDivSIOp(_IntBinary):
    name = "arith.ceildivsi"
    summary = "Signed integer division rounding toward positive infinity (tile counts)."


@register_op
@_commutative
class MaxSIOp(_IntBinary):
    name = "arith.maxsi"
    summary = "Signed integer maximum."


@register_op
@_commutative
class MinSIOp(_IntBinary):
    name = "arith.minsi"
    summary = "Signed integer minimum."


@register_op
@_commutative
class AndIOp(_IntBinary):
    name = "arith.andi"
    summary = "Bitwise and."


@register_op
@_commutative
class OrIOp(_IntBinary):
    name = "arith.ori"
    summary = "Bitwise or."


@register_op
@_commutative
class XOrIOp(_IntBinary):
    name = "arith.xori"
    summary = "Bitwise exclusive or."


@register_op
class ShLIOp(_IntBinary):
    name = "arith.shli"
    summary = "Shift left."


@register_op
class ShRSIOp(_IntBinary):
    name = "arith.shrsi"
    summary = "Arithmetic (sign-filling) shift right."


@register_op
class NegFOp(Operation):
    name = "arith.negf"
    summary = "Floating-point negation."
    operand = Operand(FLOAT_LIKE)
    result = Result(FLOAT_LIKE)
    traits = (Pure, SameOperandsAndResultType)
    assembly_format = "$operand attr-dict `:` type($result)"


def _bool_like(t: Type) -> Type:
    return TileType(t.shape, i1) if isinstance(t, TileType) else i1


CMPF_PREDICATES = (
    "oeq",
    "one",
    "olt",
    "ole",
    "ogt",
    "oge",
    "ueq",
    "une",
    "ult",
    "ule",
    "ugt",
    "uge",
    "ord",
    "uno",
)
CMPI_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")


class _Compare(Operation):
    lhs = Operand(NUMERIC_LIKE)
    rhs = Operand(NUMERIC_LIKE)
    result = Result(BOOL_LIKE)
    traits = (Pure,)
    assembly_format = "$predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs)"

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [_bool_like(operands[0].type)]

    def verify_(self) -> None:
        if self.lhs.type != self.rhs.type:
            raise self.error(
                f"operands must have the same type, got {self.lhs.type} and {self.rhs.type}"
            )
        if self.result.type != _bool_like(self.lhs.type):
            raise self.error(f"result must be {_bool_like(self.lhs.type)}, got {self.result.type}")


@register_op
class CmpFOp(_Compare):
    name = "arith.cmpf"
    summary = "Float comparison: ordered (o*) predicates are false, unordered (u*) true, on NaN."
    predicate = Attr(StringAttr, choices=CMPF_PREDICATES)
    lhs = Operand(FLOAT_LIKE)
    rhs = Operand(FLOAT_LIKE)


@register_op
class CmpIOp(_Compare):
    name = "arith.cmpi"
    summary = "Integer comparison (s*: signed, u*: unsigned)."
    predicate = Attr(StringAttr, choices=CMPI_PREDICATES)
    lhs = Operand(INT_LIKE)
    rhs = Operand(INT_LIKE)


@register_op
class SelectOp(Operation):
    name = "arith.select"
    summary = "`true_value` if the scalar `condition` holds, else `false_value`."
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
        if self.condition.type != i1:
            raise self.error(
                f"condition must be a scalar i1, got {self.condition.type}",
                hint="use 'tile.select' to choose elementwise with a tile of i1",
            )
        if not (self.true_value.type == self.false_value.type == self.result.type):
            raise self.error(
                "both values and the result must have the same type, got "
                f"{self.true_value.type}, {self.false_value.type} -> {self.result.type}"
            )


class _Cast(Operation):
    input = Operand(NUMERIC_LIKE)
    result = Result(NUMERIC_LIKE)
    traits = (Pure,)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    # (source element predicate, result element predicate, width relation) per subclass
    source_kind: type | tuple = ()
    result_kind: type | tuple = ()
    width_rule: str = "any"  # "wider", "narrower" or "any"

    def verify_(self) -> None:
        src, dst = self.input.type, self.result.type
        if isinstance(src, TileType) != isinstance(dst, TileType) or (
            isinstance(src, TileType) and src.shape != dst.shape
        ):
            raise self.error(f"input and result must have the same shape, got {src} and {dst}")
        se, de = element_type(src), element_type(dst)
        if not isinstance(se, self.source_kind) or not isinstance(de, self.result_kind):
            raise self.error(f"cannot convert {se} to {de} with this op")
        if self.width_rule == "wider" and not bit_width(de) > bit_width(se):
            raise self.error(f"result element {de} must be wider than {se}")
        if self.width_rule == "narrower" and not bit_width(de) < bit_width(se):
            raise self.error(f"result element {de} must be narrower than {se}")


@register_op
class ExtFOp(_Cast):
    name = "arith.extf"
    summary = "Widen a float (exact)."
    source_kind = FloatType
    result_kind = FloatType
    width_rule = "wider"


@register_op
class TruncFOp(_Cast):
    name = "arith.truncf"
    summary = "Narrow a float, rounding to nearest even."
    source_kind = FloatType
    result_kind = FloatType
    width_rule = "narrower"


@register_op
class SIToFPOp(_Cast):
    name = "arith.sitofp"
    summary = "Signed integer to float, rounding to nearest even."
    source_kind = (IntegerType, IndexType)
    result_kind = FloatType


@register_op
class FPToSIOp(_Cast):
    name = "arith.fptosi"
    summary = "Float to signed integer, rounding toward zero."
    source_kind = FloatType
    result_kind = (IntegerType, IndexType)


@register_op
class ExtSIOp(_Cast):
    name = "arith.extsi"
    summary = "Sign-extend an integer."
    source_kind = IntegerType
    result_kind = IntegerType
    width_rule = "wider"


@register_op
class TruncIOp(_Cast):
    name = "arith.trunci"
    summary = "Truncate an integer to fewer bits."
    source_kind = IntegerType
    result_kind = IntegerType
    width_rule = "narrower"


@register_op
class IndexCastOp(_Cast):
    name = "arith.index_cast"
    summary = "Convert between index and a fixed-width integer (sign-extending or truncating)."
    source_kind = (IntegerType, IndexType)
    result_kind = (IntegerType, IndexType)

    def verify_(self) -> None:
        super().verify_()
        if isinstance(element_type(self.input.type), IndexType) == isinstance(
            element_type(self.result.type), IndexType
        ):
            raise self.error("exactly one of input and result must be index")
