"""numpy reference for dropout.tile (`tilec run` checks the kernel against it): the keep mask
from its own Philox-4x32-10 (the stream docs/language.md specifies, written out again here so
that the check is independent of tilec's), the scale 1 / (1 - p) rounded to f32."""

import numpy as np

SCALARS = {"dropout": {"p": 0.25, "seed": 1234}, "dropout_f16": {"p": 0.5, "seed": -7}}

_LOW = np.uint64(0xFFFFFFFF)


def uniform(seed: int, offsets: np.ndarray) -> np.ndarray:
    """rand(seed, offsets) for i32 offsets: word (offset mod 4) of Philox-4x32-10 with key
    (seed lo, seed hi) and counter (offset div 4, 0, 0, 0), mapped to f32 in [0, 1) as Triton
    does."""
    key = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
    k0, k1 = np.uint64(key & 0xFFFFFFFF), np.uint64(key >> 32)
    unsigned = offsets.astype(np.uint32).astype(np.uint64)
    c0 = unsigned >> np.uint64(2)
    c1, c2, c3 = (np.zeros_like(c0) for _ in range(3))
    for _ in range(10):
        p0, p2 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (
            (p2 >> np.uint64(32)) ^ c1 ^ k0,
            p2 & _LOW,
            (p0 >> np.uint64(32)) ^ c3 ^ k1,
            p0 & _LOW,
        )
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & _LOW, (k1 + np.uint64(0xBB67AE85)) & _LOW
    words = np.stack([c0, c1, c2, c3])
    which = (unsigned & np.uint64(3)).astype(np.intp)
    word = np.take_along_axis(words, which[None], axis=0)[0].astype(np.uint32).view(np.int32)
    magnitude = np.where(word < 0, ~word, word)
    return magnitude.astype(np.float32) * np.float32(4.6566127342e-10)


def _dropout(x: np.ndarray, p: np.float32, seed: int) -> np.ndarray:
    m, n = x.shape
    offsets = (np.arange(m, dtype=np.int32)[:, None] * np.int32(n)) + np.arange(n, dtype=np.int32)
    scale = np.float32(1.0) / (np.float32(1.0) - np.float32(p))
    keep = uniform(seed, offsets) > np.float32(p)
    return np.where(keep, x.astype(np.float32) * scale, np.float32(0.0))


def dropout(x: np.ndarray, y: np.ndarray, p: np.float32, seed: np.int32) -> np.ndarray:
    return _dropout(x, p, int(seed)).astype(y.dtype)


def dropout_f16(x: np.ndarray, y: np.ndarray, p: np.float32, seed: np.int32) -> np.ndarray:
    return _dropout(x, p, int(seed)).astype(y.dtype)
