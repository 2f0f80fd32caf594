"""The f8 element types (f8e4m3, f8e5m2): the interpreter's conversions against hand-computed
values and ml_dtypes, the IR text form, the frontend's refusals of f8 arithmetic, f8 dots in the interpreter,
and the PTX of f8 conversions (sm_90 and later, through ptxas)."""

from __future__ import annotations

import numpy as np
import pytest

import tilec
from tests.interp_cases import BF16, F8E4M3, F8E5M2, F16, F32, F64, apply, same_bits
from tilec.compiler import DEFAULT_PIPELINE, target_pipeline
from tilec.diagnostics import TileError
from tilec.interp import run_kernel
from tilec.ir import parse_module, print_op
from tilec.lowering import compile_to_ptx, module_abi
from tilec.lowering.ptxas import assemble, find_ptxas
from tilec.runtime import DeviceTensor, Launcher, LaunchError

CAST = "%r = tile.cast %a : tile<{N}x{T}> -> tile<{N}x{O}>"
LARGEST = {F8E4M3: 448.0, F8E5M2: 57344.0}


def _to_f8(values, source: np.dtype, target: np.dtype) -> np.ndarray:
    return apply(CAST, np.array(values, dtype=source), out=target)


def _bits(x: np.ndarray) -> list[int]:
    return [int(b) for b in x.view(np.uint8)]


# ---------------------------------------------------------------------------------------------
# The interpreter's conversions


def test_f32_to_e4m3_rounds_to_nearest_even_in_normals_and_subnormals():
    # 1 + 1/16 lies halfway between 1 and 1.125 (3 fraction bits): even is 1.0 (0x38);
    # 1 + 3/16 between 1.125 and 1.25: even is 1.25 (0x3A). 2^-10 is half the smallest
    # subnormal 2^-9: even is 0; 3 * 2^-10 between 2^-9 (0x01) and 2^-8 (0x02): 0x02.
    values = [1.0625, 1.1875, 1.07, 2.0**-10, 3 * 2.0**-10, 2.0**-9, -(2.0**-6), -0.0]
    result = _to_f8(values, F32, F8E4M3)
    assert _bits(result) == [0x38, 0x3A, 0x39, 0x00, 0x02, 0x01, 0x88, 0x80]


def test_f32_to_e5m2_rounds_to_nearest_even_in_normals_and_subnormals():
    # 2 fraction bits: 1.125 is halfway between 1 and 1.25 (even: 1.0, 0x3C); 1.375 between
    # 1.25 and 1.5 (even: 1.5, 0x3E). The smallest subnormal is 2^-16; 3 * 2^-17 gives 2^-15.
    values = [1.125, 1.375, 2.0**-17, 3 * 2.0**-17, 2.0**-16]
    result = _to_f8(values, F32, F8E5M2)
    assert _bits(result) == [0x3C, 0x3E, 0x00, 0x02, 0x01]


@pytest.mark.parametrize("target", [F8E4M3, F8E5M2])
@pytest.mark.parametrize("source", [F32, F16, BF16, F64])
def test_beyond_the_largest_finite_value_and_inf_saturate_and_nan_stays(source, target):
    largest = LARGEST[target]
    big = 60000.0 if source == F16 else 1e30  # f16 holds no 1e30
    values = [largest, 1.1 * largest, big, np.inf, -1.1 * largest, -np.inf, np.nan]
    result = _to_f8(values, source, target).astype(np.float32)
    expected = [largest, largest, largest, largest, -largest, -largest]
    assert result[:6].tolist() == expected
    assert np.isnan(result[6])


def test_e4m3_values_that_plain_rounding_takes_to_nan_saturate_to_448():
    # 464 is halfway between 448 (0x7E) and 480, whose bits 0x7F are e4m3's NaN.
    assert _bits(_to_f8([464.0, 479.0, -464.0], F32, F8E4M3)) == [0x7E, 0x7E, 0xFE]


def test_e5m2_values_that_plain_rounding_takes_to_inf_saturate_to_57344():
    # 61440 is halfway between 57344 (0x7B) and inf (0x7C).
    assert _bits(_to_f8([61440.0, -61440.0], F32, F8E5M2)) == [0x7B, 0xFB]


