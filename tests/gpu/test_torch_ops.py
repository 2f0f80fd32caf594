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
    # The GPU kernel ran, not the interpreter; rmsnorm's dtype T makes `kernel` generic, and
    # the compilations are its bf16 instance's.
    assert kernel.instance(T="bf16").compilations >= 1


def test_rmsnorm_op_under_cuda_graphs():
    """mode="reduce-overhead": Inductor records the graph, the tilec launch included, in a CUDA
    graph and replays it; replays see new inputs copied into the graph's buffers."""

    def f(x, w):
        return RMSNORM(x * 2, w, eps=1e-6) + 1

    compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    w = torch.randn(2048, device="cuda").bfloat16()
    for step in range(4):  # warm-up, recording, then replays
        x = torch.randn(512, 2048, device="cuda", generator=None).bfloat16() + step
        got = compiled(x, w).clone()
        want = _reference(x * 2, w, 1e-6).float() + 1
        torch.testing.assert_close(got.float(), want, atol=6e-2, rtol=2e-2)


def test_dynamic_shapes_trace_once_and_compile_per_size_class():
    """dynamic=True: one Dynamo frame for every row count (the fake kernel takes symbolic
    extents); tilec compiles a specialization per size class of the extents, not per extent."""
    from torch._dynamo.testing import CompileCounterWithBackend

    def f(x, w):
        return RMSNORM(x, w, eps=1e-6).float()

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(f, backend=counter, fullgraph=True, dynamic=True)
    w = torch.randn(1024, device="cuda").bfloat16()
    instance = RMSNORM.kernel.instance(T="bf16")
    before = instance.compilations
    # Row counts of two size classes (2048, 4096: the power of two above), none a multiple of 16
    # (a multiple of 16 is a fact of its own in the key).
    for rows in (1100, 1300, 1500, 1900, 3000):
        x = torch.randn(rows, 1024, device="cuda").bfloat16()
        torch.testing.assert_close(
            compiled(x, w), _reference(x, w, 1e-6).float(), atol=3e-2, rtol=2e-2
        )
    assert counter.frame_count == 1
    assert instance.compilations - before == 2
