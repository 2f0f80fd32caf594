"""Line info: the PTX carries `.file`/`.loc` directives pointing at the kernel's own source
lines (the `.tile` file as the user named it, or the `.py` file of a `@tilec.jit` function),
and none when it is turned off (`--no-line-info`, `line_info=False`). The code itself is the
same either way. (That ptxas accepts such PTX for every example: tests/ptx.)"""

# ruff: noqa: F821 - the kernel body uses the tile language's names (f32, tiles, N)

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

import tilec
from tilec.diagnostics import relative_name

ROOT = Path(__file__).resolve().parents[2]
TILEC = os.path.join(os.path.dirname(sys.executable), "tilec")
THIS_FILE = Path(__file__)
SOURCE_LINES = THIS_FILE.read_text(encoding="utf-8").split("\n")

SCALE = """\
# scale: y = x * alpha

def scale(x: f32[N], y: f32[N], alpha: f32):
    for tn in tiles(N):
        y[tn] = x[tn] * alpha
"""

LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)", re.MULTILINE)
FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.MULTILINE)


def loc_lines(ptx: str) -> set[tuple[str, int]]:
    """(file, line) of every `.loc` of `ptx`, leaving out line 0 (code LLVM merged from
    several lines)."""
    files = dict(FILE.findall(ptx))
    return {(files[f], int(line)) for f, line, _ in LOC.findall(ptx) if int(line)}


def without_line_info(ptx: str) -> list[str]:
    """The lines of `ptx` that are code: no `.loc`/`.file`, debug section or label that line
    info adds."""
    kept = []
    for line in ptx.splitlines():
        text = line.strip()
        if text.startswith((".loc", ".file", ".section", "$L__tmp", "$L__func")) or not text:
            continue
        kept.append(text)
    return kept


def line_of(text: str) -> int:
    """The 1-based number of the one line of this file that is exactly `text`."""
    (index,) = [i for i, line in enumerate(SOURCE_LINES) if line == text]
    return index + 1


@tilec.jit(tile={"N": 128})
def jit_scale(x: f32[N], y: f32[N], alpha: f32):
    for tn in tiles(N):
        y[tn] = x[tn] * alpha  # the jit kernel's statement


def test_the_ptx_points_at_the_kernels_lines(tmp_path):
    path = tmp_path / "scale.tile"
    path.write_text(SCALE)
    ptx = tilec.compile(path, target="ptx").ptx
    name = relative_name(str(path))
    assert FILE.findall(ptx) == [("1", name)]
    lines = loc_lines(ptx)
    # The kernel's lines (its def, the loop that makes the grid, the statement) and no other.
    assert lines <= {(name, 3), (name, 4), (name, 5)}
    assert (name, 5) in lines  # y[tn] = x[tn] * alpha: the load, multiply and store


def test_the_multiply_is_at_its_operator():
    program = tilec.compile(SCALE, target="ptx")
    ptx = program.ptx.splitlines()
    at = next(i for i, line in enumerate(ptx) if "mul.rn.f32" in line or "mul.f32" in line)
    location = program.stages[-1].locations[at]
    assert (location.file, location.line, location.col) == ("<string>", 5, 23)


def test_without_line_info_there_are_no_directives_and_the_same_code():
    for path in (ROOT / "examples/matmul.tile", ROOT / "examples/softmax.tile"):
        with_info = tilec.compile(path, target="ptx").ptx
        plain = tilec.compile(path, target="ptx", line_info=False).ptx
        assert LOC.search(with_info) and FILE.search(with_info)
        assert not LOC.search(plain) and not FILE.search(plain) and ".section" not in plain
        assert without_line_info(with_info) == without_line_info(plain)
        assert "!dbg" not in tilec.compile(path, target="llvm", line_info=False).llvm


def test_the_file_is_named_as_the_user_gave_it(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "scale.tile").write_text(SCALE)
    result = subprocess.run(
        [TILEC, "compile", "kernels/scale.tile"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert FILE.findall(result.stdout) == [("1", "kernels/scale.tile")]
    assert ("kernels/scale.tile", 5) in loc_lines(result.stdout)
    off = subprocess.run(
        [TILEC, "compile", "kernels/scale.tile", "--no-line-info"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert off.returncode == 0, off.stderr
    assert ".loc" not in off.stdout and ".file" not in off.stdout
    assert without_line_info(off.stdout) == without_line_info(result.stdout)


def test_a_jit_kernel_points_at_its_py_lines(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    arrays = (np.zeros(1000, np.float32), np.zeros(1000, np.float32), 2.0)
    compiled = jit_scale.compile_for(*arrays, arch="sm_90a")
    name = relative_name(str(THIS_FILE))
    assert FILE.findall(compiled.ptx) == [("1", name)]
    statement = line_of("        y[tn] = x[tn] * alpha  # the jit kernel's statement")
    assert (name, statement) in loc_lines(compiled.ptx)
    assert loc_lines(compiled.ptx) <= {(name, statement - n) for n in range(3)}
    # Turned off, the PTX has none, and it is a different entry of the kernel cache.
    plain = tilec.jit(jit_scale.fn, tile={"N": 128}, line_info=False)
    off = plain.compile_for(*arrays, arch="sm_90a")
    assert ".loc" not in off.ptx and ".file" not in off.ptx
    assert off.key.digest() != compiled.key.digest()
    assert without_line_info(off.ptx) == without_line_info(compiled.ptx)


def test_a_location_in_another_file_gets_its_own_file_entry():
    """Ops whose locations name another file than their kernel's (IR assembled from pieces)
    are scoped by that file: the PTX lists both files."""
    program = tilec.compile(SCALE, target="tir", pipeline=tilec.compiler.DEFAULT_PIPELINE)
    mulf = next(op for op in program.module.walk() if op.name == "arith.mulf")
    mulf.loc = tilec.diagnostics.Location("helpers.tile", 7, 3)
    from tilec.lowering import compile_to_ptx

    ptx = compile_to_ptx(program.module, "sm_90a")
    assert sorted(name for _, name in FILE.findall(ptx)) == ["<string>", "helpers.tile"]
    assert ("helpers.tile", 7) in loc_lines(ptx)
