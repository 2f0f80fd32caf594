"""Atomics on the GPU against torch at awkward shapes: column sums (`x.sum(0)`), grouped row
sums (`index_add_`), counts whose elements are held by several threads (a scalar region, a
broadcast value, a reduction's slice layout: each must be added once), float and integer
max/min, compare-and-swap, f16/bf16 adds and the memory orders."""
# ruff: noqa: F821 - kernel bodies use the tile language's names (f32, tiles, M), not Python's

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tilec
from tilec.jit import load_kernel

pytestmark = pytest.mark.gpu


@tilec.jit
def col_sum_atomic(x: f32[M, N], out: f32[N]):
    for tm, tn in tiles(M, N):
        atomic_add(out[tn], sum(x[tm, tn], axis=0))


@tilec.jit
def group_rows(x: f32[M, N], out: f32[R, N]):
    for m, tn in tiles(M, N, tile={M: 1}):
        atomic_add(out[m % R, tn], x[m, tn])


@tilec.jit
def tickets(x: f32[M], counter: i32[1], ticket: i32[M]):
    for tm in tiles(M):
        ticket[tm] = atomic_add(counter[0], 1)


@tilec.jit(tile={"M": 64})
def count_blocks(x: f32[M, N], count: i32[N]):
    for tm, tn in tiles(M, N):  # noqa: B007 - tm names the grid axis the blocks differ in
        atomic_add(count[tn], 1)  # a scalar broadcast over the region: held by many threads


@tilec.jit
def col_extremes(x: f32[M, N], hi: f32[N], lo: f32[N]):
    for tm, tn in tiles(M, N):
        atomic_max(hi[tn], max(x[tm, tn], axis=0))
        atomic_min(lo[tn], min(x[tm, tn], axis=0))


@tilec.jit
def int_extremes(x: i64[M, N], y: i32[M, N], hi: i64[N], lo: i32[N]):
    for tm, tn in tiles(M, N):
        atomic_max(hi[tn], max(x[tm, tn], axis=0), sem="release")
        atomic_min(lo[tn], min(y[tm, tn], axis=0), sem="acquire")


@tilec.jit
def int_sum(x: i64[M, N], out: i64[N]):
    for tm, tn in tiles(M, N):
        atomic_add(out[tn], sum(x[tm, tn], axis=0))


@tilec.jit
def claim(owner: i32[N], got: i32[M, N]):
    for m, tn in tiles(M, N, tile={M: 1}):
        got[m, tn] = atomic_cas(owner[tn], 0, m + 1, sem="acq_rel")


@tilec.jit
def half_sum(x: f16[M, N], out: f16[N]):
    for tm, tn in tiles(M, N):
        atomic_add(out[tn], sum(x[tm, tn], axis=0).to(f16))


@tilec.jit
def brain_sum(x: bf16[M, N], out: bf16[N]):
    for tm, tn in tiles(M, N):
        atomic_add(out[tn], sum(x[tm, tn], axis=0).to(bf16))


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHAPES = [(1, 1), (100003, 77), (4099, 130), (7, 1000003), (33, 5)]


def _close(got: torch.Tensor, expected: torch.Tensor, scale: torch.Tensor, rtol: float) -> None:
    err = (got.double() - expected.double()).abs()
    bound = rtol * (expected.double().abs() + float(scale.double().abs().max()) + 1e-30)
    assert bool((err <= bound).all()), f"max error {float(err.max())}"


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_column_sums_match_torch(shape):
    torch.manual_seed(0)
    x = torch.rand(shape, device="cuda") - 0.5
    out = torch.zeros(shape[1], device="cuda")
    col_sum_atomic(x, out)
    torch.cuda.synchronize()
    _close(out, x.double().sum(0), x.abs().double().sum(0), 1e-5)


@pytest.mark.parametrize(("m", "n", "r"), [(1, 1, 1), (1000, 77, 3), (4099, 130, 17)])
def test_grouped_rows_match_index_add(m, n, r):
    torch.manual_seed(1)
    x = torch.randn(m, n, device="cuda")
    out = torch.zeros(r, n, device="cuda")
    group_rows(x, out)
    expected = torch.zeros(r, n, device="cuda", dtype=torch.float64)
    expected.index_add_(0, torch.arange(m, device="cuda") % r, x.double())
    torch.cuda.synchronize()
    _close(out, expected, expected.abs(), 1e-5)


