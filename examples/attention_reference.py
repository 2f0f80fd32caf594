"""numpy references for attention.tile (`tilec run` checks the kernels against these).

Each function takes the kernel's arguments (numpy arrays and the scalar `scale`) and returns
the expected contents of `o`: softmax(q @ k.T * scale) @ v in f64, rounded to f16 once.
"""

import numpy as np

# 1/sqrt(64), the usual scale for a head dimension of 64 (any value would do).
SCALARS = {
    "attention": {"scale": 0.125},
    "attention_causal": {"scale": 0.125},
    "attention_gqa": {"scale": 0.125},
}


def _attention(q, k, v, scale, visible=None):
    s = np.einsum("bhmd,bhnd->bhmn", q.astype(np.float64), k.astype(np.float64)) * float(scale)
    if visible is not None:
        s = np.where(visible, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhmn,bhnd->bhmd", p, v.astype(np.float64)).astype(np.float16)


def attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, o: np.ndarray, scale: np.float32
) -> np.ndarray:
    return _attention(q, k, v, scale)


def attention_causal(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, o: np.ndarray, scale: np.float32
) -> np.ndarray:
    queries, keys = q.shape[2], k.shape[2]
    visible = (
        np.arange(keys)[None, :] <= np.arange(queries)[:, None]
    )  # query m sees key n when n <= m
    return _attention(q, k, v, scale, visible)


def attention_gqa(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, o: np.ndarray, scale: np.float32
) -> np.ndarray:
    group = q.shape[1] // k.shape[1]  # query heads per KV head
    return _attention(q, np.repeat(k, group, axis=1), np.repeat(v, group, axis=1), scale)
