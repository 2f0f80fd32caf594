"""assign-layouts' occupancy model against ptxas: its register estimate, and whether ptxas's real
counts would have led it to the same warps (passes/occupancy.py, `_Occupancy`).

No GPU is needed: ptxas comes from PATH or from the test extra's `nvidia-cuda-nvcc` wheel (as
in tests/ptx/test_ptxas.py); these tests fail when it is missing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tilec.dialects.builtin import FuncOp
from tilec.jit import load_kernel
from tilec.lowering.ptxas import assemble
from tilec.passes import assign_layouts
from tilec.passes.occupancy import AUTO_WARPS, _Occupancy, estimate_registers

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
F16, F32 = np.float16, np.float32


def _layernorm(n: int) -> tuple:
    return (
        np.zeros((64, n), F16),
        np.zeros(n, F16),
        np.zeros(n, F16),
        np.zeros((64, n), F16),
        F32(1e-5),
    )


# (example, arguments, the warps the model picks): the row kernels of the GPU benchmark.
KERNELS = {
    "softmax 4096": ("softmax", (np.zeros((64, 4096), F32),) * 2, 16),
    "softmax 16384": ("softmax", (np.zeros((64, 16384), F32),) * 2, 16),
    "softmax 1024": ("softmax", (np.zeros((64, 1024), F32),) * 2, 4),
    "layernorm 8192": ("layernorm", _layernorm(8192), 4),
    "layernorm 1024": ("layernorm", _layernorm(1024), 4),
    # tiles of 4096 (tile_shapes: the contiguous axis takes the budget); a and b are both
    # streamed, 32 KiB a block: 4 blocks on 16 warps keep 128 KiB in flight, 8 warps 160 KiB.
    # (8 warps reached 102% of copy on the H200, 2026-12-01; swiglu's two streamed loads ran
    # as fast on 16 warps as on 8 and 8% faster than on 4: the regret run of b1ca8d8.)
    "vector_add": ("vector_add", (np.zeros(1 << 20, F32),) * 3, 16),
    # defer-reduction: each iteration adds its 1 x 4096 tile into the carried one (vector add's
    # streamed add): 8 warps (the H200 suite at b4986a1, 2026-12-02: 8192 x 8192 level with
    # torch.compile, 1.007; 16 x 4M rows 1.023)
    "row_sum": ("row_sum", (np.zeros((64, 4096), F32), np.zeros(64, F32)), 8),
    # loops that reduce across the warps every iteration (a running maximum rescales the sum:
    # defer-reduction cannot move it out): the fewest warps with 72 KiB in flight. Measured on
    # the H100 (2026-12-06): logsumexp 8192 x 8192 on 16 warps (nearest 72 KiB) 1.35x the time
    # of 4 or 8; cross-entropy 4096 x 32000 on 16 warps 1.96x its 4.
    "logsumexp": ("logsumexp", (np.zeros((64, 8192), F32), np.zeros(64, F32)), 4),
    "cross_entropy": (
        "cross_entropy",
        (np.zeros((64, 32000), F32), np.zeros(64, np.int32), np.zeros(64, F32)),
        4,
    ),
}


class _Seen:
    """The kernel assign-layouts chose warps for, captured from inside the pass."""

    kernel: FuncOp | None = None


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple[FuncOp, dict[int, int], int]]:
    """Per kernel: its IR as assign-layouts saw it, ptxas's registers at each automatic
    warp count, and the warps chosen."""
    seen = _Seen()
    original = assign_layouts._automatic_warps

    def spy(kernel: FuncOp, grid: tuple[int, int] | None = None):
        seen.kernel = kernel.clone()
        return original(kernel, grid)

    result = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TILEC_CACHE_DIR", "")
        patch.setattr(assign_layouts, "_automatic_warps", spy)
        for label, (example, args, _) in KERNELS.items():
            kernel = load_kernel(EXAMPLES / f"{example}.tile", example)
            chosen = _threads(kernel.compile_for(*args, arch="sm_90a").ptx) // 32
            ir = seen.kernel
            counts = {}
            for warps in AUTO_WARPS:
                # The registers of the kernel the estimate describes: pipeline's prefetch in
                # registers comes after the warps and weighs its own second copy of the tiles.
                options = {
                    "assign-layouts": {"num_warps": warps},
                    "pipeline": {"register_prefetch": 0},
                }
                pinned = load_kernel(EXAMPLES / f"{example}.tile", example, pass_options=options)
                ptx = pinned.compile_for(*args, arch="sm_90a").ptx
                (resources,) = assemble(ptx, "sm_90a").values()
                counts[warps] = resources.registers
            result[label] = (ir, counts, chosen)
    return result


def _candidates(ir: FuncOp) -> list[int]:
    """The warp counts the model weighs for `ir` (not those over 64 elements a thread)."""
    occupancy = _Occupancy.of(ir)
    assert occupancy is not None
    return [c.warps for c in occupancy.candidates]


def _threads(ptx: str) -> int:
    import re

    match = re.search(r"\.(?:maxntid|reqntid) (\d+)", ptx)
    assert match, "the kernel states its block size"
    return int(match.group(1))


@pytest.mark.parametrize("label", list(KERNELS))
def test_the_model_picks_the_measured_warps(compiled, label):
    assert compiled[label][2] == KERNELS[label][2]


# Known error of the estimate on vector add's 1 x 4096 tiles: it keeps both loaded tiles whole
# (80 registers at 4 warps), where ptxas streams the addition (60). Strict: these fail until
# the estimate learns it. (Since both streamed loads count as in flight, ptxas's counts and
# the estimate lead vector add to the same 16 warps, so only its estimate stays listed.)
_STREAMED_ADD = pytest.mark.xfail(
    strict=True, reason="the estimate keeps both operands of an element-wise add live"
)
# cross-entropy: 88 estimated at 4 warps, ptxas 128 (the target's compare and the deferred
# sum of picked logits hold more than the estimate counts); its warps are the same either way.
_UNDER = pytest.mark.xfail(strict=True, reason="the estimate is 40 registers under ptxas's")
_ESTIMATED = [
    pytest.param(k, marks=_STREAMED_ADD)
    if k == "vector_add"
    else pytest.param(k, marks=_UNDER)
    if k == "cross_entropy"
    else k
    for k in KERNELS
]
# row_sum's deferred reduction is the same streamed add of 1 x 4096 tiles. Its estimate is
# within two granules of ptxas, but close enough to the line between 8 and 16 warps that
# ptxas's counts cross it: it left this list when its bounds compares went to 32 bits (the
# counts then led to the model's 8 warps) and came back when each access compared its own
# columns (8c16d72: 32 registers at 16 warps, so ptxas's counts would take 16).
_CHOSEN = [pytest.param(k, marks=_STREAMED_ADD) if k == "row_sum" else k for k in KERNELS]


@pytest.mark.parametrize("label", _CHOSEN)
def test_ptxas_counts_lead_to_the_same_warps(compiled, label):
    ir, counts, chosen = compiled[label]
    occupancy = _Occupancy.of(ir, registers=lambda warps: max(counts[warps], 1))
    assert occupancy is not None and occupancy.choice == chosen


@pytest.mark.parametrize(
    "label",
    [k for k in _ESTIMATED if not str(getattr(k, "values", [k])[0]).startswith("layernorm")],
)
def test_estimate_is_within_two_granules_of_ptxas(compiled, label):
    ir, counts, _ = compiled[label]
    for warps in _candidates(ir):
        estimate = estimate_registers(ir, warps)
        assert abs(estimate - counts[warps]) <= 16, (warps, estimate, counts[warps])


@pytest.mark.parametrize("label", ["layernorm 8192", "layernorm 1024"])
def test_estimate_for_layernorm_is_never_under_ptxas(compiled, label):
    # The model issues both weight loads as early as their addresses allow; ptxas issues one
    # of them later (96 registers at 4 warps on rows of 8192, not the 144 estimated).
    ir, counts, _ = compiled[label]
    for warps in _candidates(ir):
        count = counts[warps]
        assert count <= estimate_registers(ir, warps) <= count + 48, (warps, count)


# Fewer than 4 warps (`FEW_WARPS`): weighed only where they remove a cost 4 warps pay and the
# launch's grid lets their blocks keep more bytes in flight per SM than 4 warps' (or 72 KiB).
# Through the jit, whose size classes give assign-layouts the grid.
def _paged_decode(batch: int, heads: int) -> tuple:
    pages, d = 16, 128  # the cache's size does not enter the grid or the tiles
    return (
        np.zeros((batch, heads, d), F16),
        np.zeros((pages, heads, 16, d), F16),
        np.zeros((pages, heads, 16, d), F16),
        np.zeros((batch, 256), np.int32),
        np.zeros(batch, np.int32),
        np.zeros((batch, heads, d), F16),
        F32(0.1),
    )


def _embedding_bag(bags: int, d: int) -> tuple:
    return (
        np.zeros((1000, d), F32),
        np.zeros((bags, 64), np.int32),
        np.zeros(bags, np.int32),
        np.zeros((bags, d), F32),
    )


# (example file, kernel, arguments, the warps the model picks)
FEW = {
    # the per-page sums over the page's 16 rows cross 4 warps (a barrier each, every page);
    # on one warp every reduction is shuffles (H200, 1bdb91b: 0.650 of 4 warps' time at
    # B64 H32: 2048 blocks, enough for 12 one-warp blocks (by registers) on each of 132 SMs).
    "paged decode, 2048 blocks": ("paged_decode", "paged_decode", _paged_decode(64, 32), 1),
    # a scan over rows of 1024 crosses 4 warps every tile, but 256 rows are 256 blocks: one-warp
    # blocks would leave each SM two warps
    "cumsum, 256 rows": ("cumsum", "cumsum_rows", (np.zeros((256, 1024), F32),) * 2, 4),
    # a bag's 128 floats: 16-byte runs on one warp, one float a thread on 4 (0.907)
    "embedding bag, 16384 bags": ("embedding_bag", "embedding_bag", _embedding_bag(16384, 128), 1),
    # 4096 bags: 31 one-warp blocks an SM, short of the 32 that fit, but twice the 16 of 4 warps
    # and twice their bytes in flight (H100, 4a04e97: one warp 0.819 of 4 warps' time)
    "embedding bag, 4096 bags": ("embedding_bag", "embedding_bag", _embedding_bag(4096, 128), 1),
    # 512 bags: 4 blocks an SM on any warps, the same bytes in flight, in runs 4 times as
    # wide on one warp (600 to 1500 bags: one warp 0.75-0.78 of 4 warps' time, H100 208240e)
    "embedding bag, 512 bags": ("embedding_bag", "embedding_bag", _embedding_bag(512, 128), 1),
    # rows of 64 floats: one float a thread on 2 and 4 warps, two (8-byte runs, still short of
    # 16) on one: wider, at 15 blocks an SM on any warps (one warp 0.771 of 4 warps' time,
    # H100 a7739e4)
    "embedding bag, 64 floats": ("embedding_bag", "embedding_bag", _embedding_bag(2000, 64), 1),
    # a scan over 1000 rows of 1024 (2 a block): 500 blocks, 4 an SM on any warps; one warp
    # saves the barriers but runs each thread's scan 4 times as long (1.159x, H100 208240e)
    "cumsum, 1000 rows": ("cumsum", "cumsum_rows", (np.zeros((1000, 1024), F32),) * 2, 4),
    # rows of 32000 across 2 warps still reduce across them: 4 stays (2 measured 1.066)
    "cross entropy, 4096 rows": (
        "cross_entropy",
        "cross_entropy",
        (np.zeros((4096, 32000), F32), np.zeros(4096, np.int32), np.zeros(4096, F32)),
        4,
    ),
}


@pytest.mark.parametrize("label", list(FEW))
def test_fewer_warps_only_where_they_remove_a_cost_and_the_grid_keeps_their_loads_in_flight(
    label,
):
    example, name, args, expected = FEW[label]
    seen: list[tuple[FuncOp, tuple[int, int] | None]] = []
    original = assign_layouts._automatic_warps

    def spy(kernel: FuncOp, grid: tuple[int, int] | None = None):
        seen.append((kernel.clone(), grid))
        return original(kernel, grid)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TILEC_CACHE_DIR", "")
        patch.setattr(assign_layouts, "_automatic_warps", spy)
        kernel = load_kernel(EXAMPLES / f"{example}.tile", name)
        ptx = kernel.compile_for(*args, arch="sm_90a").ptx
    assert _threads(ptx) // 32 == expected
    (ir, grid), *_ = seen
    assert grid is not None, "the jit gives assign-layouts its extents"
    # Without the grid (a compile without extents) the model keeps to AUTO_WARPS.
    occupancy = _Occupancy.of(ir)
    assert occupancy is not None and occupancy.choice >= AUTO_WARPS[0]
