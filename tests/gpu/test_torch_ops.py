"""`tilec.torch` operators on CUDA tensors: the compiled kernel runs (not the interpreter),
results match torch, and `torch.compile(fullgraph=True)` with Inductor calls the op."""

from __future__ import annotations

from pathlib import Path

import torch

import tilec
import tilec.torch as tt

ROOT = Path(__file__).resolve().parents[2]
RMSNORM = tt.op(
    "tilec_gpu_tests::rmsnorm", tilec.load_kernel(ROOT / "examples" / "rmsnorm.tile", "rmsnorm")
)


def _reference(x, w, eps):
    r = x.float()
    return (r * torch.rsqrt((r * r).mean(1, keepdim=True) + eps) * w.float()).to(x.dtype)


def test_rmsnorm_op_on_cuda_tensors():
    x = torch.randn(1000, 4096, device="cuda").bfloat16()
    w = torch.randn(4096, device="cuda").bfloat16()
    y = RMSNORM(x, w, eps=1e-6)
    assert y.device == x.device and y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), _reference(x, w, 1e-6).float(), atol=3e-2, rtol=2e-2)


def test_rmsnorm_op_under_inductor_fullgraph():
    def f(x, w):
        return RMSNORM(x + 1, w, eps=1e-6) * 2

    x = torch.randn(256, 1024, device="cuda").bfloat16()
    w = torch.randn(1024, device="cuda").bfloat16()
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(x, w).float(), f(x, w).float(), atol=3e-2, rtol=2e-2)


def test_a_direct_jit_call_under_inductor_runs_the_compiled_kernel():
    kernel = tilec.load_kernel(ROOT / "examples" / "rmsnorm.tile", "rmsnorm")

    def f(x, w):
        y = torch.empty_like(x)
        kernel(x, w, y, 1e-6)
        return y.float() * 2

    x = torch.randn(300, 2048, device="cuda").bfloat16()
    w = torch.randn(2048, device="cuda").bfloat16()
    compiled = torch.compile(f, fullgraph=True)
    want = _reference(x, w, 1e-6).float() * 2
    torch.testing.assert_close(compiled(x, w), want, atol=6e-2, rtol=2e-2)
    assert kernel.compilations >= 1  # the GPU kernel ran, not the interpreter
