"""numpy reference for rmsnorm_backward.tile (`tilec run` checks the kernels against it): the
gradients of y = x * rstd * w in f64, rounded to f32 once."""

import numpy as np

SCALARS = {"rmsnorm_dx": {"eps": 1e-6}}


def _rstd(x: np.ndarray, eps: float) -> np.ndarray:
    wide = x.astype(np.float64)
    return 1.0 / np.sqrt((wide * wide).mean(axis=1) + eps)


def rmsnorm_dx(x, w, gy, dx, rstd, eps):
    wide, wg = x.astype(np.float64), gy.astype(np.float64) * w.astype(np.float64)
    s = _rstd(x, float(eps))[:, None]
    d = (wide * wg).mean(axis=1, keepdims=True)
    return {
        "dx": (s * (wg - wide * s * s * d)).astype(dx.dtype),
        "rstd": s[:, 0].astype(rstd.dtype),
    }


def rmsnorm_dw(x, gy, rstd, dw):
    wide = gy.astype(np.float64) * x.astype(np.float64) * rstd.astype(np.float64)[:, None]
    return wide.sum(axis=0).astype(dw.dtype)
