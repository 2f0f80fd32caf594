"""What `tile.scan`, `tile.arg_reduce` and `tile.topk` compute (tilec.dialects.scan), in numpy.

A scan combines left to right, one position after another, rounding to the element type after
every step as every other op does (f16/bf16 steps computed in f32), so the interpreter's
cumsum of f32 is numpy's `np.add.accumulate`. Arg-reductions and topk compare values exactly:
ties go to the lower position and NaN ranks above every number (the first NaN wins `argmax`
and `argmin` alike, as in torch and numpy)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects import scan as scan_ops
from tilec.interp.numerics import BF16, F32
from tilec.interp.semantics import _float_combiner, semantics
from tilec.ir.core import Operation

if TYPE_CHECKING:
    from tilec.interp.machine import BlockState

_INT_COMBINERS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


@semantics(scan_ops.ScanOp)
def _scan(state: BlockState, op: Operation, args: list[Any]) -> Any:
    x = np.moveaxis(np.asarray(args[0]), op.axis, 0)
    if x.dtype.kind == "f" or x.dtype == BF16:
        combine, _ = _float_combiner(op.kind, x.dtype)
    else:
        combine = _INT_COMBINERS[op.kind]
    out = x.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(1, x.shape[0]):
            out[i] = combine(out[i - 1], x[i])  # integers wrap, as every integer op does
    return np.moveaxis(out, 0, op.axis)


def _comparable(x: np.ndarray) -> np.ndarray:
    """Values numpy orders exactly (bf16 widened; NaN stays NaN, -0 == +0)."""
    return x.astype(F32) if x.dtype == BF16 else x


@semantics(scan_ops.ArgReduceOp)
def _arg_reduce(state: BlockState, op: Operation, args: list[Any]) -> Any:
    x = _comparable(np.asarray(args[0]))
    # numpy's argmax/argmin return the first extreme, and the first NaN if there is one.
    found = (np.argmax if op.kind == "max" else np.argmin)(x, axis=op.axis)
    return np.asarray(found, dtype=np.int32)[()]


def topk_positions(x: np.ndarray, k: int, axis: int) -> np.ndarray:
    """The positions of the `k` largest elements along `axis`, descending, ties by lower
    position, NaN above every number: a stable ascending sort of the reversed axis puts equal
    values in decreasing position, so its last `k` entries, reversed, are the answer."""
    x = np.moveaxis(_comparable(np.asarray(x)), axis, -1)
    n = x.shape[-1]
    ascending = np.argsort(x[..., ::-1], axis=-1, kind="stable")
    positions = (n - 1 - ascending)[..., ::-1][..., :k]
    return np.moveaxis(positions, -1, axis)


@semantics(scan_ops.TopKOp)
def _topk(state: BlockState, op: Operation, args: list[Any]) -> Any:
    x = np.asarray(args[0])
    lanes = x.shape[op.axis]
    if op.k > lanes:
        raise state.error(
            op, f"takes the top {op.k} of an axis of {lanes} lane(s): its tile must hold k lanes"
        )
    positions = topk_positions(x, op.k, op.axis)
    values = np.take_along_axis(x, positions, axis=op.axis)
    return [values, positions.astype(np.int32)]
