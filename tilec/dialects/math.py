"""The `math` dialect: elementwise floating-point functions on scalars or tiles.

Each op takes and returns values of one type (a float scalar or a tile of floats):

    %e = math.exp %x : tile<BMxBNxf32>
    %r = math.rsqrt %v : f32
    %y = math.fma %a, %b, %c : f32          (a * b + c, rounded once)

Folders compute constant scalars (and constant tiles, which hold one value) with numpy in f64
and round the result once to the element type, so a folded f16 `exp` gives the f16 value
nearest to e. Lowering may use the GPU's fast approximations, which can differ from these by
a few ulps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from tilec.dialects.arith import APPROX_DOC
from tilec.ir.attributes import BoolAttr
from tilec.ir.constraints import FLOAT_LIKE
from tilec.ir.core import (
    Attr,
    Operand,
    Operation,
    Pure,
    Result,
    SameOperandsAndResultType,
    register_op,
)
from tilec.ir.folding import constant_value, from_numpy_scalar, numpy_dtype, to_numpy_scalar

__all__ = [
    "AbsFOp",
    "CeilOp",
    "CosOp",
    "ErfOp",
    "Exp2Op",
    "ExpOp",
    "FloorOp",
    "FmaOp",
    "Log2Op",
    "LogOp",
    "PowFOp",
    "RsqrtOp",
    "SinOp",
    "SqrtOp",
    "TanhOp",
]


class _Unary(Operation):
    """An elementwise function of one float operand; `compute` maps an f64 numpy scalar to
    the function's f64 value."""

    operand = Operand(FLOAT_LIKE)
    result = Result(FLOAT_LIKE)
    traits = (Pure, SameOperandsAndResultType)
    assembly_format = "$operand attr-dict `:` type($result)"
    compute: Callable[[Any], Any]

    def fold(self):
        attr = constant_value(self.operand)
        if attr is None:
            return None
        t = self.result.type
        x = to_numpy_scalar(attr, t)
        if x is None:
            return None  # no numpy dtype computes like this element type (bf16 without ml_dtypes)
        # Computed in f64 and rounded once to the element type: numpy's own f16/f32 kernels
        # are not correctly rounded and differ between CPUs, and a fold must not depend on
        # the machine that compiles.
        with np.errstate(all="ignore"):  # log(-1) = nan is the answer, not a warning
            y = numpy_dtype(t).type(type(self).compute(np.float64(x)))
        return [from_numpy_scalar(y, t)]


# erf, vectorised (numpy has none, and the interpreter must not call math.erf per element):
# a Taylor expansion around the nearest of the points 0, 1/32, ..., 6, where erf is tabulated
# with math.erf. The derivatives of erf are 2/sqrt(pi) * (-1)^(k-1) H_(k-1)(x) e^(-x^2)
# (Hermite polynomials), and |h| <= 1/64 makes 14 terms more than enough: the result is within
# 2 ulps of math.erf in f64 and rounds to the same f32 and f16. Past 6, erf is 1 in f64.
_ERF_STEPS_PER_UNIT = 32
_ERF_TERMS = 14


def _erf_table() -> tuple[np.ndarray, np.ndarray]:
    """erf at the table points, and the Taylor coefficients there (highest power first)."""
    points = np.arange(6 * _ERF_STEPS_PER_UNIT + 1) / _ERF_STEPS_PER_UNIT
    values = np.array([math.erf(float(p)) for p in points])
    scale = 2 / math.sqrt(math.pi) * np.exp(-points * points)
    hermite_previous, hermite = np.zeros_like(points), np.ones_like(points)  # H_-1, H_0
    coefficients = []
    for k in range(1, _ERF_TERMS + 1):  # the coefficient of h^k uses H_(k-1)
        coefficients.append(scale * (-1) ** (k - 1) * hermite / math.factorial(k))
        hermite_previous, hermite = hermite, 2 * points * hermite - 2 * (k - 1) * hermite_previous
    return values, np.stack(coefficients[::-1])


_ERF_VALUES, _ERF_COEFFICIENTS = _erf_table()


def _erf(x: Any) -> Any:
    x = np.asarray(x, dtype=np.float64)
    magnitude = np.minimum(np.nan_to_num(np.abs(x), nan=0.0), 6.0)
    nearest = np.rint(magnitude * _ERF_STEPS_PER_UNIT).astype(np.intp)
    h = magnitude - nearest / _ERF_STEPS_PER_UNIT  # exact
    correction = np.zeros_like(h)
    for row in _ERF_COEFFICIENTS:
        correction = (correction + row[nearest]) * h
    y = np.where(magnitude >= 6.0, 1.0, _ERF_VALUES[nearest] + correction)
    return np.copysign(np.where(np.isnan(x), x, y), x)


def _rsqrt(x: Any) -> Any:
    return np.float64(1.0) / np.sqrt(x)


@register_op
class ExpOp(_Unary):
    name = "math.exp"
    summary = "e to the power x."
    approx = Attr(BoolAttr, optional=True, doc=APPROX_DOC)
    compute = staticmethod(np.exp)


@register_op
class Exp2Op(_Unary):
    name = "math.exp2"
    summary = "2 to the power x."
    compute = staticmethod(np.exp2)


