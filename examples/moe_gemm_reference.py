"""numpy reference for moe_gemm.tile (`tilec run` checks the kernel against it).

Expert by expert, in order, the rows expert_offsets[e] .. expert_offsets[e + 1] of y (cut to
0 .. T) are x's rows times w[e].T in f64, rounded to bf16 once (the kernel accumulates in f32);
rows no expert names keep what y held, and a row two experts name holds the later one's (random
offsets overlap; a model's are sorted, from 0 to T).
"""

import numpy as np


def moe_gemm(x: np.ndarray, w: np.ndarray, expert_offsets: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = y.copy()
    rows = x.shape[0]
    for e in range(w.shape[0]):
        lo = min(max(int(expert_offsets[e]), 0), rows)
        hi = min(max(int(expert_offsets[e + 1]), 0), rows)
        if lo < hi:
            product = x[lo:hi].astype(np.float64) @ w[e].astype(np.float64).T
            out[lo:hi] = product.astype(y.dtype)
    return out
