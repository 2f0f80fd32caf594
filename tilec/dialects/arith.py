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
pattern). See the "Folding" section below and `tilec.dialects.arith_folding`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilec.dialects.arith_folding import (
    ceildivsi,
    cmpf,
    cmpi,
    divsi,
    float_constant,
    float_to_int,
    int_attr,
    int_constant,
    int_to_float,
    iota_below,
    maximumf,
    minimumf,
    remsi,
    shli,
    shrsi,
    signed,
    x_and_ones_is_x,
    x_minus_zero_is_x,
    x_op_one_is_x,
    x_op_x_is_x,
    x_op_x_is_zero,
    x_op_zero_is_x,
    x_or_ones_is_ones,
    x_plus_negative_zero_is_x,
    x_times_one_is_x,
    x_times_zero_is_zero,
)
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
# Folding: which evaluator and identities each op folds with (`arith_folding` holds the exact
# arithmetic and why undefined inputs are not folded).

# (lhs, rhs, width) -> result, or None where the operation is undefined. Operands are signed.
_INT_EVALUATORS: dict[type[Operation], Callable[[int, int, int], int | None]] = {
    AddIOp: lambda a, b, w: a + b,
    SubIOp: lambda a, b, w: a - b,
    MulIOp: lambda a, b, w: a * b,
    DivSIOp: divsi,
    RemSIOp: remsi,
    CeilDivSIOp: ceildivsi,
    MaxSIOp: lambda a, b, w: max(a, b),
    MinSIOp: lambda a, b, w: min(a, b),
    AndIOp: lambda a, b, w: a & b,
    OrIOp: lambda a, b, w: a | b,
    XOrIOp: lambda a, b, w: a ^ b,
    ShLIOp: shli,
    ShRSIOp: shrsi,
}


# numpy scalars of one dtype compute in that dtype (for f16: exactly rounded to f16).
_FLOAT_EVALUATORS: dict[type[Operation], Callable[[np.floating, np.floating], np.floating]] = {
    AddFOp: lambda a, b: a + b,
    SubFOp: lambda a, b: a - b,
    MulFOp: lambda a, b: a * b,
    DivFOp: lambda a, b: a / b,
    RemFOp: np.fmod,
    MaximumFOp: maximumf,
    MinimumFOp: minimumf,
}


_IDENTITIES: dict[type[Operation], tuple[Callable[[Operation], Value | Attribute | None], ...]] = {
    AddIOp: (x_op_zero_is_x,),
    SubIOp: (x_op_zero_is_x, x_op_x_is_zero),
    MulIOp: (x_op_one_is_x, x_times_zero_is_zero),
    DivSIOp: (x_op_one_is_x,),
    AndIOp: (x_and_ones_is_x, x_times_zero_is_zero, x_op_x_is_x),
    OrIOp: (x_op_zero_is_x, x_or_ones_is_ones, x_op_x_is_x),
    XOrIOp: (x_op_zero_is_x, x_op_x_is_zero),
    ShLIOp: (x_op_zero_is_x,),
    ShRSIOp: (x_op_zero_is_x,),
    MaxSIOp: (x_op_x_is_x,),
    MinSIOp: (x_op_x_is_x,),
    AddFOp: (x_plus_negative_zero_is_x,),
    SubFOp: (x_minus_zero_is_x,),
    MulFOp: (x_times_one_is_x,),
    DivFOp: (x_times_one_is_x,),
    MaximumFOp: (x_op_x_is_x,),
    MinimumFOp: (x_op_x_is_x,),
}


def _fold_binary(op: Operation) -> list[Attribute | Value] | None:
    kind = type(op)
    t = op.result.type
    if kind in _INT_EVALUATORS:
        a, b = int_constant(op.lhs), int_constant(op.rhs)
        if a is not None and b is not None:
            r = _INT_EVALUATORS[kind](a, b, bit_width(t))
            return None if r is None else [int_attr(r, t)]
    elif kind in _FLOAT_EVALUATORS:
        x, y = float_constant(op.lhs), float_constant(op.rhs)
        if x is not None and y is not None:
            with np.errstate(all="ignore"):  # inf and NaN results are IEEE's, not errors
                return [from_numpy_scalar(_FLOAT_EVALUATORS[kind](x, y), t)]
    for identity in _IDENTITIES.get(kind, ()):
        folded = identity(op)
        if folded is not None:
            return [folded]
    return None


def _fold_negf(op: Operation) -> list[Attribute | Value] | None:
    x = float_constant(op.operand)
    if x is not None:
        return [from_numpy_scalar(-x, op.result.type)]
    inner = op.operand
    if isinstance(inner, OpResult) and isinstance(inner.op, NegFOp):
        return [inner.op.operand]  # -(-x) -> x: negation only flips the sign bit
    return None


def _fold_compare(op: Operation) -> list[Attribute | Value] | None:
    predicate = op.predicate
    if isinstance(op, CmpIOp):
        a, b = int_constant(op.lhs), int_constant(op.rhs)
        if a is not None and b is not None:
            return [BoolAttr(cmpi(predicate, a, b, bit_width(op.lhs.type)))]
        if op.lhs is op.rhs:  # x == x holds for integers (not for floats: NaN)
            return [BoolAttr(predicate in ("eq", "sle", "sge", "ule", "uge"))]
        if b is not None and iota_below(op.lhs, predicate, b):
            return [BoolAttr(True)]
        return None
    x, y = float_constant(op.lhs), float_constant(op.rhs)
    if x is not None and y is not None:
        return [BoolAttr(cmpf(predicate, x, y))]
    return None


def _fold_cast_constant(op: Operation, attr: Attribute) -> Attribute | None:
    src, dst = op.input.type, op.result.type
    src_dtype, dst_dtype = numpy_dtype(src), numpy_dtype(dst)
    if src_dtype is None or dst_dtype is None:
        return None
    if isinstance(op, (ExtFOp, TruncFOp)):
        with np.errstate(all="ignore"):  # narrowing rounds to nearest even (numpy does too)
            return from_numpy_scalar(np.asarray(to_numpy_scalar(attr, src)).astype(dst_dtype), dst)
    if isinstance(op, FPToSIOp):
        return float_to_int(to_numpy_scalar(attr, src), dst)
    if isinstance(attr, FloatAttr):
        return None
    v = signed(int(attr.value), bit_width(src))
    if isinstance(op, SIToFPOp):
        return from_numpy_scalar(int_to_float(v, dst_dtype), dst)
    # extsi, trunci and index_cast: sign-extend or wrap the signed value.
    return int_attr(v, dst)


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
