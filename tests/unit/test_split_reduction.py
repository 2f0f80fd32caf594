"""split-reduction on the CPU: the launch-time model that chooses S, the ABI that carries the
split axis, the launcher's packing of the hidden parameters, and translation validation of
split kernels in the interpreter at awkward shapes and split counts (the GPU's own runs are
tests/gpu/test_split_reduction.py)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from tilec.compiler import DEFAULT_PIPELINE, compile_source
from tilec.interp import InterpreterError, TensorView, prepare_launch
from tilec.lowering import compile_to_ptx, module_abi
from tilec.lowering.abi import KernelABI, SplitAxis
from tilec.runtime import DeviceTensor, Launcher
from tilec.runtime import split as runtime_split
from tilec.runtime.split import choose_split, split_grid, split_time

KERNELS = """
def col_sum(x: f32[M, N], out: f32[N]):
    for tn in tiles(N):
        acc = zeros([tn], f32)
        for tm in tiles(M):
            acc += sum(x[tm, tn], axis=0)
        out[tn] = acc


def row_sum(x: f32[M, N], out: f32[M]):
    for tm in tiles(M):
        acc = zeros([tm], f32)
        for tn in tiles(N):
            acc += sum(x[tm, tn], axis=1)
        out[tm] = acc


def col_range(x: f32[M, N], top: f32[N], span: f32[N]):
    for tn in tiles(N):
        hi = full([tn], -1.0, f32)
        lo = full([tn], 1.0, f32)
        for tm in tiles(M):
            t = x[tm, tn]
            hi = maximum(hi, max(t, axis=0))
            lo = minimum(lo, min(t, axis=0))
        top[tn] = hi
        span[tn] = hi - lo


def col_count(x: i32[M, N], out: i32[N]):
    for tn in tiles(N):
        n = full([tn], 3, i32)
        for tm in tiles(M):
            n += sum(x[tm, tn], axis=0)
        out[tn] = n


def row_logsumexp(x: f32[M, N], out: f32[M], top: f32[M]):
    for tm in tiles(M):
        m_i = full([tm], -inf, f32)
        l_i = zeros([tm], f32)
        for tn in tiles(N):
            s = x[tm, tn] * 8.0
            m_new = maximum(m_i, max(s, axis=1))
            l_i = l_i * exp(m_i - m_new) + sum(exp(s - m_new[:, None]), axis=1)
            m_i = m_new
        out[tm] = m_i + log(l_i)
        top[tm] = m_i
