"""Type constraints shared by the dialects (each with the description verifiers print)."""

from __future__ import annotations

from tilec.ir.core import ANY_TYPE, TypeConstraint
from tilec.ir.types import (
    FloatType,
    IndexType,
    IntegerType,
    SharedType,
    TensorType,
    TileType,
    element_type,
    is_scalar,
)

__all__ = [
    "ANY_TYPE",
    "BOOL_LIKE",
    "FLOAT_LIKE",
    "INDEX",
    "INT_LIKE",
    "INT_OR_INDEX",
    "NUMERIC_LIKE",
    "SCALAR",
    "SCALAR_OR_TILE",
    "SHARED",
    "TENSOR",
    "TILE",
]


def _tile_or_scalar(pred):
    return lambda t: (is_scalar(t) or isinstance(t, TileType)) and pred(element_type(t))


INDEX = TypeConstraint("index", lambda t: isinstance(t, IndexType))
INT_OR_INDEX = TypeConstraint(
    "an integer or index scalar", lambda t: isinstance(t, (IntegerType, IndexType))
)
BOOL_LIKE = TypeConstraint(
    "i1 or a tile of i1", _tile_or_scalar(lambda e: isinstance(e, IntegerType) and e.width == 1)
)
FLOAT_LIKE = TypeConstraint(
    "a float scalar or a tile of floats", _tile_or_scalar(lambda e: isinstance(e, FloatType))
)
INT_LIKE = TypeConstraint(
    "an integer/index scalar or a tile of them",
    _tile_or_scalar(lambda e: isinstance(e, (IntegerType, IndexType))),
)
NUMERIC_LIKE = TypeConstraint("a scalar or a tile", _tile_or_scalar(lambda e: True))
SCALAR = TypeConstraint("a scalar", is_scalar)
SCALAR_OR_TILE = NUMERIC_LIKE
TILE = TypeConstraint("a tile", lambda t: isinstance(t, TileType))
TENSOR = TypeConstraint("a tensor view (!tile.tensor<...>)", lambda t: isinstance(t, TensorType))
SHARED = TypeConstraint("a shared buffer (!smem<...>)", lambda t: isinstance(t, SharedType))
