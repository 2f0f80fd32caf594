"""The tensor-core path on a GPU: a pipelined mma.sync matmul (cp.async copies into swizzled
buffers, ldmatrix, mma.sync m16n8k16) against torch, at shapes with partial tiles."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tilec.ir import parse_module
from tilec.lowering import Specialization, compile_to_ptx, module_abi
from tilec.runtime import Launcher

pytestmark = pytest.mark.gpu

MMA_MATMUL = Path(__file__).parents[1] / "lit" / "lowering" / "mma_matmul.tir"


@pytest.fixture(scope="module")
def mma_matmul() -> Launcher:
    module = parse_module(MMA_MATMUL.read_text())
    ptx = compile_to_ptx(module, "sm_90a")
    abi = module_abi(module)["matmul_mma"]
    return Launcher(ptx, abi, Specialization())


# Rows of A and B must be 16-byte aligned (the copies are 16 bytes): K and N multiples of 8.
@pytest.mark.parametrize(
    "m, n, k", [(128, 128, 32), (256, 256, 64), (1000, 1000, 1000), (384, 136, 72), (17, 8, 8)]
)
def test_mma_matmul_matches_torch(mma_matmul, m, n, k):
    torch.manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    mma_matmul(a, b, c)
    expected = a.float() @ b.float()
    torch.testing.assert_close(c, expected, atol=1e-2 * k**0.5, rtol=1e-3)


EXAMPLES = Path(__file__).parents[2] / "examples"


# Pins that move one decision of the wgmma tiling (tiling.wgmma_tiling): each is still wgmma,
# and right at shapes with partial tiles along M and N.
@pytest.mark.parametrize(
    "pins",
    [
        {"tile": {"K": 128}},
        {"tile": {"N": 256}},
        {"tile": {"N": 64}},
        {"warps": 4},
        {"tile": {"M": 256}},
    ],
    ids=["K128", "N256", "N64", "warps4", "M256"],
)
@pytest.mark.parametrize("m, n, k", [(1000, 1000, 1024), (384, 200, 512)])
def test_pinned_wgmma_tilings_match_torch(pins, m, n, k):
    from tilec.jit import load_kernel

    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("wgmma needs sm_90a")
    matmul = load_kernel(EXAMPLES / "matmul.tile", "matmul", **pins)
    torch.manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    matmul(a, b, c)
    assert "wgmma.mma_async" in matmul.compile_for(a, b, c).ptx
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2 * k**0.5, rtol=1e-2)
