"""Thread-block clusters on the CPU (passes/pipeline_cluster.py, tilec/interp/cluster.py): two
blocks of neighbouring row tiles that share the other operand's tile by TMA multicast compute,
in the interpreter's coroutines (both blocks, both regions each), bit for bit what the loop
before pipelining did -- also where an odd number of row tiles pads the grid with a block that
stores nothing; the interpreter catches a broken cluster protocol; the pass says why it
refuses a kernel."""

from __future__ import annotations

import numpy as np
import pytest

import tilec
from tests.unit.test_warp_specialize import _specialized
from tests.validation import run_kernel
from tilec.diagnostics import TileError
from tilec.dialects import tma as TM
from tilec.dialects.builtin import CLUSTER_ATTRIBUTE
from tilec.dialects.shared import BarrierOp
from tilec.interp import InterpreterError
from tilec.interp.cluster import clusters
from tilec.interp.runner import random_arguments
from tilec.ir.builder import Builder
from tilec.ir.printer import print_op
from tilec.tune.space import read_back

CLUSTERED = "cluster=2 "
EXAMPLES = "examples"
CASES = [
    ("gemm_layouts.tile", "gemm_nn", {"M": 208, "N": 320, "K": 400}),  # 2 row tiles
    ("gemm_layouts.tile", "gemm_nn", {"M": 336, "N": 272, "K": 144}),  # 3: one block pads
    ("bmm.tile", "bmm", {"Z": 2, "M": 96, "N": 160, "K": 48}),  # one row tile a batch
    ("matmul_bias_gelu.tile", "matmul_bias_gelu", {"M": 176, "N": 256, "K": 96}),
    ("gemm_layouts.tile", "gemm_nt_bf16", {"M": 144, "N": 272, "K": 208}),  # K-major b
    ("gemm_layouts.tile", "gemm_tt", {"M": 208, "N": 320, "K": 400}),
    ("fp8_gemm.tile", "fp8_gemm", {"M": 400, "N": 272, "K": 208}),  # 8-bit, k32 wgmma
    ("int8_gemm.tile", "int8_gemm_nt", {"M": 208, "N": 80, "K": 272}),
]


def _clustered(example: str, kernel: str, extents: dict, options: str = CLUSTERED):
    return _specialized(example, kernel, extents, options)


def _assert_same_bits(before, module, kernel: str, extents: dict, seed: int) -> None:
    """`module`'s kernel (in clusters) computes bit for bit what `before`'s did."""
    inputs = random_arguments(module.lookup(kernel), extents, seed=seed)
    got, sizes = run_kernel(module, kernel, inputs, None)
    expected, _ = run_kernel(before, kernel, inputs, sizes)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "example, kernel, extents",
    CASES,
    ids=[f"{k}:{'x'.join(map(str, e.values()))}" for _, k, e in CASES],
)
def test_two_blocks_sharing_a_tile_compute_what_the_loop_did(example, kernel, extents):
    before, module, _ = _clustered(example, kernel, extents)
    func = module.lookup(kernel)
    dims = [int(e.value) for e in func.attributes[CLUSTER_ATTRIBUTE].elements]
    assert sorted(dims, reverse=True)[:2] == [2, 1] and dims.count(2) == 1
    shared = [op for op in func.walk() if isinstance(op, TM.TmaCopyOp) and op.multicast_ctas == 2]
    assert shared and all(not op.is_folded for op in shared)
    _assert_same_bits(before, module, kernel, extents, seed=5)


def _gemm(extents=None):
    return _clustered("gemm_layouts.tile", "gemm_nn", extents or {"M": 208, "N": 320, "K": 400})


def _run(module, extents=None):
    func = module.lookup("gemm_nn")
    extents = extents or {"M": 208, "N": 320, "K": 400}
    run_kernel(module, "gemm_nn", random_arguments(func, extents, seed=3), None)


