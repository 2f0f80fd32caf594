"""The SM model the wgmma tiling ranks tiles by (passes/wgmma_model.py): its figures, the
tiles it picks at sizes it was and was not measured at, what it counts of an epilogue, and
the latency rule that decides whether a GEMM loop leaves a wgmma group in flight."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilec.dialects import tile as T
from tilec.jit import load_kernel
from tilec.passes.wgmma_model import (
    COPY_LATENCY_CLOCKS,
    epilogue_operands,
    epilogue_words,
    grid_clocks,
    lead_covers_latency,
    stages_that_fit,
    step_clocks,
    walk_clocks,
)
from tilec.tune import build_candidate, problem_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_shared_memory_holds_128x128_below_the_tensor_cores():
    # 128x128: 128 clocks of products, 160 of traffic; 128x256 balances; 256x128 reads B 4 times.
    assert step_clocks(128, 128) == 160
    assert step_clocks(128, 256) == 256 == 128 * 256 * 16 / 2048
    assert step_clocks(256, 128) == 288
    assert step_clocks(64, 64) == 64


def test_stages_that_fit_the_blocks_share_of_shared_memory():
    assert stages_that_fit(128, 256, 64, 1, 4) == 4  # 48 KiB a stage, 227 KiB
    assert stages_that_fit(128, 128, 64, 2, 4) == 3  # 32 KiB a stage, half an SM
    assert stages_that_fit(64, 64, 64, 2, 4) == 4


def test_latency_rule_separates_the_measured_cases():
    assert lead_covers_latency(128, 256, 64, 2, 1)  # measured: in flight pays
    assert not lead_covers_latency(128, 256, 64, 1, 1)  # 3 stages in flight: starved
    assert not lead_covers_latency(128, 128, 64, 2, 1)  # one block, 4 stages: starved
    assert not lead_covers_latency(128, 128, 64, 1, 2)
    assert 2 * 4 * step_clocks(128, 128) < COPY_LATENCY_CLOCKS < 2 * 4 * step_clocks(128, 256)


def test_a_block_alone_on_its_sm_pays_its_fixed_latencies():
    # 1024^3: 64x64 tiles two to an SM beat 64x128 alone (measured 0.75 against none better).
    two = grid_clocks(64, 64, 64, 16, 256, 2, 132, 4)
    alone = grid_clocks(64, 128, 64, 16, 128, 2, 132, 4)
    assert two < alone
    assert grid_clocks(128, 256, 64, None, None, 1, 132, 4) < grid_clocks(
        128, 128, 64, None, None, 2, 132, 4
    )


def _decisions(example: str, kernel: str, sizes: dict[str, int]) -> dict:
    problem = problem_for(load_kernel(EXAMPLES / example, kernel), sizes, arch="sm_90a")
    return build_candidate(problem, {}).decisions


@pytest.mark.parametrize(
    ("example", "kernel", "sizes", "tile", "blocks", "in_flight"),
    [
        ("matmul.tile", "matmul", {"M": 4096, "N": 4096, "K": 4096}, (128, 256), 1, 1),
        # 324 tiles of 24 steps: walked with a producer (test_tiling_plans_the_walk...)
        ("matmul.tile", "matmul", {"M": 2304, "N": 4608, "K": 1536}, (128, 256), 1, None),
        ("matmul.tile", "matmul", {"M": 1024, "N": 1024, "K": 1024}, (64, 64), 2, 0),
        # computed as (b @ a).T (transpose-dot): the dot's 128x256 is N x M
        ("gemm_layouts.tile", "gemm_tt", {"M": 3000, "N": 5000, "K": 2000}, (256, 128), 1, 1),
        ("bmm.tile", "bmm", {"Z": 64, "M": 256, "N": 256, "K": 64}, (128, 128), 2, 0),
        (
            "matmul_bias_gelu.tile",
            "matmul_bias_gelu",
            {"M": 4096, "N": 4096, "K": 4096},
            (128, 256),  # its epilogue spills once a tile: cheaper than 128x128 (measured)
            1,
            1,
        ),
    ],
)
def test_the_tiles_the_model_picks(example, kernel, sizes, tile, blocks, in_flight):
    d = _decisions(example, kernel, sizes)
    assert d["path"] == "wgmma"
    m = "tile.M"
    assert (d[m], d["tile.N"]) == tile
    assert d["assign-layouts.min_blocks_per_sm"] == blocks
    assert d.get("pipeline.dots_in_flight") == in_flight


def test_the_walk_pays_where_a_lone_block_has_few_steps_a_tile():
    """`walk_clocks` against `grid_clocks`: bmm 8 x 1024^3 in 128x256 tiles (16 steps, two
    tiles an SM; measured on the H100, 2026-12-06, 0.918 walked with a producer) against
    4096^3 (64 steps: the fixed cost is 4% of a tile) and 2048^3 (one tile an SM)."""
    bmm = walk_clocks(128, 256, 64, 16, 256, 132, 4) / grid_clocks(128, 256, 64, 16, 256, 1, 132, 4)
    square = walk_clocks(128, 256, 64, 64, 512, 132, 4) / grid_clocks(
        128, 256, 64, 64, 512, 1, 132, 4
    )
    one = walk_clocks(128, 256, 64, 32, 128, 132, 4) / grid_clocks(128, 256, 64, 32, 128, 1, 132, 4)
    assert 0.9 < bmm < 0.94 and 0.95 < square < 0.98 and one == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("example", "sizes", "walked"),
    [
        ("bmm.tile", {"Z": 8, "M": 1024, "N": 1024, "K": 1024}, True),
        ("matmul.tile", {"M": 2304, "N": 4608, "K": 1536}, True),
        ("matmul.tile", {"M": 2048, "N": 2048, "K": 2048}, False),  # one tile an SM
        ("matmul.tile", {"M": 4096, "N": 4096, "K": 4096}, False),  # 0.97: within the error
        ("bmm.tile", {"Z": 64, "M": 256, "N": 256, "K": 64}, False),  # two blocks an SM
    ],
)
def test_tiling_plans_the_walk_and_pipeline_makes_it(example, sizes, walked):
    d = _decisions(example, example.removesuffix(".tile"), sizes)
    assert (d["pipeline.persistent"], d["pipeline.warp_specialize"]) == (int(walked),) * 2


def _dot(example: str, kernel: str):
    import tilec

    module = tilec.compile(
        str(EXAMPLES / example), kernels=[kernel], pipeline="canonicalize,cse"
    ).module
    return next(op for op in module.lookup(kernel).walk() if isinstance(op, T.DotOp))


def test_epilogue_operands_are_the_loaded_tiles_not_the_constants():
    # gelu(acc + bias[tn]): the bias row spans the columns; gelu's constants are not held.
    assert epilogue_operands(_dot("matmul_bias_gelu.tile", "matmul_bias_gelu"), "BM", "BN") == [
        (False, True)
    ]
    assert epilogue_operands(_dot("matmul.tile", "matmul"), "BM", "BN") == []
    assert epilogue_words([(False, True)], 256) == 64
    assert epilogue_words([(True, True)], 128) == 64
    assert epilogue_words([(True, False)], 128) == 2


_RESIDUAL = """
def residual(a: f16[M, K], b: f16[K, N], r: f16[M, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = (acc + r[tm, tn].to(f32)).to(f16)
"""


def test_a_whole_tile_the_epilogue_adds_is_held_but_not_one_a_masked_store_keeps():
    import tilec

    # acc + r[tm, tn]: r's whole tile is held beside the accumulator.
    module = tilec.compile(_RESIDUAL, kernels=["residual"], pipeline="canonicalize,cse").module
    dot = next(op for op in module.lookup("residual").walk() if isinstance(op, T.DotOp))
    assert epilogue_operands(dot, "BM", "BN") == [(True, True)]
    # moe_gemm's where(mine[:, None], acc, y[tm, tn]) is a store under the rows' mask
    # (canonicalize's StoreKeepsLanes): y is not read, and nothing is held beside acc.
    assert epilogue_operands(_dot("moe_gemm.tile", "moe_gemm"), "BT", "BN") == []


_MASKED = """
def masked(q: f32[S, D], k: f32[T, D], o: f32[S, D], W: i32):
    for ts in tiles(S):
        acc = zeros([ts, D], f32)
        for tt in tiles(T):
            s = q[ts, :] @ k[tt, :].T
            keys = offsets(tt)[None, :]
            queries = offsets(ts)[:, None]
            s = where(MASK, s, 0.0)
            acc += s @ k[tt, :]
        o[ts, :] = acc
"""


@pytest.mark.parametrize(
    "mask,walk",
    [
        ("keys <= queries", "triangle"),
        ("queries >= keys", "triangle"),  # the sides swapped
        ("keys < queries + 1", "triangle"),
        ("(keys <= queries) & (keys > queries - W)", "band"),  # a sliding window
        ("keys < T", None),  # padding: no query block in it
        ("keys >= queries", "triangle"),  # hides a prefix: block i walks the n - i from it
    ],
)
def test_mask_walk_reads_how_a_mask_limits_the_key_tiles(mask, walk):
    """`mask_walk`: a comparison of the loop's offsets with the block's that hides a suffix
    of the tiles makes query block i walk i + 1 (a triangle; a prefix, the walk from the other
    end); one hiding a suffix and another a prefix, a band; a mask no block index takes part
    in, none."""
    import tilec
    from tilec.dialects import scf
    from tilec.dialects import tile as T
    from tilec.passes.wgmma_model import mask_walk

    program = tilec.compile(
        _MASKED.replace("MASK", mask), pipeline='assume{all="divisible"},canonicalize'
    )
    (loop,) = [
        op
        for op in program.module.walk()
        if isinstance(op, scf.ForOp) and any(isinstance(x, T.SelectOp) for x in op.body.walk())
    ]
    # The first select is the kernel's `where`; the frontend's padding mask of the second
    # dot's contraction follows it.
    select = next(op for op in loop.body.walk() if isinstance(op, T.SelectOp))
    assert mask_walk(loop, select) == walk
