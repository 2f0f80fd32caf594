"""Atomics on a gathered region (`atomic_add(counts[values[tn]], 1)`, `tile.atomic_scatter`):
repeated indices within one tile all count, the old values are each lane's own, max/min and
masks compose, out-of-range indices are reported as for gathers, random inputs draw indices
in range, and the PTX (one `red`/`atom` per element at the gathered address) assembles."""

from __future__ import annotations

import numpy as np
import pytest

import tilec
from tests.validation import run_kernel
from tilec.compiler import DEFAULT_PIPELINE, target_pipeline
from tilec.diagnostics import TileError
from tilec.dialects.builtin import FuncOp
from tilec.interp import InterpreterError
from tilec.interp.gather import index_bounds
from tilec.lowering import compile_to_ptx
from tilec.lowering.ptxas import assemble

KERNELS = """
def histogram(values: i32[N], counts: i32[B]):
    for tn in tiles(N):
        atomic_add(counts[values[tn]], 1)

def tickets(values: i32[N], counts: i32[B], ticket: i32[N]):
    for tn in tiles(N):
        ticket[tn] = atomic_add(counts[values[tn]], 1)

def row_max(x: f32[M, D], ids: i64[M], out: f32[V, D]):
    for tm, td in tiles(M, D):
        atomic_max(out[ids[tm], td], x[tm, td], mask=x[tm, td] > -1.0)

def rows_add(g: bf16[M, D], ids: i32[M], table: bf16[V, D]):
    for tm, td in tiles(M, D):
        atomic_add(table[ids[tm], td], g[tm, td])

def col_scatter(x: f32[M, K], cols: i32[M, K], out: f32[M, N]):
    for tm, tk in tiles(M, K):
        atomic_add(out[tm, cols[tm, tk]], x[tm, tk])

def rows_add_i64(g: i64[M, D], ids: i32[M], table: i64[V, D]):
    for tm, td in tiles(M, D):
        atomic_add(table[ids[tm], td], g[tm, td])
"""
ARCHES = ("sm_80", "sm_90a")
RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def program():
    return tilec.compile(KERNELS)


def _run(program, name, inputs, tile_sizes=None):
    return run_kernel(program.module, name, inputs, tile_sizes)[0]


def test_repeated_indices_within_one_tile_all_count(program):
    values = np.full(64, 3, np.int32)
    values[::5] = 1
    counts = _run(program, "histogram", [values, np.zeros(5, np.int32)], {"BN": 64})[1]
    np.testing.assert_array_equal(counts, np.bincount(values, minlength=5))


def test_each_lane_gets_the_count_before_its_own_update(program):
    values = RNG.integers(0, 4, 100).astype(np.int32)
    _, counts, ticket = _run(
        program, "tickets", [values, np.zeros(4, np.int32), np.zeros(100, np.int32)]
    )
    np.testing.assert_array_equal(counts, np.bincount(values, minlength=4))
    for b in range(4):  # the tickets of one bin are 0, 1, ..., count - 1 in some order
        np.testing.assert_array_equal(np.sort(ticket[values == b]), np.arange(counts[b]))


def test_max_of_rows_with_a_mask(program):
    x = RNG.standard_normal((37, 9)).astype(np.float32)
    ids = RNG.integers(0, 5, 37).astype(np.int64)
    out = _run(program, "row_max", [x, ids, np.full((5, 9), -np.inf, np.float32)])[2]
    expected = np.full((5, 9), -np.inf, np.float32)
    np.maximum.at(expected, ids, np.where(x > -1.0, x, -np.inf))
    np.testing.assert_array_equal(out, expected)


def test_integer_rows_add_matches_add_at(program):
    g = RNG.integers(-9, 9, (41, 19)).astype(np.int64)
    ids = RNG.integers(0, 3, 41).astype(np.int32)
    table = RNG.integers(-9, 9, (3, 19)).astype(np.int64)
    out = _run(program, "rows_add_i64", [g, ids, table], {"BM": 16, "BD": 16})[2]
    expected = table.copy()
    np.add.at(expected, ids, g)
    np.testing.assert_array_equal(out, expected)


def test_an_index_per_element_adds_into_its_own_column(program):
    x = RNG.standard_normal((37, 21)).astype(np.float32)
    cols = RNG.integers(0, 5, (37, 21)).astype(np.int32)
    out = _run(program, "col_scatter", [x, cols, np.zeros((37, 5), np.float32)])[2]
    expected = np.zeros((37, 5))
    np.add.at(expected, (np.arange(37)[:, None], cols), x.astype(np.float64))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_an_out_of_range_index_is_reported_at_the_atomic(program):
    values = np.zeros(20, np.int32)
    values[7] = 5
    with pytest.raises(InterpreterError) as caught:
        _run(program, "histogram", [values, np.zeros(5, np.int32)], {"BN": 16})
    text = caught.value.message
    assert "of kernel 'histogram': index 5 at position [7] of the index tile" in text
    assert "out of range for dim 0 of 'counts' (extent 5)" in text
    assert caught.value.loc.line > 1


def test_random_inputs_draw_the_indices_in_range(program):
    func = next(
        op for op in program.module.walk() if isinstance(op, FuncOp) and op.sym_name == "histogram"
    )
    assert index_bounds(func, [(1000,), (7,)]) == {0: 7}


def _ptx(kernel: str, arch: str) -> str:
    compiled = tilec.compile(
        KERNELS, kernels=[kernel], pipeline=target_pipeline(DEFAULT_PIPELINE, arch)
    )
    ptx = compile_to_ptx(compiled.module, arch)
    assemble(ptx, arch)  # raises when ptxas refuses it
    return ptx


@pytest.mark.parametrize("arch", ARCHES)
def test_unused_results_use_red_and_used_ones_atom(arch):
    ptx = _ptx("histogram", arch)
    assert "red.relaxed.gpu.global.add.u32" in ptx and "atom." not in ptx
    assert "atom.relaxed.gpu.global.add.u32" in _ptx("tickets", arch)
    assert "red.relaxed.gpu.global.max.s32" in _ptx("row_max", arch)
    assert "red.relaxed.gpu.global.add.u64" in _ptx("rows_add_i64", arch)
    assert "red.relaxed.gpu.global.add.f32" in _ptx("col_scatter", arch)


def test_bf16_rows_add_needs_sm_90():
    assert "red.relaxed.gpu.global.add.noftz.bf16" in _ptx("rows_add", "sm_90a")
    with pytest.raises(TileError, match="atomic add of bf16 needs sm_90"):
        _ptx("rows_add", "sm_80")
