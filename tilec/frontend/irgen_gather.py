"""IR for tensor accesses indexed by an integer tile: `tile.gather`, `tile.scatter` and
`tile.atomic_scatter` (an atomic on a gathered region).

The access's offsets and tile shape at the view's full rank come from `irgen`'s `access` (the
gathered dimension's offset is 0: its element indices are the index tile's values). A 1-D
index tile stays 1-D (assign-layouts gives it the slice of the result's layout along the
gathered dimension, so each thread holds the indices of its own rows); an index tile of the
region's shape gets the view's rank, like the region (size-1 axes for scalar indices).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilec.dialects import arith, atomic
from tilec.dialects import gather as G
from tilec.dialects import tile as T
from tilec.frontend.checked import IndexKind, TensorAccess
from tilec.ir.core import Value
from tilec.ir.types import TileType, Type

if TYPE_CHECKING:
    from tilec.frontend.irgen import _KernelGenerator

__all__ = ["atomic_scatter", "gather", "is_gathered", "scatter"]


def is_gathered(access: TensorAccess) -> bool:
    return any(i.kind is IndexKind.GATHER for i in access.indices)


def _indices(
    gen: _KernelGenerator, access: TensorAccess, env: dict, full_shape: tuple
) -> tuple[Value, int, Value | None]:
    """The index tile as the op takes it, the gathered dimension of the view, and the mask of
    the real lanes of the gathered axis (None: all are): the padding lanes of a partial index
    tile (`ids[tm]` past M) name no element, and a scatter must not write through them."""
    axis = next(d for d, i in enumerate(access.indices) if i.kind is IndexKind.GATHER)
    index = access.indices[axis]
    assert index.value is not None
    value = gen.expr(index.value, env)
    t = value.type
    if t.rank != 1 and t.shape != full_shape:
        value = gen.b.create(
            T.ReshapeOp, input=value, result_types=[TileType(full_shape, t.element)]
        ).result
    mask = None
    if index.extent is not None:
        mask = gen.lane_mask(index.extent, axis, full_shape)
    return value, axis, mask


def gather(
    gen: _KernelGenerator,
    access: TensorAccess,
    env: dict,
    view: Value,
    offsets: list[Value],
    full_shape: tuple,
    element: Type,
) -> Value:
    indices, axis, mask = _indices(gen, access, env, full_shape)
    return gen.b.create(
        G.GatherOp,
        view=view,
        offsets=offsets,
        indices=indices,
        mask=mask,
        axis=axis,
        result_types=[TileType(full_shape, element)],
    ).result


def scatter(
    gen: _KernelGenerator,
    access: TensorAccess,
    env: dict,
    view: Value,
    offsets: list[Value],
    value: Value,
) -> None:
    indices, axis, mask = _indices(gen, access, env, value.type.shape)
    gen.b.create(
        G.ScatterOp,
        view=view,
        offsets=offsets,
        indices=indices,
        value=value,
        mask=mask,
        axis=axis,
    )


def atomic_scatter(
    gen: _KernelGenerator,
    access: TensorAccess,
    env: dict,
    operands: dict,
    kind: str,
    sem: str | None,
) -> Value:
    """`tile.atomic_scatter` of `operands` (view, offsets, value, mask at the full rank, as
    `irgen` builds an atomic's); the padding lanes of the index tile are masked off, together
    with the user's mask."""
    value = operands["value"]
    indices, axis, lanes = _indices(gen, access, env, value.type.shape)
    mask = operands.get("mask")
    if lanes is not None:
        mask = lanes if mask is None else gen.b.create(arith.AndIOp, lhs=mask, rhs=lanes).result
    return gen.b.create(
        atomic.AtomicScatterOp,
        kind=kind,
        sem=sem,
        view=operands["view"],
        offsets=operands["offsets"],
        indices=indices,
        value=value,
        mask=mask,
        axis=axis,
    ).result
