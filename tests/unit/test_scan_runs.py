"""Scans of rows no 16 bytes align (passes/scan_layouts.py): the operand of a scan along the
last axis goes to 16-byte runs a thread when its lane steps' shuffles cost more than the two
exchanges, the results compute the same after every pass, and the decision is the tuner's
`assign-layouts.scan_runs`."""

from __future__ import annotations

import os

import pytest

import tilec
from tests.validation import check_each_pass
from tilec.compiler import DEFAULT_PIPELINE
from tilec.dialects import scan as S
from tilec.dialects import tile as T
from tilec.interp.runner import random_arguments
from tilec.ir.attributes import BlockedLayout
from tilec.ir.types import TileType, bf16, f32
from tilec.ir.verifier import verify
from tilec.passes.scan_layouts import SCAN_RUNS_ATTRIBUTE, lane_step_shuffles, runs_along
from tilec.passmanager import PassContext, parse_pipeline
from tilec.tune.space import read_back

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CUMSUM = os.path.join(ROOT, "examples", "cumsum.tile")


def _layout(run: int, warps: int = 4) -> BlockedLayout:
    return BlockedLayout((1, run), (1, 32), (warps, 1), (1, 0))


def test_lane_step_shuffles_count_each_repeat_of_a_run():
    # 1024 columns on 32 lanes: runs of one element repeat 32 times, each 5 up-shuffles, one
    # for the lanes before, one for the warp's total
    assert lane_step_shuffles(TileType((4, 1024), bf16, _layout(1)), 1) == 32 * 7
    assert lane_step_shuffles(TileType((4, 1024), bf16, _layout(8)), 1) == 4 * 7
    # a row of 32: one run a lane, one lane step
    assert lane_step_shuffles(TileType((4, 32), f32, _layout(1)), 1) == 7
    # along rows one warp each holds, no lanes exchange
    assert lane_step_shuffles(TileType((4, 1024), f32, _layout(4)), 0) == 0


def _compiled(kernel: str, extents: str, assume: str = "", tiles: str = "", scan_runs=True):
    """The kernel, and the default pipeline for it: `assume{all=...}` first, tiling at
    `extents` (tiles pinned to `tiles`), assign-layouts with option `scan_runs`."""
    tiling = f'tiling{{extents="{extents}"' + (f' tiles="{tiles}"' if tiles else "") + "},"
    layouts = f"assign-layouts{{scan_runs={str(scan_runs).lower()}}},"
    pipeline = DEFAULT_PIPELINE.replace("tiling,", tiling, 1)
    pipeline = pipeline.replace("assign-layouts,", layouts, 1)
    if assume:
        pipeline = f'assume{{all="{assume}"}},' + pipeline
    return tilec.compile(CUMSUM, kernels=[kernel]).module, pipeline


def _run(module, pipeline: str) -> None:
    context = PassContext()
    for p in parse_pipeline(pipeline):
        context.current_pass = p.name
        p.run(module, context)
        verify(module)


def _scan_operand(module, kernel: str) -> BlockedLayout:
    (scan,) = [op for op in module.lookup(kernel).walk() if isinstance(op, S.ScanOp)][:1]
    return scan.input.type.layout


@pytest.mark.parametrize("kernel", ["cumsum_rows", "running_max_rows"])
def test_rows_no_16_bytes_align_are_scanned_in_runs_and_compute_the_same(kernel):
    # 53 columns in tiles of 64 (no facts: rows start anywhere), 7 rows in tiles of 4
    module, pipeline = _compiled(kernel, "M=7,N=53", tiles="BM=4,BN=64")
    inputs = random_arguments(module.lookup(kernel), {"M": 7, "N": 53}, seed=5)
    context = check_each_pass(module, kernel, pipeline, inputs)
    func = module.lookup(kernel)
    scans = [op for op in func.walk() if isinstance(op, S.ScanOp)]
    assert scans and all(s.input.type.layout.size_per_thread[-1] > 1 for s in scans)
    assert all(isinstance(s.input.owner, T.ConvertLayoutOp) for s in scans)
    # the stores take the loads' layout back: one element a lane, a whole span an instruction
    stores = [op for op in func.walk() if isinstance(op, T.StoreOp)]
    assert all(s.value.type.layout.size_per_thread[-1] == 1 for s in stores)
    assert read_back(func)["assign-layouts.scan_runs"] is True
    said = [r.message for r in context.remarks if "16-byte runs" in r.message]
    assert any("shuffles a thread in its runs of 1" in m for m in said), said


