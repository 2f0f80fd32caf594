"""Split scans (`passes/split_scan.py`): a loop that stores what its carried ⊕-reductions reach
(a cumulative sum down the columns of a tall matrix) split across blocks, each block reducing
its chunk, waiting for the partials of the chunks before it, and scanning its chunk from there.
Checked in the interpreter against numpy at split counts 1, 2, 3 and more than the loop has
iterations, with the blocks in shuffled orders (their chunks are their tickets)."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler import DEFAULT_PIPELINE, compile_source
from tilec.interp import InterpreterError, TensorView, prepare_launch
from tilec.lowering import compile_to_ptx, module_abi
from tilec.passes.split_plan import NotSplit, split_plan
from tilec.runtime.split import choose_split, split_grid, split_time

KERNELS = """
def col_cumsum(x: f32[M, N], y: f32[M, N]):
    for tn in tiles(N):
        total = zeros([1, tn], f32)
        for tm in tiles(M):
            t = x[tm, tn]
            y[tm, tn] = cumsum(t, axis=0) + total
            total = total + sum(t, axis=0, keepdims=True)


def row_cummax(x: i32[M, N], y: i32[M, N]):
    for tm in tiles(M):
        best = full([tm, 1], -7, i32)
        for tn in tiles(N):
            t = x[tm, tn]
            y[tm, tn] = maximum(cummax(t, axis=1), best)
            best = maximum(best, max(t, axis=1, keepdims=True))


def vec_cumsum_total(x: f32[B, N], y: f32[B, N], out: f32[B]):
    for b in tiles(B, tile={B: 1}):
        total = 0.5
        for tn in tiles(N):
            t = x[b, tn]
            y[b, tn] = cumsum(t, axis=0) + total
            total = total + sum(t)
        out[b] = total


def batched_col_cumsum(x: f32[B, M, N], y: f32[B, M, N]):
    for b, tn in tiles(B, N, tile={B: 1}):
        total = zeros([1, tn], f32)
        for tm in tiles(M):
            t = x[b, tm, tn]
            y[b, tm, tn] = cumsum(t, axis=0) + total
            total = total + sum(t, axis=0, keepdims=True)
"""


def _cummax(x: np.ndarray, axis: int, start: int) -> np.ndarray:
    return np.maximum(np.maximum.accumulate(x, axis=axis), start)


REFERENCES = {
    "col_cumsum": lambda x: [np.cumsum(x, axis=0, dtype=np.float64)],
    "row_cummax": lambda x: [_cummax(x, 1, -7)],
    "vec_cumsum_total": lambda x: [
        0.5 + np.cumsum(x, axis=1, dtype=np.float64),
        0.5 + x.sum(1, dtype=np.float64),
    ],
    "batched_col_cumsum": lambda x: [np.cumsum(x, axis=1, dtype=np.float64)],
}

SHAPES = {
    "col_cumsum": [(1, 1), (100, 3), (37, 40), (200, 17)],
    "row_cummax": [(3, 100), (1, 513), (20, 33)],
    "vec_cumsum_total": [(1, 1), (2, 15), (1, 16), (3, 300)],
    "batched_col_cumsum": [(2, 70, 5), (3, 33, 20)],
}
# Small tiles, so that each loop has several iterations to share out.
TILES = {
    "col_cumsum": "BM=16,BN=16",
    "row_cummax": "BM=4,BN=16",
    "vec_cumsum_total": "BN=16",
    "batched_col_cumsum": "BM=8,BN=16",
}


def _compiled(kernel: str, split: bool = True, source: str = KERNELS):
    pipeline = DEFAULT_PIPELINE.replace("tiling", f'tiling{{tiles="{TILES[kernel]}"}}')
    if not split:
        pipeline = pipeline.replace("split-reduction,", "")
    return compile_source(source, kernels=[kernel], pipeline=pipeline)


def _interpret(module, kernel: str, x: np.ndarray, split: int | None, seed: int = 0):
    outputs = [np.zeros(r.shape, x.dtype) for r in REFERENCES[kernel](x)]
    launch = prepare_launch(module, kernel, [x, *outputs], split=split, block_seed=seed)
    launch.run()
    return [v.array for v in launch.arguments[1:] if isinstance(v, TensorView)], launch


def _input(kernel: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(sum(shape) + len(kernel))
    if kernel == "row_cummax":
        return rng.integers(-50, 50, size=shape, dtype=np.int32)
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


@pytest.mark.parametrize(
    ("kernel", "shape"),
    [(k, s) for k, shapes in SHAPES.items() for s in shapes],
    ids=lambda v: v if isinstance(v, str) else "x".join(map(str, v)),
)
def test_a_split_scan_computes_what_the_loop_does(kernel, shape):
    x = _input(kernel, shape)
    module = _compiled(kernel).module
    assert module_abi(module)[kernel].split.scan == 1
    trips = -(-max(shape) // 16)
    for count in (1, 2, 3, trips + 2):
        for seed in (0, 1, 2):  # blocks in three orders: a chunk is the order it arrives in
            got, launch = _interpret(module, kernel, x, count, seed)
            assert launch.grid[-1] == count
            for g, r in zip(got, REFERENCES[kernel](x)):
                if g.dtype.kind == "i":
                    np.testing.assert_array_equal(g, r)
                else:
                    np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5 * max(1, len(x)))


def test_a_split_scan_has_the_tickets_and_flags_and_leaves_them_at_zero():
    module = _compiled("col_cumsum").module
    ops = {op.name for op in module.walk()}
    assert {
        "tile.split_ticket",
        "tile.publish",
        "tile.wait_published",
        "tile.clear_counters",
    } <= ops
    _, launch = _interpret(module, "col_cumsum", _input("col_cumsum", (200, 40)), 4)
    # run() raises when a counter is left set; here none is, and every flag was published.
    assert not any(launch.split_state.counters.values())
    ptx = compile_to_ptx(module, "sm_90a")
    for text in ("atom.relaxed.gpu.global.inc.u32", "st.release.gpu.global.u32", "ld.acquire.gpu"):
        assert text in ptx


def _plan_of_col_cumsum(source: str):
    """`split_plan` of `source`'s col_cumsum, asked before tiling (as `tile_shapes` asks)."""
    program = compile_source(source, kernels=["col_cumsum"], pipeline="canonicalize,cse")
    kernel = next(op for op in program.module.walk() if getattr(op, "sym_name", "") == "col_cumsum")
    return split_plan(kernel, tiled=False)


