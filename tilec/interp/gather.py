"""What `tile.gather` and `tile.scatter` compute (`tilec.dialects.gather`).

Every index is checked: an index along the gathered dimension outside `0 <= i < extent`, in a
lane whose mask holds, is an `InterpreterError` at the op naming the kernel, the tensor, the
index and its position in the index tile, since compiled code gives such a lane no defined
value (it reads padding or skips the store unless compiled with `TILEC_CHECK_BOUNDS=1`).
Lanes outside the extents of the other dimensions are padding, as for `tile.load`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects import gather as G
from tilec.interp.semantics import _cached, _concrete_shape, element_constant, semantics
from tilec.ir.core import Operation

if TYPE_CHECKING:
    from tilec.interp.machine import BlockState

__all__ = ["gathered_elements"]


def gathered_elements(
    state: BlockState,
    op: Operation,
    view: Any,
    offsets: list[Any],
    indices: np.ndarray,
    mask: np.ndarray | None,
    shape: tuple[int, ...],
) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The element coordinates (one broadcastable int64 array per view dimension) an access
    of `shape` indexed by `indices` along `op.axis` reaches, and where it reaches inside the
    tensor (and the mask); reports an out-of-range index. Shared by every op that accesses a
    gathered region (an atomic on one, too)."""
    axis = op.attributes["axis"].value
    rank = len(shape)
    if indices.ndim == 1:
        if indices.shape[0] != shape[axis]:
            raise state.error(op, f"has {indices.shape[0]} indices for dim {axis} of {shape}")
        along = indices.reshape([-1 if d == axis else 1 for d in range(rank)])
    elif indices.shape != shape:
        raise state.error(op, f"has indices of shape {indices.shape} for a tile of {shape}")
    else:
        along = indices
    coordinates: list[np.ndarray] = []
    inside = np.ones(shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    for d, (extent, offset) in enumerate(zip(view.shape, offsets)):
        if d == axis:
            where = int(offset) + along.astype(np.int64)
            valid = (where >= 0) & (where < extent)
            bad = ~valid & inside
            if bad.any():
                _report(state, op, view, d, extent, where, bad, indices.ndim == 1)
        else:
            where = int(offset) + np.arange(shape[d], dtype=np.int64)
            where = where.reshape([-1 if k == d else 1 for k in range(rank)])
            valid = (where >= 0) & (where < extent)
        inside = inside & valid
        coordinates.append(np.where(valid, where, 0))
    return tuple(np.broadcast_to(c, shape) for c in coordinates), inside


def _report(state, op, view, dim, extent, where, bad, per_row: bool) -> None:
    position = tuple(int(p) for p in np.argwhere(bad)[0])
    value = int(np.broadcast_to(where, bad.shape)[position])
    if per_row:
        position = (position[dim],)
    kernel = state.launch.func.sym_name
    raise state.error(
        op,
        f"of kernel '{kernel}': index {value} at position {list(position)} of the index tile is "
        f"out of range for dim {dim} of '{view.name}' (extent {extent})",
        hint="indices must satisfy 0 <= index < extent; compiled code reads padding there "
        "(stores skip it) unless compiled with TILEC_CHECK_BOUNDS=1",
    )


def _operands(op: Operation, args: list[Any], has_value: bool):
    view = args[0]
    rank = len(view.shape)
    offsets = args[1 : 1 + rank]
    rest = list(args[1 + rank :])
    indices = np.asarray(rest.pop(0))
    value = rest.pop(0) if has_value else None
    mask = rest[0] if rest else None
    return view, offsets, indices, value, mask


@semantics(G.GatherOp)
def _gather(state: BlockState, op: Operation, args: list[Any]) -> Any:
    view, offsets, indices, _, mask = _operands(op, args, False)
    shape = _concrete_shape(state, op, op.result.type)
    dtype = view.array.dtype
    padding = _cached(
        state,
        op,
        lambda: element_constant(
            op.attributes["padding"].value if "padding" in op.attributes else 0, dtype
        ),
    )
    coordinates, inside = gathered_elements(state, op, view, offsets, indices, mask, shape)
    values = view.read_elements(coordinates)
    return np.where(inside, values, padding).astype(dtype)


@semantics(G.ScatterOp)
def _scatter(state: BlockState, op: Operation, args: list[Any]) -> Any:
    view, offsets, indices, value, mask = _operands(op, args, True)
    shape = tuple(value.shape)
    coordinates, inside = gathered_elements(state, op, view, offsets, indices, mask, shape)
    # Assigned in row-major order, so of two lanes that hit one element the last one wins
    # (the language leaves which one unspecified).
    view.write_elements(tuple(c[inside] for c in coordinates), value[inside])
    return []


def index_bounds(func: Any, shapes: list) -> dict[int, int]:
    """Per tensor argument (by position) that a gather, scatter or atomic scatter of `func` reads its indices
    from (loaded, then reshaped or converted at most), the extent its values index, so that
    random inputs (`tilec run`, the tests, the fuzzers) draw indices in range. So is a tensor
    whose elements, read one at a time (`page = block_table[b, i]`), are the scalar offset of
    a load or store (`k_cache[page, :, :]`). `shapes` are the arguments' shapes (None for
    scalars)."""
    from tilec.dialects import arith
    from tilec.dialects import tile as T
    from tilec.ir.core import BlockArgument, OpResult

    positions = {arg: i for i, arg in enumerate(func.arguments)}
    bounds: dict[int, int] = {}

    def source_load(v: Any, through: tuple) -> Any:
        while isinstance(v, OpResult) and isinstance(v.op, through):
            v = v.op.operands[0]
        return v.op if isinstance(v, OpResult) and isinstance(v.op, T.LoadOp) else None

    def bound(load: Any, table: Any, axis: int) -> None:
        view = load.view
        if not (isinstance(view, BlockArgument) and isinstance(table, BlockArgument)):
            return
        if view not in positions or table not in positions:
            return
        extent = shapes[positions[table]][axis]
        i = positions[view]
        bounds[i] = min(bounds.get(i, extent), extent)

    scalar_read = (T.ReshapeOp, T.ConvertLayoutOp, T.ReduceOp, arith.IndexCastOp, T.CastOp)
    from tilec.dialects.atomic import AtomicScatterOp

    for op in func.walk():
        if isinstance(op, (G.GatherOp, G.ScatterOp, AtomicScatterOp)):
            load = source_load(op.indices, (T.ReshapeOp, T.ConvertLayoutOp))
            if load is not None:
                bound(load, op.view, op.axis)
        elif isinstance(op, (T.LoadOp, T.StoreOp)):
            for axis, offset in enumerate(op.offsets):
                load = source_load(offset, scalar_read)
                if load is not None and load.result.type.shape == (1,) * load.view.type.rank:
                    bound(load, op.view, axis)
    return bounds


@semantics(G.BincountOp)
def _bincount(state: BlockState, op: Operation, args: list[Any]) -> Any:
    indices, values = np.asarray(args[0]), np.asarray(args[1])
    mask = np.asarray(args[2]) if len(args) > 2 else np.ones(indices.shape, bool)
    bins = _concrete_shape(state, op, op.result.type)[0]
    keep = mask & (indices >= 0) & (indices < bins)
    counts = np.zeros(bins, values.dtype)
    # Integer sums wrap, as `red.shared.add` does; numpy's add.at wraps in the array's dtype.
    with np.errstate(over="ignore"):
        np.add.at(counts, indices[keep].astype(np.int64), values[keep])
    return counts
