"""Dtype parameters (`@kernel(dtypes={"T": [...]})`, tilec/frontend/generics.py): a kernel
written once, compiled and run per binding; bound by options, `--dtype`, a call's tensors and
`tilec.torch` operators."""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tilec
from tilec.compiler import compile_source
from tilec.diagnostics import TileError

TILEC = os.path.join(os.path.dirname(sys.executable), "tilec")

SCALE = """
@kernel(dtypes={"T": [bf16, f16, f32]})
def scale(x: T[M], y: T[M], alpha: f32):
    for tm in tiles(M):
        acc = zeros([tm], f32) + x[tm].to(f32)
        y[tm] = (acc * alpha).to(T)
"""

# Two parameters; the scalar is typed by one of them.
MIXED = """
@kernel(dtypes={"A": [f16, f32], "B": [i32, i64]})
def shift(x: A[M], ids: B[M], y: A[M], k: A):
    for tm in tiles(M):
        y[tm] = x[tm] + ids[tm].to(A) * k
"""


def _write(tmp_path, text: str, name: str = "k.tile") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _tensor_types(program: tilec.CompiledProgram) -> list[str]:
    func = program.module.functions[0]
    return [str(a.type) for a in func.body.block.args]


def test_the_default_is_the_first_dtype_listed():
    program = compile_source(SCALE)
    assert _tensor_types(program)[:2] == ["!tile.tensor<Mxbf16>"] * 2


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_an_option_binds_a_parameter(dtype):
    program = compile_source(SCALE, options={"dtypes": {"T": dtype}})
    assert _tensor_types(program)[:2] == [f"!tile.tensor<Mx{dtype}>"] * 2
    assert f"-> tile<BMx{dtype}>" in program.tir  # `.to(T)` too


def test_a_binding_outside_the_declaration_is_an_error():
    with pytest.raises(TileError) as caught:
        compile_source(SCALE, options={"dtypes": {"T": "i32"}})
    assert caught.value.message == (
        "dtype parameter T cannot be i32: kernel 'scale' declares it one of bf16, f16, f32"
    )
    assert caught.value.notes[0][1].line == 2  # the declaration


def test_an_option_may_narrow_the_declaration_and_name_only_dtypes():
    narrowed = compile_source(SCALE, options={"dtypes": {"T": ["f32", "f16"]}})
    assert "Mxf16" in _tensor_types(narrowed)[0]  # the declaration's order: f16 before f32
    with pytest.raises(TileError, match="option dtypes gives T 'half', which is not a dtype"):
        compile_source(SCALE, options={"dtypes": {"T": "half"}})


def test_several_parameters_and_a_scalar_typed_by_one():
    program = compile_source(MIXED, options={"dtypes": {"A": "f32", "B": "i64"}})
    assert _tensor_types(program) == [
        "!tile.tensor<Mxf32>",
        "!tile.tensor<Mxi64>",
        "!tile.tensor<Mxf32>",
        "f32",
    ]


