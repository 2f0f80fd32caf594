"""The semantics of `tile.philox` (`tilec.dialects.random`) in the interpreter: Philox-4x32-10,
exactly, on whole tiles in numpy's uint64 (a product of two 32-bit words fits in 64 bits, so
its high and low halves are a shift and a mask away)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects.random import PHILOX_KEY_STEPS, PHILOX_MULTIPLIERS, PHILOX_ROUNDS, PhiloxOp
from tilec.interp.semantics import semantics
from tilec.ir.core import Operation

if TYPE_CHECKING:
    from tilec.interp.machine import BlockState

__all__ = ["philox"]

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


@semantics(PhiloxOp)
def _philox(state: BlockState, op: Operation, args: list[Any]) -> Any:
    seed, offsets = args
    word = philox(int(seed), offsets)[op.attributes["word"].value].view(np.int32)
    return word if np.ndim(offsets) else word[()]
