"""Scans and arg-reductions on the GPU against torch (`torch.cumsum`, `cumprod`, `cummax`,
`cummin`, `argmax`, `argmin`, `topk`) and the interpreter, at awkward shapes, along rows and
columns, with warps pinned so that the axis is held in one thread, across lanes, across warps
(through shared memory) and in repeats. Ties and NaNs follow docs/language.md: the first
position wins, NaN ranks above every number."""

# ruff: noqa: F821 - kernel bodies use the tile language's names (f32, tiles, N), not Python's

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilec
from tilec.interp.scan import topk_positions

pytestmark = pytest.mark.gpu

SHAPES = [(1, 1), (3, 37), (5, 1000), (64, 129), (33, 512)]
WARPS = [1, 4, 8]


@tilec.jit
def row_scans(x: f32[M, N], s: f32[M, N], p: f32[M, N], hi: f32[M, N], lo: f32[M, N]):
    for tm in tiles(M):
        t = x[tm, :]
        s[tm, :] = cumsum(t, axis=1)
        p[tm, :] = cumprod(t, axis=1)
        hi[tm, :] = cummax(t, axis=1)
        lo[tm, :] = cummin(t, axis=1)


@tilec.jit
def column_cumsum(x: f32[M, N], s: f32[M, N]):
    for tn in tiles(N):
        s[:, tn] = cumsum(x[:, tn], axis=0)


@tilec.jit
def column_cumsum_walked(x: f32[M, N], s: f32[M, N]):
    for tn in tiles(N):
        total = zeros([1, tn], f32)
        for tm in tiles(M):
            t = x[tm, tn]
            s[tm, tn] = cumsum(t, axis=0) + total
            total = total + sum(t, axis=0, keepdims=True)


@tilec.jit
def int_row_scans(x: i32[M, N], s: i32[M, N], hi: i32[M, N]):
    for tm in tiles(M):
        s[tm, :] = cumsum(x[tm, :], axis=1)
        hi[tm, :] = cummax(x[tm, :], axis=1)


@tilec.jit
def half_cumsum(x: f16[M, N], s: f16[M, N]):
    for tm in tiles(M):
        s[tm, :] = cumsum(x[tm, :], axis=1)


@tilec.jit
def row_args(x: f32[M, N], hi: i32[M], lo: i32[M]):
    for tm in tiles(M):
        hi[tm] = argmax(x[tm, :], axis=1)
        lo[tm] = argmin(x[tm, :], axis=1)


@tilec.jit
def column_args(x: f32[M, N], hi: i32[N]):
    for tn in tiles(N):
        hi[tn] = argmax(x[:, tn], axis=0)


@tilec.jit
def row_topk4(x: f32[M, N], v: f32[M, 4], i: i32[M, 4]):
    for tm in tiles(M):
        v[tm, :] = topk(x[tm, :], 4, axis=1)
        i[tm, :] = topk_indices(x[tm, :], 4, axis=1)


def _pinned(kernel, **options):
    return tilec.jit(kernel.fn, **options)