def test_f64_to_f8_rounds_to_f32_first_as_the_gpu_does():
    # Just above the tie 1.0625 (below f32's precision): f32 makes it the tie, which rounds
    # to even, 1.0 (0x38), where one rounding would give 1.125. The GPU converts f64 to f32
    # and then f32 to f8.
    assert _bits(_to_f8([1.0625 + 2.0**-40], F64, F8E4M3)) == [0x38]


@pytest.mark.parametrize("source", [F8E4M3, F8E5M2])
def test_f8_to_f32_is_exact_for_all_256_bit_patterns(source):
    every = np.arange(256, dtype=np.uint8).view(source)
    result = apply(CAST, every, out=F32)
    expected = every.astype(F32)  # ml_dtypes widens exactly
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(result), nan)
    assert same_bits(result[~nan], expected[~nan])  # -0.0 and subnormals too


def test_f8_to_integers_truncates_and_integers_to_f8_saturate():
    x = np.array([-2.5, 1.75, 448.0], dtype=np.float32).astype(F8E4M3)
    assert apply(CAST, x, out=np.int32).tolist() == [-2, 1, 448]
    ints = np.array([3, -1000, 17], dtype=np.int32)
    assert _to_f8(ints, np.int32, F8E4M3).astype(np.float32).tolist() == [3.0, -448.0, 16.0]


def test_e4m3_to_e5m2_rounds_to_nearest_even():
    # 1.125 (e4m3 0x39) is a tie in e5m2: even is 1.0.
    x = np.array([1.125, 448.0], dtype=np.float32).astype(F8E4M3)
    assert apply(CAST, x, out=F8E5M2).astype(np.float32).tolist() == [1.0, 448.0]


# ---------------------------------------------------------------------------------------------
# The IR text form


def test_f8_types_round_trip_through_print_and_parse():
    text = (
        "func @k(%x: !tile.tensor<64xf8e4m3>, %y: !tile.tensor<64xf8e5m2>) {\n"
        "  %c0 = arith.constant 0 : index\n"
        "  %a = tile.load %x[%c0] : !tile.tensor<64xf8e4m3> -> tile<64xf8e4m3>\n"
        "  %b = tile.cast %a : tile<64xf8e4m3> -> tile<64xf8e5m2>\n"
        "  tile.store %y[%c0], %b : !tile.tensor<64xf8e5m2>, tile<64xf8e5m2>\n"
        "  return\n}"
    )
    printed = print_op(parse_module(text, "k.tir"))
    assert "tile<64xf8e4m3> -> tile<64xf8e5m2>" in printed
    assert print_op(parse_module(printed, "k.tir")) == printed


# ---------------------------------------------------------------------------------------------
# The frontend's refusals


@pytest.mark.parametrize(
    ("expression", "what"),
    [
        ("x[t] + x[t]", "'+'"),
        ("x[t] * 2.0", "'*'"),
        ("-x[t]", "unary '-'"),
        ("exp(x[t])", "exp()"),
        ("where(x[t].to(f32) > 0.0, x[t], x[t])", "where()"),
    ],
)
def test_arithmetic_on_f8_is_an_error_that_says_to_cast_to_f32(expression, what):
    source = (
        f"def k(x: f8e4m3[N], y: f8e4m3[N]):\n    for t in tiles(N):\n        y[t] = {expression}\n"
    )
    with pytest.raises(TileError) as error:
        tilec.compile(source)
    assert error.value.message == f"{what} does not take f8e4m3 values"
    assert error.value.loc.line == 3
    assert "cast to f32 first" in error.value.render()


@pytest.mark.parametrize(
    "dtype, product",
    [
        ("f8e4m3", "a[tm, :] @ b[:, tn]"),
        ("f8e5m2", "a[tm, :] @ b[:, tn]"),
        # dot() is `@` (the differential fuzzer found dot() refusing f8 as other builtins do)
        ("f8e4m3", "dot(a[tm, :], b[:, tn])"),
        ("f8e5m2", "dot(a[tm, :], b[:, tn])"),
    ],
)
def test_a_dot_of_f8_operands_accumulates_in_f32_exactly_in_the_interpreter(dtype, product):
    """f8 x f8 products are exact in f32 (at most 4 + 4 significant bits); the interpreter sums
    them in f32, and the frontend gives a dot of f8 tiles an f32 result."""
    source = (
        f"def k(a: {dtype}[M, K], b: {dtype}[K, N], c: f32[M, N]):\n"
        "    for tm, tn in tiles(M, N):\n"
        f"        c[tm, tn] = {product}\n"
    )
    element = {"f8e4m3": F8E4M3, "f8e5m2": F8E5M2}[dtype]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(element)
    b = rng.standard_normal((7, 3)).astype(element)
    c = np.zeros((5, 3), np.float32)
    run_kernel(tilec.compile(source), "k", [a, b, c])
    expected = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, expected, rtol=1e-6, atol=1e-6)


