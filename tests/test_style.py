"""`ruff check` and `ruff format --check` are part of the test command."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUFF = os.path.join(os.path.dirname(sys.executable), "ruff")


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([RUFF, *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_check():
    result = _ruff("check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format():
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr
