"""Exact arithmetic for the `arith` dialect's folders: constants, evaluators and identities.

A folder gives what the kernel would compute, exactly: integers as Python ints wrapped to the
element width (two's complement), floats with numpy in the element dtype (f16 rounds as f16;
bf16 has no exact numpy type here and is not folded). Operations that are undefined for some
inputs (division by zero, INT_MIN / -1, oversized shifts, float-to-int out of range) are not
folded for those inputs: the hardware result is not ours to choose.

Nothing here knows the op classes: `tilec.dialects.arith` maps each op to these functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tilec.ir.attributes import Attribute, BoolAttr, FloatAttr, IntegerAttr
from tilec.ir.core import Operation, OpResult, Value
from tilec.ir.folding import constant_value, to_numpy_scalar
from tilec.ir.types import Type, bit_width


def signed(v: int, width: int) -> int:
    """`v` wrapped to `width` bits, read as signed (so i1 true is -1)."""
    v &= (1 << width) - 1
    return v - (1 << width) if v >> (width - 1) else v


def int_constant(v: Value) -> int | None:
    """The constant integer (or i1) that `v` holds, or splats, as a signed value."""
    attr = constant_value(v)
    if not isinstance(attr, (IntegerAttr, BoolAttr)):
        return None
    return signed(int(attr.value), bit_width(v.type))


def float_constant(v: Value) -> np.floating | None:
    """The constant float that `v` holds, or splats, rounded to its element type."""
    attr = constant_value(v)
    if not isinstance(attr, (FloatAttr, IntegerAttr)):
        return None
    return to_numpy_scalar(attr, v.type)


def int_attr(v: int, t: Type) -> Attribute:
    """Integer `v` as an element of `t` (wrapped to its width; i1 as a bool)."""
    width = bit_width(t)
    if width == 1:
        return BoolAttr(bool(v & 1))
    return IntegerAttr(signed(v, width))


def is_float(v: Value, target: float) -> bool:
    """`v` is a constant equal to `target`, sign of zero included."""
    x = float_constant(v)
    return x is not None and x == target and bool(np.signbit(x)) == (math.copysign(1.0, target) < 0)


def _truncating_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def divsi(a: int, b: int, width: int) -> int | None:
    if b == 0 or (a == -(1 << (width - 1)) and b == -1):
        return None  # division by zero; INT_MIN / -1 overflows
    return _truncating_div(a, b)


def remsi(a: int, b: int, width: int) -> int | None:
    if b == 0 or (a == -(1 << (width - 1)) and b == -1):
        return None
    return a - b * _truncating_div(a, b)


def ceildivsi(a: int, b: int, width: int) -> int | None:
    if b == 0 or (a == -(1 << (width - 1)) and b == -1):
        return None
    return -((-a) // b)


def shli(a: int, b: int, width: int) -> int | None:
    return a << b if 0 <= b < width else None  # shifting by >= width is undefined


def shrsi(a: int, b: int, width: int) -> int | None:
    return a >> b if 0 <= b < width else None


def maximumf(a: np.floating, b: np.floating) -> np.floating:
    if np.isnan(a) or np.isnan(b):
        return a.dtype.type(np.nan)
    if a == b:  # +0.0 and -0.0 compare equal, but maximum(-0.0, +0.0) is +0.0
        return b if np.signbit(a) else a
    return a if a > b else b


def minimumf(a: np.floating, b: np.floating) -> np.floating:
    if np.isnan(a) or np.isnan(b):
        return a.dtype.type(np.nan)
    if a == b:
        return a if np.signbit(a) else b
    return a if a < b else b


# -- algebraic identities: each maps an op to an existing value or a constant, or None --------


def x_op_zero_is_x(op: Operation) -> Value | None:
    """x + 0, x - 0, x | 0, x ^ 0, x << 0, x >> 0 (integers) -> x."""
    return op.lhs if int_constant(op.rhs) == 0 else None


def x_op_one_is_x(op: Operation) -> Value | None:
    """x * 1, x / 1 (integers) -> x."""
    return op.lhs if int_constant(op.rhs) == 1 else None


def x_times_zero_is_zero(op: Operation) -> Attribute | None:
    """x * 0, x & 0 (integers) -> 0. Not for floats: NaN * 0, inf * 0 and -1.0 * 0 differ."""
    return int_attr(0, op.result.type) if int_constant(op.rhs) == 0 else None


def x_and_ones_is_x(op: Operation) -> Value | None:
    """x & -1 -> x."""
    return op.lhs if int_constant(op.rhs) == -1 else None


def x_or_ones_is_ones(op: Operation) -> Attribute | None:
    """x | -1 -> -1."""
    return int_attr(-1, op.result.type) if int_constant(op.rhs) == -1 else None


def x_op_x_is_x(op: Operation) -> Value | None:
    """x & x, x | x, max(x, x), min(x, x) -> x (floats too: NaN stays NaN)."""
    return op.lhs if op.lhs is op.rhs else None


def x_op_x_is_zero(op: Operation) -> Attribute | None:
    """x - x, x ^ x (integers) -> 0. Not for floats: inf - inf is NaN."""
    return int_attr(0, op.result.type) if op.lhs is op.rhs else None


def x_plus_negative_zero_is_x(op: Operation) -> Value | None:
    """x + (-0.0) -> x. Only negative zero: x + (+0.0) is NOT x when x is -0.0, because
    -0.0 + +0.0 is +0.0 in round-to-nearest."""
    return op.lhs if is_float(op.rhs, -0.0) else None


def x_minus_zero_is_x(op: Operation) -> Value | None:
    """x - (+0.0) -> x: it is x + (-0.0), exact for every x (x - (-0.0) is not)."""
    return op.lhs if is_float(op.rhs, 0.0) else None


def x_times_one_is_x(op: Operation) -> Value | None:
    """x * 1.0, x / 1.0 -> x (exact for every x, signed zeros, infinities and NaN)."""
    return op.lhs if is_float(op.rhs, 1.0) else None


# -- comparisons and conversions -------------------------------------------------------------


def cmpi(predicate: str, a: int, b: int, width: int) -> bool:
    if predicate[0] == "u":
        a, b = a & ((1 << width) - 1), b & ((1 << width) - 1)
    relation = predicate if predicate in ("eq", "ne") else predicate[1:]
    return _RELATIONS[relation](a, b)


def cmpf(predicate: str, a: np.floating, b: np.floating) -> bool:
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


def iota_below(v: Value, predicate: str, bound: int) -> bool:
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


def int_to_float(v: int, dtype: np.dtype) -> np.floating:
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


def float_to_int(x: np.floating, t: Type) -> Attribute | None:
    if not np.isfinite(x):
        return None
    v = int(x)  # toward zero
    width = bit_width(t)
    if not -(1 << (width - 1)) <= v < (1 << (width - 1)):
        return None  # out of range: undefined
    return int_attr(v, t)
