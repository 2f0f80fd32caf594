"""accumulate-atomics on the CPU: translation validation of kernels whose grid axis becomes a
loop (and then a split whose partials the atomics combine) at awkward shapes and split
counts, against numpy and the kernels as written; the launch model and the ABI of an atomic
split; and the kernels the pass and split-reduction leave alone (the GPU's runs are
tests/gpu/test_atomics.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler import DEFAULT_PIPELINE, compile_source
from tilec.interp import TensorView, prepare_launch
from tilec.lowering import module_abi
from tilec.lowering.abi import KernelABI, SplitAxis
from tilec.runtime import split as runtime_split
from tilec.runtime.split import choose_split, split_grid, split_time

KERNELS = """
def col_sum_atomic(x: f32[M, N], out: f32[N]):
    for tm, tn in tiles(M, N):
        atomic_add(out[tn], sum(x[tm, tn], axis=0))


def row_top(x: i32[M, N], top: i32[M], seen: i32[M]):
    for tm, tn in tiles(M, N):
        atomic_max(top[tm], max(x[tm, tn], axis=1))
        atomic_add(seen[tm], 1)


def col_low(x: i64[M, N], low: i64[N]):
    for tm, tn in tiles(M, N):
        atomic_min(low[tn], min(x[tm, tn] * 3, axis=0))


def total(x: f32[N], out: f32[1]):
    for tn in tiles(N):
        atomic_add(out[0], sum(x[tn] * x[tn]))
"""

# Each output's initial contents (the atomics accumulate into them) and the numpy result.
CASES = {
    "col_sum_atomic": (
        lambda x: [np.full(x.shape[1], 0.5, np.float32)],
        lambda x: [x.sum(0) + 0.5],
    ),
    "row_top": (
        lambda x: [np.full(x.shape[0], -7, np.int32), np.full(x.shape[0], 2, np.int32)],
        lambda x: [np.maximum(x.max(1), -7), None],  # seen: checked against the tiles
    ),
    "col_low": (
        lambda x: [np.full(x.shape[1], 5, np.int64)],
        lambda x: [np.minimum((x * 3).min(0), 5)],
    ),
    "total": (lambda x: [np.zeros(1, np.float32)], lambda x: [np.array([(x * x).sum()])]),
}


def _input(kernel: str, shape: tuple, rng) -> np.ndarray:
    if kernel == "total":
        return rng.uniform(-1, 1, size=shape[0] * shape[1]).astype(np.float32)
    if kernel == "row_top":
        return rng.integers(-50, 50, size=shape, dtype=np.int32)
    if kernel == "col_low":
        return rng.integers(-(2**40), 2**40, size=shape, dtype=np.int64)
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def _compiled(kernel: str, pipeline: str):
    if kernel == "total":  # 1-D: no BM
        pipeline = pipeline.replace("BM=16,BN=16", "BN=16")
    return compile_source(KERNELS, kernels=[kernel], pipeline=pipeline).module


def _run(module, kernel, x, split):
    outputs = CASES[kernel][0](x)
    launch = prepare_launch(module, kernel, [x, *outputs], split=split)
    launch.run()
    return [v.array for v in launch.arguments[1:] if isinstance(v, TensorView)], launch


SHAPES = [(1, 1), (7, 300), (200, 3), (1000, 77), (130, 65)]
# Small tiles, so that the loops have several iterations to share out.
PIPELINE = DEFAULT_PIPELINE.replace("tiling", 'tiling{tiles="BM=16,BN=16"}')
AS_WRITTEN = PIPELINE.replace("accumulate-atomics,", "")


@pytest.mark.parametrize("kernel", list(CASES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_accumulated_kernels_compute_what_the_kernels_as_written_do(kernel, shape):
    rng = np.random.default_rng(sum(shape))
    x = _input(kernel, shape, rng)
    module = _compiled(kernel, PIPELINE)
    assert module_abi(module)[kernel].split.atomic == 1
    written, _ = _run(_compiled(kernel, AS_WRITTEN), kernel, x, None)
    for count in (1, 2, 3, 11):
        got, launch = _run(module, kernel, x, count)
        assert launch.grid[-1] == count
        for g, w, r in zip(got, written, CASES[kernel][1](x)):
            if g.dtype.kind == "f":
                scale = max(1.0, float(np.abs(w).max()))
                np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * scale * np.sqrt(x.size))
                np.testing.assert_allclose(g, r, rtol=0, atol=1e-5 * scale * np.sqrt(x.size))
            else:
                np.testing.assert_array_equal(g, w)  # integers, max and min: exact
                if r is not None:
                    np.testing.assert_array_equal(g, r)
    if kernel == "row_top":
        # Every tile of columns the blocks as written ran counted once, as it does now.
        np.testing.assert_array_equal(got[1], 2 + -(-shape[1] // 16))


def test_the_pass_makes_the_grid_axis_a_loop_and_split_adds_the_split_axis():
    module = _compiled("col_sum_atomic", DEFAULT_PIPELINE)
    abi = module_abi(module)["col_sum_atomic"]
    assert [a.dim for a in abi.grid] == ["N"]
    assert abi.split == SplitAxis("M", abi.split.step, 0, abi.split.trip_bytes, 0, 0, atomic=1)
    assert KernelABI.from_json(abi.to_json()) == abi
    text = str(module)
    assert "tile.workspace_store" not in text and "tile.last_arrival" not in text


def test_disabled_the_kernel_keeps_its_grid():
    # Without the pass the grid is tiling's: N, the axis along memory, first (inner_first),
    # and M as declared once that order is turned off; neither is split.
    pipeline = DEFAULT_PIPELINE.replace("accumulate-atomics,", "")
    abi = module_abi(_compiled("col_sum_atomic", pipeline))["col_sum_atomic"]
    assert [a.dim for a in abi.grid] == ["N", "M"] and abi.split is None
    declared = pipeline.replace("tiling", "tiling{inner_first=false}", 1)
    abi = module_abi(_compiled("col_sum_atomic", declared))["col_sum_atomic"]
    assert [a.dim for a in abi.grid] == ["M", "N"] and abi.split is None


def test_split_leaves_atomics_in_a_loop_alone():
    source = """
