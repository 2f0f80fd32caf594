"""GEMMs whose operands the TMA unit copies (sm_90a), against torch: every operand layout of
examples/gemm_layouts.tile, f16 and bf16, at shapes with partial tiles along M, N and K (the
unit zero-fills outside the tensor), K a multiple of 8 but not 16 (rows of 16-byte multiples),
and tiny ones; the same kernels with `pipeline.tma = 0` (cp.async) give the same bits; and a
layout the unit cannot take keeps cp.async. Warp-specialized, persistent and clustered kernels
give the bits of the plain ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).parents[2] / "examples"
TMA = "cp.async.bulk.tensor"


def _kernel(name: str, tma: int, **options):
    from tilec.jit import load_kernel

    return load_kernel(
        EXAMPLES / "gemm_layouts.tile", name, pass_options={"pipeline": {"tma": tma}}, **options
    )


def _operands(m, n, k, layout, dtype, seed):
    torch.manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    a_stored = a.t().contiguous() if layout[0] == "t" else a
    b_stored = b.t().contiguous() if layout[1] == "t" else b
    return a, b, a_stored, b_stored


SHAPES = [
    (4096, 4096, 4096),
    (4000, 3000, 1000),  # partial tiles along M and N, K a multiple of 8 only
    (1000, 520, 72),  # K: one full and one partial tile of 64
    (257, 129, 136),
    (8, 64, 8),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_tma_gemm_matches_torch_and_cp_async(m, n, k, layout, dtype):
    name = f"gemm_{layout}" + ("_bf16" if dtype == torch.bfloat16 else "")
    kernel = _kernel(name, -1)
    a, b, a_stored, b_stored = _operands(m, n, k, layout, dtype, m + n + k)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    kernel(a_stored, b_stored, c)
    expected = (a.float() @ b.float()).to(dtype)
    torch.testing.assert_close(c, expected, rtol=2e-2, atol=0.5)
    plain = _kernel(name, 0)
    c0 = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    plain(a_stored, b_stored, c0)
    assert torch.equal(c, c0), "TMA copies and cp.async copies must give the same bits"
    ptx = kernel.compile_for(a_stored, b_stored, c).ptx
    # the leading strides of a and b, in elements (a.T @ b.T is computed as (b @ a).T)
    rows = {"nn": (k, n), "nt": (k, k), "tn": (m, n)}.get(layout)
    if rows and all(r % 8 == 0 for r in rows) and "wgmma" in ptx:
        assert TMA in ptx  # both operands' rows are 16-byte multiples
    assert TMA not in plain.compile_for(a_stored, b_stored, c0).ptx


def test_rows_not_16_byte_aligned_keep_cp_async():
    """K = 1001: rows of 2002 bytes cannot be described to the TMA unit: cp.async, right."""
    kernel = _kernel("gemm_nt", -1)
    a, b, a_stored, b_stored = _operands(300, 200, 1001, "nt", torch.float16, 3)
    c = torch.empty(300, 200, device="cuda", dtype=torch.float16)
    kernel(a_stored, b_stored, c)
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=2e-2, atol=0.5)
    assert TMA not in kernel.compile_for(a_stored, b_stored, c).ptx


def test_a_pinned_tma_on_unaligned_rows_is_a_clear_error():
    from tilec.diagnostics import TileError

    # (the launch would copy such rows into pitched buffers, which TMA reads: not this test's)
    kernel = _kernel("gemm_nt", 1, pitch_operands=False)
    _a, _b, a_stored, b_stored = _operands(64, 64, 1001, "nt", torch.float16, 4)
    c = torch.empty(64, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(TileError, match=r"stride 0 of a \(a.stride.0\)"):
        kernel(a_stored, b_stored, c)


# Each case compiles two kernels for its shape (about 30 s a case on the device): a few that
# cover the walk -- many tiles a block, partial tiles, one tile -- over the operand layouts.
PERSISTENT_CASES = [
    (4000, 3000, 1000, "nn"),  # 384 tiles of 128x256: each of the 132 blocks walks 2 or 3
    (4000, 3000, 1000, "nt"),
    (1000, 520, 72, "tn"),
    (257, 129, 136, "tt"),
    (8, 64, 8, "nn"),  # one tile: one block
]


@pytest.mark.parametrize("m, n, k, layout", PERSISTENT_CASES)
def test_persistent_blocks_give_the_bits_of_a_block_a_tile(m, n, k, layout):
    """pipeline's option persistent (passes/pipeline_persistent.py): as many blocks as the GPU
    holds walk the tiles, the next tile's copies issued before this tile's epilogue, which
    exchanges the tile in row pieces through a scratch out of the stages (`chunks`): the same
    bits as a block a tile."""
    from tilec.jit import load_kernel

    name = f"gemm_{layout}"
    persistent = load_kernel(
        EXAMPLES / "gemm_layouts.tile", name, pass_options={"pipeline": {"persistent": -1}}
    )
    plain = _kernel(name, -1)
    a, b, a_stored, b_stored = _operands(m, n, k, layout, torch.float16, m * 7 + n + k)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    persistent(a_stored, b_stored, c)
    c0 = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    plain(a_stored, b_stored, c0)
    assert torch.equal(c, c0)
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=2e-2, atol=0.5)


def test_persistent_bmm_walks_its_batch_too():
    from tilec.jit import load_kernel

    bmm = load_kernel(EXAMPLES / "bmm.tile", "bmm", pass_options={"pipeline": {"persistent": -1}})
    torch.manual_seed(5)
    a = torch.randn(6, 520, 136, device="cuda", dtype=torch.float16)
    b = torch.randn(6, 136, 392, device="cuda", dtype=torch.float16)
    c = torch.full((6, 520, 392), float("nan"), device="cuda", dtype=torch.float16)
    bmm(a, b, c)
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=2e-2, atol=0.5)


WARP_SPECIALIZED_CASES = [
    (4096, 4096, 4096, "nn", torch.float16),
    (4000, 3000, 1000, "nt", torch.float16),  # partial tiles, K a multiple of 8 only
    (1000, 520, 72, "tn", torch.bfloat16),  # a K loop of two steps, A read M-major
    (257, 129, 136, "tt", torch.float16),  # small: two blocks an SM, may be refused
    (8, 64, 8, "nn", torch.float16),  # one step: the producer's wait on a fresh stage
]
# two blocks of neighbouring row tiles share b's tile by TMA multicast (pipeline_cluster.py)
CLUSTERED = {"pipeline": {"cluster": 2}}
WARP_SPECIALIZED = {  # without clusters (which `cluster = -1` adds where b's rows straddle)
    "warp_specialize": {"pipeline": {"warp_specialize": -1, "cluster": 1}},
    "persistent": {"pipeline": {"warp_specialize": -1, "persistent": -1, "cluster": 1}},
}


@pytest.mark.parametrize("variant", list(WARP_SPECIALIZED))
@pytest.mark.parametrize("m, n, k, layout, dtype", WARP_SPECIALIZED_CASES)
def test_warp_specialized_gemm_gives_the_bits_of_the_plain_one(m, n, k, layout, dtype, variant):
    """pipeline's option warp_specialize (passes/pipeline_warp_specialize.py): a producer
    warpgroup issues the copies behind the stages' empty mbarriers, the consumer warps run the
    wgmma loop and the epilogue (setmaxnreg, the consumers' named barrier); with persistent
    blocks both walk the tiles: the same bits as the kernel without it, and torch's result.
    At 1000 rows and more the kernel must be specialized (one block an SM)."""
    from tilec.jit import load_kernel

    name = f"gemm_{layout}" + ("_bf16" if dtype == torch.bfloat16 else "")
    specialized = load_kernel(
        EXAMPLES / "gemm_layouts.tile", name, pass_options=WARP_SPECIALIZED[variant]
    )
    plain = _kernel(name, -1)
    a, b, a_stored, b_stored = _operands(m, n, k, layout, dtype, m * 5 + n + k)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    specialized(a_stored, b_stored, c)
    c0 = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    plain(a_stored, b_stored, c0)
    torch.testing.assert_close(c, (a.float() @ b.float()).to(dtype), rtol=2e-2, atol=0.5)
    assert torch.equal(c, c0)
    ptx = specialized.compile_for(a_stored, b_stored, c).ptx
    if m >= 1000:  # a.T @ b too: its A is read M-major by descriptor, no register A
        assert "setmaxnreg.inc" in ptx and "mbarrier.arrive.shared" in ptx


@pytest.mark.parametrize("variant", [*WARP_SPECIALIZED, "cluster"])
def test_warp_specialized_bmm_and_fused_epilogue(variant):
    """A batched GEMM (3-D tensor maps, a 3-D walk) and a bias + GELU epilogue in the
    consumer region; in clusters (along bmm's row axis, the batch another) at an odd number
    of row tiles, the padding block's epilogue skipped."""
    from tilec.jit import load_kernel

    ws = {**WARP_SPECIALIZED, "cluster": CLUSTERED}[variant]
    rows = 1100 if variant == "cluster" else 1000
    bmm = load_kernel(EXAMPLES / "bmm.tile", "bmm", pass_options=ws)
    torch.manual_seed(6)
    a = torch.randn(6, rows, 520, device="cuda", dtype=torch.float16)
    b = torch.randn(6, 520, 776, device="cuda", dtype=torch.float16)
    c = torch.full((6, rows, 776), float("nan"), device="cuda", dtype=torch.float16)
    bmm(a, b, c)
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=2e-2, atol=0.5)
    fused = load_kernel(EXAMPLES / "matmul_bias_gelu.tile", "matmul_bias_gelu", pass_options=ws)
    x = torch.randn(rows, 520, device="cuda", dtype=torch.float16)
    w = torch.randn(520, 776, device="cuda", dtype=torch.float16)
    bias = torch.randn(776, device="cuda", dtype=torch.float16)
    y = torch.empty(rows, 776, device="cuda", dtype=torch.float16)
    fused(x, w, bias, y)
    expected = torch.nn.functional.gelu(x.float() @ w.float() + bias.float())  # erf GELU
    torch.testing.assert_close(y, expected.half(), rtol=2e-2, atol=0.5)
    for kernel, args in ((bmm, (a, b, c)), (fused, (x, w, bias, y))):
        ptx = kernel.compile_for(*args).ptx
        assert "setmaxnreg.inc" in ptx
        assert (".reqnctapercluster" in ptx) == (variant == "cluster")


CLUSTER_CASES = [
    (4096, 4096, 4096, "nn", torch.float16),
    (4000, 3000, 1000, "nn", torch.float16),  # b's rows straddle lines: what clusters are for
    (1100, 3000, 1000, "nn", torch.bfloat16),  # 9 row tiles: a block pads the last cluster
    (4000, 3000, 1000, "nt", torch.float16),  # K-major b, its boxes halved to split in two
    (1100, 520, 72, "nt", torch.bfloat16),
]
CLUSTER_VARIANTS = {
    "cluster": CLUSTERED,
    # pairs of x neighbours walking neighbouring tiles (the row tiles counted in pairs)
    "persistent": {"pipeline": {"cluster": 2, "persistent": 1}},
}


@pytest.mark.parametrize("variant", list(CLUSTER_VARIANTS))
@pytest.mark.parametrize("m, n, k, layout, dtype", CLUSTER_CASES)
def test_clustered_gemm_gives_the_bits_of_the_warp_specialized_one(m, n, k, layout, dtype, variant):
    """pipeline's option cluster (passes/pipeline_cluster.py): two blocks of neighbouring row
    tiles each copy half of b's tile and the TMA unit multicasts it to both; each releases a
    stage in both blocks. The same bits as the warp-specialized kernel without clusters (the
    same dots in the same order), torch's result, and the launch in whole clusters."""
    from tilec.jit import load_kernel

    name = f"gemm_{layout}" + ("_bf16" if dtype == torch.bfloat16 else "")
    clustered = load_kernel(
        EXAMPLES / "gemm_layouts.tile", name, pass_options=CLUSTER_VARIANTS[variant]
    )
    alone = load_kernel(
        EXAMPLES / "gemm_layouts.tile", name, pass_options=WARP_SPECIALIZED["warp_specialize"]
    )
    a, b, a_stored, b_stored = _operands(m, n, k, layout, dtype, m * 3 + n + k)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    clustered(a_stored, b_stored, c)
    c0 = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    alone(a_stored, b_stored, c0)
    torch.testing.assert_close(c, (a.float() @ b.float()).to(dtype), rtol=2e-2, atol=0.5)
    assert torch.equal(c, c0)
    for _ in range(20):  # a protocol race shows as bits that change between launches
        clustered(a_stored, b_stored, c)
    torch.cuda.synchronize()
    assert torch.equal(c, c0)
    ptx = clustered.compile_for(a_stored, b_stored, c).ptx
    assert ".reqnctapercluster 2, 1, 1" in ptx and ".multicast::cluster" in ptx


WARP_SPECIALIZED_ATTENTION = [
    # kernel, (B, H, G, M, N, D): plain and causal at d64 and d128, grouped-query heads, lengths
    # no tile divides, one query tile, a single key tile (the producer's first wait only)
    ("attention", (2, 4, 4, 1024, 1024, 128)),
    ("attention", (1, 3, 3, 1537, 1537, 64)),
    ("attention", (1, 2, 2, 40, 24, 64)),
    ("attention_causal", (2, 4, 4, 1000, 1000, 128)),
    ("attention_causal", (1, 2, 2, 257, 257, 64)),
    ("attention_gqa", (1, 8, 2, 777, 1100, 128)),
]


@pytest.mark.parametrize("kernel, shape", WARP_SPECIALIZED_ATTENTION)
def test_warp_specialized_attention_gives_the_bits_of_the_plain_one(kernel, shape):
    """Attention's two TMA loops (the masks' main loop and tail) under one protocol of stages,
    filled by a producer warpgroup while the consumers stage q and run both loops, with the
    launch bounds of the 2 blocks an SM its stages were chosen for: the bits of the kernel
    without it, and SDPA's result."""
    from tilec.jit import load_kernel

    b, h, g, m, n, d = shape
    torch.manual_seed(m + n + d)
    q = torch.randn(b, h, m, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, g, n, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, g, n, d, device="cuda", dtype=torch.float16)
    scale = d**-0.5
    results = []
    for option in (1, 0):
        run = load_kernel(
            EXAMPLES / "attention.tile",
            kernel,
            pass_options={"pipeline": {"warp_specialize": option}},
        )
        o = torch.full_like(q, float("nan"))
        run(q, k, v, o, scale)
        results.append(o)
        if option == 1:
            ptx = run.compile_for(q, k, v, o, scale).ptx
            assert "setmaxnreg.inc" in ptx and "mbarrier.arrive.shared" in ptx
    kk = k.repeat_interleave(h // g, dim=1)
    vv = v.repeat_interleave(h // g, dim=1)
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.float(), kk.float(), vv.float(), is_causal=kernel == "attention_causal", scale=scale
    )
    torch.testing.assert_close(results[0].float(), expected, rtol=2e-2, atol=2e-2)
    assert torch.equal(results[0], results[1])


@pytest.mark.parametrize(
    "kernel, shape, options",
    [
        ("attention", (2, 4, 4, 1024, 1024, 128), {"tiles": "BM=64,BN=64"}),
        ("attention_causal", (1, 3, 3, 1537, 1537, 128), {"tiles": "BS=64,BT=64"}),
        ("attention", (1, 2, 2, 777, 1000, 64), {"tiles": "BM=64,BN=128"}),
        (
            "attention_gqa",
            (1, 8, 2, 777, 1100, 128),
            {"tiles": "BM=64,BN=64", "pipeline": {"warp_specialize": 1}},
        ),
    ],
)
def test_q_read_from_shared_memory_gives_the_bits_of_q_in_registers(kernel, shape, options):
    """tiling's option staged_a = shared: q @ k.T reads q by descriptor from its buffer (its
    8-row groups in the accumulator's order, two column blocks at d128) every step -- the
    bits of the kernel that holds q's fragments, and SDPA's result; with a producer
    warpgroup too. The tiles are pinned, so that both hold the same scores in the same
    order (unpinned, d128 takes 128x128 tiles where q is read from shared memory and not
    where it is held)."""
    from tilec.jit import load_kernel

    options = dict(options)
    tiles = options.pop("tiles")
    b, h, g, m, n, d = shape
    torch.manual_seed(m + d)
    q = torch.randn(b, h, m, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, g, n, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, g, n, d, device="cuda", dtype=torch.float16)
    results = []
    for staged in ("shared", "registers"):
        run = load_kernel(
            EXAMPLES / "attention.tile",
            kernel,
            pass_options={**options, "tiling": {"staged_a": staged, "tiles": tiles}},
        )
        o = torch.full_like(q, float("nan"))
        run(q, k, v, o, d**-0.5)
        results.append(o)
    kk = k.repeat_interleave(h // g, dim=1)
    vv = v.repeat_interleave(h // g, dim=1)
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.float(), kk.float(), vv.float(), is_causal=kernel == "attention_causal", scale=d**-0.5
    )
    torch.testing.assert_close(results[0].float(), expected, rtol=2e-2, atol=2e-2)
    assert torch.equal(results[0], results[1])


@pytest.mark.parametrize(
    "kernel, shape",
    [
        ("attention", (2, 4, 4, 1024, 1024, 128)),
        ("attention_causal", (1, 3, 3, 1537, 1537, 64)),
        ("attention", (1, 2, 2, 100, 40, 128)),  # one query tile, one key tile
    ],
)
def test_pingpong_warpgroups_give_the_bits_of_free_ones(kernel, shape):
    """pipeline's option pingpong: two consumer warpgroups (BM = 128 on 8 warps, a producer
    warpgroup) take turns issuing each step's q @ k.T on named barriers -- the same bits as
    without turns (no deadlock at any trip count), and SDPA's result."""
    from tilec.jit import load_kernel

    b, h, g, m, n, d = shape
    torch.manual_seed(m * 3 + d)
    q = torch.randn(b, h, m, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, g, n, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, g, n, d, device="cuda", dtype=torch.float16)
    dims = ("S", "T") if kernel == "attention_causal" else ("M", "N")
    results = []
    for pingpong in (1, 0):
        run = load_kernel(
            EXAMPLES / "attention.tile",
            kernel,
            tile={dims[0]: 128},
            warps=8,
            pass_options={"pipeline": {"warp_specialize": 1, "pingpong": pingpong}},
        )
        o = torch.full_like(q, float("nan"))
        run(q, k, v, o, d**-0.5)
        torch.cuda.synchronize()
        results.append(o)
        if pingpong:
            assert "bar.arrive" in run.compile_for(q, k, v, o, d**-0.5).ptx
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=kernel == "attention_causal", scale=d**-0.5
    )
    torch.testing.assert_close(results[0].float(), expected, rtol=2e-2, atol=2e-2)
    assert torch.equal(results[0], results[1])
