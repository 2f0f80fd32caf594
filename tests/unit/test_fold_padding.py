"""fold-padding on the odd-width row kernels: which selects go (softmax's max pads its load
with -inf; layernorm's and rmsnorm's statistics read loads that pad with 0 already), which stay
(layernorm's `d * d`, whose hidden lanes are not constant; softmax's sum of `exp(x - max)`
goes, as long as the sum reaches memory only where the mask shows), what it leaves alone (a load whose
padding lanes another user sees), and the kernels computing in the interpreter, bit for bit,
what they did before, at widths no tile divides."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tilec
from tilec.compiler import compile_source
from tilec.dialects import tile as T
from tilec.interp import TensorView, prepare_launch
from tilec.ir.folding import constant_value
from tilec.passmanager import PassContext, parse_pipeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# What the jit runs before fold-padding for rows of at most 64 columns, one row a block.
BEFORE = (
    'assume{aligned="x,y" unit="x.stride.1,y.stride.1"},canonicalize,cse,'
    'tiling{extents="N=64,M=8"},canonicalize,split-reduction,mask-bounds,defer-reduction,'
    "assign-layouts,vectorize"
)
KERNELS = {  # kernel: (file, select constants that stay, loads' padding after)
    "softmax": ("softmax.tile", [], [-np.inf]),
    "softmax_f16": ("softmax.tile", [], [-np.inf]),
    "layernorm": ("layernorm.tile", [0.0], [None, None, None]),
    "rmsnorm": ("rmsnorm.tile", [], [None, None]),
}


def _module(kernel: str, pipeline: str = BEFORE):
    return tilec.compile(str(EXAMPLES / KERNELS[kernel][0]), kernels=[kernel], pipeline=pipeline)


def _folded(module):
    context = PassContext()
    for p in parse_pipeline("fold-padding"):
        context.current_pass = p.name
        p.run(module, context)
    return context


def _selects(module) -> list[float]:
    ops = [op for op in module.walk() if isinstance(op, T.SelectOp)]
    return [getattr(constant_value(op.false_value), "value", None) for op in ops]


def _paddings(module) -> list:
    loads = [op for op in module.walk() if isinstance(op, T.LoadOp)]
    return [getattr(op.attributes.get("padding"), "value", None) for op in loads]


def _arguments(kernel: str, m: int, n: int) -> list:
    rng = np.random.default_rng(n)
    dtype = {"softmax": np.float32, "softmax_f16": np.float16}.get(kernel, np.float16)
    if kernel == "rmsnorm":
        dtype = ml_dtypes.bfloat16
    x = rng.uniform(-4, 4, size=(m, n)).astype(dtype)
    if kernel.startswith("softmax"):
        return [x, np.zeros_like(x)]
    w = rng.uniform(-1, 1, size=n).astype(dtype)
    if kernel == "rmsnorm":
        return [x, w, np.zeros_like(x), np.float32(1e-6)]
    return [x, w, rng.uniform(-1, 1, size=n).astype(dtype), np.zeros_like(x), np.float32(1e-5)]


def _run(module, kernel: str, arguments: list) -> list[np.ndarray]:
    arguments = [a.copy() if isinstance(a, np.ndarray) else a for a in arguments]
    launch = prepare_launch(module, kernel, arguments)
    launch.run()
    return [v.array for v in launch.arguments if isinstance(v, TensorView)]


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_selects_on_the_padding_mask_fold_into_the_loads(kernel):
    module = _module(kernel).module
    context = _folded(module)
    _, stay, paddings = KERNELS[kernel]
    assert _selects(module) == stay
    assert _paddings(module) == paddings
    assert context.remarks  # each fold says how


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("n", [0, 1, 37, 63, 64])
def test_folded_kernels_compute_what_they_did(kernel, n):
    before = _module(kernel).module
    after = before.clone()
    _folded(after)
    arguments = _arguments(kernel, 3, n)
    for x, y in zip(_run(before, kernel, arguments), _run(after, kernel, arguments)):
        assert x.tobytes() == y.tobytes()


@pytest.mark.parametrize("kernel", ["softmax", "softmax_f16"])
@pytest.mark.parametrize("n", [1, 37])
def test_softmax_without_its_sum_select_on_rows_of_infinities_and_nan(kernel, n):
    """The rows where the sum's select mattered: all -inf (max -inf: the hidden lanes of
    exp(x - max) are NaN, but so are the row's own), one +inf (max +inf), one NaN."""
    before = _module(kernel).module
    after = before.clone()
    _folded(after)
    (x, y) = _arguments(kernel, 4, n)
    x[0, :] = -np.inf
    x[1, n // 2] = np.inf
    x[2, n // 2] = np.nan
    for a, b in zip(_run(before, kernel, [x, y]), _run(after, kernel, [x, y])):
        np.testing.assert_array_equal(a, b)  # NaN where NaN


def test_a_sum_of_exp_stored_per_row_keeps_its_select():
    """logsumexp stores its sum per row: with an extent of 0 the row has no lanes, the max is
    -inf and exp(-inf - -inf) NaN, so without the select the sum would be NaN, not 0."""
    source = """
def logsumexp(x: f32[M, N], out: f32[M]):
    for tm in tiles(M):
        row = x[tm, :]
        m = max(row, axis=1, keepdims=True)
        out[tm] = sum(exp(row - m), axis=1)
"""
    pipeline = BEFORE.replace('aligned="x,y" unit="x.stride.1,y.stride.1"', 'aligned="x"')
    module = compile_source(source, kernels=["logsumexp"], pipeline=pipeline).module
    _folded(module)
    assert _selects(module) == [0.0]
    assert _paddings(module) == [-np.inf]


def test_a_load_whose_padding_another_user_sees_keeps_it():
    """The row's padding lanes reach `sum(row)` unmasked here: padding it with -inf for the
    max's select would make the sum -inf. The select stays, and the load pads with 0."""
    source = """
def softmax_plus(x: f32[M, N], y: f32[M, N], s: f32[M]):
    for tm in tiles(M):
        row = x[tm, :]
        s[tm] = sum(where(row > 100.0, 0.0, row), axis=1)
        y[tm, :] = exp(row - max(row, axis=1, keepdims=True))
"""
    pipeline = BEFORE.replace('aligned="x,y" ', "")
    module = compile_source(source, kernels=["softmax_plus"], pipeline=pipeline).module
    _folded(module)
    assert -np.inf in _selects(module)
    assert _paddings(module) == [None]


def test_scalar_selects_and_casts_are_left_alone():
    """A select of scalars (no tile, no padding) over a scalar cast: found by the fuzzers
    (seeds 154, 184, ... crashed reading a scalar type's element type)."""
    from tilec.ir.parser import parse_module

    module = parse_module(
        """
module {
  func @k(%x: i32, %m: i1, %out: !tile.tensor<4xf64>) {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.0 : f64
    %v = tile.cast %x : i32 -> f64
    %s = tile.select %m, %v, %zero : f64
    %t = tile.splat %s : f64 -> tile<4xf64>
    tile.store %out[%c0], %t : !tile.tensor<4xf64>, tile<4xf64>
    return
  }
}
"""
    )
    (fold,) = parse_pipeline("fold-padding")
    fold.run(module, PassContext())
    assert "tile.select" in str(module)