@register_op
class LogOp(_Unary):
    name = "math.log"
    summary = "Natural logarithm (NaN below 0, -inf at 0)."
    compute = staticmethod(np.log)


@register_op
class Log2Op(_Unary):
    name = "math.log2"
    summary = "Base-2 logarithm."
    compute = staticmethod(np.log2)


@register_op
class SqrtOp(_Unary):
    name = "math.sqrt"
    summary = "Square root."
    compute = staticmethod(np.sqrt)


@register_op
class RsqrtOp(_Unary):
    name = "math.rsqrt"
    summary = "Reciprocal square root, 1 / sqrt(x)."
    compute = staticmethod(_rsqrt)


@register_op
class SinOp(_Unary):
    name = "math.sin"
    summary = "Sine (radians)."
    compute = staticmethod(np.sin)


@register_op
class CosOp(_Unary):
    name = "math.cos"
    summary = "Cosine (radians)."
    compute = staticmethod(np.cos)


@register_op
class TanhOp(_Unary):
    name = "math.tanh"
    summary = "Hyperbolic tangent."
    compute = staticmethod(np.tanh)


@register_op
class ErfOp(_Unary):
    name = "math.erf"
    summary = "The error function."
    compute = staticmethod(_erf)


@register_op
class AbsFOp(_Unary):
    name = "math.absf"
    summary = "Absolute value (clears the sign bit)."
    compute = staticmethod(np.abs)


@register_op
class FloorOp(_Unary):
    name = "math.floor"
    summary = "Largest integer value not above x."
    compute = staticmethod(np.floor)


@register_op
class CeilOp(_Unary):
    name = "math.ceil"
    summary = "Smallest integer value not below x."
    compute = staticmethod(np.ceil)


def round_exact(value: Fraction, dtype: np.dtype) -> Any:
    """`value` rounded once, to nearest even, to `dtype` (a numpy float dtype)."""
    try:
        approx = float(value)  # correctly rounded to f64
    except OverflowError:
        return dtype.type(math.inf if value > 0 else -math.inf)
    with np.errstate(over="ignore"):  # overflow to inf is the rounded result
        y = dtype.type(approx)
    if not np.isfinite(y):
        return y
    # Rounding to f64 first may have moved `value` onto a halfway point of `dtype` (double
    # rounding): choose among `y` and its neighbours by exact distance, ties to even.
    below = np.nextafter(y, dtype.type(-np.inf))
    above = np.nextafter(y, dtype.type(np.inf))
    bits = f"u{dtype.itemsize}"

    def key(c: Any) -> tuple[Fraction, int]:
        odd = int(np.asarray(c).view(bits)) & 1  # the significand's last bit
        return abs(Fraction(float(c)) - value), odd

    return min((c for c in (y, below, above) if np.isfinite(c)), key=key)


@register_op
class FmaOp(Operation):
    """Fused multiply-add: `a * b + c` with a single rounding."""

    name = "math.fma"
    summary = "Fused multiply-add a * b + c, rounded once."
    a = Operand(FLOAT_LIKE)
    b = Operand(FLOAT_LIKE)
    c = Operand(FLOAT_LIKE)
    result = Result(FLOAT_LIKE)
    traits = (Pure, SameOperandsAndResultType)
    assembly_format = "$a `,` $b `,` $c attr-dict `:` type($result)"

    def fold(self):
        attrs = [constant_value(v) for v in (self.a, self.b, self.c)]
        if any(a is None for a in attrs):
            return None
        t = self.result.type
        dtype = numpy_dtype(t)
        if dtype is None:
            return None
        a, b, c = (float(to_numpy_scalar(x, t)) for x in attrs)
        if not all(map(math.isfinite, (a, b, c))):
            # inf/nan in gives inf/nan out whatever the rounding: f64 arithmetic is exact.
            with np.errstate(all="ignore"):
                y = dtype.type(np.float64(a) * np.float64(b) + np.float64(c))
        else:
            exact = Fraction(a) * Fraction(b) + Fraction(c)
            if exact == 0:
                # The sign of a zero follows IEEE rules that f64 arithmetic applies exactly
                # (a zero sum means a * b is exact).
                y = dtype.type(np.float64(a) * np.float64(b) + np.float64(c))
            else:
                y = round_exact(exact, dtype)
        return [from_numpy_scalar(y, t)]


@register_op
class PowFOp(Operation):
    """`lhs` to the power `rhs` (C `pow` semantics: a negative base needs an integral exponent)."""

    name = "math.powf"
    summary = "lhs raised to the power rhs."
    lhs = Operand(FLOAT_LIKE)
    rhs = Operand(FLOAT_LIKE)
    result = Result(FLOAT_LIKE)
    traits = (Pure, SameOperandsAndResultType)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"

    def fold(self):
        attrs = [constant_value(v) for v in (self.lhs, self.rhs)]
        t = self.result.type
        if any(a is None for a in attrs) or numpy_dtype(t) is None:
            return None
        x, y = (np.float64(to_numpy_scalar(a, t)) for a in attrs)
        with np.errstate(all="ignore"):  # pow(-1, 0.5) = nan is the answer, not a warning
            return [from_numpy_scalar(numpy_dtype(t).type(np.power(x, y)), t)]
