"""`stmatrix` for 16-bit tiles leaving tensor-core fragments (tilec/lowering/stmatrix.py):
which layouts it takes, and -- simulated here with the instruction's definition (lane 8 j + i
gives the address of row i of matrix j; lane 4 i + q gives columns 2 q and 2 q + 1 of that row
in its register j) -- that every element lands where the element-by-element write puts it."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.ir.parser import Parser
from tilec.lowering.exchange import thread_map
from tilec.lowering.layouts import WARP_SIZE
from tilec.lowering.stmatrix import lane_shift, stmatrix_plan


def parse_type(text: str):
    return Parser(text).parse_type()


MMA_8 = "#mma<version = 3, warps_per_cta = [8, 1], instr_shape = [64, 256, 16]>"
MMA_4 = "#mma<version = 3, warps_per_cta = [4, 1], instr_shape = [64, 128, 16]>"
MMA_2 = "#mma<version = 2, warps_per_cta = [2, 2], instr_shape = [16, 8, 16]>"


def _simulate(t, strides, plan) -> np.ndarray:
    """The scratch after the plan's stores, each element holding its row-major index."""
    m = thread_map(t)
    table = m.table()  # [threads, slots]: each slot's element (row-major in the tile)
    flat = np.zeros_like(table)  # each slot's place in the scratch
    rows, cols = m.indices()
    for s in range(m.num_slots):
        k = m.slot_multi_index(s)
        flat[:, s] = rows[:, k[0]] * strides[0] + cols[:, k[1]] * strides[1]
    scratch = np.full(t.shape[0] * strides[0], -1, dtype=np.int64)
    for warp in range(m.num_threads // WARP_SIZE):
        tid = warp * WARP_SIZE
        for square in plan.squares:
            for j, first in enumerate(square):
                for i in range(8):
                    provider = tid + 8 * j + i
                    address = flat[provider, square[0]] + lane_shift(plan, 8 * j + i)
                    for q in range(4):
                        holder = tid + 4 * i + q
                        scratch[address + 2 * q] = table[holder, first]
                        scratch[address + 2 * q + 1] = table[holder, plan.partner[first]]
    return scratch


@pytest.mark.parametrize(
    ("text", "padded_row"),
    [
        (f"tile<128x256xbf16, {MMA_8}>", 264),  # a GEMM's 128 x 256 bf16 result
        (f"tile<64x128xf16, {MMA_4}>", 136),
        (f"tile<128x64xf16, {MMA_4}>", 72),
        (f"tile<64x32xf16, {MMA_2}>", 40),  # mma.sync's fragments, 2 x 2 warps
    ],
)
def test_every_element_lands_where_the_element_stores_put_it(text, padded_row):
    t = parse_type(text)
    strides = (padded_row, 1)
    plan = stmatrix_plan(t, strides, "sm_90a")
    assert plan is not None
    assert 4 * len(plan.squares) * 2 * WARP_SIZE * (thread_map(t).num_threads // WARP_SIZE) == (
        t.shape[0] * t.shape[1]
    )
    scratch = _simulate(t, strides, plan)
    expected = np.full_like(scratch, -1)
    for r in range(t.shape[0]):
        expected[r * padded_row : r * padded_row + t.shape[1]] = np.arange(t.shape[1]) + (
            r * t.shape[1]
        )
    np.testing.assert_array_equal(scratch, expected)


@pytest.mark.parametrize(
    ("text", "strides", "arch", "why"),
    [
        (f"tile<128x256xf32, {MMA_8}>", (264, 1), "sm_90a", "32-bit elements"),
        (f"tile<128x256xbf16, {MMA_8}>", (264, 1), "sm_80", "no stmatrix before sm_90"),
        (f"tile<128x256xbf16, {MMA_8}>", (260, 1), "sm_90a", "rows not 16-byte aligned"),
        (f"tile<128x256xbf16, {MMA_8}>", (1, 128), "sm_90a", "columns not contiguous"),
        (
            "tile<64x64xf16, #blocked<size_per_thread = [1, 8], threads_per_warp = [4, 8], "
            "warps_per_cta = [4, 1], order = [1, 0]>>",
            (72, 1),
            "sm_90a",
            "a thread holds 8 columns of one row, not fragments",
        ),
    ],
)
def test_layouts_it_leaves_to_element_stores(text, strides, arch, why):
    assert stmatrix_plan(parse_type(text), strides, arch) is None, why


def test_a_bf16_gemm_epilogue_uses_it_on_hopper_only():
    import tilec

    source = """
def gemm(a: bf16[M, K], b: bf16[K, N], c: bf16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc.to(bf16)
"""

    def ptx(arch: str) -> str:
        pipeline = 'assume{all="aligned,unit,divisible"},' + tilec.compiler.build_pipeline(
            options={
                "tiling": {"extents": "M=1024,N=1024,K=1024", "arch": arch},
                "pipeline": {"arch": arch},
            }
        )
        return tilec.compile(source, pipeline=pipeline, target="ptx", arch=arch).ptx

    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx("sm_90a")
    assert "stmatrix" not in ptx("sm_80")
