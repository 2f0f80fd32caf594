"""Test-session settings shared by every test directory.

Many tests start Python anew (`tilec` on the command line, lit's RUN lines, the tuner's and the
fuzzers' worker processes), and each imports tilec's ~200 modules. Where the environment
forbids bytecode (PYTHONDONTWRITEBYTECODE, which keeps source trees clean), every such process
compiles them all again: 0.67 s an import against 0.35 s from bytecode. The test session's
children write theirs to one cache outside the tree instead (PYTHONPYCACHEPREFIX), so each
module is compiled once a session.
"""

from __future__ import annotations

import os
import tempfile

if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    os.environ.setdefault(
        "PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), "tilec-test-pycache")
    )
