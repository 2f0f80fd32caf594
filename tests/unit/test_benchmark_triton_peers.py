"""The benchmark suite's Triton peers (tests/reference/triton_kernels.py), run in Triton's CPU
interpreter at one pinned configuration each: the tutorial matmul on every layout of its
operands, and the fused-attention forward (plain, causal, grouped-query) against PyTorch's
math. On the GPU the same kernels run autotuned."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # as test_triton_cpu.py: Triton reads it when it runs

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

PATH = Path(__file__).resolve().parents[1] / "reference" / "triton_kernels.py"


@pytest.fixture(scope="module")
def interpreted():
    """A private copy of the references, defined with TRITON_INTERPRET=1."""
    spec = importlib.util.spec_from_file_location("interpreted_triton_references", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_matmul_tunes_over_at_least_eight_configurations(interpreted):
    configs = interpreted._matmul_configs()
    assert len(configs) >= 8
    assert all(c.kwargs["GROUP_M"] == 8 for c in configs)
    assert {"M", "N", "K"} <= set(interpreted._matmul_autotuned.keys)


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_the_matmul_takes_strided_views(interpreted, layout):
    m, n, k = 37, 45, 70
    generator = torch.Generator().manual_seed(0)
    a = torch.randn((m, k) if layout[0] == "n" else (k, m), generator=generator).half()
    b = torch.randn((k, n) if layout[1] == "n" else (n, k), generator=generator).half()
    a_view = a if layout[0] == "n" else a.t()
    b_view = b if layout[1] == "n" else b.t()
    got = interpreted.matmul(a_view, b_view, bm=32, bn=32, bk=16)
    expected = a_view.double() @ b_view.double()
    assert got.dtype == torch.float16 and got.shape == (m, n)
    assert torch.allclose(got.double(), expected, rtol=2e-3, atol=2e-2)


def _reference(q, k, v, scale, causal):
    groups = q.shape[1] // k.shape[1]
    k, v = (t.double().repeat_interleave(groups, dim=1) for t in (k, v))
    s = q.double() @ k.transpose(-1, -2) * scale
    if causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize(
    ("heads", "kv_heads", "causal", "block_n"),
    [(2, 2, False, 32), (2, 2, True, 32), (4, 2, False, 64), (2, 2, True, 64)],
)
def test_the_attention_forward_matches_the_math(interpreted, heads, kv_heads, causal, block_n):
    generator = torch.Generator().manual_seed(1)
    batch, length, d = 1, 128, 16
    q = torch.randn(batch, heads, length, d, generator=generator).half()
    k = torch.randn(batch, kv_heads, length, d, generator=generator).half()
    v = torch.randn(batch, kv_heads, length, d, generator=generator).half()
    config = {"BLOCK_M": 64, "BLOCK_N": block_n, "num_warps": 4, "num_stages": 2}
    got = interpreted.attention(q, k, v, d**-0.5, causal=causal, config=config)
    expected = _reference(q, k, v, d**-0.5, causal)
    assert torch.allclose(got.double(), expected, rtol=1e-2, atol=5e-3)


def test_the_attention_refuses_what_the_tutorial_kernel_cannot_do(interpreted):
    q = torch.zeros(1, 1, 100, 16).half()
    with pytest.raises(ValueError, match="unsupported"):
        interpreted.attention(q, q, q, 1.0)


def test_softmax_takes_f16_rows(interpreted):
    x = torch.randn(3, 77, generator=torch.Generator().manual_seed(2)).half()
    got = interpreted.softmax(x, num_warps=interpreted.row_warps(77))
    assert got.dtype == torch.float16
    assert torch.allclose(got.float(), torch.softmax(x.float(), dim=1), rtol=2e-3, atol=1e-4)
