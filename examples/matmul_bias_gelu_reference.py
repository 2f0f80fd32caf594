"""numpy reference for matmul_bias_gelu.tile (`tilec run` checks the kernel against it).

Takes the kernel's arguments (numpy arrays) and returns the expected contents of `c`:
gelu(a @ b + bias) with the exact (erf) gelu, in f64, rounded to f16 once.
"""

import math

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def matmul_bias_gelu(a: np.ndarray, b: np.ndarray, bias: np.ndarray, c: np.ndarray) -> np.ndarray:
    z = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    gelu = 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0)).astype(np.float64))
    return gelu.astype(np.float16)
