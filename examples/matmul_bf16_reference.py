"""numpy reference for matmul_bf16.tile: the product in f64, rounded to bf16 once (the kernel
accumulates in f32)."""

import numpy as np


def matmul_bf16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(c.dtype)
