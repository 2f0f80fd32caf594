"""What a compilation leaves to look at: `tilec compile --dump-dir` (every step as a numbered
file and `remarks.json`), `CompiledProgram.stages` with their per-line source locations and
remark lines, the source on the result, and `keep_going` (a failed compilation returned with
the stages that succeeded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tilec
from tilec.compiler import DEFAULT_PIPELINE, compile_source
from tilec.diagnostics import InternalCompilerError, Location, TileError, relative_name
from tilec.lowering.ptxas import find_ptxas
from tilec.passmanager import Instrumentation

ROOT = Path(__file__).resolve().parents[2]
TILEC = os.path.join(os.path.dirname(sys.executable), "tilec")
MATMUL = ROOT / "examples" / "matmul.tile"

SCALE = """\
def scale(x: f32[N], y: f32[N], alpha: f32):
    for tn in tiles(N):
        y[tn] = x[tn] * alpha
"""

# Pinned tiles whose pipelined operand buffers cannot fit in shared memory: `tiling` says so.
TOO_BIG = {"tile": {"M": 256, "N": 256, "K": 128}, "stages": 6}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TILEC, *args], capture_output=True, text=True, check=False, cwd=cwd)


def test_dump_dir_holds_the_whole_set_in_order(tmp_path):
    (tmp_path / "k.tile").write_text(SCALE)
    result = run("compile", "k.tile", "--dump-dir", "dump", "-o", "k.ptx", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    dump = tmp_path / "dump"
    passes = DEFAULT_PIPELINE.split(",")
    expected = ["source.tile", "frontend.tir", *(f"{p}.tir" for p in passes)]
    expected += ["lower-to-llvm.ll", "ptx.ptx"]
    if find_ptxas() is not None:
        expected.append("cubin.ptxas.txt")
    names = sorted(p.name for p in dump.iterdir())
    assert names == [f"{i:02d}-{name}" for i, name in enumerate(expected)] + ["remarks.json"]
    assert (dump / "00-source.tile").read_text() == SCALE
    assert (dump / f"{len(passes) + 3:02d}-ptx.ptx").read_text() == (tmp_path / "k.ptx").read_text()
    if find_ptxas() is not None:
        report = (dump / f"{len(passes) + 4:02d}-cubin.ptxas.txt").read_text()
        assert report.startswith("scale: ") and "registers" in report


@pytest.mark.parametrize("source", [SCALE, MATMUL.read_text()], ids=["scale", "matmul"])
def test_the_dump_files_are_the_stages(tmp_path, source):
    """The dumps print the module as each pass leaves it; the stages print their copies of
    it only when read, after the whole compilation: the same text."""
    program = tilec.compile(
        source, target="ptx", instrumentation=Instrumentation(dump_dir=str(tmp_path))
    )
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != "remarks.json")
    # File NN holds stage NN - 1 (file 00 is the source).
    assert [n.split("-", 1)[1].rsplit(".", 1)[0] for n in names[1:]] == [
        s.name.replace("cubin", "cubin.ptxas") for s in program.stages
    ]
    for name, stage in zip(names[1:], program.stages):
        assert (tmp_path / name).read_text() == stage.ir


def test_remarks_json_ties_each_remark_to_its_stage_and_ir_line(tmp_path):
    program = tilec.compile(
        MATMUL,
        kernels=["matmul"],
        target="llvm",
        instrumentation=Instrumentation(dump_dir=str(tmp_path)),
    )
    entries = json.loads((tmp_path / "remarks.json").read_text())
    assert entries == program.remarks_json()
    assert len(entries) == len(program.remarks) > 5
    assert {e["pass"] for e in entries} >= {"tiling", "smem-placement", "pipeline", "vectorize"}
    for entry, remark in zip(entries, program.remarks):
        assert set(entry) == {"pass", "op", "loc", "message", "stage", "stage_index", "ir_line"}
        assert entry["message"] == remark.message and entry["pass"] == remark.pass_name
        stage = program.stages[entry["stage_index"]]
        assert stage.name == entry["stage"] == remark.pass_name
        if entry["ir_line"] is not None:
            # The line names the op the remark concerns (its result or its name).
            line = stage.ir.splitlines()[entry["ir_line"] - 1]
            assert entry["op"].split(".", 1)[1] in line or entry["op"] == "builtin.func"
            assert stage.locations[entry["ir_line"] - 1] == remark.loc
    located = [e for e in entries if e["loc"] is not None]
    assert located and {e["loc"]["file"] for e in located} == {relative_name(str(MATMUL))}
    assert any(e["op"] == "tile.async_copy" and e["ir_line"] for e in entries)


def test_each_tile_ir_line_has_the_location_of_its_op(tmp_path):
    path = tmp_path / "scale.tile"
    path.write_text(SCALE)
    program = tilec.compile(path, pipeline="canonicalize,cse")
    assert (program.source, program.filename) == (SCALE, relative_name(str(path)))
    for stage in program.stages:
        lines = stage.ir.splitlines()
        assert len(stage.locations) == len(lines)
        by_text = dict(zip(lines, stage.locations))
        (mulf,) = [line for line in lines if "arith.mulf" in line]
        assert (by_text[mulf].line, by_text[mulf].col) == (3, 23)  # the "*" of x[tn] * alpha
        (store,) = [line for line in lines if "tile.store" in line]
        assert by_text[store].line == 3
        (func,) = [line for line in lines if line.lstrip().startswith("func @scale")]
        assert by_text[func].line == 1

    # A closing brace belongs to the op whose region it ends: matmul's loop over K.
    frontend = tilec.compile(MATMUL, kernels=["matmul"]).stages[0]
    lines = frontend.ir.splitlines()
    loop_at = next(i for i, line in enumerate(lines) if "scf.for" in line)
    indent = lines[loop_at][: len(lines[loop_at]) - len(lines[loop_at].lstrip())]
    close = lines.index(indent + "}", loop_at)
    assert frontend.locations[close] == frontend.locations[loop_at]
    assert frontend.locations[loop_at].line == 7  # for tk in tiles(K):
    assert frontend.locations[-1] == frontend.locations[0]  # the module's brace


def test_remark_lines_point_at_the_op_and_remarks_on_line_finds_them():
    program = tilec.compile(MATMUL, kernels=["matmul"], pipeline=DEFAULT_PIPELINE)
    tiling = next(s for s in program.stages if s.name == "tiling")
    assert len(tiling.remark_lines) == len(tiling.remarks) > 0
    lines = tiling.ir.splitlines()
    for remark, line in zip(tiling.remarks, tiling.remark_lines):
        assert line is not None
        assert remark in tiling.remarks_on_line(line)
        assert tiling.locations[line] == remark.loc
    func_line = next(i for i, t in enumerate(lines) if t.lstrip().startswith("func @matmul"))
    assert tiling.remarks_on_line(func_line)
    assert tiling.remarks_on_line(0) == []  # `#alias` or `module {`


def test_llvm_and_ptx_stages_carry_locations_unless_line_info_is_off():
    program = tilec.compile(SCALE, target="ptx")
    llvm, ptx = program.stages[-2:]
    assert (llvm.name, ptx.name) == ("lower-to-llvm", "ptx")
    for stage in (llvm, ptx):
        assert len(stage.locations) == len(stage.ir.splitlines())
        lines = {loc.line for loc in stage.locations if loc is not None}
        assert lines <= {1, 2, 3} and 3 in lines
        assert {loc.file for loc in stage.locations if loc is not None} == {"<string>"}
    fmul = next(i for i, t in enumerate(llvm.ir.splitlines()) if " fmul " in t)
    assert (llvm.locations[fmul].line, llvm.locations[fmul].col) == (3, 23)
    plain = tilec.compile(SCALE, target="ptx", line_info=False)
    assert plain.stages[-1].locations == () and plain.stages[-2].locations == ()


def test_keep_going_returns_the_stages_before_a_failing_pass(tmp_path):
    program = tilec.compile(
        MATMUL,
        kernels=["matmul"],
        options=TOO_BIG,
        target="ptx",
        keep_going=True,
        instrumentation=Instrumentation(dump_dir=str(tmp_path)),
    )
    assert isinstance(program.error, TileError)
    assert "shared memory" in program.error.message
    assert program.failed_stage == "tiling"
    assert [s.name for s in program.stages] == [
        "frontend", "canonicalize", "cse", "flatten", "privatize-atomics",
        "accumulate-atomics", "transpose-dot",
    ]  # fmt: skip
    assert program.module is not None and program.ptx is None
    assert "kernel matmul" in program.explain()  # what was decided before the failure
    assert program.source == MATMUL.read_text() and program.filename
    # The dumps up to the failure stay, with the remarks made so far.
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "00-source.tile",
        "01-frontend.tir",
        "02-canonicalize.tir",
        "03-cse.tir",
        "04-flatten.tir",
        "05-privatize-atomics.tir",
        "06-accumulate-atomics.tir",
        "07-transpose-dot.tir",
        "remarks.json",
    ]
    assert json.loads((tmp_path / "remarks.json").read_text()) == program.remarks_json()
    # Without keep_going the same error raises, and the dumps are the same.
    with pytest.raises(TileError, match="shared memory"):
        tilec.compile(MATMUL, kernels=["matmul"], options=TOO_BIG, target="ptx")


def test_keep_going_with_a_frontend_error_has_no_ir():
    source = SCALE.replace("alpha\n", "alpah\n")
    program = tilec.compile(source, keep_going=True)
    assert program.failed_stage == "frontend"
    assert isinstance(program.error, TileError) and program.error.loc == Location("<string>", 3, 25)
    assert program.module is None and program.program is None
    assert program.stages == [] and program.kernels == [] and program.tir == ""
    assert (program.source, program.filename) == (source, "<string>")
    with pytest.raises(TileError, match="alpah"):
        program.explain()
    syntax = tilec.compile("def k(x: f32[N]):\n    y = 1 +\n", keep_going=True)
    assert syntax.failed_stage == "frontend" and "expected an expression" in str(syntax.error)
    # Text read from somewhere else (stdin, an editor): located in the name it is given.
    named = compile_source("def k(x: f32[N]):\n    y = 1 +\n", "bad.tile", keep_going=True)
    assert (named.filename, named.error.loc.file, named.error.loc.line) == ("bad.tile",) * 2 + (2,)
    missing = tilec.compile(MATMUL, kernels=["nope"], keep_going=True)
    assert missing.failed_stage == "frontend"
    assert "matmul, matmul_pinned" in str(missing.error)


def test_keep_going_with_an_internal_error_in_lowering(monkeypatch):
    def broken(module, arch, specializations=None, *, line_info=True):
        raise InternalCompilerError("lower-to-llvm", KeyError("slot"), None)

    monkeypatch.setattr("tilec.compiler.lower_to_llvm", broken)
    program = tilec.compile(SCALE, target="ptx", keep_going=True)
    assert isinstance(program.error, InternalCompilerError)
    assert program.failed_stage == "lower-to-llvm"
    assert [s.name for s in program.stages] == ["frontend", *DEFAULT_PIPELINE.split(",")]
    with pytest.raises(InternalCompilerError):
        tilec.compile(SCALE, target="ptx")


def test_mistakes_in_the_arguments_raise_even_with_keep_going():
    with pytest.raises(TileError, match="unknown target"):
        tilec.compile(SCALE, target="sass", keep_going=True)
    with pytest.raises(TileError, match="unknown pass"):
        tilec.compile(SCALE, pipeline="canonicalise", keep_going=True)


def test_a_failed_compile_from_the_command_line_keeps_its_dumps(tmp_path):
    (tmp_path / "k.tile").write_text(MATMUL.read_text())
    result = run(
        "compile",
        "k.tile",
        "-k",
        "matmul",
        "--tile",
        "M=256,N=256,K=128",
        "--stages",
        "6",
        "--dump-dir",
        "dump",
        "-o",
        "k.ptx",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "shared memory" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "k.ptx").exists()
    names = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert names[:2] == ["00-source.tile", "01-frontend.tir"] and names[-1] == "remarks.json"
    remarks = json.loads((tmp_path / "dump" / "remarks.json").read_text())
    assert {r["pass"] for r in remarks} <= {"canonicalize", "cse"}


def test_a_kernel_that_does_not_exist_lists_the_kernels_and_writes_nothing(tmp_path):
    (tmp_path / "m.tile").write_text(MATMUL.read_text())
    result = run(
        "compile", "m.tile", "-k", "matmull", "--dump-dir", "dump", "-o", "m.ptx", cwd=tmp_path
    )
    assert result.returncode == 1
    assert result.stderr == (
        "m.tile: error: no kernel named 'matmull'\n"
        "hint: the kernels in this file are: matmul, matmul_pinned\n"
    )
    # The frontend stops it before anything is written, dumps included.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tile"]
