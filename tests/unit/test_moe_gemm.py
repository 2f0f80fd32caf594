"""The mixture-of-experts grouped GEMM (examples/moe_gemm.tile) in the interpreter against its
numpy reference, at sorted, uneven expert splits (an empty expert, experts smaller than a tile,
boundaries inside tiles), from the frontend's IR at small tiles and after the default pipeline;
what the compiler makes of it on sm_90a (wgmma, operands pipelined by cp.async); and the
`tile_start()`/`tile_end()` builtins it bounds its expert loop with."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tilec
from tests.validation import run_kernel
from tilec.compiler import DEFAULT_PIPELINE
from tilec.diagnostics import TileError
from tilec.passmanager import PassContext, parse_pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "moe_gemm.tile"
sys.path.insert(0, str(ROOT / "examples"))

import moe_gemm_reference  # noqa: E402

BF16 = ml_dtypes.bfloat16


@pytest.fixture(scope="module")
def program():
    return tilec.compile(str(EXAMPLE))


def _inputs(rows_per_expert: list[int], k: int, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    t = sum(rows_per_expert)
    offsets = np.concatenate([[0], np.cumsum(rows_per_expert)]).astype(np.int32)
    x = rng.uniform(-1, 1, (t, k)).astype(BF16)
    w = rng.uniform(-1, 1, (len(rows_per_expert), n, k)).astype(BF16)
    y = np.full((t, n), 7.0, BF16)  # every row is some expert's: none may keep a 7
    return [x, w, offsets, y]


def _run(program, inputs, after_pipeline: bool, tile_sizes=None):
    module = program.module.clone()
    if after_pipeline:
        tile_sizes = None
        context = PassContext()
        for p in parse_pipeline(DEFAULT_PIPELINE):
            context.current_pass = p.name
            p.run(module, context)
    outputs, _ = run_kernel(module, "moe_gemm", inputs, tile_sizes)
    return outputs[-1]


def _check(got, expected):
    wide = expected.astype(np.float64)
    scale = float(np.max(np.abs(wide), initial=1.0))
    np.testing.assert_allclose(got.astype(np.float64), wide, rtol=0, atol=1.6e-2 * scale)


# Rows per expert: an empty expert first, in the middle and last; experts of fewer rows than
# a 16-row tile, several in one tile; one expert alone; boundaries on and off tile edges.
SPLITS = [[0, 5, 0, 27, 3, 0], [16, 16, 1, 30], [41], [1, 2, 3, 4, 5, 6, 7, 8]]


@pytest.mark.parametrize("rows_per_expert", SPLITS, ids=lambda s: "-".join(map(str, s)))
def test_uneven_experts_at_small_tiles(program, rows_per_expert):
    inputs = _inputs(rows_per_expert, k=37, n=24)
    expected = moe_gemm_reference.moe_gemm(*(a.copy() for a in inputs))
    got = _run(program, inputs, False, {"T": 16, "N": 16, "K": 16})
    _check(got, expected)
    assert not np.any(got == BF16(7.0)) or np.any(expected == BF16(7.0))


@pytest.mark.parametrize("rows_per_expert", [[0, 100, 29, 0, 171], [300]], ids=["uneven", "one"])
def test_uneven_experts_after_the_pipeline(program, rows_per_expert):
    """The default pipeline's tiles (128 rows: an expert boundary inside a tile, a tile of two
    experts and of one), its masks and its copies, keep the reference's result."""
    inputs = _inputs(rows_per_expert, k=72, n=40, seed=1)
    expected = moe_gemm_reference.moe_gemm(*(a.copy() for a in inputs))
    _check(_run(program, inputs, True), expected)


def test_wgmma_with_pipelined_operands_on_sm_90a():
    """Each expert's K loop, nested in the range() loop over experts, is a plain tile GEMM to
    the passes: wgmma from swizzled shared memory, filled by cp.async several steps ahead."""
    pipeline = 'assume{all="aligned,unit,divisible"},' + tilec.compiler.build_pipeline(
        options={"tiling": {"arch": "sm_90a"}}
    )
    compiled = tilec.compile(str(EXAMPLE), pipeline=pipeline, target="ptx", arch="sm_90a")
    messages = [r.message for stage in compiled.stages for r in stage.remarks]
    assert not [m for m in messages if m.startswith("not pipelined")], messages
    assert any(re.match(r"[234] slots: copies run", m) for m in messages), messages
    assert "wgmma.mma_async" in compiled.ptx and "cp.async" in compiled.ptx


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("y[m] = x[m] * tile_start(m)", "tile_start() takes the variable of a tiles() loop"),
        ("y[m] = x[m] * tile_end(3)", "tile_end() takes the variable of a tiles() loop"),
    ],
)
def test_tile_start_and_end_take_a_tile_loop_variable(body, message):
    source = f"""
def k(x: f32[M], y: f32[M]):
    for m in tiles(M, tile={{M: 1}}):
        {body}
"""
    with pytest.raises(TileError) as caught:
        tilec.compile(source)
    assert caught.value.message == message


def test_tile_start_and_end_bound_a_tile():
    source = """
def k(x: f32[M], y: f32[M]):
    for tm in tiles(M):
        if tile_start(tm) > 0:
            y[tm] = x[tm] + (tile_end(tm) - tile_start(tm)).to(f32)
        else:
            y[tm] = x[tm]
"""
    program = tilec.compile(source)
    x = np.zeros(40, np.float32)
    outputs, _ = run_kernel(program.module.clone(), "k", [x, np.zeros(40, np.float32)], {"M": 16})
    np.testing.assert_array_equal(outputs[-1], np.where(np.arange(40) >= 16, 16.0, 0.0))
