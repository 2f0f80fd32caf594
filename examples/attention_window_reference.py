"""numpy references for attention_window.tile (`tilec run` checks the kernels against these).

Each function takes the kernel's arguments (numpy arrays and the scalars `scale`, `W`) and
returns the expected contents of `o`: softmax(q @ k.T * scale) @ v over the keys each query
sees, in f64, rounded to f16 once.
"""

import numpy as np

# A window of 20 keys: not a multiple of any tile size, smaller than some sequences the tests
# run and larger than others.
SCALARS = {"attention_window": {"scale": 0.125, "W": 20}}


def _attention(q, k, v, scale, visible):
    s = np.einsum("bhmd,bhnd->bhmn", q.astype(np.float64), k.astype(np.float64)) * float(scale)
    s = np.where(visible, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhmn,bhnd->bhmd", p, v.astype(np.float64)).astype(np.float16)


def attention_window(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    o: np.ndarray,
    scale: np.float32,
    W: np.int32,
) -> np.ndarray:
    queries, keys = np.arange(q.shape[2])[:, None], np.arange(k.shape[2])[None, :]
    visible = (keys <= queries) & (keys > queries - int(W))  # query i sees i - W < j <= i
    return _attention(q, k, v, scale, visible)