@pytest.mark.parametrize("m", [1, 16, 1000, 100003])
def test_a_scalar_region_is_updated_once_per_block(m):
    x = torch.zeros(m, device="cuda")
    counter = torch.zeros(1, device="cuda", dtype=torch.int32)
    ticket = torch.full((m,), -1, device="cuda", dtype=torch.int32)
    tickets(x, counter, ticket)
    torch.cuda.synchronize()
    starts = ticket.unique()
    assert int(counter) == starts.numel(), "one ticket per block, not per thread"
    assert starts.tolist() == list(range(starts.numel()))


@pytest.mark.parametrize("shape", [(1, 1), (1000, 7), (100003, 77), (5, 4099)], ids=str)
def test_a_broadcast_value_is_added_once_per_element(shape):
    x = torch.zeros(shape, device="cuda")
    count = torch.zeros(shape[1], device="cuda", dtype=torch.int32)
    count_blocks(x, count)
    torch.cuda.synchronize()
    # Every element of every column counts the blocks along M once (BM = 64 pinned).
    assert bool((count == -(-shape[0] // 64)).all())


@pytest.mark.parametrize("shape", SHAPES[:4], ids=str)
def test_float_max_and_min_match_torch_with_signed_zeros(shape):
    torch.manual_seed(2)
    x = torch.randn(shape, device="cuda")
    x[0, 0] = -0.0
    hi = torch.full((shape[1],), float("-inf"), device="cuda")
    lo = torch.full((shape[1],), float("inf"), device="cuda")
    col_extremes(x, hi, lo)
    torch.cuda.synchronize()
    assert torch.equal(hi, x.amax(0)) and torch.equal(lo, x.amin(0))
    zeros = torch.tensor([[-0.0, 0.0, -0.0]], device="cuda").T.contiguous()
    hi, lo = torch.full((1,), float("-inf"), device="cuda"), torch.full((1,), 1.0, device="cuda")
    col_extremes(zeros, hi, lo)
    torch.cuda.synchronize()
    assert not torch.signbit(hi).item() and torch.signbit(lo).item()  # -0 < +0


def test_integer_max_min_and_sums_are_exact():
    torch.manual_seed(3)
    x = torch.randint(-(2**40), 2**40, (3001, 45), device="cuda", dtype=torch.int64)
    y = torch.randint(-(2**31), 2**31 - 1, (3001, 45), device="cuda", dtype=torch.int32)
    hi = torch.full((45,), -(2**62), device="cuda", dtype=torch.int64)
    lo = torch.full((45,), 2**31 - 1, device="cuda", dtype=torch.int32)
    int_extremes(x, y, hi, lo)
    out = torch.zeros(45, device="cuda", dtype=torch.int64)
    int_sum(x, out)
    torch.cuda.synchronize()
    assert torch.equal(hi, x.amax(0)) and torch.equal(lo, y.amin(0))
    assert torch.equal(out, x.sum(0))


def test_compare_and_swap_has_one_winner_per_element():
    owner = torch.zeros(1000, device="cuda", dtype=torch.int32)
    got = torch.full((300, 1000), -1, device="cuda", dtype=torch.int32)
    claim(owner, got)
    torch.cuda.synchronize()
    assert bool((owner >= 1).all())
    winners = (owner - 1).long()
    columns = torch.arange(1000, device="cuda")
    assert bool((got[winners, columns] == 0).all())
    assert int((got == 0).sum()) == 1000  # exactly one 0 per column
    assert bool(((got == owner[None, :]) | (got == 0)).all())


@pytest.mark.parametrize(
    ("kernel", "dtype", "rtol"),
    [(half_sum, torch.float16, 2e-3), (brain_sum, torch.bfloat16, 1.6e-2)],
    ids=["f16", "bf16"],
)
@pytest.mark.parametrize("shape", [(1, 1), (1000, 77), (4099, 130)], ids=str)
def test_half_precision_adds(kernel, dtype, rtol, shape):
    torch.manual_seed(4)
    x = (torch.rand(shape, device="cuda") - 0.5).to(dtype)
    out = torch.zeros(shape[1], device="cuda", dtype=dtype)
    kernel(x, out)
    torch.cuda.synchronize()
    blocks = max(1, shape[0] // 16)
    _close(out, x.double().sum(0), x.abs().double().sum(0), rtol * blocks)


def test_col_sum_atomic_example_matches_the_two_pass_example():
    torch.manual_seed(5)
    x = torch.rand(65536, 128, device="cuda")
    out = torch.zeros(128, device="cuda")
    kernel = load_kernel(EXAMPLES / "col_sum_atomic.tile", "col_sum_atomic")
    kernel(x, out)
    torch.cuda.synchronize()
    _close(out, x.double().sum(0), x.double().sum(0), 1e-5)
