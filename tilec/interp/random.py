"""The semantics of `tile.philox` (`tilec.dialects.random`) in the interpreter: Philox-4x32-10,
exactly, on whole tiles in numpy's uint64 (a product of two 32-bit words fits in 64 bits, so
its high and low halves are a shift and a mask away), one run per four offsets; and the check
of the `group` promise the lowering relies on. `tile.rand_threshold` by its definition (a
bisection over the magnitudes, `tilec.dialects.random.rand_threshold`), not by the lowering's
formula, so that translation validation checks the rewrite that introduces it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects.random import (
    PHILOX_KEY_STEPS,
    PHILOX_MULTIPLIERS,
    PHILOX_ROUNDS,
    PhiloxOp,
    RandThresholdOp,
    rand_threshold,
)
from tilec.interp.semantics import semantics
from tilec.ir.core import Operation
from tilec.ir.types import element_type

if TYPE_CHECKING:
    from tilec.interp.machine import BlockState

__all__ = ["philox", "philox_stream"]

_LOW = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)


def philox(seed: int, offsets: Any, rounds: int = PHILOX_ROUNDS) -> list[np.ndarray]:
    """The four uint32 words of Philox-4x32 for key `seed` (sign-extended to 64 bits) and
    counters (offset lo, offset hi, 0, 0), per element of the integer array `offsets` (the
    high word is 0 for offsets narrower than 64 bits)."""
    offsets = np.asarray(offsets)
    wide = offsets.dtype.itemsize == 8
    bits = offsets.astype(np.int64).view(np.uint64)
    key = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
    k0, k1 = np.uint64(key & 0xFFFFFFFF), np.uint64(key >> 32)
    c0 = bits & _LOW
    c1 = (bits >> _32) if wide else np.zeros_like(bits)
    c2 = np.zeros_like(bits)
    c3 = np.zeros_like(bits)
    a, b = (np.uint64(m) for m in PHILOX_MULTIPLIERS)
    step0, step1 = (np.uint64(s) for s in PHILOX_KEY_STEPS)
    for _ in range(rounds):
        product0, product2 = a * c0, b * c2
        c0, c1, c2, c3 = (
            (product2 >> _32) ^ c1 ^ k0,
            product2 & _LOW,
            (product0 >> _32) ^ c3 ^ k1,
            product0 & _LOW,
        )
        k0, k1 = (k0 + step0) & _LOW, (k1 + step1) & _LOW
    return [word.astype(np.uint32) for word in (c0, c1, c2, c3)]


def philox_stream(seed: int, offsets: Any, xor: int = 0, width: int | None = None) -> np.ndarray:
    """The stream's i32 word of every offset: word `(o mod 4) xor xor` of Philox-4x32-10 at
    counter `o div 4`, with `o` the offset's bits read unsigned at `width` (32 or 64; default
    the array's own)."""
    offsets = np.asarray(offsets)
    width = width or 8 * offsets.dtype.itemsize
    unsigned = offsets.astype(np.int64).astype(np.uint64 if width == 64 else np.uint32)
    words = np.stack(philox(seed, unsigned >> 2))
    which = ((unsigned & 3) ^ xor).astype(np.intp)
    return np.take_along_axis(words, which[None, ...], axis=0)[0].view(np.int32)


def _check_group(state: BlockState, op: Operation, offsets: np.ndarray, group: int) -> None:
    """`group = g`'s promise: along the last dimension, every aligned run of g elements holds
    consecutive offsets, the first a multiple of g."""
    kept = offsets.shape[-1] % group == 0
    if kept:
        runs = offsets.astype(np.int64).reshape(*offsets.shape[:-1], -1, group)
        first = runs[..., :1]
        kept = not np.any(first % group) and not np.any(runs != first + np.arange(group))
    if not kept:
        raise state.error(
            op,
            f"breaks its group = {group} promise: along the last dimension, aligned runs of "
            f"{group} offsets are not consecutive from a multiple of {group}",
            hint="the pass that set group (vectorize) proved something false",
        )


@semantics(PhiloxOp)
def _philox(state: BlockState, op: Operation, args: list[Any]) -> Any:
    seed, offsets = args
    offsets = np.asarray(offsets)
    group = op.attributes.get("group")
    if group is not None and offsets.ndim:
        _check_group(state, op, offsets, group.value)
    width = element_type(op.offsets.type).width
    word = philox_stream(int(seed), offsets, op.attributes["xor"].value, width)
    return word if offsets.ndim else word[()]


@semantics(RandThresholdOp)
def _rand_threshold(state: BlockState, op: Operation, args: list[Any]) -> Any:
    (p,) = args
    return np.int32(rand_threshold(float(p), op.predicate))
