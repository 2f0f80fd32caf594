"""numpy references for matmul.tile (`tilec run` checks the kernels against these).

Each function takes the kernel's arguments (numpy arrays) and returns the expected contents of
`c`: the product in f64, rounded to f16 once. The kernels accumulate in f32.
"""

import numpy as np


def matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)


def matmul_pinned(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return matmul(a, b, c)
