"""numpy reference for swiglu.tile (`tilec run` checks the kernel against it): silu(a) * b in
f64, rounded to bf16 once."""

import numpy as np


def swiglu(a: np.ndarray, b: np.ndarray, y: np.ndarray) -> np.ndarray:
    gate = a.astype(np.float64)
    return (gate / (1.0 + np.exp(-gate)) * b.astype(np.float64)).astype(y.dtype)


swiglu_f32 = swiglu  # rounds to y's dtype
