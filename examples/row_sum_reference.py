"""numpy references for row_sum.tile (`tilec run` checks the kernels against these).

Each function takes the kernel's arguments (numpy arrays) and returns the expected contents of
the tensor it writes. Sums are taken in f64: the kernels sum in f32, in another order.
"""

import numpy as np


def row_sum(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    return x.astype(np.float64).sum(axis=1).astype(np.float32)


def row_sum_whole(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    return x.astype(np.float64).sum(axis=1).astype(np.float32)
