"""Scans and arg-reductions from the language down to the interpreter: the builtins' types
(sema), the IR they become, and what they compute at awkward shapes against numpy, padding
included (tiles pinned smaller than the extents, so that the last tile of each row is partial).
Their lowering: tests/unit/test_scan_lowering.py; their errors: tests/frontend_errors."""

from __future__ import annotations

import numpy as np
import pytest

import tilec
from tilec.dialects import scan as S
from tilec.frontend import analyze
from tilec.frontend.sema import format_program
from tilec.frontend.syntax import parse_source
from tilec.interp import run_kernel
from tilec.interp.scan import topk_positions
from tilec.ir import parse_module, print_op, verify

SHAPES = [(1, 1), (3, 37), (5, 100), (17, 129)]


def _compile(source: str) -> tilec.CompiledProgram:
    return tilec.compile(source)


def _run(source: str, kernel: str, args: list, **tiles) -> None:
    run_kernel(_compile(source), kernel, args, tile_sizes=tiles or None)


ROWS = """
def rows(x: f32[M, N], s: f32[M, N], p: f32[M, N], hi: f32[M, N], lo: f32[M, N]):
    for tm in tiles(M):
        t = x[tm, :]
        s[tm, :] = cumsum(t, axis=1)
        p[tm, :] = cumprod(t, 1)
        hi[tm, :] = cummax(t, axis=-1)
        lo[tm, :] = cummin(t, axis=1)

def columns(x: f32[M, N], s: f32[M, N]):
    for tn in tiles(N):
        s[:, tn] = cumsum(x[:, tn], axis=0)
"""


@pytest.mark.parametrize("shape", SHAPES)
def test_scans_of_whole_rows_and_columns_match_numpy(shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, -1] = np.nan  # propagates to the right in cummax/cummin, nowhere else
    outs = [np.zeros_like(x) for _ in range(4)]
    _run(ROWS, "rows", [x, *outs], M=2)
    np.testing.assert_array_equal(outs[0], np.add.accumulate(x, axis=1))
    np.testing.assert_array_equal(outs[1], np.multiply.accumulate(x, axis=1))
    np.testing.assert_array_equal(outs[2], np.maximum.accumulate(x, axis=1))
    np.testing.assert_array_equal(outs[3], np.minimum.accumulate(x, axis=1))
    s = np.zeros_like(x)
    _run(ROWS, "columns", [x, s], N=16)
    np.testing.assert_array_equal(s, np.add.accumulate(x, axis=0))


DTYPES = """
def narrow(x: i8[M, N], s: i32[M, N], h: i8[M, N]):
    for tm in tiles(M):
        s[tm, :] = cumsum(x[tm, :], axis=1)
        h[tm, :] = cummax(x[tm, :], axis=1)

def half(x: f16[M, N], s: f16[M, N]):
    for tm in tiles(M):
        s[tm, :] = cumsum(x[tm, :], axis=1)

def wraps(x: i32[M, N], p: i32[M, N]):
    for tm in tiles(M):
        p[tm, :] = cumprod(x[tm, :], axis=1)
"""


def test_scan_dtypes_widen_narrow_integers_and_sum_halves_in_f32():
    program = analyze(parse_source(DTYPES, "dtypes.tile"))
    text = format_program(program)
    assert "scan_sum[1]:i32[BM, BN](cast:i32[BM, BN]" in text
    assert "scan_max[1]:i8[BM, BN]" in text
    assert "cast:f16[BM, BN](scan_sum[1]:f32[BM, BN](cast:f32[BM, BN]" in text
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (3, 300), dtype=np.int8)
    s, h = np.zeros(x.shape, np.int32), np.zeros_like(x)
    _run(DTYPES, "narrow", [x, s, h])
    np.testing.assert_array_equal(s, np.cumsum(x.astype(np.int32), axis=1))
    np.testing.assert_array_equal(h, np.maximum.accumulate(x, axis=1))
    y = rng.standard_normal((3, 300)).astype(np.float16)
    t = np.zeros_like(y)
    _run(DTYPES, "half", [y, t])
    wide = np.add.accumulate(y.astype(np.float32), axis=1)  # f32 sums, each rounded once
    np.testing.assert_array_equal(t, wide.astype(np.float16))
    big = np.full((2, 40), 3, dtype=np.int32)
    p = np.zeros_like(big)
    _run(DTYPES, "wraps", [big, p])
    wrapped = (np.multiply.accumulate(big.astype(np.int64), axis=1) % 2**32).astype(np.uint32)
    np.testing.assert_array_equal(p, wrapped.view(np.int32))  # two's complement


