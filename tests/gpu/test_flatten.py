"""Flattened element-wise kernels on the GPU (`passes/flatten.py`): a 2-D or 3-D kernel over
dense tensors runs as one dimension of their elements, launched on the caller's own tensors;
a call on tensors with gaps compiles the 2-D kernel; one-dimensional accesses whose extent no
vector divides move in checked 16-byte runs (`vectorize`). Against torch, at shapes whose rows
no 16 bytes align, calls in a row (the jit's fast path after the first)."""

from __future__ import annotations

import pytest
import torch

from tests.unit.test_flatten import KERNELS
from tilec.jit import load_kernel

pytestmark = pytest.mark.gpu

# The unit tests' kernels (interpreter, refusals), here against torch.


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("flatten") / "k.tile"
    path.write_text(KERNELS)
    return {name: load_kernel(str(path), name) for name in ("gelu_tanh", "pick", "swish3", "scale")}


def _randn(shape, dtype, seed):
    g = torch.Generator("cuda").manual_seed(seed)
    return torch.randn(shape, device="cuda", generator=g).to(dtype)


@pytest.mark.parametrize("shape", [(3000, 7001), (1, 1), (37, 19), (4096, 4096)])
def test_a_flattened_tanh_gelu_matches_torch(kernels, shape):
    for seed in range(3):  # the first call compiles, the later ones take the fast path
        x = _randn(shape, torch.bfloat16, seed)
        y = torch.full_like(x, float("nan"))
        kernels["gelu_tanh"](x, y)
        want = torch.nn.functional.gelu(x.float(), approximate="tanh").to(torch.bfloat16)
        torch.testing.assert_close(y, want, rtol=1e-2, atol=1e-2)


def test_tensors_with_gaps_take_the_2d_kernel(kernels):
    """Rows of a wider tensor (a gap after each) and a transposed view: not dense."""
    base = _randn((300, 7010), torch.bfloat16, 1)
    for x in (base[:, :7001], base[:, :300].t()):
        y = torch.empty(x.shape, dtype=x.dtype, device="cuda")
        kernels["gelu_tanh"](x, y)
        want = torch.nn.functional.gelu(x.float(), approximate="tanh").to(torch.bfloat16)
        torch.testing.assert_close(y, want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("shape", [(999, 1001), (8, 3)])
def test_a_flattened_kernel_with_a_scalar_and_mixed_dtypes_matches_torch(kernels, shape):
    x = _randn(shape, torch.float32, 2)
    g = _randn(shape, torch.float16, 3)
    out = torch.empty_like(x)
    kernels["pick"](x, g, 0.5, out)
    torch.testing.assert_close(out, torch.where(x > 0, x * 0.5, g.float()))


@pytest.mark.parametrize("shape", [(8, 1000, 1001), (3, 5, 7)])
def test_a_flattened_3d_kernel_matches_torch(kernels, shape):
    a, b = _randn(shape, torch.float32, 4), _randn(shape, torch.float32, 5)
    y = torch.empty(shape, dtype=torch.float16, device="cuda")
    kernels["swish3"](a, b, y)
    torch.testing.assert_close(y, (torch.nn.functional.silu(a) * b).half(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("n", [1, 7, 4097, 1_000_003])
def test_checked_runs_of_an_odd_extent_match_torch(kernels, n):
    """Every element of the last, partial run written, none past it (a guard element)."""
    x = _randn((n + 1,), torch.bfloat16, n % 97)
    y = torch.full_like(x, 7.0)
    kernels["scale"](x[:n], y[:n])
    torch.testing.assert_close(y[:n], x[:n] * 2)
    assert y[n].item() == 7.0
