"""Helpers for op folders: reading constant operands and computing in the IR's dtypes.

A folder (`Operation.fold`) returns, per result, either an existing `Value` or a constant
`Attribute` that `canonicalize` materializes (`arith.constant` for scalars, `tile.full` for
tiles). Folded arithmetic must give exactly what the kernel would compute, so it is done in
the element type with numpy (f16 rounds as f16, integers wrap around).
"""

from __future__ import annotations

import numpy as np

from tilec.ir.attributes import Attribute, BoolAttr, FloatAttr, IntegerAttr
from tilec.ir.core import ConstantLike, OpResult, Value
from tilec.ir.types import FloatType, IndexType, IntegerType, Type, element_type

__all__ = [
    "check_constant_fits",
    "constant_value",
    "from_numpy_scalar",
    "numpy_dtype",
    "to_numpy_scalar",
]


def constant_value(v: Value) -> Attribute | None:
    """The constant `v` holds (a scalar, or the splat value of a constant tile), else None."""
    if isinstance(v, OpResult) and v.op.has_trait(ConstantLike):
        return v.op.attributes.get("value")
    return None


def numpy_dtype(t: Type) -> np.dtype | None:
    """The numpy dtype that computes exactly like `t`'s elements (None: not available)."""
    e = element_type(t)
    if isinstance(e, FloatType):
        if e.is_f8:
            return None  # conversions to f8 saturate, which a numpy cast does not: not folded
        if e.name == "bf16":
            try:
                import ml_dtypes
            except ImportError:
                return None
            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[e.name])
    if isinstance(e, IndexType):
        return np.dtype(np.int64)
    if isinstance(e, IntegerType):
        return np.dtype(
            {1: np.bool_, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}[e.width]
        )
    return None


def to_numpy_scalar(attr: Attribute, t: Type):
    """`attr` as a numpy scalar of `t`'s element type (None if it cannot be represented)."""
    dtype = numpy_dtype(t)
    if dtype is None:
        return None
    value = attr.value
    if dtype == np.bool_:
        return np.bool_(bool(value))
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        v = int(value)
        if not info.min <= v <= info.max:
            v = (v - info.min) % (1 << info.bits) + info.min  # wrap, as the hardware does
        return dtype.type(v)
    with np.errstate(over="ignore"):  # a value beyond the type's range is inf, as in the IR
        return dtype.type(value)


def from_numpy_scalar(x, t: Type) -> Attribute:
    """The attribute holding numpy scalar `x` as an element of `t`."""
    e = element_type(t)
    if isinstance(e, FloatType):
        return FloatAttr(float(x))
    if isinstance(e, IntegerType) and e.width == 1:
        return BoolAttr(bool(x))
    return IntegerAttr(int(x))


def check_constant_fits(op, attr: Attribute, t: Type, what: str) -> None:
    """Check that constant `attr` is a value of scalar type `t` — a float for floats (one that
    does not round to inf), an integer in range for integers (signed or unsigned spelling:
    255 : i8 is -1), bool or 0/1 for i1 — so that folding and lowering need not guess. Raises
    `op.error(...)`; `what` names the attribute in the message."""
    import math

    if isinstance(t, FloatType):
        if not isinstance(attr, FloatAttr):
            hint = f"write {attr}.0" if isinstance(attr, IntegerAttr) else None
            raise op.error(f"{what} {attr} must be a float for element type {t}", hint=hint)
        dtype = numpy_dtype(t)
        if dtype is not None and math.isfinite(attr.value):
            with np.errstate(over="ignore"):
                if np.isinf(dtype.type(attr.value)):
                    raise op.error(
                        f"{what} {attr} is too large for {t} (it would become inf)",
                        hint="write inf explicitly if that is what you mean",
                    )
        return
    if isinstance(attr, FloatAttr):
        raise op.error(f"{what} {attr} must be an integer for element type {t}")
    value = int(attr.value)
    if isinstance(t, IntegerType) and t.width == 1:
        if value not in (0, 1):
            raise op.error(f"{what} {attr} does not fit i1")
        return
    width = 64 if isinstance(t, IndexType) else t.width
    if not -(1 << (width - 1)) <= value < (1 << width):
        raise op.error(f"{what} {value} does not fit {t}")
