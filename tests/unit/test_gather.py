"""Gathers and scatters (`x[ids[tm], :]`, `x[tm, cols]`, `out[idx, :] = v`): the frontend's
rules, the ops' verifier and text form, the interpreter at awkward shapes (out-of-range
indices reported), every pass of the pipeline preserving results, and the PTX (16-byte row
accesses, the TILEC_CHECK_BOUNDS report) through ptxas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tilec
from tests.validation import run_kernel
from tilec.compiler import DEFAULT_PIPELINE, target_pipeline
from tilec.diagnostics import TileError
from tilec.interp import InterpreterError, prepare_launch
from tilec.ir.parser import parse_module
from tilec.ir.printer import print_op
from tilec.ir.verifier import verify
from tilec.lowering.ptxas import assemble, find_ptxas

SOURCE = """
def rows(table: f32[V, D], ids: i32[M], out: f32[M, D]):
    for tm in tiles(M):
        out[tm, :] = table[ids[tm], :]

def rows_tiled(table: f16[V, D], ids: i64[M], out: f16[M, D]):
    for tm, td in tiles(M, D):
        out[tm, td] = table[ids[tm], td]

def columns(x: f32[M, N], cols: i32[M, K], y: f32[M, K]):
    for tm, tk in tiles(M, K):
        y[tm, tk] = x[tm, cols[tm, tk]]

def shared_columns(x: f32[M, N], cols: i32[K], y: f32[M, K]):
    for tm in tiles(M):
        y[tm, :] = x[tm, cols[:]]

def scatter_rows(v: f32[M, D], idx: i32[M], out: f32[V, D]):
    for tm in tiles(M):
        out[idx[tm], :] = v[tm, :] * 2.0

def batched(x: f32[B, N, D], idx: i32[B, M], y: f32[B, M, D]):
    for b, tm in tiles(B, M, tile={B: 1}):
        y[b, tm, :] = x[b, idx[b, tm], :]

def masked(table: f32[V, D], ids: i32[M], out: f32[M, D]):
    for tm in tiles(M):
        keep = offsets(tm) % 2 == 0
        out[tm, :] = where(keep[:, None], table[ids[tm], :], 0.0)

def accumulate(v: f32[M, D], idx: i32[M], out: f32[V, D]):
    for tm in tiles(M):
        out[idx[tm], :] += v[tm, :]

