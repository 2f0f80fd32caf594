"""The model's operators in plain PyTorch, with the signatures of examples/torch/ops.py: the
eager model the tilec one is compared with, and the one `torch.compile` is timed on.

In bf16 they compute as LLaMA's own code does and as the tilec kernels do: norms, SwiGLU and
rotary in f32, rounded to the tensors' dtype once; the loss from f32 logits; the matmuls and
attention in bf16 (cuBLAS, SDPA) with f32 accumulation. In f32 the conversions do nothing."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w)


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    r = x.float()
    return (r * torch.rsqrt((r * r).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (F.silu(a.float()) * b.float()).to(a.dtype)


def rotary(x: torch.Tensor, cos_t: torch.Tensor, sin_t: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.float().chunk(2, dim=-1)
    c, s = cos_t[:, None, :], sin_t[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), target.long(), reduction="none")


def embedding(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return F.embedding(ids.long(), table)