def _cuda(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(a).cuda()


def _data(shape, seed=0, ties=False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if ties:  # few distinct values: many ties
        return rng.integers(-3, 4, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("warps", WARPS)
@pytest.mark.parametrize("rows", [2, 16])  # a tile of 1 drops the dimension
def test_row_scans_match_torch(shape, warps, rows):
    kernel = _pinned(row_scans, tile={"M": rows}, warps=warps)
    x = _data(shape)
    x = np.where(np.abs(x) < 0.05, np.float32(1.0), x)  # cumprod: no underflow to 0 early
    xs = _cuda(x)
    outs = [torch.empty_like(xs) for _ in range(4)]
    kernel(xs, *outs)
    t = torch.from_numpy(x).cuda()
    torch.testing.assert_close(outs[0], torch.cumsum(t, 1), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(outs[1], torch.cumprod(t, 1), rtol=1e-4, atol=1e-30)
    torch.testing.assert_close(outs[2], torch.cummax(t, 1).values, rtol=0, atol=0)
    torch.testing.assert_close(outs[3], torch.cummin(t, 1).values, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(1, 1), (37, 3), (1000, 5), (129, 64), (513, 33)])
@pytest.mark.parametrize("warps", WARPS)
def test_column_cumsum_matches_torch(shape, warps):
    if shape[0] > 1024:
        pytest.skip("a whole dimension is at most 1024")
    kernel = _pinned(column_cumsum, warps=warps)
    x = _data(shape, 1)
    s = torch.empty(shape, device="cuda")
    kernel(_cuda(x), s)
    torch.testing.assert_close(s, torch.cumsum(_cuda(x), 0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape", [(8192, 1000), (1000, 24), (300, 5), (2049, 129)])
@pytest.mark.parametrize("pins", [{}, {"tile": {"M": 256, "N": 8}}, {"tile": {"M": 64}}])
def test_a_column_cumsum_walking_its_rows_matches_torch(shape, pins):
    """The loop's tiles of rows scanned in runs of consecutive rows a thread
    (`scan_layouts.runs_along`: the heuristics' 512 x 8 at 8192 x 1000, and 256 x 8 pinned),
    the running total carried between them."""
    kernel = _pinned(column_cumsum_walked, **pins) if pins else column_cumsum_walked
    x = _data(shape, 2)
    s = torch.empty(shape, device="cuda")
    kernel(_cuda(x), s)
    want = torch.cumsum(_cuda(x).double(), 0).float()
    torch.testing.assert_close(s, want, rtol=1e-4, atol=1e-3 * shape[0] ** 0.5)


@pytest.mark.parametrize("shape", [(100000, 64), (30000, 300), (7, 5), (4099, 1)])
@pytest.mark.parametrize("split", [None, 1, 2, 7])
def test_a_split_column_cumsum_matches_torch_launch_after_launch(shape, split):
    """A tall column scan split across blocks (`passes/split_scan.py`: chunks by ticket, each
    reduced, published, waited for and scanned), at the launch's S and pinned ones; three
    launches in a row, so that tickets and flags left set would show in the second."""
    kernel = column_cumsum_walked if split is None else _pinned(column_cumsum_walked, split=split)
    for seed in range(3):
        x = _data(shape, 10 + seed)
        s = torch.full(shape, float("nan"), device="cuda")
        kernel(_cuda(x), s)
        want = torch.cumsum(_cuda(x).double(), 0).float()
        torch.testing.assert_close(s, want, rtol=1e-4, atol=1e-3 * shape[0] ** 0.5)


@tilec.jit
def long_row_running_max(x: f32[M, N], y: f32[M, N]):
    for tm in tiles(M):
        best = full([tm, 1], -inf, f32)
        for tn in tiles(N):
            t = x[tm, tn]
            y[tm, tn] = maximum(cummax(t, axis=1), best)
            best = maximum(best, max(t, axis=1, keepdims=True))


@pytest.mark.parametrize("shape", [(3, 200000), (1, 65537), (40, 5000)])
def test_a_split_running_max_along_few_long_rows_matches_torch(shape):
    x = torch.from_numpy(_data(shape, 4)).cuda()
    y = torch.empty_like(x)
    for _ in range(2):
        long_row_running_max(x, y)
        torch.testing.assert_close(y, torch.cummax(x, 1).values, rtol=0, atol=0)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("warps", WARPS)
def test_integer_scans_wrap_like_torch(shape, warps):
    kernel = _pinned(int_row_scans, warps=warps)
    rng = np.random.default_rng(2)
    x = rng.integers(-(2**30), 2**30, shape, dtype=np.int32)
    s, hi = (torch.empty(shape, dtype=torch.int32, device="cuda") for _ in "sh")
    kernel(_cuda(x), s, hi)
    wrapped = np.cumsum(x.astype(np.int64), axis=1).astype(np.int32)  # two's complement
    np.testing.assert_array_equal(s.cpu().numpy(), wrapped)
    np.testing.assert_array_equal(hi.cpu().numpy(), np.maximum.accumulate(x, axis=1))


@pytest.mark.parametrize("shape", SHAPES)
def test_half_cumsum_accumulates_in_f32(shape):
    x = _data(shape, 3).astype(np.float16)
    s = torch.empty(shape, dtype=torch.float16, device="cuda")
    half_cumsum(_cuda(x), s)
    want = np.cumsum(x.astype(np.float32), axis=1).astype(np.float16)
    np.testing.assert_allclose(s.cpu().numpy().astype(np.float32), want, rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("warps", WARPS)
@pytest.mark.parametrize("ties", [False, True])
def test_argmax_argmin_first_on_ties_and_nan_wins(shape, warps, ties):
    kernel = _pinned(row_args, warps=warps)
    x = _data(shape, 4, ties)
    if shape[1] > 3:
        x[0, shape[1] // 2] = np.nan
        x[-1, 1] = x[-1, 2] = np.nan
    hi, lo = (torch.empty(shape[0], dtype=torch.int32, device="cuda") for _ in "hl")
    kernel(_cuda(x), hi, lo)
    t = _cuda(x)
    np.testing.assert_array_equal(hi.cpu().numpy(), torch.argmax(t, 1).cpu().numpy())
    np.testing.assert_array_equal(lo.cpu().numpy(), torch.argmin(t, 1).cpu().numpy())
    np.testing.assert_array_equal(hi.cpu().numpy(), np.argmax(x, 1))


@pytest.mark.parametrize("shape", [(1, 1), (37, 3), (1000, 5), (129, 64)])
@pytest.mark.parametrize("warps", WARPS)
def test_column_argmax(shape, warps):
    kernel = _pinned(column_args, warps=warps)
    x = _data(shape, 5, ties=True)
    hi = torch.empty(shape[1], dtype=torch.int32, device="cuda")
    kernel(_cuda(x), hi)
    np.testing.assert_array_equal(hi.cpu().numpy(), np.argmax(x, 0))


@pytest.mark.parametrize("shape", [(1, 4), (3, 37), (5, 1000), (64, 129), (33, 512)])
@pytest.mark.parametrize("warps", WARPS)
@pytest.mark.parametrize("ties", [False, True])
def test_topk_sorted_ties_by_lower_index(shape, warps, ties):
    kernel = _pinned(row_topk4, warps=warps)
    x = _data(shape, 6, ties)
    v = torch.empty((shape[0], 4), device="cuda")
    i = torch.empty((shape[0], 4), dtype=torch.int32, device="cuda")
    kernel(_cuda(x), v, i)
    want_v, want_i = torch.topk(_cuda(x), 4, dim=1)
    torch.testing.assert_close(v, want_v, rtol=0, atol=0)  # the values never depend on ties
    positions = topk_positions(x, 4, 1)
    np.testing.assert_array_equal(i.cpu().numpy(), positions)
    if not ties:
        np.testing.assert_array_equal(i.cpu().numpy(), want_i.cpu().numpy())