"""

REFERENCES = {
    "col_sum": lambda x: [x.sum(0)],
    "row_sum": lambda x: [x.sum(1)],
    "col_range": lambda x: [
        np.maximum(x.max(0), -1.0),
        np.maximum(x.max(0), -1.0) - np.minimum(x.min(0), 1.0),
    ],
    "col_count": lambda x: [x.sum(0, dtype=np.int32) + 3],
    "row_logsumexp": lambda x: [
        np.log(np.exp(8.0 * x.astype(np.float64)).sum(1)).astype(np.float32),
        (8.0 * x).max(1),
    ],
}

# -- the model -----------------------------------------------------------------------------------


def test_a_grid_that_fills_the_gpu_is_not_split():
    assert choose_split(sm_count=132, blocks_per_sm=4, base_blocks=528, trips=10**6,
                        trip_bytes=16384, rows=64) == 1  # fmt: skip
    # Every SM has a block already (512 bags of embedding_bag: 1.6x slower split 4 ways).
    assert choose_split(sm_count=132, blocks_per_sm=16, base_blocks=512, trips=16,
                        trip_bytes=260, rows=64) == 1  # fmt: skip
    assert choose_split(sm_count=132, blocks_per_sm=16, base_blocks=132, trips=10**4,
                        trip_bytes=16384, rows=64) == 1  # fmt: skip
    assert choose_split(sm_count=132, blocks_per_sm=4, base_blocks=10**5, trips=10**6,
                        trip_bytes=16384, rows=64) == 1  # fmt: skip


def test_the_split_count_is_where_the_h200_ran_fastest():
    # Column sums timed at every split count by the tuner on the H200 (2026-12-02, after
    # defer-reduction; docs/benchmarks.md). 16384 x 128 f32 in 32 x 128 tiles: 45 splits
    # 14.2 us, 66: 12.4, 132: 11.4, 264: 12.3, 528: 15.9.
    s = choose_split(sm_count=132, blocks_per_sm=4, base_blocks=1, trips=512,
                     trip_bytes=16384, rows=32)  # fmt: skip
    assert 96 <= s <= 200
    # 50000 x 96 in 64 x 64 tiles (2 blocks of columns): 66 splits 15.2 us, 132: 13.1,
    # 264: 13.3, 16: 35.6.
    s = choose_split(sm_count=132, blocks_per_sm=4, base_blocks=2, trips=782,
                     trip_bytes=16384, rows=64)  # fmt: skip
    assert 80 <= s <= 264
    # 3000 x 1000 in 64 x 64 tiles (16 blocks): 16 splits 9.9 us, 66: 12.3, 132: 17.5.
    s = choose_split(sm_count=132, blocks_per_sm=4, base_blocks=16, trips=47,
                     trip_bytes=16384, rows=64)  # fmt: skip
    assert 8 <= s <= 40


def test_too_little_to_split_is_not_split():
    # 4 iterations of 16 KiB: a split's fixed costs and the combine outweigh what it saves.
    assert choose_split(sm_count=132, blocks_per_sm=4, base_blocks=1, trips=4,
                        trip_bytes=16384, rows=64) == 1  # fmt: skip


def test_the_combine_never_costs_more_than_the_loop_it_shortens():
    # One partial a round (a 4096-wide accumulator): every split adds a round, so the count
    # stops where a round costs more than the iterations it takes off each block.
    s = choose_split(sm_count=132, blocks_per_sm=4, base_blocks=1, trips=100003,
                     trip_bytes=16384, rows=1)  # fmt: skip
    rounds = s * runtime_split.COMBINE_ROUND_S
    assert 1 < s < 1000 and rounds < split_time(s, 132, 4, 1, 100003, 16384, 1) - rounds
    assert split_time(s, 132, 4, 1, 100003, 16384, 1) < split_time(1, 132, 4, 1, 100003, 16384, 1)


def test_few_long_rows_split_to_fill_the_gpu():
    # 16 rows of 4M in 1-row blocks: 16 blocks; splits give every SM a block at least.
    s = choose_split(sm_count=132, blocks_per_sm=4, base_blocks=16, trips=1024,
                     trip_bytes=16384, rows=4096)  # fmt: skip
    assert 16 * s >= 132


class _Workspaces:
    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def get(self, ordinal, stream, slot_bytes, counters):
        self.asked.append((ordinal, stream, slot_bytes, counters))
        return self.answer


def test_split_grid_pins_sizes_the_workspace_and_falls_back_under_capture(monkeypatch):
    axis = SplitAxis("M", 64, 256, 16384, 64, pinned=5)
    fake = _Workspaces((0x1000, 0x2000))
    monkeypatch.setattr(runtime_split, "WORKSPACES", fake)
    grid, hidden = split_grid(axis, 1, (2, 1, 1), {"M": 1000}, (132, 4), 0, 7)
    assert grid == (2, 5, 1) and hidden == (0x1000, 0x2000)
    assert fake.asked == [(0, 7, 2 * 5 * 256, 2)]  # slots for 2 x 5 blocks, 2 counters
    # Capturing with no workspace yet: S = 1, no hidden addresses, no error.
    monkeypatch.setattr(runtime_split, "WORKSPACES", _Workspaces(None))
    assert split_grid(axis, 1, (2, 1, 1), {"M": 1000}, (132, 4), 0, 7) == ((2, 1, 1), (0, 0))
    # A grid that fills the GPU never asks for a workspace.
    unpinned = SplitAxis("M", 64, 256, 16384, 64)
    quiet = _Workspaces(None)
    monkeypatch.setattr(runtime_split, "WORKSPACES", quiet)
    assert split_grid(unpinned, 1, (600, 1, 1), {"M": 10**6}, (132, 4), 0, 7)[0] == (600, 1, 1)
    assert quiet.asked == []


# -- the ABI and the launcher --------------------------------------------------------------------


def _compiled(kernel: str, pipeline: str = DEFAULT_PIPELINE):
    return compile_source(KERNELS, kernels=[kernel], pipeline=pipeline)


def test_the_abi_records_the_split_axis_and_round_trips_through_json():
    program = _compiled("col_sum")
    abi = module_abi(program.module)["col_sum"]
    assert abi.split is not None and abi.split.dim == "M" and abi.split.pinned == 0
    assert [p.kind for p in abi.parameters[-2:]] == ["workspace", "counters"]
    again = KernelABI.from_json(abi.to_json())
    assert again == abi
    plain = module_abi(
        _compiled("col_sum", DEFAULT_PIPELINE.replace("split-reduction,", "")).module
    )
    assert plain["col_sum"].split is None
    assert KernelABI.from_json(plain["col_sum"].to_json()).split is None


def test_the_launcher_packs_the_hidden_parameters_last():
    program = _compiled("col_sum")
    ptx = compile_to_ptx(program.module, "sm_90a")
    launcher = Launcher(ptx, module_abi(program.module)["col_sum"])
    assert [name for name, *_ in launcher.checker.arguments] == ["x", "out"]
    x = DeviceTensor(1 << 20, (1000, 77), (77, 1), "f32", 0)
    out = DeviceTensor(1 << 21, (77,), (1,), "f32", 0)
    values = launcher.checker.convert([x, out]).values
    packed = launcher.parameters(values, (0xAAAA, 0xBBBB))
    assert packed[-2:] == (0xAAAA, 0xBBBB) and packed[0] == 1 << 20
    assert launcher._struct.size == struct.calcsize("<" + "Q" * len(packed))


# -- translation validation ----------------------------------------------------------------------


def _interpret(module, kernel, x, split):
    outputs = [
        np.zeros(REFERENCES[kernel](x)[i].shape, x.dtype) for i in range(len(REFERENCES[kernel](x)))
    ]
    launch = prepare_launch(module, kernel, [x, *outputs], split=split)
    launch.run()
    return [v.array for v in launch.arguments[1:] if isinstance(v, TensorView)], launch


SHAPES = [(1, 1), (7, 300), (200, 3), (1000, 77), (130, 65)]


@pytest.mark.parametrize("kernel", list(REFERENCES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_split_kernels_compute_what_the_unsplit_ones_do(kernel, shape):
    rng = np.random.default_rng(sum(shape))
    if kernel == "col_count":
        x = rng.integers(-8, 8, size=shape, dtype=np.int32)
    else:
        x = rng.uniform(-1, 1, size=shape).astype(np.float32)
    # Small tiles, so that the loop has several iterations to share out.
    pipeline = DEFAULT_PIPELINE.replace("tiling", 'tiling{tiles="BM=16,BN=16"}')
    split = _compiled(kernel, pipeline).module
    plain = _compiled(kernel, pipeline.replace("split-reduction,", "")).module
    expected, _ = _interpret(plain, kernel, x, None)
    trips = -(-max(shape) // 16)
    for count in (1, 2, 3, trips + 2):
        got, launch = _interpret(split, kernel, x, count)
        assert launch.grid[-1] == count
        for g, e, r in zip(got, expected, REFERENCES[kernel](x)):
            exact = kernel == "col_count" or "range" in kernel
            if exact or (kernel == "row_logsumexp" and g is got[-1]):  # the maximum: exact
                np.testing.assert_array_equal(g, e)  # integers, max and min
            else:
                np.testing.assert_allclose(g, e, rtol=0, atol=1e-5 * max(1.0, np.abs(e).max()))
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(r).max()))


def test_a_pinned_split_is_the_interpreters_too():
    pinned = KERNELS.replace("def row_sum", "@kernel(split=5)\ndef row_sum")
    module = compile_source(pinned, kernels=["row_sum"], pipeline=DEFAULT_PIPELINE).module
    x = np.ones((3, 5000), np.float32)
    out = np.zeros(3, np.float32)
    launch = prepare_launch(module, "row_sum", [x, out], split=2)
    assert launch.grid[-1] == 5  # the pin wins
    launch.run()
    np.testing.assert_array_equal(out, 5000.0)


def test_the_interpreter_reports_a_read_of_a_slot_nobody_wrote():
    text = """
