"""privatize-atomics on the CPU: translation validation of histograms counted in the block
(then accumulated over a loop and split) at awkward sizes, with bins that hold every value and
bins that hold only some (the rest keep the scatter), against numpy and the kernels as
written; `tile.bincount`'s semantics and PTX (the GPU's runs are tests/gpu/test_examples.py's
histogram cases and tests/gpu/test_atomic_scatter.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler import DEFAULT_PIPELINE, compile_source
from tilec.interp import InterpreterError, TensorView, prepare_launch
from tilec.lowering import compile_to_ptx, module_abi

KERNELS = """
def histogram(values: i32[N], counts: i32[B]):
    for tn in tiles(N):
        atomic_add(counts[values[tn]], 1)


def weighted(bins: i32[N], w: i32[N], sums: i32[B]):
    for tn in tiles(N):
        atomic_add(sums[bins[tn]], w[tn] * 2)


def masked(values: i64[N], counts: i32[B]):
    for tn in tiles(N):
        v = values[tn]
        atomic_add(counts[v], 1, mask=v % 3 != 0)
"""


def _pipeline(max_bins: int) -> str:
    tiled = DEFAULT_PIPELINE.replace("tiling", 'tiling{tiles="BN=64"}')
    return tiled.replace("privatize-atomics", f"privatize-atomics{{max_bins={max_bins}}}")


def _run(module, kernel, inputs, out, split):
    launch = prepare_launch(module, kernel, [*inputs, out.copy()], split=split)
    launch.run()
    return [v.array for v in launch.arguments if isinstance(v, TensorView)][-1]


def _inputs(kernel: str, n: int, bins: int, rng) -> list[np.ndarray]:
    if kernel == "weighted":
        return [
            rng.integers(0, bins, n, dtype=np.int32),
            rng.integers(-1000, 1000, n, dtype=np.int32),
        ]
    dtype = np.int64 if kernel == "masked" else np.int32
    return [rng.integers(0, bins, n, dtype=dtype)]


def _expected(kernel: str, inputs: list[np.ndarray], start: np.ndarray) -> np.ndarray:
    if kernel == "weighted":
        bins, w = inputs
        out = start.copy()
        np.add.at(out, bins, 2 * w)
        return out
    v = inputs[0]
    keep = v[v % 3 != 0] if kernel == "masked" else v
    return start + np.bincount(keep, minlength=len(start)).astype(start.dtype)


@pytest.mark.parametrize("kernel", ["histogram", "weighted", "masked"])
@pytest.mark.parametrize("n, bins", [(1, 1), (1013, 37), (3000, 300), (700, 64)])
@pytest.mark.parametrize("max_bins", [4096, 64])  # 64: bins that hold only some of 300
def test_counted_histograms_compute_what_the_kernels_as_written_do(kernel, n, bins, max_bins):
    rng = np.random.default_rng(n + bins)
    inputs = _inputs(kernel, n, bins, rng)
    dtype = np.int32
    start = (np.arange(bins) % 5).astype(dtype)
    module = compile_source(KERNELS, kernels=[kernel], pipeline=_pipeline(max_bins)).module
    text = str(module)
    assert "tile.bincount" in text
    assert module_abi(module)[kernel].split.atomic == 1
    as_written = DEFAULT_PIPELINE.replace("privatize-atomics,", "")
    written = compile_source(KERNELS, kernels=[kernel], pipeline=as_written).module
    before = _run(written, kernel, inputs, start, None)
    expected = _expected(kernel, inputs, start)
    for split in (1, 3, 8):
        got = _run(module, kernel, inputs, start, split)
        if dtype is np.int32:
            np.testing.assert_array_equal(got, before)
            np.testing.assert_array_equal(got, expected)
        else:
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * max(1, n))
            np.testing.assert_allclose(got, before, rtol=0, atol=1e-5 * max(1, n))


def test_an_out_of_range_value_is_still_reported():
    module = compile_source(KERNELS, kernels=["histogram"], pipeline=_pipeline(4096)).module
    values = np.array([0, 1, 7, 2], np.int32)  # 7: past the 5 bins, inside the 8 counted
    with pytest.raises(InterpreterError, match="out of range"):
        _run(module, "histogram", [values], np.zeros(5, np.int32), 1)


def test_bincount_lowers_to_shared_adds_and_sizes_the_scratch():
    module = compile_source(KERNELS, kernels=["weighted"], pipeline=_pipeline(256)).module
    ptx = compile_to_ptx(module, "sm_90a")
    assert "red.shared.add.u32" in ptx and "red.relaxed.gpu.global.add.u32" in ptx
    assert module_abi(module)["weighted"].shared_bytes >= 256 * 4


def test_without_the_pass_the_scatter_is_left_as_written():
    pipeline = DEFAULT_PIPELINE.replace("privatize-atomics,", "")
    module = compile_source(KERNELS, kernels=["histogram"], pipeline=pipeline).module
    assert "tile.bincount" not in str(module)
    assert module_abi(module)["histogram"].split is None
