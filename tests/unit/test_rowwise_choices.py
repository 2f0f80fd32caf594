"""Block shapes of row-wise kernels: one row per block once two rows exceed the tile budget,
and the warps that let an SM hold the most of the tile (passes/tiling.py, assign_layouts.py)."""

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
        ("softmax", 4096, 1, 4),  # 32 per thread: ~82 registers, 5 blocks per SM
        ("softmax", 16384, 1, 8),  # 64 per thread: 2 blocks per SM (16 warps: 1)
        ("layernorm", 8192, 1, 4),
    ],
)
def test_row_blocks_and_warps(example: str, n: int, rows: int, warps: int) -> None:
    assert _choices(example, n) == (rows, warps)
