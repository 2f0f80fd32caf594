"""A small LLaMA-style decoder: token embedding, pre-norm blocks of RMSNorm, causal attention
with rotary embedding and a SwiGLU MLP, a final RMSNorm, an output projection and the
cross-entropy loss. No biases, as LLaMA.

The model holds only parameters; `loss(ids, targets)` computes through a set of operators, so
one set of weights runs through tilec's operators (examples/torch/ops.py) or through plain
PyTorch (examples/torch/reference.py) -- the same init and the same data, by construction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType

import torch
from torch import nn


@dataclass(frozen=True)
class Config:
    vocab: int
    dim: int
    layers: int
    heads: int
    hidden: int  # the MLP's inner width
    seq: int
    batch: int
    eps: float = 1e-6
    rope_base: float = 10000.0


class Block(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        d, h = config.dim, config.hidden

        def weight(rows: int, cols: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(rows, cols) / math.sqrt(cols))

        self.attention_norm = nn.Parameter(torch.ones(d))
        self.wq, self.wk, self.wv, self.wo = (weight(d, d) for _ in range(4))
        self.mlp_norm = nn.Parameter(torch.ones(d))
        self.w_gate, self.w_up, self.w_down = weight(h, d), weight(h, d), weight(d, h)


class Decoder(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.embedding = nn.Parameter(torch.randn(config.vocab, config.dim))
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = nn.Parameter(torch.ones(config.dim))
        self.output = nn.Parameter(torch.randn(config.vocab, config.dim) / math.sqrt(config.dim))

    def rotary_angles(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of each (batch, position) row's angles, [batch * seq, head_dim / 2]."""
        c = self.config
        half = c.dim // c.heads // 2
        frequencies = c.rope_base ** (-torch.arange(half, dtype=torch.float64) / half)
        angles = torch.arange(c.seq, dtype=torch.float64)[:, None] * frequencies[None, :]
        angles = angles.repeat(c.batch, 1).to(device=device, dtype=torch.float32)
        return angles.cos(), angles.sin()

    def loss(self, ops: ModuleType, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The mean next-token loss of ids, targets (i32[batch, seq]) computed by `ops`."""
        c = self.config
        rows, head_dim = c.batch * c.seq, c.dim // c.heads
        cos_t, sin_t = self.rotary_angles(ids.device)
        x = ops.embedding(self.embedding, ids.reshape(rows))
        for block in self.blocks:
            h = ops.rmsnorm(x, block.attention_norm, c.eps)
            q = ops.rotary(ops.linear(h, block.wq).view(rows, c.heads, head_dim), cos_t, sin_t)
            k = ops.rotary(ops.linear(h, block.wk).view(rows, c.heads, head_dim), cos_t, sin_t)
            v = ops.linear(h, block.wv)

            def heads_first(t: torch.Tensor) -> torch.Tensor:
                return t.reshape(c.batch, c.seq, c.heads, head_dim).transpose(1, 2).contiguous()

            o = ops.attention(heads_first(q), heads_first(k), heads_first(v), head_dim**-0.5)
            x = x + ops.linear(o.transpose(1, 2).reshape(rows, c.dim), block.wo)
            h = ops.rmsnorm(x, block.mlp_norm, c.eps)
            gated = ops.swiglu(ops.linear(h, block.w_gate), ops.linear(h, block.w_up))
            x = x + ops.linear(gated, block.w_down)
        logits = ops.linear(ops.rmsnorm(x, self.norm, c.eps), self.output)
        return ops.cross_entropy(logits, targets.reshape(rows)).mean()