def test_a_jit_function_declares_its_parameters_in_its_options(tmp_path, monkeypatch):
    (tmp_path / "jit_add.py").write_text(
        "from __future__ import annotations\n"
        "import tilec\n"
        "@tilec.jit(dtypes={'T': ('f16', 'f32')}, interpret=True)\n"
        "def add(a: T[N], b: T[N], c: T[N]):\n"
        "    for tn in tiles(N):\n"
        "        c[tn] = a[tn] + b[tn]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import jit_add

    for dtype in (np.float16, np.float32):
        a = np.arange(5, dtype=dtype)
        c = np.zeros_like(a)
        jit_add.add(a, a, c)
        np.testing.assert_array_equal(c, 2 * a)
    with pytest.raises(TileError, match="which may be f16, f32; got a tensor of f64"):
        jit_add.add(np.ones(2), np.ones(2), np.ones(2))
    unused = tilec.jit(jit_add.add.fn, dtypes={"U": ("f16",)}, interpret=True)
    with pytest.raises(TileError, match="dtype parameter 'U' is the dtype of no argument"):
        unused(np.ones(2), np.ones(2), np.ones(2))


@pytest.fixture
def scale_kernel(tmp_path):
    return tilec.load_kernel(_write(tmp_path, SCALE), "scale", interpret=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_a_call_binds_the_parameter_to_its_tensors_dtype(scale_kernel, dtype):
    x = (np.arange(9) - 4).astype(dtype)
    y = np.zeros_like(x)
    scale_kernel(x, y, 1.5)
    np.testing.assert_array_equal(y, (x.astype(np.float32) * 1.5).astype(dtype))


def test_each_binding_is_one_function_made_once(scale_kernel):
    x = np.ones(4, np.float16)
    scale_kernel(x, np.zeros_like(x), 1.0)
    scale_kernel(x, np.zeros_like(x), alpha=2.0)
    scale_kernel(x=np.ones(4, np.float32), y=np.zeros(4, np.float32), alpha=2.0)
    assert sorted(scale_kernel._instances) == [(("T", "f16"),), (("T", "f32"),)]
    assert scale_kernel.instance(T="f16") is scale_kernel.instance_for([x])


def test_a_tensor_of_a_dtype_the_parameter_cannot_take_is_a_located_error(scale_kernel):
    x = np.ones(4, np.int32)
    with pytest.raises(TileError) as caught:
        scale_kernel(x, x.copy(), 1.0)
    assert caught.value.message == (
        "argument 'x' is typed T[...], which may be bf16, f16, f32; got a tensor of i32"
    )
    assert "error:" in caught.value.render() and "^" in caught.value.render()


def test_a_binding_whose_tensors_disagree_is_reported_by_the_launch_checks(scale_kernel):
    with pytest.raises(TileError, match="y"):
        scale_kernel(np.ones(4, np.float16), np.zeros(4, np.float32), 1.0)


def test_compile_for_compiles_the_binding_of_its_arguments(scale_kernel):
    half = scale_kernel.compile_for(np.zeros(256, np.float16), np.zeros(256, np.float16), 1.0)
    single = scale_kernel.compile_for(np.zeros(256, np.float32), np.zeros(256, np.float32), 1.0)
    assert "cvt.rn.f16x2.f32" in half.ptx and "cvt.rn.f16x2.f32" not in single.ptx


def test_tilec_compile_takes_dtype(tmp_path):
    path = _write(tmp_path, SCALE)
    out = tmp_path / "out.tir"
    for dtype in ("f16", "f32"):
        done = subprocess.run(
            [TILEC, "compile", path, "--dtype", f"T={dtype}", "--emit", "tir", "-o", str(out)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        assert f"!tile.tensor<Mx{dtype}>" in out.read_text()
    bad = subprocess.run(
        [TILEC, "compile", path, "--dtype", "T"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "--dtype: expected PARAM=DTYPE, got 'T'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_torch_operator_serves_every_dtype_of_its_parameter(tmp_path):
    torch = pytest.importorskip("torch")
    import tilec.torch as tt

    kernel = tilec.load_kernel(_write(tmp_path, SCALE), "scale")
    op = tt.op(f"dtype_params_{tmp_path.name[-8:]}::scale", kernel)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x = torch.arange(-3, 5, dtype=dtype)
        y = op(x, 2.0)
        assert y.dtype == dtype
        torch.testing.assert_close(y, (x.float() * 2.0).to(dtype))
        torch.library.opcheck(op.custom_op, (x, 2.0))
    with pytest.raises(tt.OpError, match="must be a tensor of bf16 or f16 or f32"):
        op(torch.arange(4, dtype=torch.int32), 1.0)
    compiled = torch.compile(lambda x: op(x, 3.0), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(
        compiled(torch.ones(4, dtype=torch.float16)), torch.full((4,), 3.0, dtype=torch.float16)
    )


def test_a_direct_call_under_torch_compile_binds_per_call(tmp_path):
    torch = pytest.importorskip("torch")
    kernel = tilec.load_kernel(_write(tmp_path, SCALE), "scale")

    def scaled(x):
        y = torch.empty_like(x)
        kernel(x, y, 2.0)
        return y + 1

    compiled = torch.compile(scaled, fullgraph=True, backend="aot_eager")
    for dtype in (torch.float16, torch.float32):
        got = compiled(torch.ones(4, dtype=dtype))
        assert got.dtype == dtype
        torch.testing.assert_close(got, torch.full((4,), 3.0, dtype=dtype))


def test_tilec_run_checks_a_binding_against_the_reference():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "examples", "rmsnorm.tile")
    done = subprocess.run(
        [TILEC, "run", path, "--sizes", "M=5,N=33", "--dtype", "T=f32"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "y: f32[M, N]" in done.stdout and "PASS" in done.stdout
