"""numpy reference for int8_gemm.tile (`tilec run` checks the kernel against it).

The i32 sum of products is exact; the scaling is done in f64 and rounded to f16 once, while the
kernel rounds to f32 after each of its two multiplications (well inside 2 ulp of f16).
"""

import numpy as np


def int8_gemm(
    a: np.ndarray, b: np.ndarray, row_scale: np.ndarray, col_scale: np.ndarray, c: np.ndarray
) -> np.ndarray:
    acc = a.astype(np.int64) @ b.astype(np.int64)
    scaled = acc * row_scale.astype(np.float64)[:, None] * col_scale.astype(np.float64)[None, :]
    return scaled.astype(np.float16)


def int8_gemm_nt(
    a: np.ndarray, b: np.ndarray, row_scale: np.ndarray, col_scale: np.ndarray, c: np.ndarray
) -> np.ndarray:
    return int8_gemm(a, b.T, row_scale, col_scale, c)
