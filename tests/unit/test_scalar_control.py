"""Scalar control flow in the interpreter, against numpy at awkward sizes: range() loops over
scalars read from tensors (empty, negative and strided ranges, counting down), if/elif/else
with carried tiles, paged-attention decode walking many pages; every pass of the default
pipeline keeps their results; the uniformity rule on names carried around loops; the IR's
text form round-trips; PTX for sm_80 and sm_90a."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tilec
from tests.validation import run_kernel
from tilec.compiler import DEFAULT_PIPELINE
from tilec.diagnostics import TileError
from tilec.dialects import scf
from tilec.ir.parser import parse_module
from tilec.ir.printer import print_op
from tilec.passmanager import PassContext, parse_pipeline

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import paged_decode_reference  # noqa: E402

SOURCE = """
def ranges(x: f32[B, L, D], lens: i32[B], y: f32[B, 3, D], step_start: i32):
    for b, td in tiles(B, D, tile={B: 1}):
        n = lens[b]
        up = zeros([td], f32)
        for i in range(n):
            up += x[b, i, td]
        strided = zeros([td], f32)
        for i in range(step_start, n, 3):
            strided += x[b, i, td] * i
        down = zeros([td], f32)
        for i in range(n - 1, -1, -2):
            down = down * 0.5 + x[b, i, td]
        y[b, 0, td] = up
        y[b, 1, td] = strided
        y[b, 2, td] = down


def branches(x: f32[M, N], flags: i32[M], y: f32[M, N], s: f32):
    for m, tn in tiles(M, N, tile={M: 1}):
        f = flags[m]
        v = x[m, tn]
        if f > 2 and s > 0.0:
            v = v * s
        elif f == 1 or not (f >= 0):
            v = v - 1.0
        else:
            w = v + 10.0
            v = w * 2.0
        if f != 0:
            y[m, tn] = v
        else:
            y[m, tn] = zeros([tn], f32)


def nested(x: f32[B, L, D], lens: i32[B], y: f32[B, D]):
    for b, td in tiles(B, D, tile={B: 1}):
        acc = zeros([td], f32)
        for i in range(lens[b]):
            for j in range(i, lens[b]):
                if (i + j) % 2 == 0:
                    acc += x[b, j, td]
        y[b, td] = acc
"""


def _ranges_reference(x, lens, step_start):
    y = np.zeros((x.shape[0], 3, x.shape[2]), np.float32)
    for b, n in enumerate(lens):
        n = int(n)
        y[b, 0] = sum((x[b, i] for i in range(n)), np.zeros(x.shape[2], np.float32))
        for i in range(step_start, n, 3):
            y[b, 1] += x[b, i] * np.float32(i)
        for i in range(n - 1, -1, -2):
            y[b, 2] = y[b, 2] * np.float32(0.5) + x[b, i]
    return y


def _branches_reference(x, flags, s):
    y = np.zeros_like(x)
    for m, f in enumerate(flags):
        v = x[m]
        if f > 2 and s > 0:
            v = v * s
        elif f == 1 or not f >= 0:
            v = v - np.float32(1.0)
        else:
            v = (v + np.float32(10.0)) * np.float32(2.0)
        y[m] = v if f != 0 else 0
    return y


def _nested_reference(x, lens):
    y = np.zeros((x.shape[0], x.shape[2]), np.float32)
    for b, n in enumerate(lens):
        for i in range(n):
            for j in range(i, n):
                if (i + j) % 2 == 0:
                    y[b] += x[b, j]
    return y


@pytest.fixture(scope="module")
def program():
    return tilec.compile(SOURCE)


def _run(program, name, inputs, after_pipeline: bool, tile_sizes=None):
    """The tensors `name` writes, run from the frontend's IR (at `tile_sizes`), or after the
    default pipeline (at the sizes it chose)."""
    module = program.module.clone()
    if after_pipeline:
        tile_sizes = None
        context = PassContext()
        for p in parse_pipeline(DEFAULT_PIPELINE):
            context.current_pass = p.name
            p.run(module, context)
    outputs, _ = run_kernel(module, name, inputs, tile_sizes)
    return outputs


@pytest.mark.parametrize("after_pipeline", [False, True], ids=["frontend", "pipeline"])
@pytest.mark.parametrize("d", [1, 37])
def test_range_loops_match_python_ranges(program, after_pipeline, d):
    rng = np.random.default_rng(d)
    x = rng.standard_normal((6, 11, d)).astype(np.float32)
    lens = np.array([0, 1, 5, 11, -3, 7], np.int32)  # empty, one, odd, the whole L, negative
    y = np.zeros((6, 3, d), np.float32)
    _, _, got = _run(program, "ranges", [x, lens, y, np.int32(2)], after_pipeline, {"D": 16})
    np.testing.assert_allclose(got, _ranges_reference(x, lens, 2), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("after_pipeline", [False, True], ids=["frontend", "pipeline"])
@pytest.mark.parametrize("s", [2.0, -1.0])
def test_if_elif_else_carry_tiles(program, after_pipeline, s):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 45)).astype(np.float32)
    flags = np.array([0, 1, 2, 3, -4, 5, 1], np.int32)
    y = np.full((7, 45), 99.0, np.float32)
    _, _, got = _run(program, "branches", [x, flags, y, np.float32(s)], after_pipeline, {"N": 16})
    np.testing.assert_array_equal(got, _branches_reference(x, flags, np.float32(s)))


@pytest.mark.parametrize("after_pipeline", [False, True], ids=["frontend", "pipeline"])
def test_nested_range_loops_with_bounds_from_the_outer_variable(program, after_pipeline):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 9, 19)).astype(np.float32)
    lens = np.array([9, 0, 4, 1], np.int32)
    y = np.zeros((4, 19), np.float32)
    _, _, got = _run(program, "nested", [x, lens, y], after_pipeline, {"D": 16})
    np.testing.assert_allclose(got, _nested_reference(x, lens), rtol=1e-6, atol=1e-6)


def _paged_inputs(rng, batch, heads, groups, dim, pages, columns, lens):
    q = rng.standard_normal((batch, heads, dim)).astype(np.float16)
    k = rng.standard_normal((pages, groups, 16, dim)).astype(np.float16)
    v = rng.standard_normal((pages, groups, 16, dim)).astype(np.float16)
    table = rng.integers(0, pages, (batch, columns)).astype(np.int32)
    o = np.zeros((batch, heads, dim), np.float16)
    return [q, k, v, table, np.array(lens, np.int32), o, np.float32(0.125)]


@pytest.mark.parametrize("after_pipeline", [False, True], ids=["frontend", "pipeline"])
@pytest.mark.parametrize(
    ("batch", "heads", "groups", "dim", "pages", "columns", "lens"),
    [
        (1, 1, 1, 1, 1, 1, [16]),
        (4, 4, 2, 37, 11, 5, [1, 33, 0, 80]),  # one token, a partial page, empty, full table
        (3, 6, 3, 64, 9, 3, [17, 200, -5]),  # longer than the table: cut at 3 pages
    ],
)
def test_paged_decode_walks_many_pages(
    after_pipeline, batch, heads, groups, dim, pages, columns, lens
):
    program = tilec.compile(str(ROOT / "examples" / "paged_decode.tile"))
    inputs = _paged_inputs(
        np.random.default_rng(dim), batch, heads, groups, dim, pages, columns, lens
    )
    expected = paged_decode_reference.paged_decode(*inputs)
    *_, got = _run(program, "paged_decode", inputs, after_pipeline)
    scale = float(np.max(np.abs(expected.astype(np.float64)), initial=1.0))
    np.testing.assert_allclose(
        got.astype(np.float64), expected.astype(np.float64), rtol=0, atol=4e-3 * scale
    )
    assert np.all(got[np.array(lens) <= 0] == 0)


def test_uniformity_follows_names_carried_around_loops():
    # `n` is uniform when first tested, but the loop makes it a reduction for later
    # iterations: the condition is not uniform.
    source = """
