"""A whole dimension compiled for its extent's bound (`jit_sizes.whole_bound`: rounded up to an
eighth of the tile that covers it): the launch holds the extent to it, and the lowering drops
the slots of every access past it -- no load, no store -- as the PTX shows, without a GPU."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tilec.jit import load_kernel
from tilec.jit_sizes import whole_bound

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
F16, F32 = np.float16, np.float32


@pytest.mark.parametrize(
    "extent, bound",
    [(3001, 3072), (5001, 5120), (3077, 3584), (4096, 4096), (1000, 1024), (100, 112), (1, 1)],
)
def test_the_bound_is_the_extent_rounded_up_to_an_eighth_of_its_tile(extent, bound):
    assert whole_bound(extent) == bound


def _layernorm(m: int, n: int):
    kernel = load_kernel(EXAMPLES / "layernorm.tile")
    args = (
        np.zeros((m, n), F16),
        np.ones(n, F16),
        np.zeros(n, F16),
        np.zeros((m, n), F16),
        F32(1e-5),
    )
    return kernel, kernel.compile_for(*args, arch="sm_90a")


def _count(pattern: str, ptx: str) -> int:
    return len(re.findall(pattern, ptx))


def test_slots_past_the_bound_are_neither_loaded_nor_stored():
    # 3001 columns in a tile of 4096 on 4 warps: a thread's 32 columns, 128 apart; 24 of them
    # fall below the bound 3072, the other 8 are padding whatever the extent
    _, odd = _layernorm(6000, 3001)
    assert odd.abi.max_extents == {"N": 3072}
    assert _count(r"ld\.global", odd.ptx) == 3 * 24  # x, w and b
    assert _count(r"st\.global", odd.ptx) == 24
    # A row that fills the bound's last eighth keeps every slot below it
    _, full = _layernorm(6000, 3999)
    assert full.abi.max_extents == {"N": 4096}
    assert _count(r"ld\.global", full.ptx) == 3 * 32


def test_extents_of_one_bound_share_a_specialization_and_others_do_not():
    kernel = load_kernel(EXAMPLES / "layernorm.tile")

    def key(n: int) -> tuple:
        return kernel._key(kernel._checker.convert(_args_of(64, n)))

    assert key(3001) == key(3049)  # both 3072 (both odd: the same stride facts)
    assert key(3001) != key(3101)  # 3584


def _args_of(m: int, n: int):
    return (
        np.zeros((m, n), F16),
        np.ones(n, F16),
        np.zeros(n, F16),
        np.zeros((m, n), F16),
        F32(1e-5),
    )


def test_runs_past_the_bound_are_dropped_from_vector_accesses_too():
    # 3000 columns, a multiple of 8: 16-byte runs of 8, 1024 columns a pass of 4 warps; of a
    # thread's 4 runs a row, the one at 3072 and past is padding
    _, vectors = _layernorm(6000, 3000)
    assert vectors.abi.max_extents == {"N": 3072}
    assert _count(r"ld\.global\.v4", vectors.ptx) == 3 * 3
    assert _count(r"st\.global\.v4", vectors.ptx) == 3
