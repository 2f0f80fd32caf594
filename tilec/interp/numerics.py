"""Exact arithmetic in the IR's element types, vectorised with numpy.

Every function here computes what the GPU computes, bit for bit, for whole tiles at once:

* **Rounding.** A result is rounded once, to nearest even, to its element type. f16 and bf16
  arithmetic is done in f32 and rounded: for +, -, *, / and sqrt that is exact (f32 carries
  more than twice the bits of either, so the double rounding is innocuous). Conversions from
  f64 to bf16 and from 64-bit integers to narrower floats go through *round to odd*, which
  makes the second rounding correct where a plain double rounding would not be.
* **f8** (f8e4m3, f8e5m2) values are only converted. To f8 rounds to nearest even and
  saturates, as `cvt.rn.satfinite.e4m3x2.f32` does: finite values beyond the largest finite
  one and infinities become the largest finite value of their sign; NaN stays NaN; f64 is
  rounded to f32 first, as on the GPU. f8 to any float is exact.
* **Integers** wrap around (two's complement); `i1` computes as a signed 1-bit integer
  (true is -1) and wraps to its low bit. Results the hardware leaves undefined (division by
  zero, INT_MIN / -1, shifts by the width or more, float → int out of range) get the value the
  PTX instructions give, so padding lanes that compute them stay harmless.
* **Reductions** of floats combine lanes in a pairwise tree (lane i with lane i + n/2, as a
  warp shuffle reduction does), rounding in the element type at each step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from tilec.ir.types import FloatType, IndexType, IntegerType, Type, element_type

__all__ = [
    "BF16",
    "F8E4M3",
    "F8E5M2",
    "dtype_of",
    "float_to_int",
    "fma",
    "int_to_float",
    "is_float_dtype",
    "maximumf",
    "minimumf",
    "round_from_f64",
    "round_to_f8",
    "tree_reduce",
]

BF16 = np.dtype(ml_dtypes.bfloat16)
F8E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
F8E5M2 = np.dtype(ml_dtypes.float8_e5m2)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

_INT_DTYPES = {1: np.dtype(np.bool_), 8: np.dtype(np.int8), 16: np.dtype(np.int16)}
_INT_DTYPES.update({32: np.dtype(np.int32), 64: np.dtype(np.int64)})
_FLOAT_DTYPES = {"f8e4m3": F8E4M3, "f8e5m2": F8E5M2, "f16": F16, "bf16": BF16}
_FLOAT_DTYPES.update({"f32": F32, "f64": F64})
_F8_LARGEST = {F8E4M3: 448.0, F8E5M2: 57344.0}


def dtype_of(t: Type) -> np.dtype:
    """The numpy dtype holding elements of `t` (a scalar type or a shaped type)."""
    e = element_type(t)
    if isinstance(e, FloatType):
        return _FLOAT_DTYPES[e.name]
    if isinstance(e, IndexType):
        return _INT_DTYPES[64]
    if isinstance(e, IntegerType):
        return _INT_DTYPES[e.width]
    raise TypeError(f"no numpy dtype for {t}")


def is_float_dtype(dtype: np.dtype) -> bool:
    """numpy's floats and ml_dtypes' (whose kind is not 'f')."""
    return dtype.kind == "f" or dtype in (BF16, F8E4M3, F8E5M2)


def is_f8(dtype: np.dtype) -> bool:
    return dtype in _F8_LARGEST


def round_to_f8(x: Any, dtype: np.dtype) -> np.ndarray:
    """Floats rounded to nearest even to f8 `dtype`, saturating: beyond the largest finite
    value (and for infinities) the largest finite value of the sign; NaN stays NaN. (ml_dtypes'
    own cast gives NaN or inf there.) f64 is rounded to f32 first, as the GPU converts it
    (`cvt` has no f64 source for f8): two roundings, the hardware's."""
    wide = np.asarray(x).astype(F32)
    largest = _F8_LARGEST[dtype]
    return np.clip(wide, -largest, largest).astype(dtype)  # clip keeps NaN


def is_narrow_float(dtype: np.dtype) -> bool:
    """f16 and bf16: computed in f32 and rounded."""
    return dtype in (F16, BF16)


