"""numpy references for gemm_layouts.tile (`tilec run` checks the kernels against these).

Each function takes the kernel's arguments (numpy arrays) and returns the expected contents of
`c`: the product in f64, rounded once to c's dtype (f16 or bf16). The kernels accumulate in f32.
"""

import numpy as np


def _product(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(c.dtype)


def gemm_nn(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return _product(a, b, c)


def gemm_nt(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return _product(a, b.T, c)


def gemm_tn(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return _product(a.T, b, c)


def gemm_tt(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return _product(a.T, b.T, c)


def gemm_nn_bf16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return gemm_nn(a, b, c)


def gemm_nt_bf16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return gemm_nt(a, b, c)


def gemm_tn_bf16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return gemm_tn(a, b, c)


def gemm_tt_bf16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return gemm_tt(a, b, c)