def test_the_clustered_kernel_shares_b_and_releases_stages_in_both_blocks():
    _, module, context = _gemm()
    func = module.lookup("gemm_nn")
    copies = [op for op in func.walk() if isinstance(op, TM.TmaCopyOp)]
    assert {op.view.name_hint: op.multicast_ctas for op in copies} == {"a": 1, "b": 2}
    releases = [op for op in func.walk() if isinstance(op, TM.MbarrierArriveOp)]
    assert releases and all(op.cluster_ctas == 2 for op in releases)
    inits = {op.barriers: op.arrivals for op in func.walk() if isinstance(op, TM.MbarrierInitOp)}
    assert inits[releases[0].barriers] == 2
    top = func.body.block.ops
    assert sum(isinstance(op, TM.ClusterBarrierOp) for op in top) == 2
    assert isinstance(
        top[top.index(next(o for o in top if isinstance(o, TM.MbarrierInvalOp))) - 1],
        TM.ClusterBarrierOp,
    )
    said = [r.message for r in context.remarks if "clusters of 2" in r.message]
    assert said and "multicasts" in said[0] and "along M" in said[0]
    assert read_back(func)["pipeline.cluster"] == 2
    text = print_op(module)
    from tilec.ir.parser import parse_module

    assert print_op(parse_module(text)) == text


def test_the_scratch_of_the_epilogue_still_reuses_the_stages():
    """The cluster's mbarriers live to the kernel's end; the epilogue's scratch goes below
    them, into the stages no longer in use, so the kernel needs no more shared memory."""
    _, plain, _ = _specialized(
        "gemm_layouts.tile", "gemm_nn", {"M": 208, "N": 320, "K": 400}, "warp_specialize=1 "
    )
    _, clustered, _ = _gemm()
    size = [
        int(m.lookup("gemm_nn").attributes["tilec.shared_bytes"].value) for m in (plain, clustered)
    ]
    assert size[0] == size[1]


def test_a_block_reaching_the_other_before_a_cluster_barrier_is_caught():
    _, module, _ = _gemm()
    func = module.lookup("gemm_nn")
    first = next(op for op in func.body.block.ops if isinstance(op, TM.ClusterBarrierOp))
    Builder.before_op(first).create(BarrierOp)
    first.erase()
    with pytest.raises(InterpreterError, match=r"reaches (mbarrier \d+ of )?block \(1,( 0)?\)"):
        _run(module)


def test_invalidating_barriers_the_other_block_may_still_reach_is_caught():
    _, module, _ = _gemm()
    func = module.lookup("gemm_nn")
    last = [op for op in func.body.block.ops if isinstance(op, TM.ClusterBarrierOp)][-1]
    last.erase()
    with pytest.raises(InterpreterError, match="another block of the cluster reached"):
        _run(module)


def test_releasing_a_stage_in_one_block_only_deadlocks():
    """The producer's multicast writes both blocks' slots, so it waits for both blocks'
    consumers; releasing only the block's own stage leaves that wait one arrival short."""
    _, module, _ = _gemm()
    for op in module.lookup("gemm_nn").walk():
        if isinstance(op, TM.MbarrierArriveOp):
            del op.attributes["cluster"]
    with pytest.raises(InterpreterError, match=r"would wait forever|deadlock"):
        _run(module)


def test_a_multicast_in_a_kernel_without_clusters_is_an_error():
    _, module, _ = _gemm()
    del module.lookup("gemm_nn").attributes[CLUSTER_ATTRIBUTE]
    with pytest.raises(InterpreterError, match="does not run in clusters"):
        _run(module)


@pytest.mark.parametrize(
    "kernel, options, why",
    [
        ("gemm_nn", "cluster=2 warp_specialize=0 ", "not warp-specialized"),
        ("gemm_nn", "cluster=3 ", "must be -1 .automatic., 1 .no clusters. or 2"),
    ],
)
def test_a_kernel_that_cannot_run_in_clusters_is_refused_with_the_reason(kernel, options, why):
    with pytest.raises(TileError, match=why):
        _clustered("gemm_layouts.tile", kernel, {"M": 208, "N": 320, "K": 400}, options)


