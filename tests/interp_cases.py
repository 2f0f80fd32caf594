"""Helpers of the interpreter's op tests (`tests/unit/test_interp_ops*.py`): tiny kernels in
IR text that load their inputs from tensors, apply an op and store the result, so what is
tested is the whole path a kernel takes; and exact references."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np

from tilec.dialects import math as math_ops
from tilec.interp import run_kernel
from tilec.ir import parse_module, verify

BF16 = np.dtype(ml_dtypes.bfloat16)
F8E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
F8E5M2 = np.dtype(ml_dtypes.float8_e5m2)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
TYPE_NAMES = {
    np.dtype(np.bool_): "i1",
    np.dtype(np.int8): "i8",
    np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    F8E4M3: "f8e4m3",
    F8E5M2: "f8e5m2",
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


def wrap(v: int, bits: int) -> int:
    """`v` as a two's complement integer of `bits` bits."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v
