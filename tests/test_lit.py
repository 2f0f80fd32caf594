"""Runs the lit + FileCheck suite under tests/lit (RUN lines over `tilec opt`/`tilec compile`)."""

import os
import subprocess
import sys

LIT_DIR = os.path.join(os.path.dirname(__file__), "lit")


def test_lit_suite():
    lit = os.path.join(os.path.dirname(sys.executable), "lit")
    result = subprocess.run(
        [lit, "-q", "--no-progress-bar", LIT_DIR], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