module {
  func @k(%out: !tile.tensor<Nxf32>) attributes {tilec.grid = [["N", 4]], tilec.split = [["dim", 4], ["step", 1], ["slot_bytes", 16], ["trip_bytes", 0], ["rows", 4], ["pinned", 2]]} {
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %p = tile.workspace_load slots %c0 count %c2 offset 0 slot_bytes 16 {padding = 0.0} : tile<4x4xf32>
    return
  }
}
"""
    from tilec.ir.parser import parse_module

    module = parse_module(text)
    with pytest.raises(
        InterpreterError, match=r"reads slot 0 .*which no block of this launch wrote"
    ):
        prepare_launch(module, "k", [np.zeros(4, np.float32)]).run()


def test_paged_decode_splits_its_pages_across_blocks():
    """examples/paged_decode.tile: a loop over `minimum(pages, MAXP)` (at most the table's
    columns), scalar running maximum and sum, and a 1-D accumulator rescaled by the same
    `alpha` -- split, with S chosen for MAXP and each block chunking its own sequence's
    pages; every split count gives the unsplit kernel's result, empty and negative lengths
    included."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[2] / "examples"
    spec = importlib.util.spec_from_file_location("ref", path / "paged_decode_reference.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    source = (path / "paged_decode.tile").read_text()
    program = compile_source(source, kernels=["paged_decode"], pipeline=DEFAULT_PIPELINE)
    said = [str(r) for r in program.remarks if "split-reduction" in str(r)]
    assert "at most ceil(MAXP/1) iterations" in said[0], said
    assert "acc by add of terms rescaled by exp(m_i" in said[1], said
    rng = np.random.default_rng(5)
    b, h, g, d, maxp, pages = 3, 4, 2, 64, 9, 40
    for lengths in ([130, 0, 17], [144, 1, 60], [-3, 200, 16]):
        q = rng.standard_normal((b, h, d)).astype(np.float16)
        k, v = (rng.standard_normal((pages, g, 16, d)).astype(np.float16) for _ in range(2))
        table = rng.integers(0, pages, (b, maxp)).astype(np.int32)
        lens = np.array(lengths, np.int32)
        want = reference.paged_decode(q, k, v, table, lens, np.zeros((b, h, d), np.float16), 0.125)
        for split in (1, 2, 3, 20):
            o = np.full((b, h, d), np.nan, np.float16)
            args = [q, k, v, table, lens, o, np.float32(0.125)]
            launch = prepare_launch(program.module, "paged_decode", args, split=split)
            assert launch.grid[-1] == split
            launch.run()
            np.testing.assert_allclose(o.astype(np.float32), want.astype(np.float32), atol=2e-3)


@pytest.mark.parametrize(
    ("extents", "split"),
    [
        ("B=16384,L=64,D=128,V=1048576", False),  # 8193+ bags: a block an SM, always
        ("B=4096,L=20,D=1024,V=65536", False),  # 2049+ bags of 1000 columns (1.9x slower split)
        ("B=512,L=16,D=64,V=16384", False),  # 257+ bags
        ("B=128,L=16,D=64,V=16384", True),  # 65+ bags: SMs may idle, S chosen at launch
        ("B=64,L=16,D=16384,V=16384", True),  # the smallest class: any batch up to 64, even 1
        ("L=64,D=128,V=1048576", True),  # B unknown
    ],
)
def test_a_grid_the_extents_show_filling_the_gpu_is_not_split(extents, split):
    """The jit tells split-reduction the extents' size classes (a class n: an extent above
    n / 2); a grid that gives each of 132 SMs a block at the least of them runs S = 1 at
    every launch (`choose_split`), so the combine's code (and its registers) is left out."""
    source = (Path(__file__).parents[2] / "examples" / "embedding_bag.tile").read_text()
    option = f'split-reduction{{extents="{extents}"}}'
    pipeline = DEFAULT_PIPELINE.replace(",split-reduction,", f",{option},")
    program = compile_source(source, kernels=["embedding_bag"], pipeline=pipeline)
    kernel = program.module.lookup("embedding_bag")
    assert ("tilec.split" in kernel.attributes) == split
    said = [str(r) for r in program.remarks if "split-reduction" in str(r)]
    assert any("gives every SM a block" in r for r in said) != split, said


TOTAL_LOGSUMEXP = """
def total_logsumexp(x: f32[N], out: f32[O]):
    for to in tiles(O, tile={O: 1}):
        m = -inf
        l = 0.0
        for tn in tiles(N):
            s = x[tn]
            m_new = maximum(m, max(s))
            l = l * exp(m - m_new) + sum(exp(s - m_new))
            m = m_new
        out[to] = m + log(l)
"""


@pytest.mark.parametrize("n", [1, 63, 1000, 5000])
def test_scalar_rescaled_sums_split_and_lower(n):
    """A scalar running maximum and a scalar sum it rescales (one block, the whole vector's
    log-sum-exp): both kept in their slots as 1-element tiles, combined, read back as
    scalars; the interpreter gives the unsplit result at every split count, and the split
    kernel lowers to PTX."""
    pipeline = DEFAULT_PIPELINE.replace("tiling", 'tiling{tiles="BN=64"}')
    program = compile_source(TOTAL_LOGSUMEXP, kernels=["total_logsumexp"], pipeline=pipeline)
    said = [str(r) for r in program.remarks if "split-reduction" in str(r)]
    assert "l by add of terms rescaled by exp(m - the combined maximum), m by max" in said[1]
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 6 + np.linspace(0, 20, n)).astype(np.float32)
    want = np.log(np.exp(x.astype(np.float64)).sum())
    for split in (1, 2, 7, 100):
        out = np.zeros(1, np.float32)
        launch = prepare_launch(program.module, "total_logsumexp", [x, out], split=split)
        launch.run()
        assert abs(out[0] - want) <= 2e-6 * max(1.0, abs(want))
    if n == 1000:
        ptx = compile_to_ptx(program.module, "sm_90a")
        assert "atom.global" in ptx or "atom." in ptx  # the ticket


