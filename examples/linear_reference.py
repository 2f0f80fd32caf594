"""numpy references for linear.tile (`tilec run` checks the kernels against these): the
products in f64, rounded to f32 once."""

import numpy as np


def _f64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


def linear(x: np.ndarray, w: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (_f64(x) @ _f64(w).T).astype(y.dtype)


def linear_dx(dy: np.ndarray, w: np.ndarray, dx: np.ndarray) -> np.ndarray:
    return (_f64(dy) @ _f64(w)).astype(dx.dtype)


def linear_dw(dy: np.ndarray, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
    return (_f64(dy).T @ _f64(x)).astype(dw.dtype)
