# lit configuration for tilec: RUN lines call `tilec` and `FileCheck` from the environment
# that runs lit (the project's virtual environment), never from the system.
import os
import sys

import lit.formats

config.name = "tilec"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".tir", ".tile", ".py"]
config.excludes = ["lit.cfg.py", "Output"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, "Output")

bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bin_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])
# Every RUN line starts Python anew: its bytecode goes to one cache beside the results, out of
# the source tree, so that the hundreds of `tilec` runs compile tilec's modules once, not each
# (0.33 s a run; with PYTHONDONTWRITEBYTECODE, which keeps the tree clean, 0.67).
config.environment.pop("PYTHONDONTWRITEBYTECODE", None)
config.environment["PYTHONPYCACHEPREFIX"] = os.path.join(config.test_exec_root, "pycache")
# The Python `filecheck` package implements LLVM's FileCheck.
config.substitutions.append(("FileCheck", os.path.join(bin_dir, "filecheck")))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%examples", os.path.join(config.test_source_root, "..", "..", "examples")))
# `tilec` is the venv's console script; this checkout's package comes first on its path, so a
# worktree's lit run tests that worktree, not the copy the venv was installed from.
repo_root = os.path.abspath(os.path.join(config.test_source_root, "..", ".."))
config.environment["PYTHONPATH"] = os.pathsep.join(
    p for p in (repo_root, os.environ.get("PYTHONPATH", "")) if p
)
