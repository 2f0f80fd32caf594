"""`hoist-loads` in the code ptxas gets: paged decode's page of values is loaded with its page
of keys, before the loop's first block barrier (docs/passes.md, hoist-loads)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tilec.jit import load_kernel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _loop_body(ptx: str) -> list[str]:
    """The PTX lines of the kernel's loop over pages: from the block the back edge returns to
    up to that branch."""
    lines = ptx.splitlines()
    labels = {line.strip().rstrip(":"): i for i, line in enumerate(lines) if line.startswith("$")}
    for i, line in enumerate(lines):
        jump = re.search(r"bra(?:\.uni)?\s+(\$\S+);", line)
        if jump and labels.get(jump.group(1), i) < i:
            return lines[labels[jump.group(1)] : i + 1]
    raise AssertionError("no loop in the PTX")


def _ptx(disable: tuple[str, ...] = ()) -> str:
    kernel = load_kernel(EXAMPLES / "paged_decode.tile", "paged_decode", disable=disable)
    b, h, g, pages, d = 2, 4, 4, 8, 128
    args = (
        np.zeros((b, h, d), np.float16),
        np.zeros((pages, g, 16, d), np.float16),
        np.zeros((pages, g, 16, d), np.float16),
        np.zeros((b, 4), np.int32),
        np.zeros(b, np.int32),
        np.zeros((b, h, d), np.float16),
        np.float32(0.1),
    )
    return kernel.compile_for(*args, arch="sm_90a").ptx


def _wide_loads_before_first_barrier(body: list[str]) -> int:
    first = next(i for i, line in enumerate(body) if "bar.sync" in line)
    return sum(1 for line in body[:first] if re.search(r"ld\.global(\.nc)?\.v4", line))


def test_the_values_of_a_page_are_loaded_with_its_keys():
    hoisted = _loop_body(_ptx())
    written = _loop_body(_ptx(disable=("hoist-loads",)))
    # keys and values (16 x 128 f16 each, 16-byte accesses): both before the first barrier
    assert _wide_loads_before_first_barrier(hoisted) == 2 * _wide_loads_before_first_barrier(
        written
    )
    assert sum("bar.sync" in line for line in hoisted) == sum(
        "bar.sync" in line for line in written
    )
