"""numpy reference for rotary.tile (`tilec run` checks the kernel against it).

Takes the kernel's arguments — x and y as [S, H, 2, D // 2] views of [S, H, D] tensors — and
returns the expected `y` in f64, rounded to y's dtype once. Random cos_t and sin_t are not the
cosines and sines of one angle, which the kernel does not rely on.
"""

import numpy as np


def _rotate(x: np.ndarray, cos_t: np.ndarray, sin_t: np.ndarray) -> np.ndarray:
    x1, x2 = x[:, :, 0, :].astype(np.float64), x[:, :, 1, :].astype(np.float64)
    c = cos_t.astype(np.float64)[:, None, :]  # one angle per position, for every head
    s = sin_t.astype(np.float64)[:, None, :]
    return np.stack([x1 * c - x2 * s, x2 * c + x1 * s], axis=2)


def rotary(x: np.ndarray, cos_t: np.ndarray, sin_t: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _rotate(x, cos_t, sin_t).astype(y.dtype)
