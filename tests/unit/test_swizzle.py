"""The swizzles smem-placement chooses (`swizzle_for`) keep both shared-memory access patterns
of a dot operand free of bank conflicts, by the lowering's own address formula
(`tilec.lowering.shared_memory.swizzled_offset`): the 8 rows one `ldmatrix` reads, and each wave
of 8 threads storing consecutive 16-byte chunks."""

from __future__ import annotations

import pytest

from tilec.ir.types import TileType, bf16, f16
from tilec.lowering.shared_memory import swizzled_offset
from tilec.passes.smem_placement import swizzle_for

BANK_GROUPS = 8  # 128 bytes of banks = 8 groups of 16 bytes (one ldmatrix row, one cp.async)


def _group(layout, shape, r: int, c: int) -> int:
    return swizzled_offset(layout, shape, r, c) * 2 // 16 % BANK_GROUPS  # 2-byte elements


@pytest.mark.parametrize("element", [f16, bf16])
@pytest.mark.parametrize("rows, cols", [(64, 16), (128, 32), (64, 64), (32, 128), (16, 256)])
def test_ldmatrix_rows_and_store_waves_hit_every_bank_once(element, rows, cols):
    layout, _ = swizzle_for(TileType((rows, cols), element))
    shape = (rows, cols)
    for r0 in range(0, rows, 8):
        for c in range(0, cols, 8):  # one 8x8 matrix: rows r0..r0+7 of one 16-byte chunk
            groups = {_group(layout, shape, r0 + i, c) for i in range(8)}
            assert len(groups) == 8, (layout, r0, c)
    chunks = [(r, c) for r in range(rows) for c in range(0, cols, 8)]  # row-major, as copied
    for wave in range(0, len(chunks), 8):
        groups = {_group(layout, shape, r, c) for r, c in chunks[wave : wave + 8]}
        assert len(groups) == 8, (layout, wave)


def test_without_the_swizzle_ldmatrix_would_conflict():
    # Rows of 128 bytes unswizzled: the 8 rows of one chunk all fall on one bank group.
    shape = (64, 64)
    assert len({_group(None, shape, i, 0) for i in range(8)}) == 1