def test_a_scan_that_reads_what_it_stores_is_not_split():
    source = KERNELS.replace(
        "            t = x[tm, tn]\n            y[tm, tn] = cumsum(t, axis=0) + total",
        "            t = x[tm, tn] + y[tm, tn]\n            y[tm, tn] = cumsum(t, axis=0) + total",
        1,
    )
    with pytest.raises(NotSplit, match="reads a tensor it stores"):
        _plan_of_col_cumsum(source)
    assert module_abi(_compiled("col_cumsum", source=source).module)["col_cumsum"].split is None


def test_a_scan_whose_iterations_store_over_each_other_is_not_split():
    """A store in the loop at a place that does not move with the loop (`y[0, tn] = ...` in
    it: every iteration overwrites it, the last one wins) would be written by every chunk's
    block in no defined order: not split."""
    source = KERNELS.replace(
        "            y[tm, tn] = cumsum(t, axis=0) + total\n",
        "            y[tm, tn] = cumsum(t, axis=0) + total\n            y[0, tn] = sum(total, axis=0)\n",
        1,
    )
    with pytest.raises(NotSplit, match="not indexed by the loop's variable"):
        _plan_of_col_cumsum(source)


def test_a_wait_for_a_partial_nobody_published_is_reported():
    text = """
module {
  func @k(%out: !tile.tensor<Nxf32>) attributes {tilec.grid = [["N", 4]], tilec.split = [["dim", 4], ["step", 1], ["slot_bytes", 16], ["trip_bytes", 0], ["rows", 4], ["pinned", 2], ["scan", 1]]} {
    %c0 = arith.constant 0 : index
    %c3 = arith.constant 3 : index
    tile.wait_published counters %c0 count %c3
    return
  }
}
"""
    from tilec.ir.parser import parse_module

    module = parse_module(text)
    launch = prepare_launch(module, "k", [np.zeros(4, np.float32)], split=2)
    with pytest.raises(InterpreterError, match="no block before it published"):
        launch.run()


def test_the_launch_counts_a_scans_chunks_twice_and_its_flags():
    args = dict(sm_count=132, blocks_per_sm=8, base_blocks=1, trips=6250, trip_bytes=8192, rows=64)
    # One block of columns, 6250 iterations: split many ways, though each chunk runs twice.
    assert choose_split(**args, scan=True) > 132
    assert split_time(1, *args.values(), scan=True) == split_time(1, *args.values())
    assert split_time(4, *args.values(), scan=True) > split_time(4, *args.values())

    class _Workspaces:
        def __init__(self):
            self.asked = []

        def get(self, ordinal, stream, slot_bytes, counters):
            self.asked.append((slot_bytes, counters))
            return 0x1000, 0x2000

    from tilec.lowering.abi import SplitAxis
    from tilec.runtime import split as runtime_split

    axis = SplitAxis("M", 16, 256, 8192, 64, pinned=5, scan=1)
    spaces = _Workspaces()
    old = runtime_split.WORKSPACES
    runtime_split.WORKSPACES = spaces
    try:
        grid, hidden = split_grid(axis, 1, (3, 1, 1), {"M": 10**5}, (132, 8), 0, 7)
    finally:
        runtime_split.WORKSPACES = old
    assert grid == (3, 5, 1) and hidden == (0x1000, 0x2000)
    # 3 blocks of the other axes: a ticket and a finish counter each, and 5 flags each.
    assert spaces.asked == [(3 * 5 * 256, 3 * (2 + 5))]
