"""Scalar control flow on the GPU against torch: range() loops over counts read from tensors
(empty, negative, strided, counting down), if/elif/else on uniform scalars with carried tiles,
and paged-attention decode (examples/paged_decode.tile) against SDPA over the gathered pages,
at awkward shapes and at the size of a decode step (64 sequences of 4096 tokens, 32 heads)."""

# ruff: noqa: F821 - kernel bodies use the tile language's names (f32, tiles, M), not Python's

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import tilec
from tilec.jit import load_kernel

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


@tilec.jit
def ranges(x: f32[B, L, D], lens: i32[B], y: f32[B, 3, D], start: i32):
    for b, td in tiles(B, D, tile={B: 1}):
        n = lens[b]
        up = zeros([td], f32)
        for i in range(n):
            up += x[b, i, td]
        strided = zeros([td], f32)
        for i in range(start, n, 3):
            strided += x[b, i, td] * i
        down = zeros([td], f32)
        for i in range(n - 1, -1, -2):
            down = down * 0.5 + x[b, i, td]
        y[b, 0, td] = up
        y[b, 1, td] = strided
        y[b, 2, td] = down


@tilec.jit
def branches(x: f32[M, N], flags: i32[M], y: f32[M, N], s: f32):
    for m, tn in tiles(M, N, tile={M: 1}):
        f = flags[m]
        v = x[m, tn]
        if f > 2 and s > 0.0:
            v = v * s
        elif f == 1 or not (f >= 0):
            v = v - 1.0
        else:
            v = (v + 10.0) * 2.0
        if f != 0:
            y[m, tn] = v


def _ranges_reference(x, lens, start):
    y = torch.zeros(x.shape[0], 3, x.shape[2], device=x.device)
    for b, n in enumerate(lens.tolist()):
        y[b, 0] = x[b, : max(n, 0)].sum(0)
        for i in range(start, n, 3):
            y[b, 1] += x[b, i] * i
        for i in range(n - 1, -1, -2):
            y[b, 2] = y[b, 2] * 0.5 + x[b, i]
    return y