def test_aligned_rows_keep_their_runs_and_the_option_keeps_any():
    module, pipeline = _compiled("cumsum_rows", "M=64,N=4096", assume="aligned,unit,divisible")
    _run(module, pipeline)
    func = module.lookup("cumsum_rows")
    assert SCAN_RUNS_ATTRIBUTE not in func.attributes
    assert "assign-layouts.scan_runs" not in read_back(func)
    scans = [op for op in func.walk() if isinstance(op, S.ScanOp)]
    assert scans and not any(isinstance(s.input.owner, T.ConvertLayoutOp) for s in scans)
    assert all(s.input.type.layout.size_per_thread[-1] == 4 for s in scans)

    module, pipeline = _compiled("cumsum_rows", "M=64,N=4096", scan_runs=False)
    _run(module, pipeline)
    func = module.lookup("cumsum_rows")
    scans = [op for op in func.walk() if isinstance(op, S.ScanOp)]
    assert all(s.input.type.layout.size_per_thread[-1] == 1 for s in scans)
    assert read_back(func)["assign-layouts.scan_runs"] is False


UNSEEN = os.path.join(ROOT, "tilec", "benchmarks", "unseen.tile")


def test_a_scan_down_the_columns_takes_runs_of_rows_and_computes_the_same():
    """Along an axis other than the last, a thread's repeats of the axis fold into one run of
    consecutive rows (`runs_along`): one lane step instead of one a repeat, the same accesses."""
    pipeline = 'assume{all="aligned,unit,divisible"},' + DEFAULT_PIPELINE.replace(
        "tiling,", 'tiling{extents="M=300,N=24" tiles="BM=256,BN=8"},'
    )
    module = tilec.compile(UNSEEN, kernels=["col_cumsum"]).module
    inputs = random_arguments(module.lookup("col_cumsum"), {"M": 300, "N": 24}, seed=3)
    context = check_each_pass(module, "col_cumsum", pipeline, inputs)
    func = module.lookup("col_cumsum")
    scans = [op for op in func.walk() if isinstance(op, S.ScanOp)]  # (mask-bounds peels one)
    assert scans
    for scan in scans:
        t = scan.input.type
        # 256 rows on 16 lanes and 4 warps: 4 rows a thread, once, where the load repeats 4 times
        assert t.layout.size_per_thread == (4, 4)
        assert isinstance(scan.input.owner, T.ConvertLayoutOp)
        loaded = scan.input.owner.input.type
        assert loaded.layout.size_per_thread == (1, 4)
        assert lane_step_shuffles(t, 0) * 4 == lane_step_shuffles(loaded, 0)
    assert read_back(func)["assign-layouts.scan_runs"] is True
    said = [r.message for r in context.remarks if "runs along axis 0" in r.message]
    assert said and "operand converted" in said[0], said


def test_runs_along_folds_only_the_repeats_of_the_axis():
    # 64 rows on 16 lanes and 4 warps: no repeats, nothing to fold
    layout = BlockedLayout((1, 4), (16, 2), (4, 1), (1, 0))
    assert runs_along(layout, (64, 8), 0) == layout
    assert runs_along(layout, (512, 8), 0).size_per_thread == (8, 4)
    # the last axis's run is left alone: its repeats are the next lanes' accesses
    assert runs_along(layout, (512, 8), 1) == layout
