"""Regression guard: row reductions and their broadcasts stay in registers.

Softmax and layernorm reduce whole rows and broadcast the results back. With `#slice` layouts
the only shared memory left is one exchange of warp partials per reduction when warps share a
row (write, barrier, read, barrier); everything else is shuffles and register copies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tilec
from tilec.lowering import compile_to_ptx

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _ptx(example: str, extent: int) -> str:
    pipeline = (
        f'canonicalize,cse,specialize{{extents="N={extent}"}},assign-layouts,canonicalize,cse,dce'
    )
    # The kernel named like its file (softmax.tile also holds softmax_f16).
    kernel = Path(example).stem
    program = tilec.compile(str(EXAMPLES / example), kernels=[kernel], pipeline=pipeline)
    return compile_to_ptx(program.module, "sm_90a")


def _shared_ops(ptx: str) -> tuple[int, int, int]:
    return ptx.count("st.shared"), ptx.count("ld.shared"), ptx.count("bar.sync")


@pytest.mark.parametrize("example", ["softmax.tile", "layernorm.tile"])
def test_rows_within_one_warp_need_no_shared_memory(example):
    # N = 1024: 4 rows of 1024 over 4 warps, a warp per row.
    assert _shared_ops(_ptx(example, 1024)) == (0, 0, 0)


@pytest.mark.parametrize(
    ("example", "extent"),
    [("softmax.tile", 4096), ("softmax.tile", 16384), ("layernorm.tile", 8192)],
)
def test_rows_over_several_warps_exchange_partials_once_per_reduction(example, extent):
    # Two reductions per kernel; each: one partial per warp written, barrier, every thread reads
    # its row's partials (one row per thread: as many loads as warps per row), barrier.
    stores, loads, barriers = _shared_ops(_ptx(example, extent))
    assert stores == 2
    assert barriers <= 4
    assert loads <= 2 * 8  # at most 8 warps share a row
