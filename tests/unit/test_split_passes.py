"""Split multi-pass kernels (`passes/split_passes.py`): loops over one extent, the first
reducing, up to two more reducing what those before found, the last applying their results as
it stores (a softmax down the columns, a mean taken out of the middle axis of [B, S, D], a
column norm that also stores its statistics, a layer norm of few long rows in three loops, a
softmax in three), split across blocks: each block runs the pass of its ticket, waiting for
and combining the partials of the passes before it. Checked in the interpreter against numpy
at split counts 1, the passes, one more, and more than the loops have iterations, with the
blocks in shuffled orders (a block's pass is its ticket's), and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler import DEFAULT_PIPELINE, compile_source
from tilec.dialects import scf
from tilec.dialects import tile as T
from tilec.interp import TensorView, prepare_launch
from tilec.lowering import compile_to_ptx, module_abi
from tilec.passes.split_plan import NotSplit, split_plan
from tilec.runtime.split import choose_split, split_grid, split_time

KERNELS = """
def col_softmax(x: f32[M, N], y: f32[M, N]):
    for tn in tiles(N):
        m_i = full([1, tn], -inf, f32)
        l_i = zeros([1, tn], f32)
        for tm in tiles(M):
            s = x[tm, tn]
            m_new = maximum(m_i, max(s, axis=0, keepdims=True))
            l_i = l_i * exp(m_i - m_new) + sum(exp(s - m_new), axis=0, keepdims=True)
            m_i = m_new
        for tm in tiles(M):
            y[tm, tn] = exp(x[tm, tn] - m_i) / l_i


def center_seq(x: f32[B, S, D], y: f32[B, S, D]):
    for tb, td in tiles(B, D):
        acc = zeros([tb, td], f32)
        for ts in tiles(S):
            acc += sum(x[tb, ts, td], axis=1)
        mu = acc / S
        for ts in tiles(S):
            y[tb, ts, td] = x[tb, ts, td] - mu[:, None, :]


def col_norm(x: f32[M, N], y: f32[M, N], mu_out: f32[N], rstd: f32[N]):
    for tn in tiles(N):
        s1 = zeros([tn], f32)
        s2 = zeros([tn], f32)
        for tm in tiles(M):
            t = x[tm, tn]
            s1 += sum(t, axis=0)
            s2 += sum(t * t, axis=0)
        mu = s1 / M
        r = rsqrt(s2 / M - mu * mu + 1e-5)
        mu_out[tn] = mu
        rstd[tn] = r
        for tm in tiles(M):
            y[tm, tn] = (x[tm, tn] - mu[None, :]) * r[None, :]


def row_layernorm(x: f32[M, N], w: f32[N], y: f32[M, N]):
    for tm in tiles(M):
        s1 = zeros([tm], f32)
        for tn in tiles(N):
            s1 += sum(x[tm, tn], axis=1)
        mu = s1 / N
        s2 = zeros([tm], f32)
        for tn in tiles(N):
            d = x[tm, tn] - mu[:, None]
            s2 += sum(d * d, axis=1)
        r = rsqrt(s2 / N + 1e-5)
        for tn in tiles(N):
            y[tm, tn] = (x[tm, tn] - mu[:, None]) * r[:, None] * w[tn][None, :]


def naive_softmax(x: f32[M, N], y: f32[M, N]):
    for tm in tiles(M):
        m = full([tm], -inf, f32)
        for tn in tiles(N):
            m = maximum(m, max(x[tm, tn], axis=1))
        total = zeros([tm], f32)
        for tn in tiles(N):
            total += sum(exp(x[tm, tn] - m[:, None]), axis=1)
        for tn in tiles(N):
            y[tm, tn] = exp(x[tm, tn] - m[:, None]) / total[:, None]


def row_share(x: f32[B, N], y: f32[B, N]):
    for b in tiles(B, tile={B: 1}):
        total = 0.25
        for tn in tiles(N):
            total += sum(x[b, tn])
        for tn in tiles(N):
            y[b, tn] = x[b, tn] / total