ARGS = """
def rows(x: f32[M, N], hi: i32[M], lo: i32[M], kept: i32[M, 1]):
    for tm in tiles(M):
        hi[tm] = argmax(x[tm, :], axis=1)
        lo[tm] = argmin(x[tm, :], 1)
        kept[tm, :] = argmax(x[tm, :], axis=1, keepdims=True)

def columns(x: i32[M, N], hi: i32[N]):
    for tn in tiles(N):
        hi[tn] = argmax(x[:, tn], axis=0)

def vector(x: f32[N], best: i32[B]):
    for tb in tiles(B):
        best[tb] = zeros([tb], i32) + argmax(x[:], axis=0, keepdims=True)
"""


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ties", [False, True])
def test_arg_reductions_first_on_ties_nan_wins_padding_loses(shape, ties):
    rng = np.random.default_rng(2)
    x = (rng.integers(-2, 1, shape) if ties else rng.standard_normal(shape)).astype(np.float32)
    x -= 100  # every real element is below 0, the value loads give padding lanes
    if shape[1] > 3:
        x[0, 3] = x[0, 1] = np.nan
    hi, lo = np.zeros(shape[0], np.int32), np.zeros(shape[0], np.int32)
    kept = np.zeros((shape[0], 1), np.int32)
    _run(ARGS, "rows", [x, hi, lo, kept])
    np.testing.assert_array_equal(hi, np.argmax(x, axis=1))
    np.testing.assert_array_equal(lo, np.argmin(x, axis=1))
    np.testing.assert_array_equal(kept[:, 0], hi)
    xi = rng.integers(-(2**31), 2**31 - 1, shape, dtype=np.int32)
    xi[:, 0] = -(2**31)
    col = np.zeros(shape[1], np.int32)
    _run(ARGS, "columns", [xi, col], N=16)
    np.testing.assert_array_equal(col, np.argmax(xi, axis=0))


def test_argmax_of_a_vector_keeps_its_axis():
    x = np.array([1.0, 5.0, 5.0, -1.0, 2.0], dtype=np.float32)
    best = np.zeros(3, np.int32)
    _run(ARGS, "vector", [x, best])
    assert best.tolist() == [1, 1, 1]


TOPK = """
def rows(x: f32[M, N], v: f32[M, 4], i: i32[M, 4]):
    for tm in tiles(M):
        t = x[tm, :]
        v[tm, :] = topk(t, 4, axis=1)
        i[tm, :] = topk_indices(t, 4)

def tiled(x: f32[M, N], first: i32[M, N]):
    for tm, tn in tiles(M, N):
        first[tm, tn] = argmax(x[tm, tn], axis=1, keepdims=True) + offsets(tn)[None, :] * 0 + min(offsets(tn), axis=0)
"""


@pytest.mark.parametrize("shape", [(1, 4), (3, 37), (5, 100), (17, 129)])
@pytest.mark.parametrize("ties", [False, True])
def test_topk_sorted_descending_ties_by_lower_position_padding_excluded(shape, ties):
    rng = np.random.default_rng(3)
    x = (rng.integers(-3, 0, shape) if ties else rng.standard_normal(shape) - 10).astype(np.float32)
    if shape[1] > 5:
        x[-1, 5] = np.nan
    v, i = np.zeros((shape[0], 4), np.float32), np.zeros((shape[0], 4), np.int32)
    _run(TOPK, "rows", [x, v, i])
    want = topk_positions(x, 4, 1)
    np.testing.assert_array_equal(i, want)
    np.testing.assert_array_equal(v, np.take_along_axis(x, want, axis=1))
    assert (i < shape[1]).all()  # never a padding lane, though padding reads as 0 > x


def test_positions_are_within_the_tile_and_offsets_make_them_tensor_indices():
    x = np.arange(40, dtype=np.float32)[None, :].repeat(3, 0)
    first = np.zeros(x.shape, np.int32)
    _run(TOPK, "tiled", [x, first], M=2, N=16)
    # each tile's argmax is its last real lane; plus the tile's first offset
    want = np.minimum((np.arange(40) // 16) * 16 + 15, 39)
    np.testing.assert_array_equal(first, np.broadcast_to(want, x.shape))


def test_topk_and_topk_indices_of_one_tile_become_one_op():
    module = tilec.compile(TOPK, pipeline="canonicalize,cse,dce").module
    assert sum(isinstance(op, S.TopKOp) for op in module.walk()) == 1


def test_ir_text_round_trips():
    text = """func @f(%x: tile<4x8xf32>, %n: tile<8xi16>) {
  %0 = tile.scan prod %x axis 0 : tile<4x8xf32> -> tile<4x8xf32>
  %1 = tile.arg_reduce min %n axis 0 : tile<8xi16> -> i32
  %2, %3 = tile.topk %x k 8 axis 1 : tile<4x8xf32> -> tile<4x8xf32>, tile<4x8xi32>
  return
}
"""
    module = parse_module(text)
    verify(module)
    printed = print_op(module)
    assert print_op(parse_module(printed)) == printed
    assert "tile.topk %x k 8 axis 1" in printed and "tile.arg_reduce min %n axis 0" in printed
