"""The `arith` dialect: constants, integer and float arithmetic, comparisons and conversions.

Arithmetic ops work on scalars and, elementwise, on tiles of equal shape (no implicit
broadcasting at this level: the frontend inserts `tile.broadcast`/`tile.splat`).

    %c = arith.constant 1.0 : f32
    %s = arith.addf %a, %b : tile<BMxBNxf32>
    %m = arith.cmpf olt, %a, %b : f32
    %h = arith.truncf %s : tile<BMxBNxf32> -> tile<BMxBNxf16>

Every op folds: on constant operands (scalars, or splat tiles from `tile.full`) to the value
the kernel would compute, exactly, and through the algebraic identities that are exact for
every input. Commutative ops and comparisons keep constants on the right (a canonicalization
pattern). See the "Folding" section below.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tilec.ir.attributes import Attribute, BoolAttr, FloatAttr, IntegerAttr, StringAttr
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
    OpResult,
    Pure,
    Result,
    SameOperandsAndResultType,
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
from tilec.ir.rewrite import PatternRewriter, RewritePattern
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
        check_constant_fits(self, self.attributes["value"], self.result.type, "value")

    def fold(self):
        return [self.attributes["value"]]


class _Binary(Operation):
    lhs = Operand(NUMERIC_LIKE)
    rhs = Operand(NUMERIC_LIKE)
    result = Result(NUMERIC_LIKE)
    traits = (Pure, SameOperandsAndResultType)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"

    def fold(self):
        return _fold_binary(self)


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


APPROX_DOC = (
    "computed with the hardware's approximate instruction (`precision` sets it where the "
    "result reaches memory only as f16/bf16); the interpreter computes it exactly"
)


@register_op
class DivFOp(_FloatBinary):
    name = "arith.divf"
    summary = "Floating-point division."
    approx = Attr(BoolAttr, optional=True, doc=APPROX_DOC)


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

    def fold(self):
        return _fold_negf(self)


def _bool_like(t: Type) -> Type:
    # A comparison's i1 tile is held like its operands (same layout).
    return TileType(t.shape, i1, t.layout) if isinstance(t, TileType) else i1


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

    def fold(self):
        return _fold_compare(self)


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

    def fold(self):
        return _fold_cast(self)


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


# ---------------------------------------------------------------------------------------------
# Folding
#
# A folder gives what the kernel would compute, exactly: integers as Python ints wrapped to the
# element width (two's complement), floats with numpy in the element dtype (f16 rounds as f16;
# bf16 has no exact numpy type here and is not folded). Operations that are undefined for some
# inputs (division by zero, INT_MIN / -1, oversized shifts, float-to-int out of range) are not
# folded for those inputs: the hardware result is not ours to choose.


def _signed(v: int, width: int) -> int:
    """`v` wrapped to `width` bits, read as signed (so i1 true is -1)."""
    v &= (1 << width) - 1
    return v - (1 << width) if v >> (width - 1) else v


def _int_constant(v: Value) -> int | None:
    """The constant integer (or i1) that `v` holds, or splats, as a signed value."""
    attr = constant_value(v)
    if not isinstance(attr, (IntegerAttr, BoolAttr)):
        return None
    return _signed(int(attr.value), bit_width(v.type))


def _float_constant(v: Value) -> np.floating | None:
    """The constant float that `v` holds, or splats, rounded to its element type."""
    attr = constant_value(v)
    if not isinstance(attr, (FloatAttr, IntegerAttr)):
        return None
    return to_numpy_scalar(attr, v.type)


def _int_attr(v: int, t: Type) -> Attribute:
    """Integer `v` as an element of `t` (wrapped to its width; i1 as a bool)."""
    width = bit_width(t)
    if width == 1:
        return BoolAttr(bool(v & 1))
    return IntegerAttr(_signed(v, width))


def _is_float(v: Value, target: float) -> bool:
    """`v` is a constant equal to `target`, sign of zero included."""
    x = _float_constant(v)
    return x is not None and x == target and bool(np.signbit(x)) == (math.copysign(1.0, target) < 0)


def _truncating_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _divsi(a: int, b: int, width: int) -> int | None:
    if b == 0 or (a == -(1 << (width - 1)) and b == -1):
        return None  # division by zero; INT_MIN / -1 overflows
    return _truncating_div(a, b)


def _remsi(a: int, b: int, width: int) -> int | None:
    if b == 0 or (a == -(1 << (width - 1)) and b == -1):
        return None
    return a - b * _truncating_div(a, b)


def _ceildivsi(a: int, b: int, width: int) -> int | None:
    if b == 0 or (a == -(1 << (width - 1)) and b == -1):
        return None
    return -((-a) // b)


def _shli(a: int, b: int, width: int) -> int | None:
    return a << b if 0 <= b < width else None  # shifting by >= width is undefined


def _shrsi(a: int, b: int, width: int) -> int | None:
    return a >> b if 0 <= b < width else None


# (lhs, rhs, width) -> result, or None where the operation is undefined. Operands are signed.
_INT_EVALUATORS: dict[type[Operation], Callable[[int, int, int], int | None]] = {
    AddIOp: lambda a, b, w: a + b,
    SubIOp: lambda a, b, w: a - b,
    MulIOp: lambda a, b, w: a * b,
    DivSIOp: _divsi,
    RemSIOp: _remsi,
    CeilDivSIOp: _ceildivsi,
    MaxSIOp: lambda a, b, w: max(a, b),
    MinSIOp: lambda a, b, w: min(a, b),
    AndIOp: lambda a, b, w: a & b,
    OrIOp: lambda a, b, w: a | b,
    XOrIOp: lambda a, b, w: a ^ b,
    ShLIOp: _shli,
    ShRSIOp: _shrsi,
}


def _maximumf(a: np.floating, b: np.floating) -> np.floating:
    if np.isnan(a) or np.isnan(b):
        return a.dtype.type(np.nan)
    if a == b:  # +0.0 and -0.0 compare equal, but maximum(-0.0, +0.0) is +0.0
        return b if np.signbit(a) else a
    return a if a > b else b


def _minimumf(a: np.floating, b: np.floating) -> np.floating:
    if np.isnan(a) or np.isnan(b):
        return a.dtype.type(np.nan)
    if a == b:
        return a if np.signbit(a) else b
    return a if a < b else b


# numpy scalars of one dtype compute in that dtype (for f16: exactly rounded to f16).
_FLOAT_EVALUATORS: dict[type[Operation], Callable[[np.floating, np.floating], np.floating]] = {
    AddFOp: lambda a, b: a + b,
    SubFOp: lambda a, b: a - b,
    MulFOp: lambda a, b: a * b,
    DivFOp: lambda a, b: a / b,
    RemFOp: np.fmod,
    MaximumFOp: _maximumf,
    MinimumFOp: _minimumf,
}


# -- algebraic identities: each maps an op to an existing value or a constant, or None --------


def _x_op_zero_is_x(op: Operation) -> Value | None:
    """x + 0, x - 0, x | 0, x ^ 0, x << 0, x >> 0 (integers) -> x."""
    return op.lhs if _int_constant(op.rhs) == 0 else None


def _x_op_one_is_x(op: Operation) -> Value | None:
    """x * 1, x / 1 (integers) -> x."""
    return op.lhs if _int_constant(op.rhs) == 1 else None


def _x_times_zero_is_zero(op: Operation) -> Attribute | None:
    """x * 0, x & 0 (integers) -> 0. Not for floats: NaN * 0, inf * 0 and -1.0 * 0 differ."""
    return _int_attr(0, op.result.type) if _int_constant(op.rhs) == 0 else None


def _x_and_ones_is_x(op: Operation) -> Value | None:
    """x & -1 -> x."""
    return op.lhs if _int_constant(op.rhs) == -1 else None


def _x_or_ones_is_ones(op: Operation) -> Attribute | None:
    """x | -1 -> -1."""
    return _int_attr(-1, op.result.type) if _int_constant(op.rhs) == -1 else None


def _x_op_x_is_x(op: Operation) -> Value | None:
    """x & x, x | x, max(x, x), min(x, x) -> x (floats too: NaN stays NaN)."""
    return op.lhs if op.lhs is op.rhs else None


def _x_op_x_is_zero(op: Operation) -> Attribute | None:
    """x - x, x ^ x (integers) -> 0. Not for floats: inf - inf is NaN."""
    return _int_attr(0, op.result.type) if op.lhs is op.rhs else None


def _x_plus_negative_zero_is_x(op: Operation) -> Value | None:
    """x + (-0.0) -> x. Only negative zero: x + (+0.0) is NOT x when x is -0.0, because
    -0.0 + +0.0 is +0.0 in round-to-nearest."""
    return op.lhs if _is_float(op.rhs, -0.0) else None


def _x_minus_zero_is_x(op: Operation) -> Value | None:
    """x - (+0.0) -> x: it is x + (-0.0), exact for every x (x - (-0.0) is not)."""
    return op.lhs if _is_float(op.rhs, 0.0) else None


def _x_times_one_is_x(op: Operation) -> Value | None:
    """x * 1.0, x / 1.0 -> x (exact for every x, signed zeros, infinities and NaN)."""
    return op.lhs if _is_float(op.rhs, 1.0) else None


_IDENTITIES: dict[type[Operation], tuple[Callable[[Operation], Value | Attribute | None], ...]] = {
    AddIOp: (_x_op_zero_is_x,),
    SubIOp: (_x_op_zero_is_x, _x_op_x_is_zero),
    MulIOp: (_x_op_one_is_x, _x_times_zero_is_zero),
    DivSIOp: (_x_op_one_is_x,),
    AndIOp: (_x_and_ones_is_x, _x_times_zero_is_zero, _x_op_x_is_x),
    OrIOp: (_x_op_zero_is_x, _x_or_ones_is_ones, _x_op_x_is_x),
    XOrIOp: (_x_op_zero_is_x, _x_op_x_is_zero),
    ShLIOp: (_x_op_zero_is_x,),
    ShRSIOp: (_x_op_zero_is_x,),
    MaxSIOp: (_x_op_x_is_x,),
    MinSIOp: (_x_op_x_is_x,),
    AddFOp: (_x_plus_negative_zero_is_x,),
    SubFOp: (_x_minus_zero_is_x,),
    MulFOp: (_x_times_one_is_x,),
    DivFOp: (_x_times_one_is_x,),
    MaximumFOp: (_x_op_x_is_x,),
    MinimumFOp: (_x_op_x_is_x,),
}


def _fold_binary(op: Operation) -> list[Attribute | Value] | None:
    kind = type(op)
    t = op.result.type
    if kind in _INT_EVALUATORS:
        a, b = _int_constant(op.lhs), _int_constant(op.rhs)
        if a is not None and b is not None:
            r = _INT_EVALUATORS[kind](a, b, bit_width(t))
            return None if r is None else [_int_attr(r, t)]
    elif kind in _FLOAT_EVALUATORS:
        x, y = _float_constant(op.lhs), _float_constant(op.rhs)
        if x is not None and y is not None:
            with np.errstate(all="ignore"):  # inf and NaN results are IEEE's, not errors
                return [from_numpy_scalar(_FLOAT_EVALUATORS[kind](x, y), t)]
    for identity in _IDENTITIES.get(kind, ()):
        folded = identity(op)
        if folded is not None:
            return [folded]
    return None


def _fold_negf(op: Operation) -> list[Attribute | Value] | None:
    x = _float_constant(op.operand)
    if x is not None:
        return [from_numpy_scalar(-x, op.result.type)]
    inner = op.operand
    if isinstance(inner, OpResult) and isinstance(inner.op, NegFOp):
        return [inner.op.operand]  # -(-x) -> x: negation only flips the sign bit
    return None


def _cmpi(predicate: str, a: int, b: int, width: int) -> bool:
    if predicate[0] == "u":
        a, b = a & ((1 << width) - 1), b & ((1 << width) - 1)
    relation = predicate if predicate in ("eq", "ne") else predicate[1:]
    return _RELATIONS[relation](a, b)


def _cmpf(predicate: str, a: np.floating, b: np.floating) -> bool:
    unordered = bool(np.isnan(a) or np.isnan(b))
    if predicate == "ord":
        return not unordered
    if predicate == "uno":
        return unordered
    if unordered:
        return predicate[0] == "u"
    return _RELATIONS[predicate[1:]](a, b)


_RELATIONS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda a, b: bool(a == b),
    "ne": lambda a, b: bool(a != b),
    "lt": lambda a, b: bool(a < b),
    "le": lambda a, b: bool(a <= b),
    "gt": lambda a, b: bool(a > b),
    "ge": lambda a, b: bool(a >= b),
}


def _fold_compare(op: Operation) -> list[Attribute | Value] | None:
    predicate = op.predicate
    if isinstance(op, CmpIOp):
        a, b = _int_constant(op.lhs), _int_constant(op.rhs)
        if a is not None and b is not None:
            return [BoolAttr(_cmpi(predicate, a, b, bit_width(op.lhs.type)))]
        if op.lhs is op.rhs:  # x == x holds for integers (not for floats: NaN)
            return [BoolAttr(predicate in ("eq", "sle", "sge", "ule", "uge"))]
        if b is not None and _iota_below(op.lhs, predicate, b):
            return [BoolAttr(True)]
        return None
    x, y = _float_constant(op.lhs), _float_constant(op.rhs)
    if x is not None and y is not None:
        return [BoolAttr(_cmpf(predicate, x, y))]
    return None


def _iota_below(v: Value, predicate: str, bound: int) -> bool:
    """Whether `v < bound` (or `<=`) holds for every element of `v`, a `tile.iota` (its
    elements are 0 .. n-1): the padding mask of a whole dimension whose extent is known to
    fill its tile."""
    if not (isinstance(v, OpResult) and v.op.name == "tile.iota"):
        return False
    if not isinstance(v.type.shape[0], int):  # a symbolic size: unknown until tiling
        return False
    largest = v.type.shape[0] - 1
    if predicate in ("slt", "ult"):
        return largest < bound
    if predicate in ("sle", "ule"):
        return largest <= bound
    return False


def _int_to_float(v: int, dtype: np.dtype) -> np.floating:
    """`v` rounded to nearest even in `dtype`, in one rounding (numpy would go through f64
    and round twice for |v| >= 2**53)."""
    if abs(v) > 1 << 53:
        mantissa_bits = np.finfo(dtype).nmant + 1
        shift = abs(v).bit_length() - mantissa_bits
        q, r = divmod(abs(v), 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        v = (q << shift) * (1 if v > 0 else -1)  # now exact in f64
    with np.errstate(all="ignore"):
        return dtype.type(float(v))


def _float_to_int(x: np.floating, t: Type) -> Attribute | None:
    if not np.isfinite(x):
        return None
    v = int(x)  # toward zero
    width = bit_width(t)
    if not -(1 << (width - 1)) <= v < (1 << (width - 1)):
        return None  # out of range: undefined
    return _int_attr(v, t)


def _fold_cast_constant(op: Operation, attr: Attribute) -> Attribute | None:
    src, dst = op.input.type, op.result.type
    src_dtype, dst_dtype = numpy_dtype(src), numpy_dtype(dst)
    if src_dtype is None or dst_dtype is None:
        return None
    if isinstance(op, (ExtFOp, TruncFOp)):
        with np.errstate(all="ignore"):  # narrowing rounds to nearest even (numpy does too)
            return from_numpy_scalar(np.asarray(to_numpy_scalar(attr, src)).astype(dst_dtype), dst)
    if isinstance(op, FPToSIOp):
        return _float_to_int(to_numpy_scalar(attr, src), dst)
    if isinstance(attr, FloatAttr):
        return None
    v = _signed(int(attr.value), bit_width(src))
    if isinstance(op, SIToFPOp):
        return from_numpy_scalar(_int_to_float(v, dst_dtype), dst)
    # extsi, trunci and index_cast: sign-extend or wrap the signed value.
    return _int_attr(v, dst)


def _inverse_cast_input(op: Operation) -> Value | None:
    """x when `op` undoes the cast that made its input from x exactly:
    truncf(extf(x)), trunci(extsi(x)) and index_cast(index_cast(x)) from an integer."""
    inner = op.input
    if not (isinstance(inner, OpResult) and isinstance(inner.op, _Cast)):
        return None
    inner_op = inner.op
    if inner_op.input.type != op.result.type:
        return None
    if isinstance(op, TruncFOp) and isinstance(inner_op, ExtFOp):
        return inner_op.input
    if isinstance(op, TruncIOp) and isinstance(inner_op, ExtSIOp):
        return inner_op.input
    if (
        isinstance(op, IndexCastOp)
        and isinstance(inner_op, IndexCastOp)
        and not isinstance(element_type(inner_op.input.type), IndexType)
    ):
        # iN -> index sign-extends, index -> iN truncates it back. The other order
        # (index -> iN -> index) loses the high bits.
        return inner_op.input
    return None


def _fold_cast(op: Operation) -> list[Attribute | Value] | None:
    if op.input.type == op.result.type:
        return [op.input]
    x = _inverse_cast_input(op)
    if x is not None:
        return [x]
    attr = constant_value(op.input)
    if attr is None:
        return None
    folded = _fold_cast_constant(op, attr)
    return None if folded is None else [folded]


# ---------------------------------------------------------------------------------------------
# Canonicalization patterns


class MoveConstantToRight(RewritePattern):
    """`c op x` -> `x op c` for commutative ops: one form for both orders, so that CSE finds
    `1 + x` and `x + 1` equal and the identities above need only look at the right."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        if not op.has_trait(Commutative) or len(op.operands) != 2:
            return False
        lhs, rhs = op.operands
        if constant_value(lhs) is None or constant_value(rhs) is not None:
            return False
        rewriter.set_operands(op, [rhs, lhs])
        return True


