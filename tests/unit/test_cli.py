"""`tilec` as a user runs it (a subprocess): output, errors with carets and exit codes, no
traceback, no output file unless everything succeeded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tilec

TILEC = os.path.join(os.path.dirname(sys.executable), "tilec")

KERNEL = """\
func @k(%out: !tile.tensor<Nxf32>, %o: index, %t: tile<4xf32>) {
  %a = tile.full 1.0 : tile<4xf32>
  %b = tile.full 2.0 : tile<4xf32>
  %c = arith.addf %a, %b : tile<4xf32>
  %d = arith.mulf %t, %c : tile<4xf32>
  tile.store %out[%o], %d : !tile.tensor<Nxf32>, tile<4xf32>
  return
}
"""

MALFORMED = """\
func @k(%x: f32) {
  %a = arith.addf %x, %y : f32
  return
}
"""


def run(*args: str, stdin: str | None = None, cwd: Path | None = None):
    return subprocess.run(
        [TILEC, *args], input=stdin, capture_output=True, text=True, check=False, cwd=cwd
    )


def test_opt_runs_a_pipeline_and_prints_the_result(tmp_path):
    (tmp_path / "k.tir").write_text(KERNEL)
    result = run("opt", "k.tir", "-p", "canonicalize,cse,dce", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "tile.full 3.0 : tile<4xf32>" in result.stdout
    assert "arith.addf" not in result.stdout
    assert result.stderr == ""


def test_output_file_is_written_on_success(tmp_path):
    (tmp_path / "k.tir").write_text(KERNEL)
    result = run("opt", "k.tir", "-p", "canonicalize", "-o", "out.tir", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "tile.full 3.0" in (tmp_path / "out.tir").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.tir", "out.tir"]


def test_malformed_ir_is_located_with_a_caret_and_writes_nothing(tmp_path):
    (tmp_path / "bad.tir").write_text(MALFORMED)
    result = run("opt", "bad.tir", "-p", "canonicalize", "-o", "out.tir", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines()[:3] == [
        "bad.tir:2:23: error: use of undefined value '%y'",
        "  %a = arith.addf %x, %y : f32",
        "                      ^",
    ]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    # Neither the output nor a temporary file next to it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tir"]


def test_invalid_ir_is_a_located_verifier_error(tmp_path):
    (tmp_path / "bad.tir").write_text(
        "func @k(%x: f32) {\n  %a = arith.addi %x, %x : f32\n  return\n}\n"
    )
    result = run("opt", "bad.tir", cwd=tmp_path)
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith("bad.tir:2:3: error: 'arith.addi' op ")
    assert "Traceback" not in result.stderr


def test_stdin_is_read_for_dash():
    result = run("opt", "-", "-p", "canonicalize", stdin=KERNEL)
    assert result.returncode == 0, result.stderr
    assert "tile.full 3.0" in result.stdout
    result = run("opt", "-", stdin=MALFORMED)
    assert result.returncode == 1
    assert result.stderr.startswith("<stdin>:2:23: error: use of undefined value '%y'")


def test_bad_pipeline_is_a_user_error():
    result = run("opt", "-", "-p", "canonicalize{fold=perhaps}", stdin=KERNEL)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "<pipeline>:1:19: error: option 'fold' must be true or false, got 'perhaps'",
        "canonicalize{fold=perhaps}",
        "                  ^",
    ]


def test_version():
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"tilec {tilec.__version__}"


def test_passes_lists_each_pass_with_its_options():
    result = run("passes")
    assert result.returncode == 0
    out = result.stdout
    for line in (
        "canonicalize: ",
        "cse: ",
        "dce: ",
        "    option max_iterations: int = 10  -- ",
        "    option fold: bool = true  -- ",
    ):
        assert line in out


def test_passes_shows_an_empty_default_as_quotes():
    result = run("passes")
    assert result.returncode == 0
    assert '    option extents: str = ""  -- ' in result.stdout
    assert not [ln for ln in result.stdout.splitlines() if " =   -- " in ln]


def test_compile_and_explore_take_the_architectures_the_lowering_supports(monkeypatch):
    import tilec.lowering.llvm
    from tilec.cli import build_parser

    # A new architecture added to the lowering is one `--arch` accepts everywhere.
    monkeypatch.setattr(tilec.lowering.llvm, "ARCHES", (*tilec.lowering.llvm.ARCHES, "sm_100"))
    parser = build_parser()
    for command in ("compile", "explore"):
        assert parser.parse_args([command, "k.tile", "--arch", "sm_100"]).arch == "sm_100"


def test_dump_dir_from_the_command_line(tmp_path):
    (tmp_path / "k.tir").write_text(KERNEL)
    result = run("opt", "k.tir", "-p", "canonicalize,cse", "--dump-dir", "dumps", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in (tmp_path / "dumps").iterdir())
    assert names == ["00-input.tir", "01-canonicalize.tir", "02-cse.tir"]


CRASHING_PASS = (Path(__file__).parent / "crashing_pass.py").read_text()


def test_a_pass_that_crashes_is_an_internal_compiler_error(tmp_path):
    (tmp_path / "k.tir").write_text(KERNEL)
    (tmp_path / "crash.py").write_text(CRASHING_PASS)
    command = ["crash.py", "opt", "k.tir", "-p", "canonicalize,crash", "-o", "out.tir"]
    result = subprocess.run(
        [sys.executable, *command, "--dump-dir", "dumps"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("internal compiler error in pass 'crash': KeyError: ")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.tir").exists()
    # The IR the failing pass ran on is saved, and named in the message.
    (saved,) = (tmp_path / "dumps").glob("tilec-crash-crash-*.tir")
    assert str(saved.name) in result.stderr
    assert "tile.full 3.0" in saved.read_text()
