"""`@tilec.jit`: kernels written as Python functions in this file.

The kernels below are real `@tilec.jit` functions: their IR, their options, the locations of
their ops and of their errors all refer to this `.py` file. (Calling a kernel belongs to the
interpreter's tests.)
"""

# ruff: noqa: F821 - kernel bodies use the tile language's names (f32, tiles, N), not Python's

from __future__ import annotations

import functools
from pathlib import Path

import pytest

import tilec
from tilec.diagnostics import TileError
from tilec.dialects.builtin import ModuleOp

THIS_FILE = Path(__file__)
SOURCE_LINES = THIS_FILE.read_text(encoding="utf-8").split("\n")


def line_of(text: str) -> int:
    """The 1-based number of the one line of this file that is exactly `text`."""
    (index,) = [i for i, line in enumerate(SOURCE_LINES) if line == text]
    return index + 1


def passthrough(fn):
    return fn


@tilec.jit
def scale(x: f32[N], y: f32[N], alpha: f32):
    for tn in tiles(N):
        y[tn] = x[tn] * alpha


@tilec.jit(tile={"M": 64, "K": 32}, warps=4, stages=2)
def matmul(a: f16[M, K], b: f16[K, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc


@passthrough
@tilec.jit(
    tile={"N": 128},
    warps=2,
)
@passthrough
def decorated(x: f32[N], y: f32[N]):
    for tn in tiles(N):
        y[tn] = exp(x[tn])


@tilec.jit
def misspelt(x: f32[N], y: f32[N], alpha: f32):
    for tn in tiles(N):
        y[tn] = x[tn] * alpah


@tilec.jit
def unsupported(x: f32[N], y: f32[N]):
    for tn in tiles(N):
        while True:
            y[tn] = x[tn]


@tilec.jit(tile={"Q": 64})
def unknown_option_dimension(x: f32[N], y: f32[N]):
    for tn in tiles(N):
        y[tn] = x[tn]


# The same kernel as `scale`, as a .tile file would hold it (indented by two, so that
# `line_of` finds the lines of the Python kernel only).
SCALE_TILE = """\
def scale(x: f32[N], y: f32[N], alpha: f32):
  for tn in tiles(N):
    y[tn] = x[tn] * alpha
"""


def test_a_jit_kernel_exposes_its_ir():
    assert isinstance(scale, tilec.JitFunction)
    assert isinstance(scale.ir, ModuleOp)
    assert scale.compiled.kernels == ["scale"]
    assert scale.tir == tilec.compile(SCALE_TILE).tir
    assert scale.tir.startswith("module {\n  func @scale(%x: !tile.tensor<Nxf32>")


def test_compilation_happens_once():
    assert scale.compiled is scale.compiled
    assert scale.ir is scale.compiled.module


def test_the_kernel_keeps_the_function_name():
    assert scale.__name__ == "scale"
    assert scale.__wrapped__.__name__ == "scale"
    assert repr(scale) == "<tilec.jit kernel scale>"


def test_options_are_pinned():
    assert (
        'tilec.pinned_tiles = [["BM", 64], ["BK", 32]], tilec.num_warps = 4, '
        "tilec.num_stages = 2" in matmul.tir
    )
    assert "tilec.pinned_tiles" not in scale.tir


def test_ops_are_located_in_this_file():
    name = scale.ir.functions[0].body.blocks[0].ops[-1].loc.file
    assert Path(name).resolve() == THIS_FILE.resolve()
    store_line = line_of("        y[tn] = x[tn] * alpha")
    stores = [op for op in scale.ir.walk() if op.name == "tile.store"]
    assert [(op.loc.line, op.loc.col) for op in stores] == [(store_line, 9)]
    multiply = next(op for op in scale.ir.walk() if op.name == "arith.mulf")
    assert (multiply.loc.line, multiply.loc.col) == (store_line, 23)


def test_decorators_are_dropped_and_lines_stay_those_of_the_file():
    # Decorators above, below and spread over several lines: only the 'def' is parsed.
    assert 'tilec.pinned_tiles = [["BN", 128]], tilec.num_warps = 2' in decorated.tir
    exp_line = line_of("        y[tn] = exp(x[tn])")
    (exp,) = [op for op in decorated.ir.walk() if op.name == "math.exp"]
    assert (exp.loc.line, exp.loc.col) == (exp_line, 17)
    func = decorated.ir.functions[0]
    assert func.loc.line == line_of("def decorated(x: f32[N], y: f32[N]):")


def test_an_error_names_the_line_and_column_of_this_file():
    with pytest.raises(TileError) as caught:
        _ = misspelt.tir
    error = caught.value
    line = line_of("        y[tn] = x[tn] * alpah")
    assert error.message == "unknown name 'alpah'"
    assert (error.loc.line, error.loc.col) == (line, 25)
    assert Path(error.loc.file).resolve() == THIS_FILE.resolve()
    rendered = error.render().split("\n")
    assert rendered[0] == f"{error.loc.file}:{line}:25: error: unknown name 'alpah'"
    assert rendered[1] == "        y[tn] = x[tn] * alpah"
    assert rendered[2] == " " * 24 + "^"
    assert rendered[3] == "hint: did you mean 'alpha'?"


def test_unsupported_python_is_reported_in_this_file():
    with pytest.raises(TileError) as caught:
        _ = unsupported.ir
    error = caught.value
    assert error.message == "'while' loops are not supported in tile kernels"
    assert (error.loc.line, error.loc.col) == (line_of("        while True:"), 9)


def test_a_bad_option_points_at_the_kernel_name():
    with pytest.raises(TileError) as caught:
        _ = unknown_option_dimension.ir
    error = caught.value
    assert error.message == "'Q' is not a dimension of kernel 'unknown_option_dimension'"
    def_line = line_of("def unknown_option_dimension(x: f32[N], y: f32[N]):")
    assert (error.loc.line, error.loc.col) == (def_line, 5)


def test_a_kernel_defined_inside_a_function_keeps_the_file_columns():
    @tilec.jit
    def inner(x: f32[N], y: f32[N]):
        for tn in tiles(N):
            y[tn] = x[tn] + missing_name

    with pytest.raises(TileError) as caught:
        _ = inner.tir
    error = caught.value
    line = line_of("            y[tn] = x[tn] + missing_name")
    assert (error.loc.line, error.loc.col) == (line, 29)
    assert error.render().split("\n")[1:3] == [SOURCE_LINES[line - 1], " " * 28 + "^"]


def test_the_same_function_can_be_compiled_with_other_options():
    # The same function compiled with other options is another kernel object.
    fast = tilec.jit(scale.fn, tile={"N": 256})
    assert '[["BN", 256]]' in fast.tir
    assert "tilec.pinned_tiles" not in scale.tir


def test_a_function_without_source_is_a_tile_error():
    lambda_kernel = tilec.jit(lambda x: x)
    with pytest.raises(TileError, match="is not a 'def' function"):
        _ = lambda_kernel.ir
    built = tilec.jit(functools.partial(print))
    with pytest.raises(TileError, match="cannot read the source"):
        _ = built.ir


# -- pipeline controls: disable=, pass_options= -------------------------------------------------


def matmul_arrays():
    import numpy as np

    return (
        np.zeros((128, 64), np.float16),
        np.zeros((64, 96), np.float16),
        np.zeros((128, 96), np.float16),
    )


def test_disabled_passes_and_pass_options_change_the_pipeline_and_the_key(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    base = matmul.compile_for(*matmul_arrays(), arch="sm_90a")
    # The jit tells tiling the target (sm_90a: the wgmma path) and the extents' size classes,
    # pipeline the target (the TMA unit's copies) and the extents (a loop that runs once is not
    # prefetched in registers), split-reduction the extents (a grid they show filling the GPU
    # is not split), assign-layouts the extents (fewer than 4 warps only on grids that fill
    # the GPU), and transpose-dot the target.
    assert base.pipeline.endswith(
        tilec.compiler.DEFAULT_PIPELINE.replace(
            ",tiling,", ',tiling{extents="K=64,M=128,N=128" arch=sm_90a},'
        )
        .replace(",pipeline,", ',pipeline{arch=sm_90a extents="K=64,M=128,N=128"},')
        .replace(",split-reduction,", ',split-reduction{extents="K=64,M=128,N=128"},')
        .replace(",assign-layouts,", ',assign-layouts{extents="K=64,M=128,N=128"},')
        .replace("transpose-dot,", "transpose-dot{arch=sm_90a},")
    )
    plain = tilec.jit(matmul.fn, tile={"M": 64, "K": 32}, warps=4, disable=("pipeline", "tiling"))
    off = plain.compile_for(*matmul_arrays(), arch="sm_90a")
    assert ",pipeline" not in off.pipeline
    assert "mma=false arch=sm_90a group_m=1}" in off.pipeline
    assert off.key.digest() != base.key.digest()
    assert "cp.async" not in off.ptx and "mma.sync" not in off.ptx
    narrow = tilec.jit(matmul.fn, pass_options={"vectorize": {"max_bytes": 8}})
    compiled = narrow.compile_for(*matmul_arrays(), arch="sm_90a")
    assert "vectorize{max_bytes=8}" in compiled.pipeline
    assert compiled.key.digest() not in {base.key.digest(), off.key.digest()}


def test_whole_dimension_extents_still_reach_a_disabled_tiling(monkeypatch, tmp_path):
    import numpy as np

    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    softmax = tilec.load_kernel(
        THIS_FILE.parents[2] / "examples" / "softmax.tile", "softmax", disable=["tiling"]
    )
    x = np.zeros((8, 100), np.float32)
    compiled = softmax.compile_for(x, x.copy(), arch="sm_90a")
    # N by its bound: 100 rounded up to an eighth of the tile of 128
    assert 'tiling{extents="N=112,M=64" mma=false arch=sm_90a group_m=1}' in compiled.pipeline


def test_bad_pipeline_controls_fail_when_decorating():
    with pytest.raises(TileError, match="cannot disable 'cse'"):
        tilec.jit(scale.fn, disable=("cse",))
    with pytest.raises(TileError, match="pass 'pipeline' has no option 'stages'"):
        tilec.jit(scale.fn, pass_options={"pipeline": {"stages": 2}})
    with pytest.raises(TileError, match=r"pass option pipeline\.num_stages: must be an integer"):
        tilec.jit(scale.fn, pass_options={"pipeline": {"num_stages": "two"}})


def test_interpreter_ignores_the_pipeline_controls():
    import numpy as np

    kernel = tilec.jit(
        scale.fn, interpret=True, disable="vectorize", pass_options={"tiling": {"group_m": 4}}
    )
    x = np.arange(10, dtype=np.float32)
    y = np.zeros_like(x)
    kernel(x, y, 2.0)
    assert np.array_equal(y, 2 * x)
    assert kernel.options == {}  # the controls are not kernel pins
