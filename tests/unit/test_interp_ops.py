"""The interpreter's semantics of every op, against direct computations: numpy, exact rational
arithmetic (`fractions`) rounded once, and the constant folders -- arithmetic, math functions,
integers, conversions, scalars and shapes (reductions, dots, memory and control flow are in
`test_interp_ops_memory.py`).

Each case runs a tiny kernel written in IR text (`tests/interp_cases.py`): it loads its inputs
from tensors, applies the op, and stores the result, so what is tested is the whole path a
kernel takes.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from tests.interp_cases import (
    BF16,
    F16,
    F32,
    F64,
    TYPE_NAMES,
    apply,
    exact,
    random_floats,
    run_ir,
    same_bits,
    wrap,
)
from tilec.interp import InterpreterError
from tilec.interp.semantics import SEMANTICS
from tilec.ir import parse_module
from tilec.ir.attributes import FloatAttr
from tilec.ir.core import OP_REGISTRY

# ---------------------------------------------------------------------------------------------
# The table covers every op


def test_every_op_that_computes_has_semantics():
    structural = {"builtin.module", "builtin.func", "builtin.return", "scf.yield"}
    missing = [
        name for name, cls in OP_REGISTRY.items() if name not in structural and cls not in SEMANTICS
    ]
    assert not missing, f"ops without interpreter semantics: {missing}"


# ---------------------------------------------------------------------------------------------
# Float arithmetic: one rounding to the element type


BINARY_FLOAT = {
    "arith.addf": lambda x, y: x + y,
    "arith.subf": lambda x, y: x - y,
    "arith.mulf": lambda x, y: x * y,
    "arith.divf": lambda x, y: x / y,
}


@pytest.mark.parametrize("dtype", [F16, BF16, F32, F64], ids=str)
@pytest.mark.parametrize("op", sorted(BINARY_FLOAT))
def test_float_arithmetic_rounds_once_to_the_element_type(op, dtype):
    a, b = random_floats(dtype, seed=1), random_floats(dtype, seed=2)
    got = apply(f"%r = {op} %a, %b : tile<{{N}}x{{T}}>", a, b, out=dtype)
    expected = exact(
        [BINARY_FLOAT[op](Fraction(float(x)), Fraction(float(y))) for x, y in zip(a, b)], dtype
    )
    assert same_bits(got, expected)


def test_f16_overflows_to_inf_and_rounds_to_nearest_even():
    a = np.array([60000, -60000, 65504, 2048, 2048, 1, 0.1], F16)
    b = np.array([60000, -60000, 16, 1, 3, 2**-11, 0.2], F16)
    got = apply("%r = arith.addf %a, %b : tile<{N}x{T}>", a, b, out=F16)
    # 65504 + 16 is exactly halfway to the next binade: ties to even overflow to inf.
    assert list(got[:3]) == [np.inf, -np.inf, np.inf]
    assert got[3] == 2048  # 2049 is a tie between 2048 and 2050: even wins
    assert got[4] == 2052  # 2051 is a tie between 2050 and 2052: even wins
    assert got[5] == 1  # 1 + 2^-11 is a tie: even (1.0) wins
    assert got[6] == np.float16(0.2998)  # f16(0.1) + f16(0.2) rounded once
    product = apply("%r = arith.mulf %a, %b : tile<{N}x{T}>", a[:1], a[:1], out=F16)
    assert product[0] == np.inf


def test_bf16_has_the_range_of_f32_and_8_bits_of_precision():
    a = np.array([1e38, 1.0, 256.0], BF16)
    b = np.array([1e38, 2**-8, 1.0], BF16)
    got = apply("%r = arith.addf %a, %b : tile<{N}x{T}>", a, b, out=BF16)
    assert got[0] == np.array(2e38, BF16)  # f16 would overflow; bf16 does not
    assert got[1] == 1.0 and got[2] == 256.0  # the small addend is lost (ties to even)


def test_maximumf_minimumf_propagate_nan_and_order_signed_zeros():
    a = np.array([1.0, np.nan, 2.0, -0.0, 0.0, -np.inf], F32)
    b = np.array([2.0, 1.0, np.nan, 0.0, -0.0, 3.0], F32)
    high = apply("%r = arith.maximumf %a, %b : tile<{N}x{T}>", a, b, out=F32)
    low = apply("%r = arith.minimumf %a, %b : tile<{N}x{T}>", a, b, out=F32)
    assert np.isnan(high[1]) and np.isnan(high[2]) and np.isnan(low[1]) and np.isnan(low[2])
    assert high[0] == 2.0 and low[0] == 1.0 and high[5] == 3.0 and low[5] == -np.inf
    assert not np.signbit(high[3]) and not np.signbit(high[4])  # max(-0, +0) is +0
    assert np.signbit(low[3]) and np.signbit(low[4])  # min(-0, +0) is -0


def test_remf_has_the_sign_of_the_dividend_and_negf_flips_the_sign_bit():
    a = np.array([5.5, -5.5, 5.5, 0.0, np.inf], F32)
    b = np.array([2.0, 2.0, -2.0, 1.0, 1.0], F32)
    got = apply("%r = arith.remf %a, %b : tile<{N}x{T}>", a, b, out=F32)
    assert list(got[:4]) == [1.5, -1.5, 1.5, 0.0] and np.isnan(got[4])
    negated = apply(
        "%r = arith.negf %a : tile<{N}x{T}>", np.array([0.0, -1.0, np.nan], F16), out=F16
    )
    assert np.signbit(negated[0]) and negated[1] == 1.0 and np.isnan(negated[2])


CMPF_TRUTH = {  # for (1, 2), (2, 2), (NaN, 2)
    "oeq": (0, 1, 0),
    "one": (1, 0, 0),
    "olt": (1, 0, 0),
    "ole": (1, 1, 0),
    "ogt": (0, 0, 0),
    "oge": (0, 1, 0),
    "ueq": (0, 1, 1),
    "une": (1, 0, 1),
    "ult": (1, 0, 1),
    "ule": (1, 1, 1),
    "ugt": (0, 0, 1),
    "uge": (0, 1, 1),
    "ord": (1, 1, 0),
    "uno": (0, 0, 1),
}


@pytest.mark.parametrize("dtype", [F16, BF16, F32], ids=str)
@pytest.mark.parametrize("predicate", sorted(CMPF_TRUTH))
def test_cmpf_ordered_predicates_are_false_and_unordered_true_on_nan(predicate, dtype):
    a = np.array([1.0, 2.0, np.nan], dtype)
    b = np.array([2.0, 2.0, 2.0], dtype)
    got = apply(f"%r = arith.cmpf {predicate}, %a, %b : tile<{{N}}x{{T}}>", a, b, out=np.bool_)
    assert got.tolist() == [bool(v) for v in CMPF_TRUTH[predicate]]


# ---------------------------------------------------------------------------------------------
# Math functions: computed in f64, rounded once, exactly as the folders compute


UNARY_MATH = [
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tanh",
    "erf",
    "absf",
    "floor",
    "ceil",
]


def folded(op_name: str, value: float, type_name: str) -> float:
    """What `canonicalize` would fold op_name(value) to."""
    module = parse_module(
        f"func @k() {{\n  %x = arith.constant {FloatAttr(value)} : {type_name}\n"
        f"  %r = {op_name} %x : {type_name}\n  return\n}}",
        "fold.tir",
    )
    op = module.functions[0].body.block.ops[1]
    return op.fold()[0].value


@pytest.mark.parametrize("dtype", [F16, BF16, F32, F64], ids=str)
@pytest.mark.parametrize("name", UNARY_MATH)
def test_math_functions_match_their_constant_folders_bit_for_bit(name, dtype):
    values = np.concatenate([random_floats(dtype, 40, seed=3), np.array([0, -0.0, 1, 2.5], dtype)])
    if name in ("log", "log2", "sqrt", "rsqrt"):
        values = np.abs(values)
    got = apply(f"%r = math.{name} %a : tile<{{N}}x{{T}}>", values, out=dtype)
    expected = np.array([folded(f"math.{name}", float(v), TYPE_NAMES[dtype]) for v in values])
    assert same_bits(got, expected.astype(dtype))


def test_math_functions_are_correctly_rounded_from_f64():
    x = random_floats(F32, 100, seed=4)
    got = apply("%r = math.exp %a : tile<{N}x{T}>", x, out=F32)
    assert same_bits(got, np.exp(x.astype(F64)).astype(F32))
    roots = apply("%r = math.rsqrt %a : tile<{N}x{T}>", np.abs(x), out=F32)
    assert same_bits(roots, (1.0 / np.sqrt(np.abs(x).astype(F64))).astype(F32))


def test_erf_matches_the_c_library():
    x = np.linspace(-7, 7, 2001)
    got = apply("%r = math.erf %a : tile<{N}x{T}>", x, out=F64)
    expected = np.array([math.erf(v) for v in x])
    assert np.max(np.abs(got - expected) / np.maximum(np.abs(expected), 1e-300)) < 5e-16
    assert same_bits(got.astype(F32), expected.astype(F32))
    special = apply(
        "%r = math.erf %a : tile<{N}x{T}>", np.array([np.inf, -np.inf, np.nan, -0.0]), out=F64
    )
    assert special[0] == 1 and special[1] == -1 and np.isnan(special[2]) and np.signbit(special[3])


@pytest.mark.parametrize("dtype", [F16, BF16, F32, F64], ids=str)
def test_fma_rounds_once(dtype):
    rng = np.random.default_rng(5)
    a, b = random_floats(dtype, 100, 6), random_floats(dtype, 100, 7)
    # c close to -a*b makes the sum cancel: where a separate rounding of a*b would show.
    c = (-(a.astype(F64) * b.astype(F64)) * (1 + rng.uniform(-1e-3, 1e-3, 100))).astype(dtype)
    got = apply("%r = math.fma %a, %b, %c : tile<{N}x{T}>", a, b, c, out=dtype)
    expected = exact(
        [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)) for x, y, z in zip(a, b, c)],
        dtype,
    )
    assert np.array_equal(got.astype(F64), expected.astype(F64))  # +0 and -0 alike


def test_powf_computes_in_f64():
    x = np.array([2.0, -2.0, -2.0, 0.0, 4.0], F32)
    y = np.array([10.0, 3.0, 0.5, -1.0, 0.5], F32)
    got = apply("%r = math.powf %a, %b : tile<{N}x{T}>", x, y, out=F32)
    assert got[0] == 1024 and got[1] == -8 and np.isnan(got[2]) and got[3] == np.inf
    assert got[4] == 2


# ---------------------------------------------------------------------------------------------
# Integers: two's complement, wrap-around


INT_BINARY = {
    "arith.addi": lambda x, y: x + y,
    "arith.subi": lambda x, y: x - y,
    "arith.muli": lambda x, y: x * y,
    "arith.andi": lambda x, y: x & y,
    "arith.ori": lambda x, y: x | y,
    "arith.xori": lambda x, y: x ^ y,
    "arith.maxsi": max,
    "arith.minsi": min,
}


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64], ids=str)
@pytest.mark.parametrize("op", sorted(INT_BINARY))
def test_integer_arithmetic_wraps(op, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(8)
    a = np.concatenate([rng.integers(info.min, info.max, 50, dtype=dtype), [info.max, info.min]])
    b = np.concatenate([rng.integers(info.min, info.max, 50, dtype=dtype), [1, -1]]).astype(dtype)
    got = apply(f"%r = {op} %a, %b : tile<{{N}}x{{T}}>", a.astype(dtype), b, out=dtype)
    expected = [wrap(INT_BINARY[op](int(x), int(y)), info.bits) for x, y in zip(a, b)]
    assert got.tolist() == expected


def test_signed_division_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 0, -128, 5, 9, -9], np.int8)
    b = np.array([2, 2, -2, -2, 3, -1, 0, 4, 4], np.int8)
    q = apply("%r = arith.divsi %a, %b : tile<{N}x{T}>", a, b, out=np.int8)
    r = apply("%r = arith.remsi %a, %b : tile<{N}x{T}>", a, b, out=np.int8)
    c = apply("%r = arith.ceildivsi %a, %b : tile<{N}x{T}>", a, b, out=np.int8)
    assert q.tolist()[:5] == [3, -3, -3, 3, 0] and r.tolist()[:5] == [1, -1, 1, -1, 0]
    assert c.tolist()[:5] == [4, -3, -3, 4, 0] and c.tolist()[7:] == [3, -2]
    assert q[5] == -128 and r[5] == 0  # INT_MIN / -1 wraps
    # Undefined in the IR; the interpreter gives what the hardware does, not an error.
    assert q[6] == -1 and r[6] == 5


def test_shifts_clamp_amounts_past_the_width():
    a = np.array([1, 1, -8, -8, 5, -5, 3], np.int32)
    b = np.array([31, 32, 1, 40, -1, 33, 0], np.int32)
    left = apply("%r = arith.shli %a, %b : tile<{N}x{T}>", a, b, out=np.int32)
    right = apply("%r = arith.shrsi %a, %b : tile<{N}x{T}>", a, b, out=np.int32)
    assert left.tolist() == [-(2**31), 0, -16, 0, 0, 0, 3]
    assert right.tolist() == [0, 0, -4, -1, 0, -1, 3]


def test_cmpi_signed_and_unsigned():
    a = np.array([-1, 1, 5], np.int8)
    b = np.array([1, -1, 5], np.int8)
    for predicate, expected in {
        "slt": [True, False, False],
        "ult": [False, True, False],  # -1 is 255 unsigned
        "sge": [False, True, True],
        "uge": [True, False, True],
        "eq": [False, False, True],
        "ne": [True, True, False],
    }.items():
        got = apply(f"%r = arith.cmpi {predicate}, %a, %b : tile<{{N}}x{{T}}>", a, b, out=np.bool_)
        assert got.tolist() == expected, predicate


def test_i1_is_a_one_bit_integer():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    add = apply("%r = arith.addi %a, %b : tile<{N}x{T}>", a, b, out=np.bool_)
    mul = apply("%r = arith.muli %a, %b : tile<{N}x{T}>", a, b, out=np.bool_)
    slt = apply("%r = arith.cmpi slt, %a, %b : tile<{N}x{T}>", a, b, out=np.bool_)
    assert add.tolist() == [False, True, True, False]  # xor
    assert mul.tolist() == [True, False, False, False]  # and
    assert slt.tolist() == [False, True, False, False]  # true is -1, below false (0)


# ---------------------------------------------------------------------------------------------
# Conversions


def test_truncf_rounds_to_nearest_even_and_overflows_to_inf():
    x = np.array([1 + 2**-11, 1 + 3 * 2**-11, 65520.0, 1e-8, -1e6], F32)
    got = apply("%r = arith.truncf %a : tile<{N}xf32> -> tile<{N}xf16>", x, out=F16)
    assert got.tolist()[:2] == [1.0, 1 + 2**-9] and got[2] == np.inf and got[4] == -np.inf
    assert got[3] == np.float16(1e-8)  # a subnormal of f16


def test_f64_to_bf16_rounds_once():
    # Through f32 this would round twice: first to 1 + 2^-8 (a tie), then down to 1.
    x = np.array([1 + 2**-8 + 2**-30, 1 + 2**-8, 3.0e38 * 1.2], F64)
    got = apply("%r = arith.truncf %a : tile<{N}xf64> -> tile<{N}xbf16>", x, out=BF16)
    assert got[0] == 1 + 2**-7 and got[1] == 1.0 and got[2] == np.inf


def test_sitofp_rounds_64_bit_integers_once():
    values = [2**53 + 1, 2**62 + 2**38 + 1, -(2**63), 2**63 - 1, 2**24 + 1, -7]
    x = np.array(values, np.int64)
    for dtype in (F64, F32, BF16, F16):
        got = apply(
            f"%r = arith.sitofp %a : tile<{{N}}xi64> -> tile<{{N}}x{TYPE_NAMES[dtype]}>",
            x,
            out=dtype,
        )
        assert same_bits(got, exact(values, dtype)), dtype


def test_float_to_int_truncates_toward_zero_and_saturates():
    x = np.array([2.9, -2.9, 1e10, -1e10, np.nan, np.inf, -0.5], F32)
    got = apply("%r = arith.fptosi %a : tile<{N}xf32> -> tile<{N}xi32>", x, out=np.int32)
    assert got.tolist() == [2, -2, 2**31 - 1, -(2**31), 0, 2**31 - 1, 0]
    via_cast = apply("%r = tile.cast %a : tile<{N}xf32> -> tile<{N}xi8>", x, out=np.int8)
    assert via_cast.tolist() == [2, -2, 127, -128, 0, 127, 0]


def test_integer_casts_wrap_and_extend():
    x = np.array([300, -1, 127], np.int32)
    assert apply(
        "%r = arith.trunci %a : tile<{N}xi32> -> tile<{N}xi8>", x, out=np.int8
    ).tolist() == [44, -1, 127]
    flags = np.array([True, False])
    extended = apply("%r = arith.extsi %a : tile<{N}xi1> -> tile<{N}xi32>", flags, out=np.int32)
    assert extended.tolist() == [-1, 0]  # sign extension of a 1-bit integer
    cast = apply("%r = tile.cast %a : tile<{N}xi1> -> tile<{N}xi32>", flags, out=np.int32)
    assert cast.tolist() == [1, 0]  # tile.cast from i1 gives 0 or 1
    as_float = apply("%r = tile.cast %a : tile<{N}xi1> -> tile<{N}xf16>", flags, out=F16)
    assert as_float.tolist() == [1.0, 0.0]
    to_bool = apply(
        "%r = tile.cast %a : tile<{N}xf32> -> tile<{N}xi1>",
        np.array([0.0, -0.0, 0.5, np.nan], F32),
        out=np.bool_,
    )
    assert to_bool.tolist() == [False, False, True, True]


def test_casts_between_f16_and_bf16_round_once():
    x = np.array([1 + 2**-10, 65504, 3.0e-5], F16)
    got = apply("%r = tile.cast %a : tile<{N}xf16> -> tile<{N}xbf16>", x, out=BF16)
    assert same_bits(got, exact([float(v) for v in x], BF16))


def test_index_cast_refuses_values_that_do_not_fit():
    text = """func @k(%out: !tile.tensor<1xi32>, %n: i64) {
  %c0 = arith.constant 0 : index
  %i = arith.index_cast %n : i64 -> index
  %big = arith.muli %i, %i : index
  %x = arith.index_cast %big : index -> i32
  %t = tile.splat %x : i32 -> tile<1xi32>
  tile.store %out[%c0], %t : !tile.tensor<1xi32>, tile<1xi32>
  return
}"""
    out = np.zeros(1, np.int32)
    run_ir(text, [out, 40000], grid=(1,))
    assert out[0] == 1_600_000_000
    with pytest.raises(InterpreterError, match="converts the index value 2500000000 to i32"):
        run_ir(text, [out, 50000], grid=(1,))


# ---------------------------------------------------------------------------------------------
# Scalars, choices, shapes, constants


def test_scalar_ops_compute_like_tiles():
    text = """func @k(%a: f16, %b: f16, %c: i1, %out: !tile.tensor<2xf16>) {
  %c0 = arith.constant 0 : index
  %s = arith.addf %a, %b : f16
  %m = arith.mulf %s, %s : f16
  %p = tile.select %c, %s, %m : f16
  %t = tile.splat %p : f16 -> tile<1xf16>
  %u = tile.splat %m : f16 -> tile<1xf16>
  %v = tile.reshape %t : tile<1xf16> -> tile<1x1xf16>
  %w = tile.reshape %v : tile<1x1xf16> -> tile<1xf16>
  tile.store %out[%c0], %w : !tile.tensor<2xf16>, tile<1xf16>
  %c1 = arith.constant 1 : index
  tile.store %out[%c1], %u : !tile.tensor<2xf16>, tile<1xf16>
  return
}"""
    out = np.zeros(2, F16)
    run_ir(text, [200.0, 56.0, True, out], grid=(1,))
    assert out.tolist() == [256.0, np.inf]  # 256 * 256 overflows f16
    run_ir(text, [0.1, 0.2, False, out], grid=(1,))
    s = np.float16(np.float16(0.1) + np.float16(0.2))
    assert out[0] == np.float16(s * s)


def test_shape_ops_and_constants():
    text = """func @k(%x: !tile.tensor<2x3xi32>, %out: !tile.tensor<3x2x2xi32>, %iota: !tile.tensor<4xi64>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : !tile.tensor<2x3xi32> -> tile<2x3xi32>
  %t = tile.transpose %a perm [1, 0] : tile<2x3xi32> -> tile<3x2xi32>
  %e = tile.expand_dims %t axis 2 : tile<3x2xi32> -> tile<3x2x1xi32>
  %b = tile.broadcast %e : tile<3x2x1xi32> -> tile<3x2x2xi32>
  %f = tile.full 100 : tile<3x2x2xi32>
  %mask = arith.cmpi sgt, %b, %f : tile<3x2x2xi32>
  %r = tile.select %mask, %f, %b : tile<3x2x2xi32>
  %l = tile.convert_layout %r : tile<3x2x2xi32> -> tile<3x2x2xi32>
  tile.store %out[%c0, %c0, %c0], %l : !tile.tensor<3x2x2xi32>, tile<3x2x2xi32>
  %i = tile.iota : tile<4xi64>
  tile.store %iota[%c0], %i : !tile.tensor<4xi64>, tile<4xi64>
  return
}"""
    x = np.array([[1, 200, 3], [4, 5, 600]], np.int32)
    out = np.zeros((3, 2, 2), np.int32)
    iota = np.zeros(4, np.int64)
    run_ir(text, [x, out, iota], grid=(1,))
    assert np.array_equal(out, np.minimum(np.broadcast_to(x.T[:, :, None], (3, 2, 2)), 100))
    assert iota.tolist() == [0, 1, 2, 3]
