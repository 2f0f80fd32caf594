"""Split two-pass kernels on the GPU (`passes/split_two_pass.py`): a reduction over a long
axis and a loop that applies it, split into reducers and appliers by ticket, against torch at
the launch's S and pinned ones, launched several times in a row (tickets, the finish counter
and flags left set would show in the next launch)."""

# ruff: noqa: F821 - kernel bodies use the tile language's names (f32, tiles, N), not Python's

from __future__ import annotations

import pytest
import torch

import tilec

pytestmark = pytest.mark.gpu


@tilec.jit
def column_softmax(x: f32[M, N], y: f32[M, N]):
    for tn in tiles(N):
        m_i = full([1, tn], -inf, f32)
        l_i = zeros([1, tn], f32)
        for tm in tiles(M):
            s = x[tm, tn]
            m_new = maximum(m_i, max(s, axis=0, keepdims=True))
            l_i = l_i * exp(m_i - m_new) + sum(exp(s - m_new), axis=0, keepdims=True)
            m_i = m_new
        for tm in tiles(M):
            y[tm, tn] = exp(x[tm, tn] - m_i) / l_i


@tilec.jit
def center_sequence(x: f32[B, S, D], y: f32[B, S, D]):
    for tb, td in tiles(B, D):
        acc = zeros([tb, td], f32)
        for ts in tiles(S):
            acc += sum(x[tb, ts, td], axis=1)
        mu = acc / S
        for ts in tiles(S):
            y[tb, ts, td] = x[tb, ts, td] - mu[:, None, :]


@tilec.jit
def column_norm(x: f32[M, N], y: f32[M, N], mu_out: f32[N], rstd: f32[N]):
    for tn in tiles(N):
        s1 = zeros([tn], f32)
        s2 = zeros([tn], f32)
        for tm in tiles(M):
            t = x[tm, tn]
            s1 += sum(t, axis=0)
            s2 += sum(t * t, axis=0)
        mu = s1 / M
        r = rsqrt(s2 / M - mu * mu + 1e-5)
        mu_out[tn] = mu
        rstd[tn] = r
        for tm in tiles(M):
            y[tm, tn] = (x[tm, tn] - mu[None, :]) * r[None, :]


def _pinned(kernel, split):
    return kernel if split is None else tilec.jit(kernel.fn, split=split)


@pytest.mark.parametrize("shape", [(50000, 64), (4096, 1000), (7, 5), (3001, 1)])
@pytest.mark.parametrize("split", [None, 1, 2, 3, 8])
def test_a_split_column_softmax_matches_torch_launch_after_launch(shape, split):
    kernel = _pinned(column_softmax, split)
    for seed in range(3):
        x = torch.randn(shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        y = torch.full(shape, float("nan"), device="cuda")
        kernel(x, y)
        torch.testing.assert_close(y, torch.softmax(x, 0), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("shape", [(4, 8000, 100), (16, 1000, 768), (1, 3, 1)])
@pytest.mark.parametrize("split", [None, 2, 5])
def test_a_split_mean_over_the_middle_axis_matches_torch(shape, split):
    kernel = _pinned(center_sequence, split)
    for seed in range(2):
        x = torch.randn(shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        y = torch.empty_like(x)
        kernel(x, y)
        want = x - x.double().mean(1, keepdim=True).float()
        torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(100000, 128), (513, 33)])
def test_a_split_column_norm_stores_its_statistics_once(shape):
    for seed in range(3):
        x = torch.randn(shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        y = torch.empty_like(x)
        mu, r = (torch.full((shape[1],), float("nan"), device="cuda") for _ in "mr")
        column_norm(x, y, mu, r)
        x64 = x.double()
        want_mu = x64.mean(0)
        want_r = 1 / torch.sqrt((x64 * x64).mean(0) - want_mu * want_mu + 1e-5)
        torch.testing.assert_close(mu, want_mu.float(), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(r, want_r.float(), rtol=1e-3, atol=1e-4)
        torch.testing.assert_close(y, ((x64 - want_mu) * want_r).float(), rtol=1e-3, atol=1e-3)