def k(x: f32[M, N], out: f32[N]):
    for tn in tiles(N):
        for tm in tiles(M):
            atomic_add(out[tn], sum(x[tm, tn], axis=0))
"""
    program = compile_source(source, pipeline=DEFAULT_PIPELINE)
    assert module_abi(program.module)["k"].split is None
    remarks = "\n".join(str(r) for r in program.remarks)
    assert "not split: the loop carries no value" in remarks


def test_split_leaves_an_epilogue_that_rescales_the_partials_alone():
    source = """
def k(x: f32[M, N], out: f32[N]):
    for tn in tiles(N):
        acc = zeros([tn], f32)
        for tm in tiles(M):
            acc += sum(x[tm, tn], axis=0)
        atomic_add(out[tn], acc * 2.0)
"""
    program = compile_source(source, pipeline=DEFAULT_PIPELINE)
    assert module_abi(program.module)["k"].split is None
    remarks = "\n".join(str(r) for r in program.remarks)
    assert "an atomic add adds a value other than a loop result of the same ⊕" in remarks


# -- the launch model ----------------------------------------------------------------------------


def test_an_atomic_split_fills_the_gpu_and_needs_no_workspace(monkeypatch):
    # 262144 x 512 f32 in 32 x 128 tiles: 4 blocks of columns, 8192 iterations of 16 KiB.
    s = choose_split(sm_count=132, blocks_per_sm=5, base_blocks=4, trips=8192,
                     trip_bytes=16384, rows=0, atomic=True)  # fmt: skip
    # Every SM gets blocks, and the loop streams at the copy bandwidth (536 MB at 132 x 32
    # GB/s); each split costs every element one more serialized update, so the count stays
    # far below one block per tile of rows (8192 updates an element, as written).
    assert 4 * s >= 132 and s < 2048
    modelled = split_time(s, 132, 5, 4, 8192, 16384, 0, True)
    assert modelled < 1.05 * 4 * 8192 * 16384 / (132 * runtime_split.SM_BYTES_PER_S)

    class Refuse:
        def get(self, *args):
            raise AssertionError("an atomic split asked for a workspace")

    monkeypatch.setattr(runtime_split, "WORKSPACES", Refuse())
    axis = SplitAxis("M", 32, 0, 16384, 0, atomic=1)
    grid, hidden = split_grid(axis, 1, (4, 1, 1), {"M": 262144}, (132, 5), 0, 7)
    assert grid == (4, s, 1) and hidden == (0, 0)


def test_a_tile_loaded_twice_is_streamed_once():
    # `x[tn] * x[tn]` is two loads of one region: the split's model counts its bytes once.
    module = _compiled("total", DEFAULT_PIPELINE)
    split = module_abi(module)["total"].split
    assert split.trip_bytes == 4 * split.step
