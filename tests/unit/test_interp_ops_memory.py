"""The interpreter's semantics of reductions, dots, loads and stores, control flow, and shapes
that disagree at run time, against direct computations (the other ops are in
`test_interp_ops.py`; the helpers in `tests/interp_cases.py`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests.interp_cases import (
    F16,
    F32,
    F64,
    apply,
    run_ir,
    wrap,
)
from tilec.dialects import arith
from tilec.interp import InterpreterError
from tilec.ir import parse_module
from tilec.ir.folding import constant_value

# ---------------------------------------------------------------------------------------------
# Reductions and dots


def scalar_reduction(kind: str, type_name: str, n: int) -> str:
    """IR reducing the 1-D tile %a to a scalar, splat into %r."""
    return (
        f"%s = tile.reduce {kind} %a axis 0 : tile<{n}x{type_name}> -> {type_name}\n"
        f"  %r = tile.splat %s : {type_name} -> tile<{{N}}x{type_name}>"
    )


def test_float_sum_is_a_pairwise_tree_rounded_at_every_step():
    x = np.array([2048, 1, 1, 1, 1, 0], F16)  # padded with -0.0 to 8 lanes
    got = apply(scalar_reduction("sum", "f16", 6), x, out=F16)
    # Lane i + lane i + 4: [2048 + 1 → 2048 (a tie, to even), 1, 1, 1]; then [2048 + 1 → 2048,
    # 1 + 1]; then 2048 + 2 = 2050. Adding left to right would give 2048.
    assert got[0] == 2050


def test_sums_keep_the_sign_of_zero():
    # The tree pads with -0.0, the identity of addition: +0.0 would turn -0.0 into +0.0.
    got = apply(scalar_reduction("sum", "f32", 3), np.full(3, -0.0, F32), out=F32)
    assert got[0] == 0 and np.signbit(got[0])


def test_reductions_of_2d_tiles_along_each_axis():
    text = """func @k(%x: !tile.tensor<3x5xf32>, %rows: !tile.tensor<3xf32>, %cols: !tile.tensor<5xf32>, %all: !tile.tensor<1xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : !tile.tensor<3x5xf32> -> tile<3x5xf32>
  %r = tile.reduce max %a axis 1 : tile<3x5xf32> -> tile<3xf32>
  %c = tile.reduce prod %a axis 0 : tile<3x5xf32> -> tile<5xf32>
  %m = tile.reduce min %r axis 0 : tile<3xf32> -> f32
  %t = tile.splat %m : f32 -> tile<1xf32>
  tile.store %rows[%c0], %r : !tile.tensor<3xf32>, tile<3xf32>
  tile.store %cols[%c0], %c : !tile.tensor<5xf32>, tile<5xf32>
  tile.store %all[%c0], %t : !tile.tensor<1xf32>, tile<1xf32>
  return
}"""
    x = np.arange(15, dtype=np.float32).reshape(3, 5) - 7
    x[1, 2] = np.nan
    rows, cols, smallest = np.zeros(3, F32), np.zeros(5, F32), np.zeros(1, F32)
    run_ir(text, [x, rows, cols, smallest], grid=(1,))
    assert rows[0] == -3 and np.isnan(rows[1]) and rows[2] == 7  # NaN wins a max
    assert np.array_equal(cols[[0, 1, 3, 4]], np.prod(x, axis=0)[[0, 1, 3, 4]])
    assert np.isnan(cols[2]) and np.isnan(smallest[0])


def test_integer_reductions_wrap():
    x = np.full(4, 100, np.int8)
    assert apply(scalar_reduction("sum", "i8", 4), x, out=np.int8)[0] == wrap(400, 8)
    flags = np.array([True, False, True])
    # i1 is signed: true is -1, so max is "all true" and min is "any true"; sum is parity.
    assert not apply(scalar_reduction("max", "i1", 3), flags, out=np.bool_)[0]
    assert apply(scalar_reduction("min", "i1", 3), flags, out=np.bool_)[0]
    assert not apply(scalar_reduction("sum", "i1", 3), flags, out=np.bool_)[0]


def dot_ir(element: str, acc: str) -> str:
    return f"""func @k(%a: !tile.tensor<MxKx{element}>, %b: !tile.tensor<KxNx{element}>, %c: !tile.tensor<MxNx{acc}>) {{
  %c0 = arith.constant 0 : index
  %x = tile.load %a[%c0, %c0] : !tile.tensor<MxKx{element}> -> tile<MxKx{element}>
  %y = tile.load %b[%c0, %c0] : !tile.tensor<KxNx{element}> -> tile<KxNx{element}>
  %z = tile.load %c[%c0, %c0] : !tile.tensor<MxNx{acc}> -> tile<MxNx{acc}>
  %d = tile.dot %x, %y, %z : tile<MxKx{element}>, tile<KxNx{element}>, tile<MxNx{acc}> -> tile<MxNx{acc}>
  tile.store %c[%c0, %c0], %d : !tile.tensor<MxNx{acc}>, tile<MxNx{acc}>
  return
}}"""


@pytest.mark.parametrize("element", ["f16", "bf16", "f32"])
def test_dot_accumulates_in_f32(element):
    dtype = (
        np.dtype(ml_dtypes.bfloat16)
        if element == "bf16"
        else np.dtype(element.replace("f", "float"))
    )
    rng = np.random.default_rng(9)
    a = rng.uniform(-1, 1, (5, 300)).astype(dtype)
    b = rng.uniform(-1, 1, (300, 7)).astype(dtype)
    c = rng.uniform(-1, 1, (5, 7)).astype(np.float32)
    expected = c.astype(F64) + a.astype(F64) @ b.astype(F64)
    out = c.copy()
    run_ir(dot_ir(element, "f32"), [a, b, out], grid=(1,))
    # f32 accumulation: far closer than f16 accumulation (eps 1e-3) would be.
    assert np.max(np.abs(out - expected)) < 1e-4


def test_dot_of_i8_wraps_in_i32_and_f64_stays_f64():
    a = np.full((1, 2), 1, np.int8)
    b = np.full((2, 1), 1, np.int8)
    c = np.array([[2**31 - 1]], np.int32)
    run_ir(dot_ir("i8", "i32"), [a, b, c], grid=(1,))
    assert c[0, 0] == -(2**31) + 1
    x = np.array([[1.0, 1e-20]], F64)
    y = np.array([[1.0], [1.0]], F64)
    z = np.zeros((1, 1), F64)
    run_ir(dot_ir("f64", "f64"), [x, y, z], grid=(1,))
    assert z[0, 0] == 1.0 + 1e-20


def test_a_dot_depends_on_its_operands_values_not_their_layout():
    """A transposed tile is a strided view and a tile read from shared memory a copy, and
    BLAS sums an f32 product in an order that can depend on which it is given (OpenBLAS's
    small-matrix kernels: 32x32x32 with a transposed B rounds 1 ulp apart). The fuzzer saw it
    as a mismatch after smem-placement (seed 239, k2): the same dot, its B no longer a view."""
    text = """func @k(%a: !tile.tensor<32x32xf32>, %bt: !tile.tensor<32x32xf32>, %b: !tile.tensor<32x32xf32>, %via_transpose: !tile.tensor<32x32xf32>, %direct: !tile.tensor<32x32xf32>) {
  %c0 = arith.constant 0 : index
  %x = tile.load %a[%c0, %c0] : !tile.tensor<32x32xf32> -> tile<32x32xf32>
  %w = tile.load %bt[%c0, %c0] : !tile.tensor<32x32xf32> -> tile<32x32xf32>
  %t = tile.transpose %w perm [1, 0] : tile<32x32xf32> -> tile<32x32xf32>
  %y = tile.load %b[%c0, %c0] : !tile.tensor<32x32xf32> -> tile<32x32xf32>
  %z = tile.load %direct[%c0, %c0] : !tile.tensor<32x32xf32> -> tile<32x32xf32>
  %d = tile.dot %x, %t, %z : tile<32x32xf32>, tile<32x32xf32>, tile<32x32xf32> -> tile<32x32xf32>
  %e = tile.dot %x, %y, %z : tile<32x32xf32>, tile<32x32xf32>, tile<32x32xf32> -> tile<32x32xf32>
  tile.store %via_transpose[%c0, %c0], %d : !tile.tensor<32x32xf32>, tile<32x32xf32>
  tile.store %direct[%c0, %c0], %e : !tile.tensor<32x32xf32>, tile<32x32xf32>
  return
}"""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 32)).astype(F32)
    b = rng.standard_normal((32, 32)).astype(F32)
    via_transpose, direct = np.zeros((32, 32), F32), np.zeros((32, 32), F32)
    run_ir(text, [a, np.ascontiguousarray(b.T), b, via_transpose, direct], grid=(1,))
    assert np.array_equal(via_transpose, direct)


# ---------------------------------------------------------------------------------------------
# Loads and stores: in-bounds, unmasked elements only


MEMORY = """func @k(%x: !tile.tensor<Nxf32>, %y: !tile.tensor<Nxf32>, %start: i64, %limit: i32) {
  %s = arith.index_cast %start : i64 -> index
  %lanes = tile.iota : tile<8xi32>
  %l = tile.splat %limit : i32 -> tile<8xi32>
  %mask = arith.cmpi slt, %lanes, %l : tile<8xi32>
  %t = tile.load %x[%s], mask %mask {padding = -1.5} : !tile.tensor<Nxf32> -> tile<8xf32>
  %even = arith.cmpi sge, %lanes, %l : tile<8xi32>
  %shifted = arith.index_cast %start : i64 -> index
  %c2 = arith.constant 2 : index
  %at = arith.addi %shifted, %c2 : index
  tile.store %y[%at], %t, mask %even : !tile.tensor<Nxf32>, tile<8xf32>
  return
}"""


def test_masked_loads_read_only_in_bounds_unmasked_elements():
    x = np.arange(10, dtype=np.float32)
    y = np.full(10, 99.0, np.float32)
    # Tile at -3: lanes 0..2 are before the tensor; the mask keeps lanes < 6.
    run_ir(MEMORY, [x, y, -3, 6], grid=(1,))
    # The stored tile is written at -1 only where lanes >= 6: lanes 6, 7 are padding (-1.5)
    # and land at elements 5, 6.
    expected = np.full(10, 99.0, np.float32)
    expected[5:7] = -1.5
    assert np.array_equal(y, expected)


def test_stores_write_only_inside_the_tensor():
    x = np.arange(10, dtype=np.float32)
    y = np.full(10, 99.0, np.float32)
    run_ir(MEMORY, [x, y, 6, 0], grid=(1,))  # mask all false on load: every lane is padding
    expected = np.full(10, 99.0, np.float32)
    expected[8:10] = -1.5  # lanes 0..7 at 8..15: only 8 and 9 exist
    assert np.array_equal(y, expected)
    run_ir(MEMORY, [x, y, 4, 8], grid=(1,))  # everything loaded, nothing stored
    assert np.array_equal(y, expected)


def test_loads_of_partial_tiles_take_the_padding():
    text = """func @k(%x: !tile.tensor<Mx?xi16>, %y: !tile.tensor<BMx4xi16>) {
  %pid = tile.program_id 0
  %bm = tile.symbol "BM"
  %row = arith.muli %pid, %bm : index
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%row, %c0] {padding = 7} : !tile.tensor<Mx?xi16> -> tile<BMx4xi16>
  tile.store %y[%c0, %c0], %t : !tile.tensor<BMx4xi16>, tile<BMx4xi16>
  return
}"""
    x = np.arange(15, dtype=np.int16).reshape(5, 3)
    y = np.zeros((4, 4), np.int16)
    run_ir(text, [x, y], grid=(2,))  # BM = 4, from y; the second block reads rows 4..7
    assert y.tolist() == [[12, 13, 14, 7], [7, 7, 7, 7], [7, 7, 7, 7], [7, 7, 7, 7]]


def test_grid_queries():
    text = """func @k(%out: !tile.tensor<2x3x4xi64>) {
  %i = tile.program_id 0
  %j = tile.program_id 1
  %k = tile.program_id 2
  %n = tile.num_programs 1
  %d = tile.dim %out, 2
  %s = arith.muli %i, %n : index
  %t = arith.addi %s, %j : index
  %u = arith.muli %t, %d : index
  %v = arith.addi %u, %k : index
  %value = arith.index_cast %v : index -> i64
  %tile = tile.splat %value : i64 -> tile<1x1x1xi64>
  tile.store %out[%i, %j, %k], %tile : !tile.tensor<2x3x4xi64>, tile<1x1x1xi64>
  return
}"""
    out = np.zeros((2, 3, 4), np.int64)
    run_ir(text, [out], grid=(2, 3, 4))
    assert out.ravel().tolist() == list(range(24))


# ---------------------------------------------------------------------------------------------
# Control flow


LOOP = """func @k(%out: !tile.tensor<1xi32>, %n: i32, %step: i32) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %sum = scf.for %i = %zero to %n step %step iter_args(%acc = %zero) {
    %next = arith.addi %acc, %i : i32
    %odd = arith.andi %i, %one : i32
    %is_odd = arith.cmpi eq, %odd, %one : i32
    %twice = scf.if %is_odd -> (i32) {
      %double = arith.addi %next, %i : i32
      scf.yield %double : i32
    } else {
      scf.yield %next : i32
    }
    scf.yield %twice : i32
  }
  %t = tile.splat %sum : i32 -> tile<1xi32>
  tile.store %out[%c0], %t : !tile.tensor<1xi32>, tile<1xi32>
  return
}"""


def test_loops_carry_values_and_ifs_choose_a_branch():
    out = np.zeros(1, np.int32)
    run_ir(LOOP, [out, 10, 1], grid=(1,))
    assert out[0] == sum(range(10)) + sum(range(1, 10, 2))
    run_ir(LOOP, [out, 0, 1], grid=(1,))
    assert out[0] == 0


def test_a_loop_with_a_non_positive_step_is_an_error():
    with pytest.raises(InterpreterError, match="has step 0; a loop's step must be positive") as e:
        run_ir(LOOP, [np.zeros(1, np.int32), 10, 0], grid=(1,))
    assert "test.tir:5:" in e.value.render() and "program id (0)" in e.value.render()


# ---------------------------------------------------------------------------------------------
# Shapes that do not line up at run time


def test_unknown_dimensions_that_disagree_are_reported_at_the_op():
    # The verifier lets '?' match any size; at run time the sizes must agree.
    text = """func @k(%x: !tile.tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0] : !tile.tensor<?xf32> -> tile<Nxf32>
  %yes = arith.constant true : i1
  %s = tile.splat %yes : i1 -> tile<1xi1>
  %c = tile.broadcast %s : tile<1xi1> -> tile<?xi1>
  %r = tile.select %c, %a, %a : tile<Nxf32>
  return
}"""
    with pytest.raises(
        InterpreterError, match=r"operands of different shapes: \(1,\), \(16,\)"
    ) as e:
        run_ir(text, [np.zeros(4, F32)], grid=(1,), tile_sizes={"N": 16})
    assert e.value.loc.line == 7


def test_a_load_needs_every_size():
    text = """func @k(%x: !tile.tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0] : !tile.tensor<?xf32> -> tile<?xf32>
  return
}"""
    with pytest.raises(InterpreterError, match="needs the size of every dimension"):
        run_ir(text, [np.zeros(4, F32)], grid=(1,))


def test_constant_folding_and_the_interpreter_agree_on_f16():
    # What canonicalize folds must be what the interpreter computes unfolded.
    module = parse_module(
        "func @k() {\n  %a = arith.constant 0.1 : f16\n  %b = arith.constant 0.2 : f16\n"
        "  %s = arith.addf %a, %b : f16\n  return\n}",
        "fold.tir",
    )
    add = module.functions[0].body.block.ops[2]
    assert isinstance(add, arith.AddFOp)
    folded_value = add.fold()[0].value
    got = apply(
        "%r = arith.addf %a, %b : tile<{N}x{T}>",
        np.array([0.1], F16),
        np.array([0.2], F16),
        out=F16,
    )
    assert np.float16(folded_value) == got[0]
    assert constant_value(add.lhs) is not None


BROKEN_PROMISE = """
func @rows(%x: !tile.tensor<Mx8xf32>, %y: !tile.tensor<Mx8xf32>) attributes {tilec.grid = [["M", "BM"]], tilec.tile_sizes = [["BM", 4]]} {
  %c0 = arith.constant 0 : index
  %BM = arith.constant 4 : index
  %p = tile.program_id 0
  %r = arith.muli %p, %BM : index
  %v = tile.load %x[%r, %c0] {in_bounds = [IN, true]} : !tile.tensor<Mx8xf32> -> tile<4x8xf32>
  tile.store %y[%r, %c0], %v : !tile.tensor<Mx8xf32>, tile<4x8xf32>
  return
}
"""


def test_in_bounds_is_a_promise_the_interpreter_checks():
    """`in_bounds` drops the lowering's bounds checks: a tile that reaches past the extent
    there is a compiler bug, reported at the op rather than read as padding."""
    x = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)
    y = np.zeros_like(x)
    run_ir(BROKEN_PROMISE.replace("IN", "false"), [x, y])  # 6 rows in tiles of 4: padded
    np.testing.assert_array_equal(y, x)
    with pytest.raises(InterpreterError, match=r"in_bounds promise along dim 0: elements 4..7"):
        run_ir(BROKEN_PROMISE.replace("IN", "true"), [x, np.zeros_like(x)])
    run_ir(BROKEN_PROMISE.replace("IN", "true"), [x[:4], y[:4]])  # whole tiles keep it