def test_a_dot_of_mixed_f8_kinds_is_an_error_at_the_dot():
    source = (
        "def k(a: f8e4m3[M, K], b: f8e5m2[K, N], c: f32[M, N]):\n"
        "    for tm, tn in tiles(M, N):\n"
        "        c[tm, tn] = a[tm, :] @ b[:, tn]\n"
    )
    with pytest.raises(TileError, match="operands must have the same dtype") as error:
        tilec.compile(source)
    assert (error.value.loc.line, error.value.loc.col) == (3, 30)  # the '@'


def test_a_scalar_argument_cannot_be_f8():
    with pytest.raises(TileError, match="a scalar argument cannot be f8e5m2"):
        tilec.compile("def k(s: f8e5m2, y: f32[N]):\n    for t in tiles(N):\n        y[t] = 0.0\n")


# ---------------------------------------------------------------------------------------------
# PTX

KERNELS = """
def quantize(x: f32[N], y: f8e4m3[N]):
    for t in tiles(N):
        y[t] = x[t].to(f8e4m3)

def dequantize(x: f8e5m2[N], y: f32[N]):
    for t in tiles(N):
        y[t] = x[t].to(f32)
"""


def _ptx(kernel: str, arch: str) -> str:
    compiled = tilec.compile(
        KERNELS, kernels=[kernel], pipeline=target_pipeline(DEFAULT_PIPELINE, arch)
    )
    return compile_to_ptx(compiled.module, arch)


@pytest.mark.parametrize(
    ("kernel", "instruction"),
    [
        ("quantize", "cvt.rn.satfinite.e4m3x2.f32"),
        ("dequantize", "cvt.rn.f16x2.e5m2x2"),
    ],
)
def test_f8_conversions_are_one_cvt_per_element(kernel, instruction):
    assert instruction in _ptx(kernel, "sm_90a")


@pytest.mark.skipif(find_ptxas() is None, reason="no ptxas (CUDA on PATH or nvidia-cuda-nvcc)")
@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize("kernel", ["quantize", "dequantize"])
def test_ptxas_assembles_f8_conversions(kernel, arch):
    assemble(_ptx(kernel, arch), arch)  # raises when ptxas refuses it


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89"])
def test_f8_conversions_before_sm_90_are_a_located_error(arch):
    with pytest.raises(TileError) as error:
        _ptx("quantize", arch)
    assert error.value.message == (
        f"tile.cast to or from f8e4m3 needs sm_90 or later; {arch} has no f8 conversions "
        "in PTX ISA 8.0"
    )
    assert error.value.loc.line == 4


# ---------------------------------------------------------------------------------------------
# The runtime's dtypes


def test_the_runtime_names_f8_dtypes_of_numpy_and_torch():
    torch = pytest.importorskip("torch")
    program = tilec.compile(
        KERNELS, kernels=["quantize"], pipeline=target_pipeline(DEFAULT_PIPELINE, "sm_90a")
    )
    launcher = Launcher(
        compile_to_ptx(program.module, "sm_90a"), module_abi(program.module)["quantize"]
    )
    x = np.zeros(8, np.float32)
    with pytest.raises(LaunchError) as error:
        launcher.checker.convert([x, np.zeros(8, np.float32)])
    assert "expected dtype f8e4m3, got f32" in str(error.value)
    assert "x.astype(ml_dtypes.float8_e4m3fn)" in str(error.value)
    if hasattr(torch, "float8_e5m2"):
        with pytest.raises(LaunchError) as error:
            launcher.checker.convert([x, DeviceTensor(1 << 20, (8,), (1,), "f8e5m2", 0)])
        assert "expected dtype f8e4m3, got f8e5m2" in str(error.value)
        assert "x.to(torch.float8_e4m3fn)" in str(error.value)
