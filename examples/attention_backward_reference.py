"""numpy references for attention_backward.tile (`tilec run` checks the kernels against
these): causal attention and its gradients in f64, rounded to f32 once."""

import numpy as np

SCALARS = {name: {"scale": 0.125} for name in ("attention_lse", "attention_dkdv", "attention_dq")}


def _probabilities(q, k, scale):
    """p = softmax of the causal scores, and each row's log-sum-exp."""
    s = np.einsum("bhsd,bhtd->bhst", q.astype(np.float64), k.astype(np.float64)) * float(scale)
    visible = np.arange(k.shape[2])[None, :] <= np.arange(q.shape[2])[:, None]
    s = np.where(visible, s, -np.inf)
    peak = s.max(axis=-1, keepdims=True)
    lse = peak + np.log(np.exp(s - peak).sum(axis=-1, keepdims=True))
    return np.exp(s - lse), lse[..., 0]


def _ds(q, k, v, do, lse, delta, scale):
    """p and the scores' gradient ds = p * (do @ v.T - delta) * scale, from the saved lse."""
    s = np.einsum("bhsd,bhtd->bhst", q.astype(np.float64), k.astype(np.float64)) * float(scale)
    visible = np.arange(k.shape[2])[None, :] <= np.arange(q.shape[2])[:, None]
    p = np.where(visible, np.exp(s - lse.astype(np.float64)[..., None]), 0.0)
    dp = np.einsum("bhsd,bhtd->bhst", do.astype(np.float64), v.astype(np.float64))
    return p, p * (dp - delta.astype(np.float64)[..., None]) * float(scale)


def attention_lse(q, k, v, o, lse, scale):
    p, row_lse = _probabilities(q, k, scale)
    out = np.einsum("bhst,bhtd->bhsd", p, v.astype(np.float64))
    return {"o": out.astype(o.dtype), "lse": row_lse.astype(lse.dtype)}


def attention_delta(o, do, delta):
    return (o.astype(np.float64) * do.astype(np.float64)).sum(axis=-1).astype(delta.dtype)


def attention_dkdv(q, k, v, do, lse, delta, dk, dv, scale):
    p, ds = _ds(q, k, v, do, lse, delta, scale)
    return {
        "dk": np.einsum("bhst,bhsd->bhtd", ds, q.astype(np.float64)).astype(dk.dtype),
        "dv": np.einsum("bhst,bhsd->bhtd", p, do.astype(np.float64)).astype(dv.dtype),
    }


def attention_dq(q, k, v, do, lse, delta, dq, scale):
    _, ds = _ds(q, k, v, do, lse, delta, scale)
    return np.einsum("bhst,bhtd->bhsd", ds, k.astype(np.float64)).astype(dq.dtype)