"""


def _softmax(x: np.ndarray) -> list[np.ndarray]:
    e = np.exp(x - x.max(0, keepdims=True))
    return [e / e.sum(0, keepdims=True)]


def _col_norm(x: np.ndarray) -> list[np.ndarray]:
    x64 = x.astype(np.float64)
    mu = x64.mean(0)
    r = 1 / np.sqrt((x64 * x64).mean(0) - mu * mu + 1e-5)
    return [(x64 - mu) * r, mu, r]


def _row_layernorm(x: np.ndarray) -> list[np.ndarray]:
    x64 = x.astype(np.float64)
    mu = x64.mean(1, keepdims=True)
    r = 1 / np.sqrt(((x64 - mu) ** 2).mean(1, keepdims=True) + 1e-5)
    return [(x64 - mu) * r * _weights(x.shape[1])]


def _weights(n: int) -> np.ndarray:
    return np.linspace(0.5, 1.5, n, dtype=np.float32)


REFERENCES = {
    "row_layernorm": _row_layernorm,
    "naive_softmax": lambda x: [_softmax(x.T)[0].T],
    "col_softmax": _softmax,
    "center_seq": lambda x: [x - x.mean(1, keepdims=True, dtype=np.float64)],
    "col_norm": _col_norm,
    "row_share": lambda x: [x / (0.25 + x.sum(1, keepdims=True, dtype=np.float64))],
}
SHAPES = {
    "row_layernorm": [(1, 1), (3, 70), (2, 300)],
    "naive_softmax": [(1, 5), (3, 70), (2, 300)],
    "col_softmax": [(1, 1), (100, 3), (37, 40), (200, 17)],
    "center_seq": [(2, 70, 20), (1, 33, 5), (3, 16, 17)],
    "col_norm": [(100, 3), (57, 33)],
    "row_share": [(1, 1), (2, 15), (3, 300)],
}
# Small tiles, so that each loop has several iterations to share out.
TILES = {
    "row_layernorm": "BM=1,BN=16",
    "naive_softmax": "BM=1,BN=16",
    "col_softmax": "BM=16,BN=16",
    "center_seq": "BB=1,BS=16,BD=16",
    "col_norm": "BM=8,BN=16",
    "row_share": "BN=16",
}


def _compiled(kernel: str, source: str = KERNELS):
    pipeline = DEFAULT_PIPELINE.replace("tiling", f'tiling{{tiles="{TILES[kernel]}"}}')
    return compile_source(source, kernels=[kernel], pipeline=pipeline)


def _input(kernel: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(sum(shape) + len(kernel))
    if kernel == "row_share":
        return rng.uniform(0.5, 1, size=shape).astype(np.float32)
    return rng.uniform(-2, 2, size=shape).astype(np.float32)


def _interpret(module, kernel: str, x: np.ndarray, split: int, seed: int):
    outputs = [np.full(r.shape, np.nan, np.float32) for r in REFERENCES[kernel](x)]
    inputs = [x, _weights(x.shape[1])] if kernel == "row_layernorm" else [x]
    launch = prepare_launch(module, kernel, [*inputs, *outputs], split=split, block_seed=seed)
    launch.run()
    return [v.array for v in launch.arguments[1:] if isinstance(v, TensorView)], launch


@pytest.mark.parametrize(
    ("kernel", "shape"),
    [(k, s) for k, shapes in SHAPES.items() for s in shapes],
    ids=lambda v: v if isinstance(v, str) else "x".join(map(str, v)),
)
def test_a_split_multi_pass_kernel_computes_what_its_loops_do(kernel, shape):
    x = _input(kernel, shape)
    module = _compiled(kernel).module
    split = module_abi(module)[kernel].split
    k = len(split.passes)
    assert k == (3 if kernel in ("row_layernorm", "naive_softmax") else 2)
    assert split.passes[0] == split.trip_bytes
    rows = kernel in ("center_seq", "row_share", "row_layernorm", "naive_softmax")
    trips = -(-(shape[1] if rows else shape[0]) // 16)
    want = REFERENCES[kernel](x)
    for count in (1, k, k + 1, k * trips + 3):
        for seed in (0, 1, 2):  # blocks in three orders: a block's role is its ticket
            got, launch = _interpret(module, kernel, x, count, seed)
            assert launch.grid[-1] == count
            got = got[1:] if kernel == "row_layernorm" else got  # (w is an argument)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
            assert launch.split_state.unreset() is None  # tickets and flags back to 0


SPREAD = """
def spread_sum(x: f32[M, N], y: f32[M, N]):
    for tn in tiles(N):
        a = zeros([1, tn], f32)
        for tm in tiles(M):
            a += sum(x[tm, tn], axis=0, keepdims=True)
        for tm in tiles(M):
            y[tm, tn] = x[tm, tn] * 0.0 + a
