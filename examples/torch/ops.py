"""The operators of the training model (examples/torch/model.py) as tilec operators, each with
a backward of tilec kernels registered through autograd (`tilec.torch.op`, docs/torch.md).

Every kernel is written once for f32 and bf16 (and most for f16) with a dtype parameter
(docs/language.md): one operator serves the f32 model and the bf16 one, the tensors choosing
the kernel's binding. Statistics, softmaxes and dot accumulators are f32 inside the kernels;
in bf16 every dot runs on tensor cores. CPU tensors run in the reference interpreter, CUDA
tensors the compiled kernels.
"""

from __future__ import annotations

from pathlib import Path

import torch

import tilec
import tilec.torch as tt

EXAMPLES = Path(__file__).resolve().parents[1]


def _op(example: str, kernel: str) -> tt.TilecOp:
    return tt.op(f"tilec_llama::{kernel}", tilec.load_kernel(EXAMPLES / f"{example}.tile", kernel))


def _save_inputs(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


# Linear, y = x @ w.T: dx = dy @ w, dw = dy.T @ x.
_linear = _op("linear", "linear")
_linear_dx = _op("linear", "linear_dx")
_linear_dw = _op("linear", "linear_dw")


def _linear_backward(ctx, dy):
    x, w = ctx.saved_tensors
    dy = dy.contiguous()
    return _linear_dx(dy, w), _linear_dw(dy, x)


_linear.register_autograd(_linear_backward, setup_context=_save_inputs)


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x[..., K] @ w[N, K].T."""
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    return _linear(rows, w).view(*x.shape[:-1], w.shape[0])


# RMSNorm: rmsnorm_backward.tile's dx (which writes rstd) and dw.
_rmsnorm = _op("rmsnorm", "rmsnorm")
_rmsnorm_dx = _op("rmsnorm_backward", "rmsnorm_dx")
_rmsnorm_dw = _op("rmsnorm_backward", "rmsnorm_dw")


def _rmsnorm_setup(ctx, inputs, output):
    x, w, eps = inputs
    ctx.save_for_backward(x, w)
    ctx.eps = eps


def _rmsnorm_backward(ctx, gy):
    x, w = ctx.saved_tensors
    gy = gy.contiguous()
    dx, rstd = _rmsnorm_dx(x, w, gy, ctx.eps)
    return dx, _rmsnorm_dw(x, gy, rstd), None


_rmsnorm.register_autograd(_rmsnorm_backward, setup_context=_rmsnorm_setup)


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """x[M, N] / rms(x) * w, per row."""
    return _rmsnorm(x.contiguous(), w, eps)


# SwiGLU, y = silu(a) * b: one element-wise kernel writes both gradients.
_swiglu = _op("swiglu", "swiglu")
_swiglu_backward = _op("swiglu_backward", "swiglu_backward")
_swiglu.register_autograd(
    lambda ctx, gy: _swiglu_backward(*ctx.saved_tensors, gy.contiguous()),
    setup_context=_save_inputs,
)


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _swiglu(a.contiguous(), b.contiguous())


# Rotary embedding: a rotation, so its backward is the rotation by the opposite angle.
_rotary = _op("rotary", "rotary")


def _rotary_setup(ctx, inputs, output):
    _, cos_t, sin_t = inputs
    ctx.save_for_backward(cos_t, sin_t)


def _rotary_backward(ctx, gy):
    cos_t, sin_t = ctx.saved_tensors
    return _rotary(gy.contiguous(), cos_t, -sin_t), None, None


_rotary.register_autograd(_rotary_backward, setup_context=_rotary_setup)


def rotary(x: torch.Tensor, cos_t: torch.Tensor, sin_t: torch.Tensor) -> torch.Tensor:
    """x[R, H, D] rotated (GPT-NeoX half-split) by the angles of its rows: cos_t, sin_t[R, D/2]
    (f32 whatever x's dtype)."""
    rows, heads, dim = x.shape
    halves = x.contiguous().view(rows, heads, 2, dim // 2)
    return _rotary(halves, cos_t, sin_t).view(rows, heads, dim)


# Causal attention: the forward keeps each row's log-sum-exp; the backward is
# attention_backward.tile's delta, dK/dV and dQ kernels.
_attention = _op("attention_backward", "attention_lse")
_attention_delta = _op("attention_backward", "attention_delta")
_attention_dkdv = _op("attention_backward", "attention_dkdv")
_attention_dq = _op("attention_backward", "attention_dq")


def _attention_setup(ctx, inputs, output):
    q, k, v, scale = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.scale = scale


def _attention_backward(ctx, do, _dlse):
    q, k, v, o, lse = ctx.saved_tensors
    do = do.contiguous()
    delta = _attention_delta(o, do)
    dk, dv = _attention_dkdv(q, k, v, do, lse, delta, ctx.scale)
    dq = _attention_dq(q, k, v, do, lse, delta, ctx.scale)
    return dq, dk, dv, None


_attention.register_autograd(_attention_backward, setup_context=_attention_setup)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal self-attention of q, k, v[B, H, S, D]."""
    o, _ = _attention(q.contiguous(), k.contiguous(), v.contiguous(), scale)
    return o


# Cross-entropy per row: softmax minus the target's one-hot, times the loss's gradient.
_cross_entropy = _op("cross_entropy", "cross_entropy")
_cross_entropy_backward = _op("cross_entropy_backward", "cross_entropy_backward")
_cross_entropy.register_autograd(
    lambda ctx, gloss: (_cross_entropy_backward(*ctx.saved_tensors, gloss.contiguous()), None),
    setup_context=_save_inputs,
)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The loss of each row of logits[M, V] for its target (i32[M])."""
    return _cross_entropy(logits.contiguous(), target)


# Embedding: a gather of the table's rows; its backward a scatter-add of the rows' gradients
# into a zeroed table (atomic adds: repeated ids sum).
_embedding = _op("embedding", "embedding")
_embedding_backward = _op("embedding_backward", "embedding_backward")


def _embedding_setup(ctx, inputs, output):
    table, ids = inputs
    ctx.save_for_backward(ids)
    ctx.rows = table.shape[0]


def _embedding_backward_of(ctx, gout):
    (ids,) = ctx.saved_tensors
    table_grad = gout.new_zeros(ctx.rows, gout.shape[1])
    _embedding_backward(gout.contiguous(), ids, table_grad)
    return table_grad, None


_embedding.register_autograd(_embedding_backward_of, setup_context=_embedding_setup)


def embedding(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Rows ids (i32[M]) of table[V, D]."""
    return _embedding(table, ids)
