"""Gathers and scatters on the GPU against torch's indexing, at awkward shapes: embedding rows
(`F.embedding`), per-element columns (`torch.gather`), scatters of distinct rows
(`index_copy_`), padded table rows; out-of-range indices as docs/language.md defines them
(padding read, stores skipped), and TILEC_CHECK_BOUNDS=1 reporting the first bad index (in a
process of its own: a device-side assert leaves the CUDA context unusable)."""

# ruff: noqa: F821 - kernel bodies use the tile language's names (f32, tiles, M), not Python's

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import tilec

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


@tilec.jit
def rows(table: bf16[V, D], ids: i64[M], out: bf16[M, D]):
    for tm, td in tiles(M, D):
        out[tm, td] = table[ids[tm], td]


@tilec.jit
def rows_i32(table: f32[V, D], ids: i32[M], out: f32[M, D]):
    for tm in tiles(M):
        out[tm, :] = table[ids[tm], :]


@tilec.jit
def columns(x: f16[M, N], cols: i64[M, K], y: f16[M, K]):
    for tm, tk in tiles(M, K):
        y[tm, tk] = x[tm, cols[tm, tk]]


@tilec.jit
def scatter_rows(v: f32[M, D], idx: i32[M], out: f32[V, D]):
    for tm in tiles(M):
        out[idx[tm], :] = v[tm, :]


SHAPES = [(1, 1, 1), (37, 300, 77), (1000, 1025, 129), (32000, 4096, 300)]


@pytest.mark.parametrize(("v", "d", "m"), SHAPES, ids=lambda x: str(x))
def test_embedding_rows_match_torch(v, d, m):
    table = torch.randn(v, d, device="cuda", dtype=torch.bfloat16)
    ids = torch.randint(0, v, (m,), device="cuda")
    out = torch.empty(m, d, device="cuda", dtype=torch.bfloat16)
    rows(table, ids, out)
    torch.testing.assert_close(out, F.embedding(ids, table), rtol=0, atol=0)
    small = table[:, : max(d // 2, 1)].float()  # a view: rows longer than the extent
    out32 = torch.empty(m, small.shape[1], device="cuda")
    rows_i32(small, ids.int(), out32)
    torch.testing.assert_close(out32, small[ids], rtol=0, atol=0)


@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 1), (77, 300, 13), (130, 5, 257)])
def test_columns_match_torch_gather(m, n, k):
    x = torch.randn(m, n, device="cuda", dtype=torch.float16)
    cols = torch.randint(0, n, (m, k), device="cuda")
    y = torch.empty(m, k, device="cuda", dtype=torch.float16)
    columns(x, cols, y)
    torch.testing.assert_close(y, torch.gather(x, 1, cols), rtol=0, atol=0)


@pytest.mark.parametrize(("m", "d", "v"), [(1, 1, 3), (77, 300, 100), (129, 33, 4000)])
def test_scatter_of_distinct_rows_matches_index_copy(m, d, v):
    values = torch.randn(m, d, device="cuda")
    idx = torch.randperm(v, device="cuda")[:m].int()
    out = torch.full((v, d), 7.0, device="cuda")
    expected = out.clone().index_copy_(0, idx.long(), values)
    scatter_rows(values, idx, out)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_out_of_range_indices_read_padding_and_skip_stores_without_checks(monkeypatch):
    monkeypatch.delenv("TILEC_CHECK_BOUNDS", raising=False)
    table = torch.randn(10, 64, device="cuda")
    ids = torch.tensor([3, 10, -1, 9, 1 << 30, 0], device="cuda", dtype=torch.int32)
    out = torch.full((6, 64), 5.0, device="cuda")
    rows_i32(table, ids, out)
    good = torch.tensor([True, False, False, True, False, True], device="cuda")
    torch.testing.assert_close(out[good], table[ids[good].long()], rtol=0, atol=0)
    assert (out[~good] == 0).all()  # the padding
    target = torch.zeros(10, 64, device="cuda")
    scatter_rows(out, ids, target)
    assert (target[[2, 4, 5, 6, 7, 8]] == 0).all()  # nothing written anywhere else


BAD_INDEX_SCRIPT = textwrap.dedent(
    """
    import torch
    import tilec
    from tilec.jit import load_kernel

    kernel = load_kernel({path!r}, "embedding")
    table = torch.zeros(100, 64, device="cuda", dtype=torch.bfloat16)
    ids = torch.zeros(40, device="cuda", dtype=torch.int64)
    ids[17] = 12345
    out = torch.empty(40, 64, device="cuda", dtype=torch.bfloat16)
    try:
        kernel(table, ids, out)
    except tilec.TileError as e:
        print("RAISED:", e.render())
    """
)


def test_check_bounds_reports_the_first_bad_index_and_its_block(tmp_path):
    script = BAD_INDEX_SCRIPT.format(path=str(ROOT / "examples" / "embedding.tile"))
    env = {**os.environ, "TILEC_CHECK_BOUNDS": "1", "TILEC_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    out = done.stdout
    assert "tilec: kernel 'embedding': index 12345 at position [" in out, out + done.stderr
    assert "out of range for dim 0 of 'table' (extent 100), in block (" in out
    assert "RAISED:" in out and "CUDA_ERROR_ASSERT" in out and "TILEC_CHECK_BOUNDS" in out
    assert out.count("tilec: kernel 'embedding'") == 1  # the first bad index, once


def test_checked_kernels_still_compute_the_embedding(tmp_path):
    script = textwrap.dedent(
        f"""
        import torch, torch.nn.functional as F
        from tilec.jit import load_kernel

        kernel = load_kernel({str(ROOT / "examples" / "embedding.tile")!r}, "embedding")
        table = torch.randn(333, 130, device="cuda", dtype=torch.bfloat16)
        ids = torch.randint(0, 333, (77,), device="cuda")
        out = torch.empty(77, 130, device="cuda", dtype=torch.bfloat16)
        kernel(table, ids, out)
        assert torch.equal(out, F.embedding(ids, table))
        print("OK")
        """
    )
    env = {**os.environ, "TILEC_CHECK_BOUNDS": "1", "TILEC_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.stdout.strip().endswith("OK"), done.stdout + done.stderr
