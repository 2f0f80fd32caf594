"""numpy references for vector_add.tile (`tilec run` checks the kernels against these).

Each function takes the kernel's arguments (numpy arrays and scalars) and returns the expected
contents of the tensor it writes.
"""

import numpy as np


def vector_add(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> np.ndarray:
    return x + y  # f32 + f32, rounded to f32: what the kernel computes, to the bit


def saxpy(alpha: np.float32, x: np.ndarray, y: np.ndarray, out: np.ndarray) -> np.ndarray:
    return alpha * x + y  # f32 throughout, rounded after each op as the kernel does
