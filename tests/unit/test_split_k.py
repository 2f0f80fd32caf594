"""Split-K GEMMs on the CPU: split-reduction of a loop that accumulates a dot, the SM model
that ranks split tiles (`wgmma_model.best_split`) and chooses S at launch
(`runtime.split.choose_dot_split`), `tile.workspace_read`, and translation validation of
split GEMMs in the interpreter at awkward shapes and split counts on both tensor-core paths
(the GPU's runs: tests/gpu/test_split_k.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler import build_pipeline, compile_source, target_pipeline
from tilec.interp import InterpreterError, prepare_launch
from tilec.interp.launch import find_kernel
from tilec.ir.parser import parse_module
from tilec.ir.verifier import verify
from tilec.lowering.abi import SplitAxis, kernel_abi
from tilec.passes.wgmma_model import best_split, grid_clocks
from tilec.runtime.split import choose_dot_split

GEMMS = """
def gemm_nn(a: f16[M, K], b: f16[K, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc


def gemm_nt_relu(a: bf16[M, K], b: bf16[N, K], bias: f32[N], c: bf16[M, N]):
    for tm, tn in tiles(M, N):
        acc = full([tm, tn], 0.5, f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tn, tk].T
        c[tm, tn] = maximum(acc + bias[tn][None, :], 0.0)


def gemm_i8(a: i8[M, K], b: i8[N, K], c: i32[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], i32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tn, tk].T
        c[tm, tn] = acc


@kernel(split=3)
def gemm_nn_pinned(a: f16[M, K], b: f16[K, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc


def two_loops(a: f16[M, K], b: f16[K, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc
"""


def _compile(kernel: str, arch: str, extents: str, tiles: str = ""):
    options: dict = {"tiling": {"extents": extents}}
    if tiles:
        options["tiling"]["tiles"] = tiles
    # The facts the jit records for 16-byte aligned, contiguous operands (wgmma needs them).
    pipeline = 'assume{all="aligned,unit,divisible"},' + build_pipeline(options=options)
    pipeline = target_pipeline(pipeline, arch)
    return compile_source(GEMMS, kernels=[kernel], pipeline=pipeline, arch=arch)


def _operands(kernel: str, m: int, n: int, k: int, rng):
    if kernel == "gemm_i8":
        a = rng.integers(-8, 8, (m, k), dtype=np.int8)
        b = rng.integers(-8, 8, (n, k), dtype=np.int8)
        return [a, b], a.astype(np.int64) @ b.astype(np.int64).T, np.zeros((m, n), np.int32)
    if kernel == "gemm_nt_relu":
        import ml_dtypes

        a = rng.uniform(-1, 1, (m, k)).astype(ml_dtypes.bfloat16)
        b = rng.uniform(-1, 1, (n, k)).astype(ml_dtypes.bfloat16)
        bias = rng.uniform(-1, 1, n).astype(np.float32)
        ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64).T + 0.5 + bias, 0.0)
        return [a, b, bias], ref, np.zeros((m, n), ml_dtypes.bfloat16)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    return [a, b], a.astype(np.float64) @ b.astype(np.float64), np.zeros((m, n), np.float16)


# -- the model -----------------------------------------------------------------------------------


def test_few_tiles_and_a_long_k_are_split_and_a_full_grid_is_not():
    # 1024 x 1024 in 128 x 256 tiles: 32 tiles on 132 SMs; K = 16384 is 256 steps of 64.
    s, split_clocks = best_split(128, 256, 64, 256, 32, 1, 132, 4)
    unsplit = grid_clocks(128, 256, 64, 256, 32, 1, 132, 4)
    assert 2 <= s <= 8 and split_clocks < 0.5 * unsplit
    # 8192^2 in the same tiles: 2048 tiles, the SMs are full -- never split.
    assert best_split(128, 256, 64, 128, 2048, 1, 132, 4)[0] == 1
    # A short K: the partials' round trip costs more than the steps it shares out.
    assert best_split(128, 128, 64, 2, 64, 2, 132, 4)[0] == 1


def test_the_split_never_exceeds_the_steps():
    for steps in (2, 3, 5):
        assert best_split(128, 128, 64, steps, 1, 2, 132, 4)[0] <= steps


def test_the_launch_chooses_with_the_model_tiling_ranked_by():
    axis = SplitAxis("K", 64, 131072, 49152, 1, dot_bm=128, dot_bn=256, dot_bytes=2)
    for m, n, k in [(1024, 1024, 16384), (200, 136, 20000), (4096, 4096, 4096)]:
        tiles = -(-m // 128) * -(-n // 256)
        expected = best_split(128, 256, 64, -(-k // 64), tiles, 1, 132, 4)[0]
        assert choose_dot_split(axis, tiles, -(-k // 64), (132, 1)) == expected
    assert choose_dot_split(axis, 1, 1, (132, 1)) == 1  # one step: nothing to share out


# -- the pass ------------------------------------------------------------------------------------


def test_tiling_ranks_split_tiles_and_the_kernel_records_its_dot_tile():
    program = _compile("gemm_nn", "sm_90a", "M=1024,N=1024,K=16384")
    abi = kernel_abi(find_kernel(program, "gemm_nn"))
    assert abi.split is not None and (abi.split.dot_bm, abi.split.dot_bn) == (128, 256)
    assert abi.split.dot_bytes == 2 and abi.split.rows == 1
    texts = [r.message for r in program.remarks]
    assert any("shared out among" in t for t in texts)
    assert "tile.workspace_read" in str(program.module)


def test_a_gemm_whose_tiles_fill_the_gpu_is_not_split():
    program = _compile("gemm_nn", "sm_90a", "M=8192,N=8192,K=8192")
    assert "tilec.split" not in str(program.module)
    texts = [r.message for r in program.remarks if r.pass_name == "split-reduction"]
    assert any("tiling's SM model keeps it whole" in t for t in texts)


def test_a_kernel_with_two_loops_is_not_split():
    program = _compile("two_loops", "sm_90a", "M=1024,N=1024,K=16384")
    texts = [r.message for r in program.remarks if r.pass_name == "split-reduction"]
    assert any("the last carries values" in t for t in texts), texts
    assert not any("shared out among" in r.message for r in program.remarks)


# -- translation validation ----------------------------------------------------------------------

CASES = [
    ("gemm_nn", "sm_90a", (200, 136, 1000), ""),
    ("gemm_nn", "sm_90a", (64, 64, 1024), ""),
    # mma.sync tilings do not model splits: the pin splits this one (3 ways, whatever the
    # launch asks).
    ("gemm_nn_pinned", "sm_80", (100, 72, 296), "BM=64,BN=64,BK=32"),
    ("gemm_nt_relu", "sm_90a", (130, 200, 4000), ""),
    ("gemm_i8", "sm_90a", (96, 80, 8192), ""),
]


@pytest.mark.parametrize(("kernel", "arch", "mnk", "tiles"), CASES, ids=lambda c: str(c))
def test_split_gemms_compute_what_the_unsplit_ones_do(kernel, arch, mnk, tiles):
    m, n, k = mnk
    program = _compile(kernel, arch, f"M={m},N={n},K={k}", tiles)
    assert "tilec.split" in str(program.module)
    rng = np.random.default_rng(m + n + k)
    args, reference, out = _operands(kernel, m, n, k, rng)
    results = []
    for split in (1, 2, 3, 7):
        c = np.zeros_like(out)
        launch = prepare_launch(program, kernel, [*args, c], split=split)
        assert launch.grid[-1] == (3 if kernel == "gemm_nn_pinned" else split)
        launch.run()
        got = launch.arguments[len(args)].array.astype(np.float64)
        results.append(got)
        if kernel == "gemm_i8":
            np.testing.assert_array_equal(got, reference)
        else:
            ulp = 2**-7 if kernel == "gemm_nt_relu" else 2**-10
            np.testing.assert_allclose(got, reference, rtol=2 * ulp, atol=2 * ulp)
    # Partials are combined in slot order: every split count rounds the same sums (up to f32
    # reassociation of the chunks) to the same output, bar an ulp of the output type.
    for got in results[1:]:
        np.testing.assert_allclose(got, results[0], rtol=2**-6, atol=2**-6)


def test_the_interpreter_reports_a_read_of_a_slot_nobody_wrote():
    text = """
module {
  func @k(%out: !tile.tensor<Nxf32>) attributes {tilec.grid = [["N", 4]], tilec.split = [["dim", 4], ["step", 1], ["slot_bytes", 64], ["trip_bytes", 0], ["rows", 1], ["pinned", 2]]} {
    %c1 = arith.constant 1 : index
    %p = tile.workspace_read slot %c1 offset 0 slot_bytes 64 : tile<4x4xf32>
    return
  }
}
"""
    module = parse_module(text)
    launch = prepare_launch(module, "k", [np.zeros(4, np.float32)])
    with pytest.raises(
        InterpreterError, match=r"reads slot 1 .*which no block of this launch wrote"
    ):
        launch.run()


def test_workspace_read_round_trips_and_checks_its_slot():
    text = """
module {
  func @k() {
    %c0 = arith.constant 0 : index
    %p = tile.workspace_read slot %c0 offset 16 slot_bytes 80 : tile<4x4xf32>
    return
  }
}
"""
    module = parse_module(text)
    assert "tile.workspace_read slot %c0 offset 16 slot_bytes 80 : tile<4x4xf32>" in str(module)
    verify(module)
    bad = text.replace("slot_bytes 80", "slot_bytes 64")
    with pytest.raises(Exception, match="needs 80 bytes, more than a slot's 64"):
        verify(parse_module(bad))


def test_disabling_split_reduction_ranks_tiles_unsplit():
    """Without split-reduction nothing splits the K loop, so tiling must not rank tiles as if
    it did (128x256 unsplit ran 0.1535 ms where 64x64 ran 0.0884 at 1024x1024x16384)."""
    options = {"tiling": {"extents": "M=1024,N=1024,K=16384"}}
    pipeline = 'assume{all="aligned,unit,divisible"},' + build_pipeline(
        options=options, disable=["split-reduction"]
    )
    program = compile_source(
        GEMMS, kernels=["gemm_nn"], pipeline=target_pipeline(pipeline, "sm_90a"), arch="sm_90a"
    )
    assert not any("shared out among" in r.message for r in program.remarks)
    assert "tilec.split_k" not in str(program.module)


def test_a_weight_streamed_once_is_split_no_more_than_dram_allows():
    """`a @ b.T` 64x4096x14336 bf16 (H200, 2026-12-04): S = 8 ran 42.6 us, S = 3 40.1, S = 4
    38.2; its 117 MB of operands take 28 us from DRAM. Without that floor the model chose 8."""
    args = (64, 128, 64, 224, 32, 2, 132, 4, 2)
    assert best_split(*args)[0] == 8
    operands = (64 + 4096) * 14336 * 2
    assert 2 < best_split(*args, operand_bytes=operands)[0] <= 4
    axis = SplitAxis("K", 64, 32768, 0, 1, dot_bm=64, dot_bn=128, dot_bytes=2, dot_dims="M,N")
    extents = {"M": 64, "N": 4096, "K": 14336}
    assert choose_dot_split(axis, 32, 224, (132, 2), extents) <= 4
    assert choose_dot_split(axis, 32, 224, (132, 2)) == 8  # extents unknown: no floor


def test_copies_from_dram_wait_for_their_bytes_at_the_sms_share():
    """A step's bytes that come from DRAM take their time at the SM's share of its rate on top
    of a copy's latency (`grid_clocks`' dram_fraction): `x @ w.T` 16x11008x4096 bf16 in 64x256
    tiles split 3 (129 blocks, one an SM) streams every weight once, and one step ahead (two
    stages, sized for two blocks an SM) leaves the SM waiting on each; three steps ahead on
    one block do not. Measured on the H100 (2026-12-06): the two-stage tiles ran 1.36x
    cuBLAS's time."""
    args = (64, 256, 64, 64, 43)
    reuse = grid_clocks(*args, 2, 132, 4, 2, splits=3)
    streamed = grid_clocks(*args, 2, 132, 4, 2, splits=3, dram_fraction=0.78)
    assert streamed > 1.8 * reuse
    deep = grid_clocks(*args, 1, 132, 4, 2, splits=3, dram_fraction=0.78)
    assert deep < 0.65 * streamed
    # The same term is small where the tiles reuse their operands from L2 (4096^3: 4% of the
    # bytes the copies move come from DRAM).
    square = grid_clocks(128, 256, 64, 64, 512, 1, 132, 4, 2)
    assert grid_clocks(128, 256, 64, 64, 512, 1, 132, 4, 2, dram_fraction=0.04) < 1.05 * square


def test_a_decode_sized_linear_streams_its_weight_from_more_copies_in_flight():
    """At the size classes the jit tells tiling for 16x11008x4096 (M=64, N=16384), the model
    ranks tiles by the copies in flight, not only by the DRAM floor every candidate met; and
    the split is decided at the least extents of the classes (N = 8193: too few tiles to fill
    the SMs), so the launch can split 11008 rows' tiles."""
    program = _compile("gemm_nt_relu", "sm_90a", "M=64,N=16384,K=4096")
    text = str(program.module)
    assert '["BN", 256]' not in text
    assert "tilec.split_k" in text
    assert any("least extents of their classes" in r.message for r in program.remarks)


def test_the_launch_takes_its_gpus_dram_rate():
    """`x @ w.T` 16x11008x4096 bf16, 64x64 tiles, three blocks an SM (H100, 2026-12-06): S = 1
    ran 0.0396 ms, S = 2 0.0426. At the H200's DRAM rate (what compiling assumes) the model
    gives S = 2; at the H100's 3.0 TB/s both reach the operands' floor and the tie goes to
    S = 1 (`tilec.runtime.device.dram_bytes_per_clock` gives the launch its GPU's rate)."""
    axis = SplitAxis("K", 64, 8192, 0, 1, dot_bm=64, dot_bn=64, dot_bytes=2, dot_dims="M,N")
    extents = {"M": 16, "N": 11008, "K": 4096}
    h100 = 0.90 * 3.352e12 / (1.98e9 * 1.83 / 1.98)
    assert choose_dot_split(axis, 172, 64, (132, 3), extents) == 2
    assert choose_dot_split(axis, 172, 64, (132, 3), extents, h100) == 1