def test_clusters_run_in_rank_order_and_cover_the_grid():
    grid = (4, 3)
    got = list(clusters(grid, (2, 1)))
    assert got[0] == [(0, 0), (1, 0)] and len(got) == 6
    assert sorted(p for c in got for p in c) == sorted(np.ndindex(*grid))
    assert [TM.cluster_rank(p, (2, 1)) for p in got[3]] == [0, 1]


PERSISTENT = "cluster=2 warp_specialize=1 persistent=1 "
PERSISTENT_CASES = [
    ("gemm_layouts.tile", "gemm_nn", {"M": 208, "N": 320, "K": 400}),  # 2 x 2 tiles
    ("gemm_layouts.tile", "gemm_nn", {"M": 336, "N": 272, "K": 144}),  # 3 row tiles: padded
    ("gemm_layouts.tile", "gemm_nt_bf16", {"M": 144, "N": 272, "K": 208}),
    ("matmul_bias_gelu.tile", "matmul_bias_gelu", {"M": 176, "N": 256, "K": 96}),
]


@pytest.mark.parametrize(
    "example, kernel, extents",
    PERSISTENT_CASES,
    ids=[f"{k}:{'x'.join(map(str, e.values()))}" for _, k, e in PERSISTENT_CASES],
)
def test_persistent_clusters_walk_pairs_of_tiles(example, kernel, extents):
    """With persistent blocks the two blocks of a cluster (x neighbours) walk neighbouring
    tiles -- the row tiles counted in whole clusters, the padding tile's epilogue skipped --
    and the interpreter's four blocks compute what the loop did."""
    before, module, _ = _clustered(example, kernel, extents, PERSISTENT)
    func = module.lookup(kernel)
    assert "tilec.persistent" in func.attributes
    assert next(int(e.value) for e in func.attributes[CLUSTER_ATTRIBUTE].elements) == 2
    _assert_same_bits(before, module, kernel, extents, seed=9)


def test_persistent_clusters_across_the_batch_are_refused():
    with pytest.raises(TileError, match="walk the tiles along grid axis 0 first"):
        _clustered("bmm.tile", "bmm", {"Z": 2, "M": 96, "N": 160, "K": 48}, PERSISTENT)


def test_a_grouped_order_of_odd_groups_is_refused():
    """Groups of 3 row tiles would put blocks of different columns into one cluster (both
    would share a tile of b that only one of them reads)."""
    from tests.unit.test_tma_copies import _before_pipeline
    from tilec.ir.attributes import IntegerAttr

    passes, module, context = _before_pipeline(
        "gemm_layouts.tile", "gemm_nn", {"M": 208, "N": 320, "K": 400}, CLUSTERED
    )
    module.lookup("gemm_nn").attributes["tilec.group_m"] = IntegerAttr(3)
    at = [p.name for p in passes].index("pipeline")
    with pytest.raises(TileError, match=r"grouped block order .groups of 3"):
        for p in passes[at:]:
            p.run(module, context)


def test_a_gemm_whose_weight_tile_comes_through_a_load_is_refused():
    """Two blocks of one cluster must read the same tile of the shared operand; a tile
    chosen by a load (an expert id read per row tile) may differ between them. Warp
    specialization already refuses such copies; the cluster's refusal says why."""
    import tilec
    from tilec.compiler import DEFAULT_PIPELINE, target_pipeline
    from tilec.passmanager import PassContext, parse_pipeline

    source = """
def gathered(a: f16[M, K], w: f16[E, K, N], ids: i32[M], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        e = ids[tile_start(tm)]
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ w[e, tk, tn]
        c[tm, tn] = acc.to(f16)
"""
    pipeline = target_pipeline(
        DEFAULT_PIPELINE.replace("tiling,", 'tiling{extents="M=512,N=512,K=256"},'), "sm_90a"
    ).replace("pipeline{", "pipeline{" + CLUSTERED, 1)
    module = tilec.compile(source).module
    context = PassContext()
    with pytest.raises(
        TileError, match=r"cluster = 2, but .*only the consumers' warps compute \(%e\)"
    ):
        for p in parse_pipeline('assume{all="aligned,unit,divisible"},' + pipeline):
            context.current_pass = p.name
            p.run(module, context)