"""


def test_every_applier_sees_the_same_combined_result_bit_for_bit():
    """Each applier combines the same partials in the same slot order, so the rows that
    different appliers write hold one column sum, to the bit."""
    pipeline = DEFAULT_PIPELINE.replace("tiling", 'tiling{tiles="BM=16,BN=16"}')
    module = compile_source(SPREAD, kernels=["spread_sum"], pipeline=pipeline).module
    x = np.random.default_rng(3).uniform(-1, 1, (300, 20)).astype(np.float32)
    for count in (3, 5, 11):
        y = np.zeros_like(x)
        launch = prepare_launch(module, "spread_sum", [x, y], split=count, block_seed=count)
        launch.run()
        y = launch.arguments[1].array
        assert (y == y[:1]).all()
        np.testing.assert_allclose(y[0], x.sum(0, dtype=np.float64), rtol=1e-5, atol=1e-5)


def test_effects_between_the_loops_run_in_the_first_block_of_the_last_pass_only():
    module = _compiled("col_norm").module
    stores = [op for op in module.walk() if isinstance(op, T.StoreOp) and op.view.type.rank == 1]
    assert len(stores) == 2  # mean and rstd
    for op in stores:
        (guard,) = [p for p in _ancestors(op) if isinstance(p, scf.IfOp)]
        _, first = guard.condition.op.operands  # alone, or the last pass's first ticket
        assert first.op.name == "arith.cmpi" and first.op.attributes["predicate"].value == "eq"


def _ancestors(op):
    parent = op.parent_op
    while parent is not None:
        yield parent
        parent = parent.parent_op


def test_the_rewrite_lowers_to_tickets_flags_and_waits():
    ptx = compile_to_ptx(_compiled("col_softmax").module, "sm_90a")
    assert "atom.relaxed.gpu" in ptx or "atom.gpu" in ptx  # the ticket
    assert "st.release.gpu" in ptx  # publish
    assert "ld.acquire.gpu" in ptx  # the appliers' wait


def test_the_remark_says_who_reduces_and_who_applies():
    program = _compiled("center_seq")
    texts = [r.message for r in program.remarks if r.pass_name == "split-reduction"]
    assert any(
        "2 passes: a reduction (acc by add), and a loop that applies them" in t for t in texts
    ), texts
    assert any("2 + S 4-byte counters" in t for t in texts), texts


REFUSED = """
def second_carries(x: f32[M, N], y: f32[N]):
    for tn in tiles(N):
        a = zeros([tn], f32)
        for tm in tiles(M):
            a += sum(x[tm, tn], axis=0)
        b = zeros([tn], f32)
        for tm in tiles(M):
            b += sum(x[tm, tn] - a[None, :], axis=0)
        y[tn] = b


def other_extent(x: f32[M, N], z: f32[K, N], y: f32[K, N]):
    for tn in tiles(N):
        a = zeros([1, tn], f32)
        for tm in tiles(M, tile={M: 32}):
            a += sum(x[tm, tn], axis=0, keepdims=True)
        for tk in tiles(K, tile={K: 32}):
            y[tk, tn] = z[tk, tn] - a


def reads_what_it_stores(x: f32[M, N], y: f32[M, N]):
    for tn in tiles(N):
        a = zeros([1, tn], f32)
        for tm in tiles(M):
            a += sum(x[tm, tn], axis=0, keepdims=True)
        for tm in tiles(M):
            y[tm, tn] = y[tm, tn] + a


def same_tile_every_time(x: f32[M, N], y: f32[M, N]):
    for tn in tiles(N):
        a = zeros([1, tn], f32)
        for tm in tiles(M):
            a += sum(x[tm, tn], axis=0, keepdims=True)
        for tm in tiles(M):
            y[0:1, tn] = a


def five_loops(x: f32[M, N], y: f32[M, N]):
    for tn in tiles(N):
        a = zeros([1, tn], f32)
        for tm in tiles(M):
            a += sum(x[tm, tn], axis=0, keepdims=True)
        b = zeros([1, tn], f32)
        for tm in tiles(M):
            b += sum(x[tm, tn] - a, axis=0, keepdims=True)
        c = zeros([1, tn], f32)
        for tm in tiles(M):
            c += sum(x[tm, tn] - b, axis=0, keepdims=True)
        d = zeros([1, tn], f32)
        for tm in tiles(M):
            d += sum(x[tm, tn] - c, axis=0, keepdims=True)
        for tm in tiles(M):
            y[tm, tn] = x[tm, tn] - d


def three_loops(x: f32[M, N], y: f32[M, N], z: f32[M, N]):
    for tn in tiles(N):
        a = zeros([1, tn], f32)
        for tm in tiles(M):
            a += sum(x[tm, tn], axis=0, keepdims=True)
        for tm in tiles(M):
            y[tm, tn] = x[tm, tn] - a
        for tm in tiles(M):
            z[tm, tn] = x[tm, tn] * 2.0
