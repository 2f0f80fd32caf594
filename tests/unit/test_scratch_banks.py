"""A layout conversion's scratch rows are padded so that the writes of an mma accumulator
(8 rows x 4 lanes per store) hit 32 different banks: checked on the wgmma matmul's epilogue,
whose rows of 128 f16 (256 bytes) would otherwise put 8 lanes on each bank."""

from __future__ import annotations

from pathlib import Path

import tilec
from tilec.compiler import DEFAULT_PIPELINE, target_pipeline
from tilec.dialects import tile as T
from tilec.lowering.exchange import (
    ROW_PAD_BYTES,
    op_scratch_bytes,
    remap_scratch_strides,
    thread_map,
)
from tilec.lowering.layouts import element_bytes, row_major_strides

MATMUL = Path(__file__).resolve().parents[2] / "examples" / "matmul.tile"


def _epilogue_conversion():
    pipeline = f'assume{{all="aligned,unit,divisible"}},{DEFAULT_PIPELINE}'
    program = tilec.compile(
        str(MATMUL), kernels=["matmul"], pipeline=target_pipeline(pipeline, "sm_90a")
    )
    (op,) = [op for op in program.module.walk() if isinstance(op, T.ConvertLayoutOp)]
    return op


def _worst_bank_conflict(op, strides) -> int:
    """Over the stores of warp 0: the most distinct 4-byte words one bank gets in one store."""
    t = op.operands[0].type
    m = thread_map(t)
    size = element_bytes(t.element)
    cols = t.shape[-1]
    flat = m.table()[:32]  # warp 0: [lanes, slots], row-major flat indices
    rows, columns = flat // cols, flat % cols
    words = (rows * strides[-2] + columns) * size // 4
    worst = 1
    for slot in range(words.shape[1]):
        banks: dict[int, set[int]] = {}
        for word in words[:, slot].tolist():
            banks.setdefault(word % 32, set()).add(word)
        worst = max(worst, max(len(w) for w in banks.values()))
    return worst


def test_the_epilogue_writes_hit_every_bank_once():
    op = _epilogue_conversion()
    t = op.operands[0].type
    assert t.shape == (128, 256) and element_bytes(t.element) == 2  # the SM model's tile
    padded = remap_scratch_strides(op)
    assert padded == (256 + ROW_PAD_BYTES // 2, 1)
    assert _worst_bank_conflict(op, row_major_strides(t.shape)) == 8  # what padding removes
    assert _worst_bank_conflict(op, padded) == 1
    assert op_scratch_bytes(op) == 128 * (512 + ROW_PAD_BYTES)