def _compiled_for(example: str, kernel: str, shapes, dtype=np.float16, pass_options=None):
    """`kernel` compiled for sm_90a for zero arrays of `shapes` (one per parameter, in order;
    a scalar dtype for the others of `dtypes`)."""
    from tilec.jit import load_kernel

    fn = load_kernel(f"{EXAMPLES}/{example}", kernel, pass_options=pass_options or {})
    arrays = [np.zeros(shape, d) for shape, d in shapes]
    return fn.compile_for(*arrays, arch="sm_90a")


F16 = np.float16


@pytest.mark.parametrize(
    "example, kernel, shapes, clustered",
    [
        # b's rows 6000 bytes, 16-byte aligned only: the TMA unit asks two lines a box row
        (
            "gemm_layouts.tile",
            "gemm_nn",
            [((512, 1024), F16), ((1024, 3000), F16), ((512, 3000), F16)],
            True,
        ),
        # 3008: 64-byte aligned rows, the unit keeps up (1.12x slower clustered on the H100)
        (
            "gemm_layouts.tile",
            "gemm_nn",
            [((512, 1024), F16), ((1024, 3008), F16), ((512, 3008), F16)],
            False,
        ),
        # a @ b.T (nn.Linear): b [N, K] with K = 1000, 2000-byte rows
        (
            "gemm_layouts.tile",
            "gemm_nt",
            [((512, 1000), F16), ((3000, 1000), F16), ((512, 3000), F16)],
            True,
        ),
        # a batch of GEMMs, the cluster along the row axis (not grid axis 0)
        (
            "bmm.tile",
            "bmm",
            [((4, 1000, 1000), F16), ((4, 1000, 1000), F16), ((4, 1000, 1000), F16)],
            True,
        ),
        # 8-bit rows of 4096 bytes: a multiple of 16 elements is all the specialization says,
        # which is not a known straddle
        (
            "int8_gemm.tile",
            "int8_gemm",
            [
                ((512, 1024), np.int8),
                ((1024, 4096), np.int8),
                ((512,), np.float32),
                ((4096,), np.float32),
                ((512, 4096), F16),
            ],
            False,
        ),
    ],
    ids=["nn-3000", "nn-3008", "nt-K1000", "bmm-1000", "int8-4096"],
)
def test_clusters_by_default_where_the_shared_operand_straddles_lines(
    example, kernel, shapes, clustered
):
    """pipeline's `cluster = -1` (the default, `cluster_motive`): clusters where the operand
    they would share has rows known to straddle 128-byte lines (16-byte aligned only), the
    TMA unit's requests then the bound -- measured 0.68-0.86x of the unclustered time at
    4000x3000x1000, 2000x1000x3000, a @ b.T at K = 1000 and bmm 4x1000^3, and 1.06-1.12x
    slower at 4096^3 and N = 3008 (H100, 2026-12-06)."""
    compiled = _compiled_for(example, kernel, shapes)
    assert (".reqnctapercluster" in compiled.ptx) == clustered
    assert (compiled.abi.cluster is not None and max(compiled.abi.cluster) == 2) == clustered
    program = tilec.compile(
        f"{EXAMPLES}/{example}", kernels=[kernel], target="tir", pipeline=compiled.pipeline
    )
    said = [r.message for r in program.remarks if "clusters of 2 blocks wanted" in r.message]
    assert bool(said) == clustered


def test_no_automatic_clusters_where_warp_specialization_is_turned_off():
    """The automatic choice asks for warp specialization only where it is left at its
    default; `warp_specialize = 0` keeps the kernel out of clusters, without an error."""
    shapes = [((512, 1024), F16), ((1024, 3000), F16), ((512, 3000), F16)]
    options = {"pipeline": {"warp_specialize": 0}}
    compiled = _compiled_for("gemm_layouts.tile", "gemm_nn", shapes, pass_options=options)
    assert ".reqnctapercluster" not in compiled.ptx and "setmaxnreg" not in compiled.ptx
