"""numpy references for embedding.tile (`tilec run` checks the kernels against these).

Random inputs draw the ids in range (`tilec.interp.gather.index_bounds`), so every row is a
row of the table.
"""

import numpy as np

SCALARS = {"embedding_scale": {"scale": 8.0}}


def embedding(table: np.ndarray, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
    return table[ids]


def embedding_scale(
    table: np.ndarray, ids: np.ndarray, scale: float, out: np.ndarray
) -> np.ndarray:
    return (table[ids].astype(np.float64) * scale).astype(np.float32)
