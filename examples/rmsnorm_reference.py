"""numpy reference for rmsnorm.tile (`tilec run` checks the kernel against it).

Takes the kernel's arguments (numpy arrays and the scalar `eps`) and returns the expected
contents of `y`, computed in f64 and rounded to y's dtype once.
"""

import numpy as np

# A random eps in [-1, 1) could make the mean square negative; use the customary one.
SCALARS = {"rmsnorm": {"eps": 1e-6}}


def rmsnorm(x: np.ndarray, w: np.ndarray, y: np.ndarray, eps: np.float32) -> np.ndarray:
    wide = x.astype(np.float64)
    mean_square = (wide * wide).mean(axis=1, keepdims=True)
    return (wide / np.sqrt(mean_square + np.float64(eps)) * w.astype(np.float64)).astype(y.dtype)
