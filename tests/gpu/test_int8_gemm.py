"""int8 GEMM on tensor cores (mma.sync m16n8k32, and wgmma k32 on sm_90a when both operands are
K-major) against torch: examples/int8_gemm.tile with B
stored [K, N] (`int8_gemm`: ldmatrix.trans and byte permutes) and [N, K] (`int8_gemm_nt`:
plain ldmatrix), at shapes with partial tiles, K not a multiple of the K tile of 64, rows
that are not 16-byte aligned (copied element by element), and a sum that wraps around in i32."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).parents[2] / "examples"
MMA_S8 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
WGMMA_S8 = "k32.s32.s8.s8"  # wgmma.mma_async.sync.aligned.m64nNk32.s32.s8.s8


def _kernel(name: str):
    from tilec.jit import load_kernel

    return load_kernel(EXAMPLES / "int8_gemm.tile", name)


def _expected(a, b_kn, row_scale, col_scale):
    """The exact i32 sum (wrapped as the hardware wraps it), scaled in f64, rounded to f16."""
    product = a.double() @ b_kn.double()  # exact: |sums| < 2^53
    wrapped = ((product.long() + 2**31) % 2**32) - 2**31
    return (wrapped.double() * row_scale.double()[:, None] * col_scale.double()[None, :]).half()


def _operands(m, n, k, layout, seed):
    torch.manual_seed(seed)
    a = torch.randint(-128, 128, (m, k), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (k, n), device="cuda", dtype=torch.int8)
    stored = b.t().contiguous() if layout == "nt" else b
    row_scale = torch.rand(m, device="cuda") * 1e-2
    col_scale = torch.rand(n, device="cuda") * 1e-2
    return a, b, stored, row_scale, col_scale


@pytest.mark.parametrize("layout", ["nn", "nt"])
@pytest.mark.parametrize(
    "m, n, k",
    [
        (4096, 4096, 4096),
        (1000, 3000, 512),  # partial tiles along M and N (masks)
        (384, 200, 1000),  # K not a multiple of 64: a partial last K tile
        (256, 136, 96),
        (130, 77, 100),  # rows of 100 and 77 bytes: not 16-byte aligned
        (17, 31, 13),
        (1, 1, 1),
    ],
)
def test_int8_gemm_matches_torch(m, n, k, layout):
    kernel = _kernel("int8_gemm" if layout == "nn" else "int8_gemm_nt")
    a, b, stored, row_scale, col_scale = _operands(m, n, k, layout, m + n + k)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    kernel(a, stored, row_scale, col_scale, c)
    ptx = kernel.compile_for(a, stored, row_scale, col_scale, c).ptx
    # B stored [N, K]: both operands K-major, wgmma k32 at sizes whose tiles it fills (the
    # tiling's model may keep mma.sync for a few rows); B stored [K, N]: mma.sync
    if layout == "nn":
        assert MMA_S8 in ptx and WGMMA_S8 not in ptx
    else:
        assert WGMMA_S8 in ptx if min(m, n) >= 128 else (WGMMA_S8 in ptx or MMA_S8 in ptx)
    expected = _expected(a, b, row_scale, col_scale)
    # the kernel rounds to f32 after each of its two multiplications: within 2 ulp of f16
    torch.testing.assert_close(c.float(), expected.float(), rtol=2e-3, atol=1e-5)


@pytest.mark.parametrize("layout", ["nn", "nt"])
def test_int8_sums_wrap_around_in_i32(layout):
    """-128 x -128 summed over K = 2^17 + 4096 is 2^31 + 2^26 + ..., past i32: the tensor
    cores wrap it around (no .satfinite), as the interpreter does."""
    m, n, k = 32, 32, 2**17 + 4096
    kernel = _kernel("int8_gemm" if layout == "nn" else "int8_gemm_nt")
    a = torch.full((m, k), -128, device="cuda", dtype=torch.int8)
    b = torch.full((k, n), -128, device="cuda", dtype=torch.int8)
    stored = b.t().contiguous() if layout == "nt" else b
    row_scale = torch.full((m,), 1e-3, device="cuda")
    col_scale = torch.full((n,), 1e-3, device="cuda")
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    kernel(a, stored, row_scale, col_scale, c)
    expected = _expected(a, b, row_scale, col_scale)
    assert (expected < 0).all()  # it did wrap
    torch.testing.assert_close(c.float(), expected.float(), rtol=2e-3, atol=1e-5)
