"""numpy reference for matmul_pipelined.tir (`tilec run examples/ir/matmul_pipelined.tir`)."""

import numpy as np


def matmul_pipelined(A, B, C):
    return {"C": A.astype(np.float32) @ B.astype(np.float32)}