"""


@pytest.mark.parametrize(
    ("kernel", "why"),
    [
        ("second_carries", "the last carries values"),
        ("other_extent", "different extents"),
        ("reads_what_it_stores", "reads a tensor it stores"),
        ("three_loops", r"a loop between the first and the last has an effect \(tile.store\)"),
        ("five_loops", "5 top-level loops"),
    ],
)
def test_loops_that_are_not_reductions_and_their_application_are_not_split(kernel, why):
    # The IR split-reduction sees (mask-bounds, after it, cuts loops in two).
    pipeline = DEFAULT_PIPELINE[: DEFAULT_PIPELINE.index(",split-reduction")]
    module = compile_source(REFUSED, kernels=[kernel], pipeline=pipeline).module
    (func,) = [f for f in module.functions if f.sym_name == kernel]
    with pytest.raises(NotSplit, match=why):
        split_plan(func)


def test_the_launch_runs_each_pass_after_the_one_before():
    """Unsplit, the block runs the loops one after the other (the reductions at their loads,
    the last at its loads and stores); split n ways, each pass's blocks run their chunks, the
    SMs' bandwidth theirs alone: a column norm of 100000 x 128 (4 blocks of columns) splits
    until its first pass gives every SM a block. S is 1 or at least a block a pass."""
    from tilec.runtime.split import ITERATION_S, SM_BYTES_PER_S

    common = {"sm_count": 132, "blocks_per_sm": 8, "base_blocks": 4, "trips": 782, "rows": 64}
    args = (132, 8, 4, 782, 16384, 64)
    passes = (16384, 32768)
    unsplit = split_time(1, *args, passes=passes)
    per_iteration = [max(ITERATION_S, b / SM_BYTES_PER_S) for b in passes]
    assert unsplit == pytest.approx(782 * sum(per_iteration))
    count = choose_split(**common, trip_bytes=16384, passes=passes)
    assert 4 * -(-count // 2) >= 132  # the first pass on every SM
    assert split_time(count, *args, passes=passes) < unsplit / 20
    few = choose_split(**{**common, "trips": 2}, trip_bytes=16384, passes=(4096, 4096, 8192))
    assert few == 1 or few >= 3


def test_the_launch_gives_a_multi_pass_split_its_flags(monkeypatch):
    """Counters as a split scan's: a ticket and a finish counter per block of the other
    axes, then n flags (those of every pass but the last)."""
    from tilec.runtime import split as R

    axis = module_abi(_compiled("col_softmax").module)["col_softmax"].split
    asked = {}

    def get(ordinal, stream, slot_bytes, counters):
        asked.update(slot_bytes=slot_bytes, counters=counters)
        return 4096, 0

    monkeypatch.setattr(R.WORKSPACES, "get", get)
    grid, _ = split_grid(axis, 1, (3, 1, 1), {"M": 100000, "N": 40}, (132, 8), 0, 0, None)
    count = grid[1]
    assert count > 2
    assert asked == {"slot_bytes": 3 * count * axis.slot_bytes, "counters": 3 * (2 + count)}


LONG_ROWS = """
def log_softmax(x: f16[M, V], y: f16[M, V]):
    for tm in tiles(M):
        m_i = full([tm], -inf, f32)
        l_i = zeros([tm], f32)
        for tv in tiles(V):
            s = x[tm, tv].to(f32)
            m_new = maximum(m_i, max(s, axis=1))
            l_i = l_i * exp(m_i - m_new) + sum(exp(s - m_new[:, None]), axis=1)
            m_i = m_new
        lse = m_i + log(l_i)
        for tv in tiles(V):
            y[tm, tv] = x[tm, tv].to(f32) - lse[:, None]
"""


def test_chunks_of_long_rows_keep_their_16_byte_accesses(tmp_path):
    """A multi-pass kernel over a few long rows splits along the rows; each chunk starts at a
    multiple of the step in either branch of the split's route (`vectorize` reads an `scf.if`
    result as both branches' yields), so its loads and stores stay 16 bytes wide."""
    from tilec.jit import load_kernel

    path = tmp_path / "long_rows.tile"
    path.write_text(LONG_ROWS)
    x = np.zeros((16, 65536), np.float16)
    compiled = load_kernel(path, "log_softmax").compile_for(x, x.copy(), arch="sm_90a")
    assert compiled.abi.split is not None and len(compiled.abi.split.passes) == 2
    assert "ld.global.v4" in compiled.ptx or "ld.global.nc.v4" in compiled.ptx
    assert "ld.global.b16" not in compiled.ptx and "ld.global.u16" not in compiled.ptx


def test_a_split_of_fewer_blocks_than_passes_is_refused():
    """Each pass needs a block: a pin of 2 on three passes is a located error, and the
    interpreter refuses to launch that many."""
    from tilec.diagnostics import TileError
    from tilec.interp import LaunchError

    pinned = KERNELS.replace("def naive_softmax(", "@kernel(split=2)\ndef naive_softmax(")
    with pytest.raises(TileError, match="its 3 passes need a block each"):
        _compiled("naive_softmax", pinned)
    module = _compiled("naive_softmax").module
    x = _input("naive_softmax", (2, 100))
    with pytest.raises(LaunchError, match="its 3 passes need a block each"):
        _interpret(module, "naive_softmax", x, 2, 0)
    assert _interpret(module, "naive_softmax", x, 1, 0)[1].grid[-1] == 1
