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

__all__ = ["constant_value", "from_numpy_scalar", "numpy_dtype", "to_numpy_scalar"]


def constant_value(v: Value) -> Attribute | None:
    """The constant `v` holds (a scalar, or the splat value of a constant tile), else None."""
    if isinstance(v, OpResult) and v.op.has_trait(ConstantLike):
        return v.op.attributes.get("value")
    return None


def numpy_dtype(t: Type) -> np.dtype | None:
    """The numpy dtype that computes exactly like `t`'s elements (None: not available)."""
    e = element_type(t)
    if isinstance(e, FloatType):
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