# The predicate that holds for (b, a) exactly when `predicate` holds for (a, b).
_MIRRORED_PREDICATES = {
    **{p: p for p in ("eq", "ne", "oeq", "one", "ueq", "une", "ord", "uno")},
    **{
        f"{kind}{a}": f"{kind}{b}"
        for kind in ("s", "u", "o")
        for a, b in (("lt", "gt"), ("gt", "lt"), ("le", "ge"), ("ge", "le"))
    },
}


class MoveCompareConstantToRight(RewritePattern):
    """`cmp pred, c, x` -> `cmp mirrored(pred), x, c` (e.g. `slt c, x` -> `sgt x, c`)."""

    op_kind = (CmpIOp, CmpFOp)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        lhs, rhs = op.operands
        if constant_value(lhs) is None or constant_value(rhs) is not None:
            return False
        op.predicate = _MIRRORED_PREDICATES[op.predicate]
        rewriter.set_operands(op, [rhs, lhs])  # also tells the driver that `op` changed
        return True


# The commutative ops of this dialect.
for _kind in (
    AddFOp,
    MulFOp,
    MaximumFOp,
    MinimumFOp,
    AddIOp,
    MulIOp,
    MaxSIOp,
    MinSIOp,
    AndIOp,
    OrIOp,
    XOrIOp,
):
    _kind.canonicalization_patterns = (MoveConstantToRight(),)
CmpIOp.canonicalization_patterns = (MoveCompareConstantToRight(),)
CmpFOp.canonicalization_patterns = (MoveCompareConstantToRight(),)
