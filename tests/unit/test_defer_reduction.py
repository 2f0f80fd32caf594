"""defer-reduction on the CPU: which loops it rewrites and which it leaves, and the rewritten
kernels computing in the interpreter what the unrewritten ones do, at awkward shapes (partial
tiles, one iteration, none), with and without split-reduction before it."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler import DEFAULT_PIPELINE, compile_source
from tilec.interp import TensorView, prepare_launch

KERNELS = """
def col_max(x: f32[M, N], out: f32[N]):
    for tn in tiles(N):
        acc = full([tn], -0.5, f32)
        for tm in tiles(M):
            acc = maximum(acc, max(x[tm, tn], axis=0))
        out[tn] = acc


def row_min_count(x: i32[M, N], low: i32[M], count: i32[M]):
    for tm in tiles(M):
        lo = full([tm], 5, i32)
        n = zeros([tm], i32)
        for tn in tiles(N):
            t = x[tm, tn]
            lo = minimum(lo, min(t, axis=1))
            n += sum(where(t > 0, 1, 0), axis=1)
        low[tm] = lo
        count[tm] = n


def rescaled(x: f32[M, N], out: f32[M]):
    for tm in tiles(M):
        acc = zeros([tm], f32)
        for tn in tiles(N):
            acc = acc * 0.5 + sum(x[tm, tn], axis=1)
        out[tm] = acc


def read_inside(x: f32[M, N], out: f32[M, N]):
    for tm in tiles(M):
        acc = zeros([tm], f32)
        for tn in tiles(N):
            acc += sum(x[tm, tn], axis=1)
            out[tm, tn] = x[tm, tn] + acc[:, None]
"""

REFERENCES = {
    "col_max": lambda x: [np.maximum(x.max(0), -0.5)],
    "row_min_count": lambda x: [np.minimum(x.min(1), 5), (x > 0).sum(1).astype(np.int32)],
}

WITHOUT = DEFAULT_PIPELINE.replace("defer-reduction,", "")
SMALL_TILES = 'tiling{tiles="BM=16,BN=16"}'


def _compiled(kernel: str, pipeline: str):
    return compile_source(KERNELS, kernels=[kernel], pipeline=pipeline).module


def _run(module, kernel: str, x: np.ndarray, split: int | None = None) -> list[np.ndarray]:
    outputs = [np.zeros(r.shape, r.dtype) for r in REFERENCES[kernel](x)]
    launch = prepare_launch(module, kernel, [x, *outputs], split=split)
    launch.run()
    return [v.array for v in launch.arguments[1:] if isinstance(v, TensorView)]


def _input(kernel: str, shape: tuple) -> np.ndarray:
    rng = np.random.default_rng(sum(shape))
    if kernel == "row_min_count":
        return rng.integers(-9, 9, size=shape, dtype=np.int32)
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


SHAPES = [(1, 1), (7, 300), (200, 3), (130, 65), (16, 16), (33, 17)]


@pytest.mark.parametrize("kernel", ["col_max", "row_min_count"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_deferred_kernels_compute_what_the_others_do(kernel, shape):
    x = _input(kernel, shape)
    pipeline = DEFAULT_PIPELINE.replace("tiling", SMALL_TILES)
    deferred = _compiled(kernel, pipeline)
    plain = _compiled(kernel, pipeline.replace("defer-reduction,", ""))
    assert deferred.functions[0].attributes.get("tilec.deferred_reductions") is not None
    expected = _run(plain, kernel, x)
    for split in (None, 2, 5):  # the chunks of split-reduction, each deferred on its own
        got = _run(deferred, kernel, x, split)
        for g, e, r in zip(got, expected, REFERENCES[kernel](x)):
            np.testing.assert_array_equal(g, e)  # max, min and integer sums: exact
            np.testing.assert_array_equal(g, r)


def _remarks(kernel: str, pipeline: str) -> list[str]:
    program = compile_source(KERNELS, kernels=[kernel], pipeline=pipeline)
    return [str(r) for r in program.remarks if r.pass_name == "defer-reduction"]


def test_what_is_not_a_reduction_is_left_alone():
    # A rescaled running sum (an online softmax's) and a value read inside the loop: no
    # rewrite, no attribute, no remark claiming one. (read_inside is a scan, which
    # split-reduction splits: the copy of its loop that only reduces each chunk is a
    # reduction like col_max's, deferred; the loop that stores is not.)
    unsplit = DEFAULT_PIPELINE.replace("split-reduction,", "")
    for kernel, pipeline in (("rescaled", DEFAULT_PIPELINE), ("read_inside", unsplit)):
        module = _compiled(kernel, pipeline)
        assert module.functions[0].attributes.get("tilec.deferred_reductions") is None
        assert not any("deferred past" in r for r in _remarks(kernel, pipeline))
    split = _compiled("read_inside", DEFAULT_PIPELINE)
    for loop in [op for op in split.walk() if op.name == "scf.for"]:
        stores = any(op.name == "tile.store" for op in loop.walk())
        carried = [a for a in loop.body.block.args[1:] if getattr(a.type, "rank", 0) == 2]
        assert not (stores and carried), "the scan's own loop carries a deferred 2-D tile"


def test_the_options_turn_it_off_and_bound_the_carried_tile():
    off = DEFAULT_PIPELINE.replace("defer-reduction", "defer-reduction{enable=false}")
    assert (
        _compiled("col_max", off).functions[0].attributes.get("tilec.deferred_reductions") is None
    )
    assert (
        _compiled("col_max", WITHOUT).functions[0].attributes.get("tilec.deferred_reductions")
        is None
    )
    small = DEFAULT_PIPELINE.replace("tiling", SMALL_TILES).replace(
        "defer-reduction", "defer-reduction{max_elements=100}"
    )
    remarks = _remarks("col_max", small)
    assert any("would hold 256 elements through the loop (max_elements=100)" in r for r in remarks)


@pytest.mark.parametrize("kernel", ["col_max", "row_min_count", "rescaled", "read_inside"])
def test_deferrable_predicts_what_the_pass_moves(kernel):
    """`deferrable` (which the occupancy model asks before the pass runs) is true of exactly
    the reductions the pass then moves past their loops: col_max's and row_min_count's, not
    a rescaled sum's; read_inside's scan only in the copy of its loop that reduces a chunk."""
    from tilec.dialects import tile as T
    from tilec.dialects.builtin import FuncOp
    from tilec.passes.defer_reduction import deferrable

    before = DEFAULT_PIPELINE.replace("tiling", SMALL_TILES).split("defer-reduction")[0]
    module = _compiled(kernel, before.rstrip(","))
    predicted = sum(deferrable(op) for op in module.walk() if isinstance(op, T.ReduceOp))
    after = _compiled(kernel, before + "defer-reduction")
    func = next(op for op in after.walk() if isinstance(op, FuncOp))
    moved = func.attributes.get("tilec.deferred_reductions")
    assert predicted == (moved.value if moved is not None else 0)
    # (mask-bounds split each loop into its full tiles and a remainder: a reduction each)
    # (read_inside's: the reducing copy of its loop that split-reduction's scan split makes)
    assert bool(predicted) == (kernel in ("col_max", "row_min_count", "read_inside"))
