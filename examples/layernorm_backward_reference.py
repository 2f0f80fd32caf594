"""numpy reference for layernorm_backward.tile: the gradients of y = xhat * w + b in f64,
rounded to f32 once; dw and db are added to what they held before the launch (the kernel
accumulates into them)."""

import numpy as np

SCALARS = {"layernorm_backward": {"eps": 1e-5}}


def layernorm_backward(x, w, gy, dx, dw, db, eps):
    wide, dy = x.astype(np.float64), gy.astype(np.float64)
    d = wide - wide.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt((d * d).mean(axis=1, keepdims=True) + float(eps))
    xhat = d * rstd
    g = dy * w.astype(np.float64)
    grad = rstd * (
        g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True)
    )
    return {
        "dx": grad.astype(dx.dtype),
        "dw": (dw.astype(np.float64) + (dy * xhat).sum(axis=0)).astype(dw.dtype),
        "db": (db.astype(np.float64) + dy.sum(axis=0)).astype(db.dtype),
    }
