"""numpy reference for paged_decode.tile (`tilec run` checks the kernel against it).

Sequence b's keys and values are the first context_lens[b] tokens of its pages, in the order
`block_table[b]` lists them (16 tokens a page), cut at the table's columns; the output is
softmax(q · k * scale) @ v per query head in f64, rounded to f16 once, and zeros for an empty
context. Random inputs draw the page numbers in range (`tilec.interp.gather.index_bounds`).
"""

import numpy as np

PAGE = 16  # tokens per page, as the kernel's cache types fix it

# 1/sqrt(64), the usual scale for a head dimension of 64 (any value would do).
SCALARS = {"paged_decode": {"scale": 0.125}}


def gathered_cache(cache: np.ndarray, table_row: np.ndarray, length: int) -> np.ndarray:
    """[G, tokens, D]: the first `length` tokens of the pages in `table_row`, in order."""
    pages = min(-(-length // PAGE), len(table_row)) if length > 0 else 0
    tokens = cache[table_row[:pages]]  # [pages, G, PAGE, D]
    tokens = tokens.transpose(1, 0, 2, 3).reshape(cache.shape[1], pages * PAGE, cache.shape[3])
    return tokens[:, : max(length, 0)]


def paged_decode(
    q: np.ndarray,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    block_table: np.ndarray,
    context_lens: np.ndarray,
    o: np.ndarray,
    scale: np.float32,
) -> np.ndarray:
    batch, heads, dim = q.shape
    group = heads // k_cache.shape[1]  # query heads per KV head
    out = np.zeros((batch, heads, dim), np.float64)
    for b in range(batch):
        k = gathered_cache(k_cache, block_table[b], int(context_lens[b])).astype(np.float64)
        v = gathered_cache(v_cache, block_table[b], int(context_lens[b])).astype(np.float64)
        if k.shape[1] == 0:
            continue
        k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)  # [H, tokens, D]
        s = np.einsum("hd,htd->ht", q[b].astype(np.float64), k) * float(scale)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        out[b] = np.einsum("ht,htd->hd", p, v)
    return out.astype(np.float16)
