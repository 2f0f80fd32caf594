"""numpy reference for embedding_bag.tile (`tilec run` checks the kernel against it).

Bag b sums the rows `ids[b, :lengths[b]]` of the table (cut at the padding; an empty bag or a
negative length gives zeros) in f64, rounded to the table's dtype once. Random inputs draw
the ids in range (`tilec.interp.gather.index_bounds`).
"""

import numpy as np


def embedding_bag(
    table: np.ndarray, ids: np.ndarray, lengths: np.ndarray, out: np.ndarray
) -> np.ndarray:
    bags, width = ids.shape
    sums = np.zeros((bags, table.shape[1]), np.float64)
    for b in range(bags):
        n = min(max(int(lengths[b]), 0), width)
        sums[b] = table[ids[b, :n]].astype(np.float64).sum(axis=0)
    return sums.astype(table.dtype)
