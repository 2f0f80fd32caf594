"""`tilec run`, as a user runs it: the report, pass and fail, and bad input (exit 1, a located
message, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TILEC = os.path.join(os.path.dirname(sys.executable), "tilec")


def tilec_run(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TILEC, "run", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


def test_run_checks_against_the_reference_and_reports():
    result = tilec_run(
        "examples/matmul.tile", "-k", "matmul", "--sizes", "M=100,N=77,K=33", "--tile", "M=64"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "matmul: M=100, K=33, N=77; tiles BM=64 (given), BN=16 (default), BK=16 (default); "
        "grid 2x5 = 10 blocks"
    )
    assert lines[1] == "random inputs (seed 0)"
    assert lines[3].startswith("  c: f16[M, N]: max abs error ")
    assert lines[3].endswith("(rtol 0.002: 2 ulp of f16) ... ok")
    assert lines[4] == "PASS: 1 output(s) match examples/matmul_reference.py"


def test_a_wrong_reference_fails_with_a_report(tmp_path):
    wrong = tmp_path / "wrong_reference.py"
    wrong.write_text(
        "def vector_add(x, y, out):\n    return x - y\n\n\n"
        "def saxpy(alpha, x, y, out):\n    return alpha * x + y\n"
    )
    result = tilec_run(
        "examples/vector_add.tile", "-k", "vector_add", "--sizes", "n=50",
        "--reference", str(wrong), "--seed", "3",
    )  # fmt: skip
    assert result.returncode == 1
    assert "random inputs (seed 3)" in result.stdout
    assert "out: f32[N]: max abs error" in result.stdout and "... FAILED" in result.stdout
    assert "    worst: at [" in result.stdout and "out of tolerance" in result.stdout
    # The report names the reference as given, or relative to the working directory when
    # that is shorter (it depends on where the checkout and the temporary directory are).
    shown = min((str(wrong), os.path.relpath(wrong, ROOT)), key=len)
    assert result.stdout.rstrip().endswith(f"FAIL: out differ(s) from {shown}")
    passing = tilec_run(
        "examples/vector_add.tile", "-k", "saxpy", "--sizes", "N=50", "--reference", str(wrong),
        "--scalar", "alpha=0.5",
    )  # fmt: skip
    assert passing.returncode == 0 and "alpha=0.5" in passing.stdout


def test_a_kernel_without_a_reference_runs_unchecked(tmp_path):
    kernel = tmp_path / "double.tile"
    kernel.write_text(
        "def double(x: f32[N]):\n    for tn in tiles(N):\n        x[tn] = x[tn] * 2\n"
    )
    result = tilec_run(str(kernel), "--sizes", "N=10")
    assert result.returncode == 0, result.stderr
    assert f"NOT CHECKED: no reference ({tmp_path / 'double_reference.py'} does not exist)" in (
        result.stdout
    )


BAD_INPUT = {
    ("examples/matmul.tile", "-k", "matmul", "--sizes", "M=10,N=7"): (
        "examples/matmul.tile:3:1: error: no size for dimension K of kernel 'matmul' "
        "(used by a: f16[M, K], b: f16[K, N])"
    ),
    ("examples/matmul.tile", "-k", "matmul", "--sizes", "M=10,N=7,K=x"): (
        "error: --sizes: K=x is not an integer"
    ),
    ("examples/matmul.tile", "-k", "matmul", "--sizes", "M=10,N=7,K=3,Q=3"): (
        "error: kernel 'matmul' has no dimension 'Q'"
    ),
    ("examples/matmul.tile", "-k", "matmul", "--sizes", "M=10,N=7,K=-3"): (
        "error: size K=-3 must be a non-negative integer"
    ),
    ("examples/matmul.tile", "-k", "nope", "--sizes", "M=1"): "error: no kernel named 'nope'",
    ("examples/matmul.tile", "--sizes", "M=1"): "has 2 kernels; choose one with -k",
    ("examples/softmax.tile", "-k", "softmax", "--sizes", "M=2,N=9", "--tile", "N=8"): (
        "tile size BN=8 does not cover dimension N=9"
    ),
    ("examples/softmax.tile", "-k", "softmax", "--sizes", "M=2,N=3000000000"): (
        "dimension N of 'x' is 3000000000: too large for kernel 'softmax', which computes "
        "element offsets in i32"
    ),
    ("examples/vector_add.tile", "-k", "vector_add", "--sizes", "N=3000000000"): (
        "the arguments of kernel 'vector_add' would take 33.5 GiB"
    ),
    ("examples/layernorm.tile", "--sizes", "M=2,N=3", "--scalar", "epsilon=1"): (
        "kernel 'layernorm' has no scalar parameter 'epsilon'"
    ),
    ("examples/missing.tile", "--sizes", "M=1"): "cannot read 'examples/missing.tile'",
}


def test_bad_input_is_a_located_error(capsys, monkeypatch):
    from tilec.cli import main

    monkeypatch.chdir(ROOT)
    for args, message in BAD_INPUT.items():
        assert main(["run", *args]) == 1, args
        captured = capsys.readouterr()
        assert message in captured.err, (args, captured.err)


def test_bad_input_exits_1_without_a_traceback():
    result = tilec_run("examples/matmul.tile", "-k", "matmul", "--sizes", "M=10,N=7")
    assert result.returncode == 1
    assert result.stderr.startswith("examples/matmul.tile:3:1: error: no size for dimension K")
    assert "Traceback" not in result.stderr and result.stdout == ""
