"""`a.T @ b` with its A read M-major by wgmma's descriptor (the accumulator in wgmma's own row
order, `#mma<natural_rows>`) under epilogues that read the accumulator by rows and by columns:
a per-row scale and a per-column bias broadcast onto it, row maxima and column sums reduced
from it (each a slice of the natural-rows layout), at shapes no tile divides, against torch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tilec.jit import load_kernel

pytestmark = pytest.mark.gpu


KERNELS = Path(__file__).resolve().parents[1] / "kernels"


def _kernel():
    return load_kernel(KERNELS / "tn_epilogue.tile", "tn_epilogue")


def _arguments(m: int, n: int, k: int, seed: int):
    torch.manual_seed(seed)
    a = torch.randn(k, m, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    scale = torch.rand(m, device="cuda") + 0.5
    bias = torch.randn(n, device="cuda")
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    row_max = torch.full((m,), float("-inf"), device="cuda")
    col_sum = torch.zeros(n, device="cuda")
    return a, b, scale, bias, c, row_max, col_sum


@pytest.mark.parametrize("m, n, k", [(4096, 2048, 1024), (1000, 3000, 1999), (264, 136, 200)])
def test_epilogues_on_an_m_major_a_read_the_accumulator_as_torch_does(m, n, k):
    a, b, scale, bias, c, row_max, col_sum = args = _arguments(m, n, k, m + n + k)
    tn_epilogue = _kernel()
    tn_epilogue(*args)
    y = (a.t().float() @ b.float()) * scale[:, None] + bias[None, :]
    torch.testing.assert_close(c.float(), y.half().float(), rtol=2e-2, atol=0.5)
    torch.testing.assert_close(row_max, y.max(dim=1).values, rtol=1e-3, atol=1e-2)
    torch.testing.assert_close(col_sum, y.sum(dim=0), rtol=1e-3, atol=0.05 * k**0.5)
    ptx = tn_epilogue.compile_for(*args).ptx
    if m >= 1000:  # the wgmma tiling: A by descriptor, M-major (tnspA = 1), no ldmatrix
        assert "wgmma.mma_async" in ptx and "ldmatrix" not in ptx
        assert ", p, 1, 1, 1, 1;" in ptx