# -- rounding ---------------------------------------------------------------------------------


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = a + b rounded, and the exact error a + b - s (Knuth's TwoSum; finite inputs)."""
    s = a + b
    b_virtual = s - a
    error = (a - (s - b_virtual)) + (b - b_virtual)
    return s, error


def _odd(s: np.ndarray, error: np.ndarray) -> np.ndarray:
    """Round to odd: `s` (a nearest rounding of s + error) moved to the neighbour whose last
    significand bit is 1 when it is inexact and even. Rounding a round-to-odd result of
    precision p + 2 or more to precision p gives the correctly rounded result."""
    bits = np.asarray(s).view(np.uint64 if s.dtype == F64 else np.uint32)
    fix = (error != 0) & ((bits & 1) == 0)
    if not np.any(fix):
        return s
    toward = np.where(error > 0, np.inf, -np.inf).astype(s.dtype)
    return np.where(fix, np.nextafter(s, toward), s)


def _f64_to_f32_odd(x: np.ndarray) -> np.ndarray:
    y = x.astype(F32)
    finite = np.isfinite(y)
    error = np.where(finite, x - y.astype(F64), 0.0)  # exact: y is within an f32 ulp of x
    return _odd(y, error)


def round_from_f64(x: Any, dtype: np.dtype) -> np.ndarray:
    """f64 values rounded once, to nearest even, to `dtype` (a float dtype)."""
    x = np.asarray(x, dtype=F64)
    if dtype == F64:
        return x
    if is_f8(dtype):
        return round_to_f8(x, dtype)
    if dtype == BF16:
        # ml_dtypes converts f64 to bf16 through f32 and would round twice.
        return _f64_to_f32_odd(x).astype(BF16)
    return x.astype(dtype)  # numpy rounds f64 to f32 and to f16 directly, once


def _round_pair(high: np.ndarray, low: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The exact sum high + low (two f64 arrays) rounded once to `dtype`."""
    s, error = _two_sum(high, low)
    if dtype == F64:
        return s
    return round_from_f64(_odd(s, error), dtype)


def int_to_float(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Signed integers (any width, as int64 or narrower) rounded once to float `dtype`."""
    x = np.asarray(x)
    if x.dtype.itemsize < 8:
        return round_from_f64(x.astype(F64), dtype)  # exact in f64
    x = x.astype(np.int64)
    # Split into a high part with at most 53 significant bits and a low part of 11 bits, both
    # exact in f64; then round their sum once.
    high = x & np.int64(-2048)
    low = x - high
    return _round_pair(high.astype(F64), low.astype(F64), dtype)


def float_to_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Floats truncated toward zero to integer `dtype`, as `cvt.rzi` does: saturated to the
    type's range, NaN to 0. (To i1, as a signed 1-bit integer: -1 or 0.)"""
    wide = np.asarray(x).astype(F64)
    if dtype == np.bool_:
        return (np.clip(np.trunc(np.nan_to_num(wide, nan=0.0)), -1, 0) != 0).astype(np.bool_)
    info = np.iinfo(dtype)
    truncated = np.trunc(np.nan_to_num(wide, nan=0.0, posinf=np.inf, neginf=-np.inf))
    # f64 cannot hold INT64_MAX: compare against the bounds as floats and set them exactly.
    result = np.clip(truncated, -(2.0**63), 2.0**63 - 1024).astype(np.int64)
    result = np.where(truncated >= float(info.max), info.max, result)
    result = np.where(truncated <= float(info.min), info.min, result)
    return result.astype(dtype)


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """a * b + c rounded once to `dtype` (the IEEE fused multiply-add)."""
    a64, b64, c64 = (np.asarray(v).astype(F64) for v in (a, b, c))
    plain = a64 * b64 + c64  # right for inf/NaN inputs, overflow, and the sign of zero sums
    if dtype != F64:
        # The product of two f32 (or narrower) values is exact in f64.
        result = _round_pair(a64 * b64, c64, dtype)
    else:
        # Boldo and Melquiond, "Emulation of FMA and correctly rounded sums" (2008): the exact
        # product as a pair (Dekker), a TwoSum with c, the tail rounded to odd, then one
        # rounding to nearest.
        product_high, product_low = _two_product(a64, b64)
        sum_high, sum_low = _two_sum(c64, product_high)
        tail, tail_error = _two_sum(sum_low, product_low)
        result = sum_high + _odd(tail, tail_error)
    finite = np.isfinite(plain) & np.isfinite(result)
    exact = np.where(finite & (result != 0), result, round_from_f64(plain, dtype).astype(F64))
    return round_from_f64(exact, dtype) if dtype != F64 else exact


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p = a * b rounded, and the exact error a * b - p (Dekker, with Veltkamp splitting)."""
    p = a * b
    a_high, a_low = _split(a)
    b_high, b_low = _split(b)
    error = ((a_high * b_high - p) + a_high * b_low + a_low * b_high) + a_low * b_low
    return p, error


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = 134217729.0 * x  # 2**27 + 1
    high = t - (t - x)
    return high, x - high


# -- float min/max ----------------------------------------------------------------------------


def maximumf(a: Any, b: Any) -> Any:
    """The larger of a and b; NaN if either is NaN; +0 is larger than -0."""
    larger = np.maximum(a, b)  # propagates NaN
    zeros = (a == 0) & (b == 0)
    if np.any(zeros):
        larger = np.where(zeros, np.where(np.signbit(a), b, a), larger)
    return larger


def minimumf(a: Any, b: Any) -> Any:
    """The smaller of a and b; NaN if either is NaN; -0 is smaller than +0."""
    smaller = np.minimum(a, b)
    zeros = (a == 0) & (b == 0)
    if np.any(zeros):
        smaller = np.where(zeros, np.where(np.signbit(a), a, b), smaller)
    return smaller


# -- reductions -------------------------------------------------------------------------------


def tree_reduce(
    x: np.ndarray, axis: int, combine: Callable[[Any, Any], Any], identity: Any
) -> np.ndarray:
    """Reduce `axis` of `x` by a pairwise tree: the axis is padded with `identity` to a power
    of two, then lane i is combined with lane i + n/2 until one lane is left."""
    x = np.moveaxis(np.asarray(x), axis, 0)
    n = x.shape[0]
    size = 1 << max(n - 1, 0).bit_length()
    if size != n:
        pad = np.full((size - n, *x.shape[1:]), identity, dtype=x.dtype)
        x = np.concatenate([x, pad]) if n else pad
    while size > 1:
        size //= 2
        x = combine(x[:size], x[size:])
    return x[0]
