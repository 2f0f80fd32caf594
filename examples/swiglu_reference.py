"""numpy reference for swiglu.tile (`tilec run` checks the kernel against it): silu(a) * b in
f64, rounded to the outputs' dtype once."""

import numpy as np


def swiglu(a: np.ndarray, b: np.ndarray, y: np.ndarray) -> np.ndarray:
    gate = a.astype(np.float64)
    return (gate / (1.0 + np.exp(-gate)) * b.astype(np.float64)).astype(y.dtype)