def k(x: f32[M, N], y: f32[M, N], c: i32):
    for tm in tiles(M):
        n = c
        for tn in tiles(N):
            if n > 0:
                y[tm, tn] = x[tm, tn]
            n = sum(x[tm, tn] > 0.0).to(i32)
"""
    with pytest.raises(TileError) as caught:
        tilec.compile(source)
    assert caught.value.message == (
        "the condition of an 'if' must be block-uniform, but 'n' holds a value computed from "
        "a tile (line 8)"
    )
    assert (caught.value.loc.line, caught.value.loc.col) == (6, 16)
    # A scalar read at uniform indices, and arithmetic on it, stay uniform.
    tilec.compile(source.replace("sum(x[tm, tn] > 0.0).to(i32)", "n - 1"))


def test_range_loop_ir_round_trips_and_is_marked(program):
    text = print_op(program.module)
    assert print_op(parse_module(text)) == text
    loops = [op for op in program.module.walk() if isinstance(op, scf.ForOp)]
    assert loops and all(scf.is_range_loop(op) for op in loops)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compiles_to_ptx(arch):
    compiled = tilec.compile(SOURCE, target="ptx", arch=arch)
    assert ".entry ranges" in compiled.ptx and ".entry nested" in compiled.ptx


def test_a_dot_accumulator_carried_out_of_an_if():
    """Tiling gives the accumulator the mma layout; an `if` that yields it (its else branch
    unchanged) keeps its results without one: the value leaves through a conversion (found
    by the differential check: invalid IR after tiling)."""
    source = """
def k(a: f16[M, K], b: f16[K, N], c: f32[M, N], n: i32):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        if n > 0:
            acc = acc * 2.0
        c[tm, tn] = acc
"""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((40, 24)).astype(np.float16)
    b = rng.standard_normal((24, 33)).astype(np.float16)
    program = tilec.compile(source)
    for n, factor in ((3, 2.0), (0, 1.0)):
        c = np.zeros((40, 33), np.float32)
        (*_, got) = _run(program, "k", [a, b, c, np.int32(n)], after_pipeline=True)
        expected = (a.astype(np.float32) @ b.astype(np.float32)) * factor
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)
    assert ".entry k" in tilec.compile(source, target="ptx", arch="sm_80").ptx
