"""numpy reference for fp8_gemm.tile (`tilec run` checks the kernel against it).

Products of two f8 values are exact in f64 and the sums nearly so; the scaling is done in f64 and
rounded to bf16 once, while the kernel sums in f32 and rounds after each of its multiplications.
"""

import ml_dtypes
import numpy as np

# Of the largest output, on the GPU only: on sm_90a the tensor cores sum fp8 products in fewer
# bits than IEEE f32 (H200: 7.1e-4 of the largest output at K = 512, e5m2 into f32); the
# interpreter sums them in f32 and keeps f32's default. fp8_gemm's bf16 output keeps bf16's.
GPU_TOLERANCES = {"fp8_gemm_e5m2": 2e-3}


def fp8_gemm(
    x: np.ndarray, w: np.ndarray, x_scale: np.ndarray, w_scale: np.ndarray, y: np.ndarray
) -> np.ndarray:
    acc = x.astype(np.float64) @ w.astype(np.float64).T
    scaled = acc * x_scale.astype(np.float64)[:, None] * w_scale.astype(np.float64)[None, :]
    return scaled.astype(ml_dtypes.bfloat16)


def fp8_gemm_e5m2(x: np.ndarray, w: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x.astype(np.float64) @ w.astype(np.float64).T).astype(np.float32)
