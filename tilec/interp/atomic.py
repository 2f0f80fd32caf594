"""The semantics of atomics (`tilec.dialects.atomic`) in the interpreter, and the order in
which the blocks of a kernel with atomics run.

One op updates each element of its region inside the tensor (and where the mask holds) and
gives back the element as it was before (0 elsewhere), exactly as the GPU's `atom` does:

* `add` of integers wraps; of `f32`, rounds to nearest even and flushes subnormal inputs and
  results to a zero of their sign (PTX's `atom.add.f32` does); of `f64`, `f16` and `bf16`
  (`.noftz`) rounds to nearest even without flushing (f16/bf16 computed in f32 and rounded
  once, which is exact);
* `max`/`min` of integers are signed; of floats they order by IEEE 754 totalOrder
  (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN), what the lowering's integer max/min of
  the bits computes;
* `cas` writes `value` where the element equals `compare`.

`tile.atomic_scatter` updates the elements its index tile names (`tilec.interp.gather`
checks the indices): lanes naming one element are separate operations, applied in row-major
order of the tile (each sees the previous lane's result, as `np.add.at` sums repeats), so
every repeat counts and each lane's old value is the element just before its own update.

**Block order.** Blocks that update the same elements atomically race with each other on the
GPU: which one comes first is not defined, so a float sum rounds differently from run to run,
and a kernel that keeps the old values sees them in any order. To make a result that depends
on that order show up in tests rather than on the GPU, the interpreter runs the blocks of a
kernel with atomics in a shuffled order: a permutation of the grid drawn from a seeded
generator. The seed is `Launch.block_seed`: `prepare_launch(..., block_seed=N)`, else the
environment variable `TILEC_INTERP_BLOCK_SEED`, else 0 (so runs repeat). The permutation is
of the blocks named by the dimensions they tile, not of the grid's axis order, so the IR
before and after a pass that reorders the axes runs the blocks in the same order. Kernels
without atomics keep the grid order (axis 0 slowest).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects import atomic
from tilec.dialects.builtin import FuncOp
from tilec.interp.numerics import BF16
from tilec.interp.semantics import _check_in_bounds, _concrete_shape, _in_bounds, semantics
from tilec.ir.core import Operation

if TYPE_CHECKING:
    from tilec.interp.machine import BlockState

__all__ = ["BLOCK_SEED_ENV", "block_order", "block_seed", "uses_atomics"]

BLOCK_SEED_ENV = "TILEC_INTERP_BLOCK_SEED"
DEFAULT_BLOCK_SEED = 0


def uses_atomics(func: FuncOp) -> bool:
    """Whether `func` has an atomic op, or a split scan's ticket (whose chunk is the order
    blocks arrive in): its blocks then run shuffled."""
    from tilec.dialects.split import SplitTicketOp

    return any(isinstance(op, (*atomic.ATOMIC_OPS, SplitTicketOp)) for op in func.walk())


def block_seed(requested: int | None) -> int:
    """The seed of the block order: `requested`, else `$TILEC_INTERP_BLOCK_SEED`, else 0."""
    if requested is not None:
        return int(requested)
    text = os.environ.get(BLOCK_SEED_ENV, "").strip()
    if not text:
        return DEFAULT_BLOCK_SEED
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{BLOCK_SEED_ENV}={text!r}: expected an integer seed") from None


def block_order(
    grid: tuple[int, ...], seed: int | None, axes: Sequence[str] = ()
) -> Iterator[tuple[int, ...]]:
    """The program ids of `grid`: axis 0 slowest when `seed` is None, else shuffled by it.

    `axes` names the dimension the first grid axes tile (`tilec.grid`; a split axis after them
    has none). The shuffle permutes the blocks with the named axes in the order of their
    names, then the others, so it is a function of the blocks, not of the axis order: a pass
    that only reorders the grid's axes (tiling puts first the axis no streamed dot operand
    depends on) runs every block at the turn it had before, and the passes' checks compare
    sums of float atomics added in the same order."""
    if seed is None:
        return itertools.product(*(range(n) for n in grid))
    named = sorted(range(len(axes)), key=lambda k: axes[k])
    canonical = named + list(range(len(axes), len(grid)))
    ordered = list(itertools.product(*(range(grid[k]) for k in canonical)))
    permutation = np.random.default_rng(seed).permutation(len(ordered))
    return (_program_id(ordered[i], canonical) for i in permutation)


def _program_id(block: tuple[int, ...], canonical: list[int]) -> tuple[int, ...]:
    ids = [0] * len(canonical)
    for axis, index in zip(canonical, block):
        ids[axis] = index
    return tuple(ids)


# ---------------------------------------------------------------------------------------------
# Semantics


def _ftz(x: np.ndarray) -> np.ndarray:
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(x) < tiny, np.copysign(np.float32(0), x), x).astype(np.float32)


def _add(old: np.ndarray, value: np.ndarray) -> np.ndarray:
    if old.dtype == np.float32:
        return _ftz(_ftz(old) + _ftz(value))
    if old.dtype in (np.float16, BF16):
        return (old.astype(np.float32) + value.astype(np.float32)).astype(old.dtype)
    return old + value  # integers wrap; f64 in its own type


def _total_order_key(x: np.ndarray) -> np.ndarray:
    """Signed integers that order floats as totalOrder does: the bits, with the magnitude
    bits of negative values flipped."""
    bits = x.view(np.int32 if x.dtype == np.float32 else np.int64)
    magnitude = np.iinfo(bits.dtype).max
    return np.where(bits < 0, bits ^ magnitude, bits)


def _extreme(kind: str, old: np.ndarray, value: np.ndarray) -> np.ndarray:
    if old.dtype.kind == "f":
        a, b = _total_order_key(old), _total_order_key(value)
        take_value = b > a if kind == "max" else b < a
        return np.where(take_value, value, old)
    return np.maximum(old, value) if kind == "max" else np.minimum(old, value)


def _update(state: BlockState, op: Operation, args: list[Any], compute) -> np.ndarray:
    view = args[0]
    rank = len(view.shape)
    offsets = args[1 : 1 + rank]
    operands = args[1 + rank :]
    has_mask = op.mask is not None
    mask = operands.pop() if has_mask else None
    shape = _concrete_shape(state, op, op.result.type)
    _check_in_bounds(state, op, view.shape, offsets, shape)
    result = np.zeros(shape, view.array.dtype)
    inside = _in_bounds(view.shape, offsets, shape)
    if inside is None:
        return result
    box, local = inside
    old = view.read(box).copy()
    new = compute(old, *(x[local] for x in operands))
    view.write(box, new, None if mask is None else mask[local])
    result[local] = old if mask is None else np.where(mask[local], old, 0)
    return result


@semantics(atomic.AtomicRMWOp)
def _atomic_rmw(state: BlockState, op: Operation, args: list[Any]) -> Any:
    if op.kind == "add":
        return _update(state, op, args, _add)
    return _update(state, op, args, lambda old, value: _extreme(op.kind, old, value))


@semantics(atomic.AtomicScatterOp)
def _atomic_scatter(state: BlockState, op: Operation, args: list[Any]) -> Any:
    from tilec.interp.gather import gathered_elements

    view = args[0]
    rank = len(view.shape)
    offsets = args[1 : 1 + rank]
    indices = np.asarray(args[1 + rank])
    value = np.asarray(args[2 + rank])
    mask = args[3 + rank] if op.mask is not None else None
    shape = tuple(value.shape)
    coordinates, inside = gathered_elements(state, op, view, offsets, indices, mask, shape)
    if op.kind == "add":
        compute = _add
    else:

        def compute(old, new):
            return _extreme(op.kind, old, new)

    result = np.zeros(shape, view.array.dtype)
    lanes = np.flatnonzero(inside)  # row-major
    targets = np.ravel_multi_index(tuple(c.reshape(-1)[lanes] for c in coordinates), view.shape)
    values = value.reshape(-1)[lanes]
    olds = np.zeros(len(lanes), view.array.dtype)
    pending = np.arange(len(lanes))
    # One round per repeat: the first pending lane of each element updates it, then the next.
    while len(pending):
        _, first = np.unique(targets[pending], return_index=True)
        now = pending[first]
        where = np.unravel_index(targets[now], view.shape)
        old = view.read_elements(where).copy()
        olds[now] = old
        view.write_elements(where, compute(old, values[now]))
        pending = np.delete(pending, first)
    result.reshape(-1)[lanes] = olds
    return result


@semantics(atomic.AtomicCasOp)
def _atomic_cas(state: BlockState, op: Operation, args: list[Any]) -> Any:
    return _update(
        state, op, args, lambda old, compare, value: np.where(old == compare, value, old)
    )