def gathered_matmul(a: f16[V, K], ids: i32[M], b: f16[K, N], c: f32[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[ids[tm], tk] @ b[tk, tn]
        c[tm, tn] = acc
"""


@pytest.fixture(scope="module")
def program():
    return tilec.compile(SOURCE)


def _run(program, name, inputs, tile_sizes=None):
    return run_kernel(program.module, name, inputs, tile_sizes)[0]


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RNG = np.random.default_rng(0)
# Every pointer aligned, every last stride 1, everything else a multiple of 16 (as @tilec.jit
# specializes contiguous tensors).
ASSUME = 'assume{all="aligned,unit,divisible"},'


@pytest.mark.parametrize(("v", "d", "m", "bm"), [(1, 1, 1, 16), (37, 23, 45, 16), (5, 130, 3, 4)])
def test_rows_are_gathered_at_awkward_shapes(program, v, d, m, bm):
    table = RNG.standard_normal((v, d)).astype(np.float32)
    ids = RNG.integers(0, v, m).astype(np.int32)
    out = _run(program, "rows", [table, ids, np.zeros((m, d), np.float32)], {"M": bm})[2]
    np.testing.assert_array_equal(out, table[ids])
    out = _run(program, "rows_tiled", [table.astype(np.float16), ids.astype(np.int64),
                                       np.zeros((m, d), np.float16)], {"M": bm, "D": 16})[2]  # fmt: skip
    np.testing.assert_array_equal(out, table.astype(np.float16)[ids])


def test_columns_per_element_and_shared(program):
    x = RNG.standard_normal((19, 41)).astype(np.float32)
    cols = RNG.integers(0, 41, (19, 7)).astype(np.int32)
    y = _run(program, "columns", [x, cols, np.zeros((19, 7), np.float32)])[2]
    np.testing.assert_array_equal(y, np.take_along_axis(x, cols, axis=1))
    shared = RNG.integers(0, 41, 9).astype(np.int32)
    y = _run(program, "shared_columns", [x, shared, np.zeros((19, 9), np.float32)])[2]
    np.testing.assert_array_equal(y, x[:, shared])


def test_scatter_writes_only_the_named_rows(program):
    v = RNG.standard_normal((21, 6)).astype(np.float32)
    idx = RNG.permutation(40)[:21].astype(np.int32)
    out = np.full((40, 6), 7.0, np.float32)
    expected = out.copy()
    expected[idx] = v * 2
    np.testing.assert_array_equal(_run(program, "scatter_rows", [v, idx, out])[2], expected)
    # Read, add, write back: distinct rows accumulate.
    expected = out.copy()
    expected[idx] += v
    np.testing.assert_array_equal(_run(program, "accumulate", [v, idx, out])[2], expected)


def test_a_scalar_index_beside_the_gathered_one(program):
    x = RNG.standard_normal((3, 11, 5)).astype(np.float32)
    idx = RNG.integers(0, 11, (3, 17)).astype(np.int32)
    y = _run(program, "batched", [x, idx, np.zeros((3, 17, 5), np.float32)])[2]
    np.testing.assert_array_equal(y, np.take_along_axis(x, idx[:, :, None], axis=1))


def test_masks_compose_with_gathers(program):
    table = RNG.standard_normal((9, 4)).astype(np.float32)
    ids = RNG.integers(0, 9, 13).astype(np.int32)
    out = _run(program, "masked", [table, ids, np.zeros((13, 4), np.float32)])[2]
    expected = np.where((np.arange(13) % 2 == 0)[:, None], table[ids], 0)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(("kernel", "bad", "position"), [("rows", 9, 4), ("scatter_rows", -1, 2)])
def test_an_out_of_range_index_is_reported_with_kernel_index_and_position(
    program, kernel, bad, position
):
    ids = np.zeros(6, np.int32)
    ids[position] = bad
    table = np.zeros((9, 3), np.float32)
    args = (
        [table, ids, np.zeros((6, 3), np.float32)]
        if kernel == "rows"
        else [np.zeros((6, 3), np.float32), ids, table]
    )
    with pytest.raises(InterpreterError) as caught:
        _run(program, kernel, args)
    text = caught.value.message
    assert f"of kernel '{kernel}': index {bad} at position [{position}] of the index tile" in text
    assert "out of range for dim 0 of" in text and "(extent 9)" in text
    assert caught.value.loc.line > 1  # at the access in the source
    assert "TILEC_CHECK_BOUNDS" in caught.value.hint


MASKED_IR = """
func @k(%t: !tile.tensor<Vx8xf32>, %i: !tile.tensor<Mxi32>, %o: !tile.tensor<Mx8xf32>) {
  %c0 = arith.constant 0 : index
  %ids = tile.load %i[%c0] : !tile.tensor<Mxi32> -> tile<4xi32>
  %lanes = tile.iota : tile<4xi32>
  %two = tile.full 2 : tile<4xi32>
  %low = arith.cmpi slt, %lanes, %two : tile<4xi32>
  %column = tile.expand_dims %low axis 1 : tile<4xi1> -> tile<4x1xi1>
  %m = tile.broadcast %column : tile<4x1xi1> -> tile<4x8xi1>
  %r = tile.gather %t[%c0, %c0], %ids axis 0, mask %m {padding = 1.0} : !tile.tensor<Vx8xf32>, tile<4xi32> -> tile<4x8xf32>
  tile.store %o[%c0, %c0], %r : !tile.tensor<Mx8xf32>, tile<4x8xf32>
  tile.scatter %t[%c0, %c0], %ids axis 0, %r, mask %m : !tile.tensor<Vx8xf32>, tile<4xi32>, tile<4x8xf32>
  return
}
"""


def test_the_ops_print_parse_verify_and_honour_their_mask():
    module = parse_module(MASKED_IR)
    verify(module)
    printed = print_op(module)
    assert print_op(parse_module(printed)) == printed
    assert "tile.gather %t[%c0, %c0], %ids axis 0, mask %m {padding = 1.0}" in printed
    # Masked-off lanes (rows 2, 3) are neither read (padding) nor checked: index 99 is fine.
    table = np.arange(24, dtype=np.float32).reshape(3, 8)
    ids = np.array([2, 0, 99, -5], np.int32)
    out = np.zeros((4, 8), np.float32)
    launch = prepare_launch(module, "k", [table.copy(), ids, out], grid=(1,))
    launch.run()
    t_after, _, o_after = (v.array for v in launch.arguments)
    np.testing.assert_array_equal(o_after[:2], table[[2, 0]])
    np.testing.assert_array_equal(o_after[2:], np.ones((2, 8), np.float32))
    np.testing.assert_array_equal(t_after, table)  # rows 2 and 0 written back unchanged


@pytest.mark.parametrize(
    ("indices", "message"),
    [
        ("tile<4xf32>", "indices must be a tile of i32 or i64, got tile<4xf32>"),
        ("tile<8xi32>", "1-D indices tile<8xi32> must have the size of dim 0"),
        ("tile<4x4xi32>", "must be 1-D or have the shape of the result tile<4x8xf32>"),
    ],
)
def test_the_verifier_rejects_bad_index_tiles(indices, message):
    value = "0.0" if "f32" in indices else "0"
    text = f"""
func @k(%t: !tile.tensor<Vx8xf32>) {{
  %c0 = arith.constant 0 : index
  %x = tile.full {value} : {indices}
  %r = tile.gather %t[%c0, %c0], %x axis 0 : !tile.tensor<Vx8xf32>, {indices} -> tile<4x8xf32>
  return
}}
"""
    with pytest.raises(TileError, match=message):
        verify(parse_module(text))


def test_in_bounds_cannot_promise_the_gathered_dimension():
    text = MASKED_IR.replace("{padding = 1.0}", "{in_bounds = [true, false]}")
    with pytest.raises(TileError, match="cannot promise the gathered dim 0"):
        verify(parse_module(text))


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize(
    ("name", "m_sizes"),
    [
        ("rows", (37, 23, 45)),
        ("columns", (19, 41, 7)),
        ("scatter_rows", (21, 6, 40)),
        ("batched", (2, 11, 5, 17)),
        ("masked", (9, 4, 13)),
        ("gathered_matmul", (50, 40, 37, 24)),
        ("accumulate", (21, 6, 40)),
    ],
)
def test_every_pass_preserves_what_gathers_compute(name, m_sizes, arch):
    """Translation validation of the whole pipeline (tiling, smem-placement, pipeline,
    vectorize): the final IR interprets like the frontend's, a gathered dot operand included."""
    from tilec.interp.runner import random_arguments

    module = tilec.compile(SOURCE, kernels=[name]).module
    func = module.lookup(name)
    dims = [d for a in func.arguments for d in getattr(a.type, "shape", ()) if isinstance(d, str)]
    dims = list(dict.fromkeys(dims))
    extents = dict(zip(dims, m_sizes))
    inputs = random_arguments(func, extents, seed=3)
    # No divisibility promised: these extents are awkward.
    pipeline = 'assume{all="aligned,unit"},' + target_pipeline(DEFAULT_PIPELINE, arch)
    final = tilec.compile(SOURCE, kernels=[name], pipeline=pipeline).module
    after, sizes = run_kernel(final, name, inputs)
    before, _ = run_kernel(module, name, inputs, sizes)
    for x, y in zip(before, after):
        np.testing.assert_allclose(x, y, rtol=1e-6 if name == "gathered_matmul" else 0)
    verify(final)
    assert "tile.async_copy %a" not in print_op(final)  # a gathered operand is no rectangle


def _ptx(name: str, arch: str, monkeypatch, check: bool = False) -> str:
    if check:
        monkeypatch.setenv("TILEC_CHECK_BOUNDS", "1")
    else:
        monkeypatch.delenv("TILEC_CHECK_BOUNDS", raising=False)
    pipeline = ASSUME + target_pipeline(DEFAULT_PIPELINE, arch)
    return tilec.compile(SOURCE, kernels=[name], pipeline=pipeline, target="ptx", arch=arch).ptx


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_gathered_rows_move_16_bytes_at_a_time(arch, monkeypatch):
    for name in ("rows", "rows_tiled", "scatter_rows"):
        ptx = _ptx(name, arch, monkeypatch)
        op = "st.global.v4" if name == "scatter_rows" else "ld.global.v4"
        assert op in ptx, name
        assert "__assertfail" not in ptx
        if find_ptxas() is not None:
            assemble(ptx, arch)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_check_bounds_compiles_a_report_that_ptxas_accepts(arch, monkeypatch):
    for name in ("rows", "columns", "scatter_rows"):
        ptx = _ptx(name, arch, monkeypatch, check=True)
        assert "__assertfail" in ptx and "vprintf" in ptx and "tilec_bounds_reported" in ptx
        assert "atom.global.exch" in ptx  # the first thread to find a bad index reports it
        if find_ptxas() is not None:
            assemble(ptx, arch)


def test_check_bounds_is_part_of_the_jit_cache_key(monkeypatch):
    import importlib

    from tilec.lowering import gather

    jit = importlib.import_module("tilec.jit")  # the module (tilec.jit is also the decorator)

    assert jit.CHECK_BOUNDS_VARIABLE == gather.CHECK_BOUNDS_VARIABLE
    monkeypatch.delenv("TILEC_CHECK_BOUNDS", raising=False)
    assert not gather.check_bounds_requested()
    monkeypatch.setenv("TILEC_CHECK_BOUNDS", "0")
    assert not gather.check_bounds_requested()
    monkeypatch.setenv("TILEC_CHECK_BOUNDS", "1")
    assert gather.check_bounds_requested()
    kernel = jit.load_kernel(EXAMPLES / "embedding.tile", "embedding")
    import ml_dtypes

    table = np.zeros((10, 16), dtype=ml_dtypes.bfloat16)
    ids = np.zeros(8, np.int64)
    out = np.zeros((8, 16), ml_dtypes.bfloat16)
    checked = kernel.compile_for(table, ids, out, arch="sm_90a")
    monkeypatch.delenv("TILEC_CHECK_BOUNDS")
    plain = kernel.compile_for(table, ids, out, arch="sm_90a")
    assert checked.key != plain.key
    assert "__assertfail" in checked.ptx and "__assertfail" not in plain.ptx


def test_a_scattered_tensor_is_an_output_for_the_interpreter_abi_and_torch():
    from tilec.interp.launch import parameter_name, written_parameters
    from tilec.lowering import module_abi

    module = tilec.compile(SOURCE, kernels=["scatter_rows"]).module
    func = module.lookup("scatter_rows")
    assert {parameter_name(a) for a in written_parameters(func)} == {"out"}
    final = tilec.compile(
        SOURCE,
        kernels=["scatter_rows"],
        pipeline=ASSUME + target_pipeline(DEFAULT_PIPELINE, "sm_90a"),
    ).module
    assert module_abi(final)["scatter_rows"].written == frozenset({"out"})


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_a_gathered_dot_operand_is_staged_from_registers_not_streamed(arch, monkeypatch):
    """smem-placement and pipeline plan rectangles: the gathered rows of `a` are loaded (16
    bytes a row run) and stored to shared memory, `b` alone streams by cp.async."""
    monkeypatch.delenv("TILEC_CHECK_BOUNDS", raising=False)
    pipeline = ASSUME + target_pipeline(DEFAULT_PIPELINE, arch)
    program = tilec.compile(
        SOURCE, kernels=["gathered_matmul"], pipeline=pipeline, target="ptx", arch=arch
    )
    text = print_op(program.module)
    assert "tile.async_copy %a" not in text and "tile.async_copy %b" in text
    gathered = [line for line in text.splitlines() if "tile.gather %a" in line]
    assert len(gathered) == 1 and "{vector = 8}" in gathered[0]
    assert "tile.store_shared %a_smem" in text
    if find_ptxas() is not None:
        resources = assemble(program.ptx, arch)["gathered_matmul"]
        assert resources.spill_stores == 0
