"""numpy reference for swiglu_backward.tile (`tilec run` checks the kernel against it): the
gradients of silu(a) * b in f64, rounded to the outputs' dtype once."""

import numpy as np


def swiglu_backward(a, b, gy, da, db):
    x, g = a.astype(np.float64), gy.astype(np.float64)
    sig = 1.0 / (1.0 + np.exp(-x))
    return {
        "da": (g * b.astype(np.float64) * sig * (1.0 + x * (1.0 - sig))).astype(da.dtype),
        "db": (g * x * sig).astype(db.dtype),
    }
