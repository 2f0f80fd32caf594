"""Block shapes of row-wise kernels: rows per block from the bytes in flight of the warps the
occupancy model chooses (passes/tile_shapes.py), and those warps (passes/assign_layouts.py:
bytes of the streamed tile in flight per SM)."""

from pathlib import Path

import pytest

from tilec.compiler import compile as compile_tile
from tilec.dialects.builtin import FuncOp

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _choices(example: str, n: int) -> tuple[int, int]:
    pipeline = f'canonicalize,cse,tiling{{extents="N={n}"}},assign-layouts'
    program = compile_tile(EXAMPLES / f"{example}.tile", target="tir", pipeline=pipeline)
    (kernel,) = [
        op for op in program.module.walk() if isinstance(op, FuncOp) and op.sym_name == example
    ]
    sizes = dict((str(s), int(v)) for s, v in kernel.attributes["tilec.tile_sizes"].value)
    return sizes["BM"], kernel.attributes["tilec.num_warps"].value


@pytest.mark.parametrize(
    ("example", "n", "rows", "warps"),
    [
        # 4 rows of 1024 fit the 4096-element budget; a row per warp (no shared memory)
        # keeps 160 KiB in flight (16 warps: 64 KiB; level on the H200)
        ("softmax", 1024, 4, 4),
        # 4 blocks x 16 KiB in flight; 8 warps keep 128 KiB, 4 warps 160 (the H200: 16
        # warps 1% faster than either, rowwise_probe 2026-11-30)
        ("softmax", 4096, 1, 16),
        ("softmax", 16384, 1, 16),  # 128 KiB; 8 warps 192 KiB and 1% slower
        # its registers (~144 estimated, 96 by ptxas) keep 4 warps to 3-5 blocks: 48-80 KiB;
        # on the H200 4 warps reach 89.1% of copy bandwidth, 8 warps 87.1%, 16 85.2%
        ("layernorm", 8192, 1, 4),
    ],
)
def test_row_blocks_and_warps(example: str, n: int, rows: int, warps: int) -> None:
    assert _choices(example, n) == (rows, warps)


def _scan_choices(kernel: str, m: int, n: int) -> tuple[int, int, int]:
    pipeline = f'canonicalize,cse,tiling{{extents="M={m},N={n}"}},assign-layouts'
    program = compile_tile(EXAMPLES / "cumsum.tile", target="tir", pipeline=pipeline)
    (func,) = [
        op for op in program.module.walk() if isinstance(op, FuncOp) and op.sym_name == kernel
    ]
    sizes = dict((str(s), int(v)) for s, v in func.attributes["tilec.tile_sizes"].value)
    return sizes["BM"], sizes["BN"], func.attributes["tilec.num_warps"].value


@pytest.mark.parametrize(
    ("kernel", "m", "n", "expected"),
    [
        # a loop scans along N: 4 rows, a warp each (H200: 0.142 ms against 0.229 as 1 x 4096
        # on 16 warps, a row across all of them)
        ("cumsum_rows", 4096, 16384, (4, 1024, 4)),
        ("running_max_rows", 3000, 10007, (4, 1024, 4)),
        # 300 rows: 4 a block would leave 75 blocks for 132 SMs, so a row a block, on the
        # fewest warps that keep 72 KiB in flight -- the row is scanned across the warps every
        # iteration (occupancy: logsumexp's and cross-entropy's loops on 16 warps measured
        # 1.35x and 1.96x the time of 4, H100 2026-12-06; this shape not yet timed)
        ("cumsum_rows", 300, 100003, (1, 4096, 4)),
        # short rows: grown by bytes in flight as before (8 rows, each inside a warp)
        ("cumsum_rows", 65536, 256, (8, 256, 4)),
    ],
)
def test_rows_of_a_scanning_loop_stay_inside_warps(kernel, m, n, expected) -> None:
    assert _scan_choices(kernel, m, n) == expected


def test_shapes_that_differ_in_unit_dimensions_share_their_layout() -> None:
    """rotary's x halves are loaded as [BS, 1, 1, 64] f16 and reshaped to the [BS, 64] of its f32
    cos and sin tables: one default layout for both shapes (`occupancy.run_key`), so their
    products need no conversion (before: two per tile, through 17 KiB of shared memory)."""
    from tilec.dialects import arith
    from tilec.dialects import tile as T

    pipeline = (
        'assume{all="aligned,unit,divisible"},canonicalize,cse,'
        'tiling{extents="S=8192,H=32,HALF=64"},assign-layouts'
    )
    program = compile_tile(EXAMPLES / "rotary.tile", target="tir", pipeline=pipeline)
    (kernel,) = [
        op for op in program.module.walk() if isinstance(op, FuncOp) and op.sym_name == "rotary"
    ]
    converted_for_arith = [
        op
        for op in kernel.walk()
        if isinstance(op, T.ConvertLayoutOp)
        and any(isinstance(user, arith.MulFOp) for user in op.result.uses)
    ]
    assert converted_for_arith == []