# The mean over the middle axis as the example writes it, and its maximum beside it.
MIDDLE_AXIS = (
    (Path(__file__).parents[2] / "examples" / "seq_mean.tile").read_text()
    + """

def mid_max(x: f32[B, S, D], out: f32[B, D]):
    for tb, td in tiles(B, D):
        acc = full([tb, td], -inf, f32)
        for ts in tiles(S):
            acc = maximum(acc, max(x[tb, ts, td], axis=1))
        out[tb, td] = acc
"""
)


@pytest.mark.parametrize("kernel", ["seq_mean", "mid_max"])
@pytest.mark.parametrize(
    "shape", [(1, 1, 1), (3, 77, 45), (5, 300, 7)], ids=lambda s: "x".join(map(str, s))
)
def test_a_carried_tile_of_two_dimensions_splits(kernel, shape):
    """A reduction over the middle axis of a [B, S, D] tensor (pooling over a sequence)
    carries a [BB, BD] tile: each split block's partial tile is combined a slot a round in its
    own layout, as a split GEMM's accumulator is. The split kernel computes what the unsplit
    one does, at every split count (the max exactly)."""
    rng = np.random.default_rng(sum(shape))
    x = rng.uniform(-1, 1, size=shape).astype(np.float32)
    pipeline = DEFAULT_PIPELINE.replace("tiling", 'tiling{tiles="BB=2,BS=16,BD=16"}')
    split = compile_source(MIDDLE_AXIS, kernels=[kernel], pipeline=pipeline)
    assert any("split the loop over S" in r.message for r in split.remarks), [
        r.message for r in split.remarks if r.pass_name == "split-reduction"
    ]
    plain = compile_source(
        MIDDLE_AXIS, kernels=[kernel], pipeline=pipeline.replace("split-reduction,", "")
    )
    reference = x.mean(1) if kernel == "seq_mean" else x.max(1)

    def run(module, count):
        out = np.zeros((shape[0], shape[2]), np.float32)
        launch = prepare_launch(module, kernel, [x, out], split=count)
        launch.run()
        return out, launch

    expected, _ = run(plain.module, None)
    for count in (1, 2, 3, -(-shape[1] // 16) + 2):
        got, launch = run(split.module, count)
        assert launch.grid[-1] == count
        if kernel == "mid_max":
            np.testing.assert_array_equal(got, expected)
        else:
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
        np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-6)


def test_grid_blocks_counts_a_grid_at_size_classes_both_ways():
    """`grid_blocks` (split-reduction's fills-the-GPU test, register prefetch's lone blocks):
    the blocks of a tiled grid at the extents given, and with `least` the fewest a size class
    allows -- 4096 stands for 2049 and more, the smallest class (64) for any extent from 1."""
    from tilec.dialects.builtin import FuncOp
    from tilec.passes.specialize import grid_blocks

    source = """
def rows(x: f32[M, N], out: f32[M]):
    for tm in tiles(M):
        out[tm] = sum(x[tm, :], axis=1)
"""
    pipeline = 'tiling{extents="M=4096,N=512" tiles="BM=4"}'
    module = compile_source(source, kernels=["rows"], pipeline=pipeline).module
    kernel = next(op for op in module.walk() if isinstance(op, FuncOp))
    assert grid_blocks(kernel, {"M": 4096, "N": 512}) == (1024, ["M=4096"])
    assert grid_blocks(kernel, {"M": 4096, "N": 512}, least=True) == (513, ["M=4096"])
    assert grid_blocks(kernel, {"M": 64}, least=True) == (1, ["M=64"])
    assert grid_blocks(kernel, {"N": 512}) is None  # M unknown
