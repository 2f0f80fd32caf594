"""numpy references for embedding_backward.tile: each row of grad_out added, in f64, into the
row of `grad_table` its id names, on top of what `grad_table` held before the launch.

Random inputs draw the ids in range (`tilec.interp.gather.index_bounds`).
"""

import numpy as np


def _scatter_add(grad_out: np.ndarray, ids: np.ndarray, grad_table: np.ndarray) -> np.ndarray:
    total = grad_table.astype(np.float64)
    np.add.at(total, ids.astype(np.int64), grad_out.astype(np.float64))
    return total


def embedding_backward(grad_out: np.ndarray, ids: np.ndarray, grad_table: np.ndarray):
    return _scatter_add(grad_out, ids, grad_table).astype(grad_table.dtype)
