"""numpy reference for bias_gelu.tile (`tilec run` checks the kernel against it).

Returns the expected `y`: the exact GELU, x/2 (1 + erf(x / sqrt 2)), of x + b in f64, rounded
to f16 once.
"""

import math

import numpy as np


def bias_gelu(x: np.ndarray, b: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = x.astype(np.float64) + b.astype(np.float64)[None, :]
    erf = np.vectorize(math.erf)
    return (0.5 * z * (1.0 + erf(z / math.sqrt(2.0)))).astype(np.float16)