@pytest.mark.parametrize(("d", "lens"), [(1, [0, 1]), (37, [5, 0, 11, -3, 7]), (300, [64, 9])])
def test_range_loops_match_python_ranges(d, lens):
    length = max(max(lens), 1)
    x = torch.randn(len(lens), length, d, device="cuda")
    counts = torch.tensor(lens, device="cuda", dtype=torch.int32)
    y = torch.zeros(len(lens), 3, d, device="cuda")
    ranges(x, counts, y, 2)
    torch.testing.assert_close(y, _ranges_reference(x, counts, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("s", [2.0, -1.0])
def test_if_elif_else_match_torch(s):
    x = torch.randn(7, 300, device="cuda")
    flags = torch.tensor([0, 1, 2, 3, -4, 5, 1], device="cuda", dtype=torch.int32)
    y = torch.full((7, 300), 99.0, device="cuda")
    branches(x, flags, y, s)
    expected = torch.full_like(x, 99.0)
    for m, f in enumerate(flags.tolist()):
        if f > 2 and s > 0:
            expected[m] = x[m] * s
        elif f == 1 or not f >= 0:
            expected[m] = x[m] - 1.0
        elif f != 0:
            expected[m] = (x[m] + 10.0) * 2.0
    torch.testing.assert_close(y, expected, rtol=0, atol=0)


def paged_reference(q, k_cache, v_cache, block_table, lens):
    """SDPA over each sequence's gathered pages (16 tokens a page, cut at the table)."""
    heads, dim = q.shape[1:]
    group = heads // k_cache.shape[1]
    out = torch.zeros_like(q)
    for b, n in enumerate(lens.tolist()):
        pages = min(-(-n // 16), block_table.shape[1]) if n > 0 else 0
        if pages == 0:
            continue
        rows = block_table[b, :pages].long()
        k = k_cache[rows].permute(1, 0, 2, 3).reshape(k_cache.shape[1], -1, dim)[:, :n]
        v = v_cache[rows].permute(1, 0, 2, 3).reshape(v_cache.shape[1], -1, dim)[:, :n]
        k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
        out[b] = F.scaled_dot_product_attention(q[b, :, None], k, v, scale=0.125)[:, 0]
    return out


@pytest.mark.parametrize(
    ("batch", "heads", "groups", "dim", "pages", "columns", "lens"),
    [
        (1, 1, 1, 16, 1, 1, [16]),
        (4, 8, 2, 64, 40, 9, [1, 33, 0, 140]),
        (3, 6, 3, 128, 30, 4, [17, 200, -5]),  # the second is cut at the table's 4 pages
        (64, 32, 32, 128, 64 * 256, 256, [4096] * 64),  # one decode step of the suite's size
        (2, 4, 2, 64, 400, 300, [4790, 2000]),  # few long sequences: the pages split
    ],
    ids=["one-token-page", "partial-and-empty", "cut-at-table", "decode-4096", "few-long"],
)
@pytest.mark.parametrize("stages", [1, 2], ids=["plain", "next-page-ahead"])
def test_paged_decode_matches_sdpa_over_gathered_pages(
    batch, heads, groups, dim, pages, columns, lens, stages
):
    """With `stages=2` the loop over pages reads the next page number and issues the next
    page's keys and values before computing this page (register prefetch over a range()
    loop): past the last page it reads the table's next column, or past the table, which
    the bounds checks keep inside the tensors."""
    kernel = load_kernel(ROOT / "examples" / "paged_decode.tile", "paged_decode", stages=stages)
    q = torch.randn(batch, heads, dim, device="cuda", dtype=torch.float16)
    k_cache = torch.randn(pages, groups, 16, dim, device="cuda", dtype=torch.float16)
    v_cache = torch.randn(pages, groups, 16, dim, device="cuda", dtype=torch.float16)
    block_table = torch.randint(0, pages, (batch, columns), device="cuda", dtype=torch.int32)
    counts = torch.tensor(lens, device="cuda", dtype=torch.int32)
    expected = paged_reference(q, k_cache, v_cache, block_table, counts)
    for _ in range(2):  # split across blocks (small grids), the tickets must be back at 0
        o = torch.full_like(q, 7.0)
        kernel(q, k_cache, v_cache, block_table, counts, o, 0.125)
        torch.testing.assert_close(o, expected, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize(
    ("rows", "dim", "width", "lens", "dtype"),
    [
        (50, 1, 1, [1], torch.float32),
        (300, 200, 9, [0, 9, 4, -3, 12], torch.float32),  # empty, full, partial, negative, cut
        (1000, 1000, 20, list(range(1, 21)) * 8, torch.bfloat16),  # D no tile divides
        (100000, 128, 64, [64] * 2048, torch.float16),
    ],
    ids=["one-id", "edge-lengths", "odd-width-bf16", "wide-bags"],
)
@pytest.mark.parametrize("stages", [1, 2], ids=["plain", "next-row-ahead"])
def test_embedding_bag_matches_torch(rows, dim, width, lens, dtype, stages):
    """Bags of rows summed (examples/embedding_bag.tile) against F.embedding_bag: each loop
    iteration reads an id, then the row it names; with `stages=2` (the default for such a
    loop) the ids run two iterations ahead and the rows one."""
    kernel = load_kernel(ROOT / "examples" / "embedding_bag.tile", "embedding_bag", stages=stages)
    table = torch.randn(rows, dim, device="cuda", dtype=dtype)
    ids = torch.randint(0, rows, (len(lens), width), device="cuda", dtype=torch.int32)
    counts = torch.tensor(lens, device="cuda", dtype=torch.int32)
    out = torch.full((len(lens), dim), 7.0, device="cuda", dtype=dtype)
    kernel(table, ids, counts, out)
    used = counts.clamp(0, width)
    mask = torch.arange(width, device="cuda")[None, :] < used[:, None]
    offsets = torch.cat([used.new_zeros(1), used.cumsum(0)[:-1]]).long()
    expected = F.embedding_bag(ids[mask].long(), table.float(), offsets, mode="sum")
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(out.float(), expected, rtol=tolerance, atol=tolerance)
