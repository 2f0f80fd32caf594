"""numpy reference for layernorm.tile (`tilec run` checks the kernel against it).

Takes the kernel's arguments (numpy arrays and the scalar `eps`) and returns the expected
contents of `y`, computed in f64 and rounded to f16 once.
"""

import numpy as np

# A random eps in [-1, 1) could make the variance negative; use the customary one.
SCALARS = {"layernorm": {"eps": 1e-5}}


def layernorm(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, y: np.ndarray, eps: np.float32
) -> np.ndarray:
    wide = x.astype(np.float64)
    mu = wide.mean(axis=1, keepdims=True)
    d = wide - mu
    variance = (d * d).mean(axis=1, keepdims=True)
    normalized = d / np.sqrt(variance + np.float64(eps))
    return (normalized * w.astype(np.float64) + b.astype(np.float64)).astype(np.float16)
