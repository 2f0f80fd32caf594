"""`tilec.compile` from Python: the same IR as `tilec compile`, its kernels and stages, kernel
selection, pinned options, and how mistakes and internal failures come out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tilec
from tilec.compiler import compile_module
from tilec.diagnostics import InternalCompilerError, TileError
from tilec.frontend import irgen as irgen_module
from tilec.frontend import parse_source
from tilec.passmanager import Instrumentation

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.tile"))
TILEC = os.path.join(os.path.dirname(sys.executable), "tilec")

SCALE = """\
def scale(x: f32[N], y: f32[N], alpha: f32):
    for tn in tiles(N):
        y[tn] = x[tn] * alpha
"""


def cli_tir(path: Path, *args: str) -> str:
    result = subprocess.run(
        [TILEC, "compile", str(path), "--emit", "tir", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_path_text_and_command_line_give_the_same_ir(path: Path):
    from_path = tilec.compile(str(path))
    from_pathlike = tilec.compile(path)
    from_text = tilec.compile(path.read_text(encoding="utf-8"))
    assert from_path.tir == from_pathlike.tir == from_text.tir == cli_tir(path)
    assert str(from_path) == from_path.tir
    assert from_path.kernels == from_text.kernels


def test_kernels_are_listed_in_file_order():
    assert tilec.compile(ROOT / "examples/matmul.tile").kernels == ["matmul", "matmul_pinned"]
    assert tilec.compile(ROOT / "examples/attention.tile").kernels == [
        "attention",
        "attention_causal",
        "attention_gqa",
    ]


def test_without_a_pipeline_there_is_one_stage_the_frontend():
    program = tilec.compile(ROOT / "examples/softmax.tile")
    assert [s.name for s in program.stages] == ["frontend"]
    assert program.stages[0].ir == program.tir
    assert program.stages[0].remarks == ()
    assert program.remarks == []


def test_each_pass_adds_a_stage_with_its_ir_and_remarks():
    softmax = ROOT / "examples/softmax.tile"
    program = tilec.compile(softmax, kernels=["softmax"], pipeline="canonicalize,cse,dce")
    names = [s.name for s in program.stages]
    assert names == ["frontend", "canonicalize", "cse", "dce"]
    frontend, _, cse, dce = program.stages
    # The frontend stage is the IR before any pass; the last stage is the result.
    assert frontend.ir == tilec.compile(softmax, kernels=["softmax"]).tir
    assert dce.ir == program.tir
    assert frontend.ir.count("tile.iota") == 2 and cse.ir.count("tile.iota") == 1
    # Remarks belong to the pass that made them, and all of them are on the program.
    assert cse.remarks and all(r.pass_name == "cse" for r in cse.remarks)
    assert "merged 1 identical op" in str(cse.remarks[0])
    assert list(program.remarks) == [r for s in program.stages for r in s.remarks]


def test_kernel_selection_keeps_the_order_asked_for():
    path = ROOT / "examples/vector_add.tile"
    assert tilec.compile(path, kernels=["saxpy"]).kernels == ["saxpy"]
    assert tilec.compile(path, kernels=["saxpy", "vector_add"]).kernels == [
        "saxpy",
        "vector_add",
    ]
    assert tilec.compile(path, kernels=["saxpy", "saxpy"]).kernels == ["saxpy"]


def test_an_unknown_kernel_is_an_error_that_lists_the_kernels():
    with pytest.raises(TileError) as caught:
        tilec.compile(ROOT / "examples/matmul.tile", kernels=["matmull"])
    error = caught.value
    assert error.message == "no kernel named 'matmull'"
    assert error.hint == "the kernels in this file are: matmul, matmul_pinned"
    assert error.loc.file.endswith("matmul.tile")
    assert error.render().startswith(f"{error.loc.file}: error: no kernel named 'matmull'\n")


def test_options_pin_decisions():
    program = tilec.compile(SCALE, options={"tile": {"N": 64}, "warps": 4, "stages": 2})
    assert (
        'tilec.pinned_tiles = [["BN", 64]], tilec.num_warps = 4, tilec.num_stages = 2'
        in program.tir
    )
    free = tilec.compile(SCALE).tir
    assert "tilec.pinned_tiles" not in free and "tilec.num_warps" not in free


def test_options_replace_the_decorator_key_by_key():
    program = tilec.compile(
        ROOT / "examples/matmul.tile",
        kernels=["matmul_pinned"],
        options={"tile": {"M": 64}, "stages": 4},
    )
    # M from the options, K and N from @kernel(...); warps from the source, stages replaced.
    assert (
        'tilec.pinned_tiles = [["BM", 64], ["BK", 32], ["BN", 128]], '
        "tilec.num_warps = 8, tilec.num_stages = 4" in program.tir
    )


def test_options_pin_only_the_selected_kernels():
    # attention_causal has no dimension M: pinning M applies to the kernel that is compiled.
    path = ROOT / "examples/attention.tile"
    program = tilec.compile(path, kernels=["attention"], options={"tile": {"M": 64}})
    assert '["BM", 64]' in program.tir
    with pytest.raises(TileError, match="'M' is not a dimension of kernel 'attention_causal'"):
        tilec.compile(path, options={"tile": {"M": 64}})


def test_bad_options_are_tile_errors():
    with pytest.raises(TileError, match="a tile size must be a power of two, not 48"):
        tilec.compile(SCALE, options={"tile": {"N": 48}})
    with pytest.raises(TileError, match="unknown kernel option 'wraps'"):
        tilec.compile(SCALE, options={"wraps": 4})


def test_mistakes_in_source_text_are_located_in_the_string():
    with pytest.raises(TileError) as caught:
        tilec.compile(SCALE.replace("alpha\n", "alpah\n"))
    error = caught.value
    assert error.message == "unknown name 'alpah'"
    assert (error.loc.file, error.loc.line, error.loc.col) == ("<string>", 3, 25)
    assert error.render().split("\n")[1:3] == ["        y[tn] = x[tn] * alpah", " " * 24 + "^"]


def test_a_missing_file_is_a_tile_error(tmp_path):
    with pytest.raises(TileError, match="cannot read"):
        tilec.compile(tmp_path / "absent.tile")
    with pytest.raises(TileError, match="cannot read"):
        tilec.compile(str(tmp_path / "absent.tile"))


def test_compile_module_is_what_the_command_line_runs():
    module = parse_source(SCALE, "scale.tile")
    assert compile_module(module).tir == tilec.compile(SCALE).tir
    with pytest.raises(TileError) as caught:
        compile_module(module, kernels=["other"])
    assert caught.value.loc.file == "scale.tile"


def test_a_failure_inside_ir_generation_is_an_internal_compiler_error(monkeypatch):
    def broken(program, kernels=None):
        raise KeyError("no value for %acc")

    monkeypatch.setattr("tilec.compiler.generate_ir", broken)
    with pytest.raises(InternalCompilerError) as caught:
        tilec.compile(SCALE)
    assert caught.value.pass_name == "irgen"
    assert "internal compiler error in pass 'irgen': KeyError" in str(caught.value)


def test_invalid_generated_ir_is_saved_where_dumps_go(monkeypatch, tmp_path):
    """IR generation that produces IR the verifier rejects is a compiler bug: the IR is saved
    (in --dump-dir when one is given) and named in the message."""
    real = irgen_module.generate_ir

    def corrupting(program, kernels=None):
        module = real(program, kernels)
        func = module.functions[0]
        store = next(op for op in func.walk() if op.name == "tile.store")
        store.operands = [store.operands[0], store.operands[2], store.operands[2]]
        return module

    monkeypatch.setattr("tilec.compiler.generate_ir", corrupting)
    with pytest.raises(InternalCompilerError) as caught:
        tilec.compile(SCALE, instrumentation=Instrumentation(dump_dir=str(tmp_path)))
    (saved,) = tmp_path.glob("tilec-crash-irgen-*.tir")
    assert str(saved) in str(caught.value)
    assert "IR generation produced invalid IR" in str(caught.value)


def test_every_op_is_located_in_the_source(tmp_path):
    path = tmp_path / "scale.tile"
    path.write_text(SCALE)
    program = tilec.compile(path)
    for op in program.module.walk():
        assert op.loc.known, f"{op.name} has no location"
        assert op.loc.file.endswith("scale.tile")
        assert 1 <= op.loc.line <= 3


def test_strings_are_source_text_unless_they_name_a_tile_file(tmp_path, monkeypatch):
    # Text with a newline is source; a one-line string is a path if it ends in .tile or
    # names a file.
    assert tilec.compile(SCALE).kernels == ["scale"]
    (tmp_path / "kernel.txt").write_text(SCALE)
    monkeypatch.chdir(tmp_path)
    assert tilec.compile("kernel.txt").kernels == ["scale"]
    with pytest.raises(TileError, match="cannot read"):
        tilec.compile("missing.tile")


@pytest.mark.parametrize("terms", range(100, 701, 50))
def test_a_very_long_expression_is_a_user_error_not_a_crash(terms: int):
    # Analysis and IR generation recurse to different depths: whichever runs out of stack
    # first must say so as a TileError (IR generation names the statement).
    text = SCALE.replace("x[tn] * alpha", "x[tn]" + " + x[tn]" * terms)
    try:
        tilec.compile(text)
    except TileError as error:
        assert error.message == "expression is too deeply nested"
        assert error.loc.line in (1, 3)
