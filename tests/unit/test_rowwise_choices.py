"""Block shapes of row-wise kernels: one row per block once two rows exceed the tile budget,
and warps by the length of a row (passes/tiling.py, assign_layouts.py)."""

from pathlib import Path

import pytest

from tilec.compiler import compile as compile_tile
from tilec.dialects.builtin import FuncOp

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _choices(example: str, n: int) -> tuple[int, int]:
    pipeline = f'canonicalize,cse,tiling{{extents="N={n}"}},assign-layouts'
    program = compile_tile(EXAMPLES / f"{example}.tile", target="tir", pipeline=pipeline)
    (kernel,) = [op for op in program.module.walk() if isinstance(op, FuncOp)]
    sizes = dict((str(s), int(v)) for s, v in kernel.attributes["tilec.tile_sizes"].value)
    return sizes["BM"], kernel.attributes["tilec.num_warps"].value


@pytest.mark.parametrize(
    ("example", "n", "rows", "warps"),
    [
        ("softmax", 1024, 4, 4),  # 4 rows of 1024 fit the 4096-element budget
        ("softmax", 4096, 1, 8),  # the fastest on the H200 (rowwise_probe)
        ("softmax", 16384, 1, 16),  # 8 warps ran 1.4x slower
        ("layernorm", 8192, 1, 8),  # 85.8% of copy bandwidth on the H200; 16 warps: 67%
    ],
)
def test_row_blocks_and_warps(example: str, n: int, rows: int, warps: int) -> None:
    assert _choices(example, n) == (rows, warps)
