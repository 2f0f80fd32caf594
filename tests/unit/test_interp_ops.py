"""The interpreter's semantics of every op, against direct computations: numpy, exact rational
arithmetic (`fractions`) rounded once, and the constant folders.

Each case runs a tiny kernel written in IR text: it loads its inputs from tensors, applies the
op, and stores the result, so what is tested is the whole path a kernel takes.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tilec.dialects import arith
from tilec.dialects import math as math_ops
from tilec.interp import InterpreterError, run_kernel
from tilec.interp.semantics import SEMANTICS
from tilec.ir import parse_module, verify
from tilec.ir.attributes import FloatAttr
from tilec.ir.core import OP_REGISTRY
from tilec.ir.folding import constant_value

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
TYPE_NAMES = {
    np.dtype(np.bool_): "i1",
    np.dtype(np.int8): "i8",
    np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    F16: "f16",
    BF16: "bf16",
    F32: "f32",
    F64: "f64",
}


def run_ir(text: str, args: list, **options) -> None:
    module = parse_module(text, "test.tir")
    verify(module)
    run_kernel(module, None, args, **options)


def apply(template: str, *inputs: np.ndarray, out: np.dtype, out_type: str | None = None):
    """Run `template` (IR defining %r from tiles %a, %b, %c) on 1-D `inputs`; {N} is the
    length, {T} the first input's type, {O} the result's."""
    inputs = tuple(np.asarray(x) for x in inputs)
    n = len(inputs[0])
    out = np.dtype(out)
    result_type = out_type or TYPE_NAMES[out]
    params, loads = [], []
    for name, x in zip("abc", inputs):
        t = TYPE_NAMES[x.dtype]
        params.append(f"%{name}_in: !tile.tensor<{n}x{t}>")
        loads.append(
            f"%{name} = tile.load %{name}_in[%c0] : !tile.tensor<{n}x{t}> -> tile<{n}x{t}>"
        )
    body = template.replace("{N}", str(n)).replace("{T}", TYPE_NAMES[inputs[0].dtype])
    body = body.replace("{O}", result_type)
    text = (
        f"func @k({', '.join(params)}, %out: !tile.tensor<{n}x{result_type}>) {{\n"
        "  %c0 = arith.constant 0 : index\n  " + "\n  ".join(loads) + f"\n  {body}\n"
        f"  tile.store %out[%c0], %r : !tile.tensor<{n}x{result_type}>, tile<{n}x{result_type}>\n"
        "  return\n}"
    )
    result = np.zeros(n, out)
    run_ir(text, [*inputs, result], grid=(1,))
    return result


def exact(values, dtype: np.dtype) -> np.ndarray:
    """Exact rational values rounded once, to nearest even, to `dtype`."""
    return np.array([math_ops.round_exact(Fraction(v), dtype) for v in values], dtype)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


def random_floats(dtype: np.dtype, n: int = 200, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    magnitudes = rng.uniform(-4, 4, n) * 2.0 ** rng.integers(-6, 6, n)
    return magnitudes.astype(np.float32).astype(dtype)


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


def wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


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
