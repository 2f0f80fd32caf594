"""numpy reference for topk_softmax.tile (`tilec run` checks the kernels against it).

`topk_softmax` returns the expected `weights` and `experts`: the softmax of each row in f64,
its two largest entries (ties to the lower expert, by a stable sort) renormalised, rounded to
f32 once. `greedy_token` returns each row's argmax (numpy's: the first maximum, the first NaN
if any).
"""

import numpy as np


def topk_softmax(logits: np.ndarray, weights: np.ndarray, experts: np.ndarray):
    wide = logits.astype(np.float64)
    p = np.exp(wide - wide.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    top = np.argsort(-p, axis=1, kind="stable")[:, :2]
    chosen = np.take_along_axis(p, top, axis=1)
    renormalised = chosen / chosen.sum(axis=1, keepdims=True)
    return {"weights": renormalised.astype(np.float32), "experts": top.astype(np.int32)}


def greedy_token(logits: np.ndarray, token: np.ndarray) -> np.ndarray:
    return np.argmax(logits, axis=1).astype(np.int32)
