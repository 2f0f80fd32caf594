"""Split multi-pass kernels on the GPU (`passes/split_passes.py`): reductions over a long axis
and a loop that applies them, each block running the pass of its ticket, against torch at the
launch's S and pinned ones, launched several times in a row (tickets, the finish counter and
flags left set would show in the next launch)."""

from __future__ import annotations

import pytest
import torch

from tilec.benchmarks import unseen_probe
from tilec.jit import load_kernel

pytestmark = pytest.mark.gpu


# The probe's kernels of the class (tilec/benchmarks/unseen.tile), as a user loads them.
def _kernel(name, split=None):
    options = {} if split is None else {"split": split}
    return load_kernel(unseen_probe.KERNELS, name, **options)


@pytest.mark.parametrize("shape", [(50000, 64), (4096, 1000), (7, 5), (3001, 1)])
@pytest.mark.parametrize("split", [None, 1, 2, 3, 8])
def test_a_split_column_softmax_matches_torch_launch_after_launch(shape, split):
    kernel = _kernel("col_softmax", split)
    for seed in range(3):
        x = torch.randn(shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        y = torch.full(shape, float("nan"), device="cuda")
        kernel(x, y)
        torch.testing.assert_close(y, torch.softmax(x, 0), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("shape", [(4, 8000, 100), (16, 1000, 768), (1, 3, 1)])
@pytest.mark.parametrize("split", [None, 2, 5])
def test_a_split_mean_over_the_middle_axis_matches_torch(shape, split):
    kernel = _kernel("center_seq", split)
    for seed in range(2):
        x = torch.randn(shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        y = torch.empty_like(x)
        kernel(x, y)
        want = x - x.double().mean(1, keepdim=True).float()
        torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(100000, 128), (513, 33)])
def test_a_split_column_norm_stores_its_statistics_once(shape):
    kernel = _kernel("col_norm")
    for seed in range(3):
        x = torch.randn(shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        y = torch.empty_like(x)
        mu, r = (torch.full((shape[1],), float("nan"), device="cuda") for _ in "mr")
        kernel(x, y, mu, r)
        x64 = x.double()
        want_mu = x64.mean(0)
        want_r = 1 / torch.sqrt((x64 * x64).mean(0) - want_mu * want_mu + 1e-5)
        torch.testing.assert_close(mu, want_mu.float(), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(r, want_r.float(), rtol=1e-3, atol=1e-4)
        torch.testing.assert_close(y, ((x64 - want_mu) * want_r).float(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape", [(16, 500000), (3, 100003), (1, 7)])
@pytest.mark.parametrize("split", [None, 1, 3, 4, 11])
def test_a_three_pass_layer_norm_of_few_long_rows_matches_torch(shape, split):
    kernel = _kernel("layernorm3", split)
    for seed in range(2):
        g = torch.Generator("cuda").manual_seed(seed)
        x = torch.randn(shape, device="cuda", generator=g) * 3 + 1
        w, b = (torch.randn(shape[1], device="cuda", generator=g) for _ in "wb")
        y = torch.full(shape, float("nan"), device="cuda")
        kernel(x, w, b, y)
        want = torch.nn.functional.layer_norm(x.double(), shape[1:], w.double(), b.double(), 1e-5)
        torch.testing.assert_close(y, want.float(), rtol=1e-4, atol=1e-4)
