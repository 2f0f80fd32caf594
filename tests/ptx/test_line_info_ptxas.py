"""ptxas accepts PTX with line info (`.file`/`.loc`; every example with it: test_ptxas.py)
and keeps it: the cubin has a line table (what Nsight Compute's source view reads), which is
absent when line info is turned off. Fails (never skips) without ptxas, as test_ptxas.py."""

from __future__ import annotations

from pathlib import Path

import pytest

import tilec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LINE_TABLE = b".nv_debug_line_sass"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("example", ["matmul.tile", "softmax.tile"])
def test_the_cubin_keeps_the_line_table(example: str, arch: str):
    path = EXAMPLES / example
    with_info = tilec.compile(path, target="cubin", arch=arch)
    assert ".loc" in with_info.ptx
    assert LINE_TABLE in with_info.cubin and path.name.encode() in with_info.cubin
    plain = tilec.compile(path, target="cubin", arch=arch, line_info=False)
    assert LINE_TABLE not in plain.cubin
    # Line info costs nothing at run time: the same registers, spills and stack.
    assert with_info.resources == plain.resources
