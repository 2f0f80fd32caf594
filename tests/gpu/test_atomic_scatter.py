"""Atomics on a gathered region on the GPU against torch: the histogram example against
`torch.bincount` (few bins: many lanes of one tile hit one bin), the embedding backward example
against `index_add_` (repeated ids, rows past one tile of D, bf16 and f32), each lane's old
value (tickets per bin) and max of rows with a mask."""
# ruff: noqa: F821 - kernel bodies use the tile language's names (f32, tiles, M), not Python's

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tilec
from tilec.jit import load_kernel

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@tilec.jit
def tickets(values: i32[N], counts: i32[B], ticket: i32[N]):
    for tn in tiles(N):
        ticket[tn] = atomic_add(counts[values[tn]], 1)


@tilec.jit
def row_max(x: f32[M, D], ids: i64[M], out: f32[V, D]):
    for tm, td in tiles(M, D):
        atomic_max(out[ids[tm], td], x[tm, td], mask=x[tm, td] > -1.0)


@pytest.mark.parametrize(("n", "bins"), [(1, 1), (1000003, 1), (1000003, 7), (4099, 4096)])
def test_histogram_matches_bincount(n, bins):
    torch.manual_seed(0)
    values = torch.randint(0, bins, (n,), device="cuda", dtype=torch.int32)
    counts = torch.zeros(bins, device="cuda", dtype=torch.int32)
    load_kernel(EXAMPLES / "histogram.tile", "histogram")(values, counts)
    torch.cuda.synchronize()
    expected = torch.bincount(values.long(), minlength=bins).int()
    assert torch.equal(counts, expected)


@pytest.mark.parametrize(("v", "d", "m"), [(1, 1, 1), (37, 300, 777), (1000, 1025, 129)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_embedding_backward_matches_index_add(dtype, v, d, m):
    """bf16 gradients with i64 ids, f32 with i32: one kernel, its dtype parameters bound by
    the tensors."""
    torch.manual_seed(0)
    grad_out = torch.randn(m, d, device="cuda").to(dtype)
    ids = torch.randint(0, v, (m,), device="cuda")
    ids = ids if dtype == torch.bfloat16 else ids.int()
    grad_table = torch.zeros(v, d, device="cuda", dtype=dtype)
    load_kernel(EXAMPLES / "embedding_backward.tile")(grad_out, ids, grad_table)
    torch.cuda.synchronize()
    expected = torch.zeros(v, d, device="cuda", dtype=torch.float64)
    expected.index_add_(0, ids.long(), grad_out.double())
    scale = torch.zeros(v, d, device="cuda", dtype=torch.float64)
    scale.index_add_(0, ids.long(), grad_out.double().abs())
    # Every add rounds once (bf16: unit roundoff 2**-8; f32: 2**-24), in the order the blocks
    # run, and no partial sum exceeds the sum of |g|: each row's error is within its number
    # of adds times that.
    roundoff = 2**-8 if dtype == torch.bfloat16 else 2**-24
    adds = torch.bincount(ids.long(), minlength=v).double()[:, None]
    err = (grad_table.double() - expected).abs()
    assert bool((err <= adds * roundoff * scale + 1e-30).all()), f"max error {float(err.max())}"


def test_each_lane_gets_the_count_before_its_own_update():
    torch.manual_seed(0)
    n, bins = 100003, 5
    values = torch.randint(0, bins, (n,), device="cuda", dtype=torch.int32)
    counts = torch.zeros(bins, device="cuda", dtype=torch.int32)
    ticket = torch.full((n,), -1, device="cuda", dtype=torch.int32)
    tickets(values, counts, ticket)
    torch.cuda.synchronize()
    assert torch.equal(counts, torch.bincount(values.long(), minlength=bins).int())
    for b in range(bins):
        got = torch.sort(ticket[values == b]).values
        assert torch.equal(got, torch.arange(int(counts[b]), device="cuda", dtype=torch.int32))


def test_max_of_rows_with_a_mask_matches_scatter_reduce():
    torch.manual_seed(0)
    x = torch.randn(3001, 77, device="cuda")
    ids = torch.randint(0, 13, (3001,), device="cuda")
    out = torch.full((13, 77), float("-inf"), device="cuda")
    row_max(x, ids, out)
    torch.cuda.synchronize()
    kept = torch.where(x > -1.0, x, torch.full_like(x, float("-inf")))
    expected = torch.full((13, 77), float("-inf"), device="cuda")
    expected.scatter_reduce_(0, ids[:, None].expand(-1, 77), kept, "amax")
    assert torch.equal(out, expected)
