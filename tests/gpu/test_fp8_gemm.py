"""fp8 GEMM (examples/fp8_gemm.tile) against float64 torch on the same f8 values: wgmma k32 with
e4m3 and e5m2 operands when both are K-major and 16-byte aligned, the f16 path otherwise, at
shapes with partial tiles along M, N and K."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).parents[2] / "examples"


def _kernel(name: str):
    from tilec.jit import load_kernel

    return load_kernel(EXAMPLES / "fp8_gemm.tile", name)


def _f8(shape, dtype, seed):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, device="cuda", generator=generator).to(dtype)


def _relative_error(got, expected) -> float:
    """The largest error over the largest magnitude: the hardware's f32 accumulation of fp8
    products is not IEEE f32 (it keeps fewer bits), so elementwise tolerances would be either
    loose or flaky; a wrong layout or descriptor gives errors of the order of the outputs."""
    return float((got.double() - expected).abs().max() / expected.abs().max().clamp_min(1e-30))


@pytest.mark.parametrize(
    "m, n, k",
    [(4096, 4096, 4096), (300, 520, 400), (1000, 3000, 512), (384, 200, 1000), (130, 77, 100)],
)
def test_fp8_gemm_matches_float64(m, n, k):
    kernel = _kernel("fp8_gemm")
    x = _f8((m, k), torch.float8_e4m3fn, m + k)
    w = _f8((n, k), torch.float8_e4m3fn, n + k + 1)
    x_scale = torch.rand(m, device="cuda") + 0.5
    w_scale = torch.rand(n, device="cuda") + 0.5
    y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel(x, w, x_scale, w_scale, y)
    ptx = kernel.compile_for(x, w, x_scale, w_scale, y).ptx
    if k % 16 == 0:
        assert "k32.f32.e4m3.e4m3" in ptx
    product = x.double() @ w.double().T
    expected = product * x_scale.double()[:, None] * w_scale.double()[None, :]
    assert not torch.isnan(y).any()
    error = _relative_error(y, expected)
    print(f"fp8 e4m3 {m}x{n}x{k}: largest error / largest output {error:.2e}")
    assert error < 1e-2  # bf16's own rounding is 4e-3


@pytest.mark.parametrize("m, n, k", [(256, 384, 512), (17, 31, 13)])
def test_fp8_e5m2_gemm_matches_float64(m, n, k):
    kernel = _kernel("fp8_gemm_e5m2")
    x = _f8((m, k), torch.float8_e5m2, 3 * m)
    w = _f8((n, k), torch.float8_e5m2, 5 * n)
    y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    kernel(x, w, y)
    if k % 16 == 0:
        assert "k32.f32.e5m2.e5m2" in kernel.compile_for(x, w, y).ptx
    error = _relative_error(y, x.double() @ w.double().T)
    print(f"fp8 e5m2 {m}x{n}x{k}: largest error / largest output {error:.2e}")
    assert error < 2e-3
