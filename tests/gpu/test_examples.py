"""Every kernel of every example, on the GPU, at several sizes (awkward ones included), against
the example's numpy reference, with every output inside a guard region that must stay
untouched (`tilec.gpucheck.run_example`)."""

from __future__ import annotations

import pytest

from tilec.gpucheck import CASES, run_example

pytestmark = pytest.mark.gpu

RUNS = [
    pytest.param(example, kernel, sizes, id=f"{kernel}-" + "-".join(map(str, sizes.values())))
    for example, kernels in CASES.items()
    for kernel, sizes_list in kernels.items()
    for sizes in sizes_list
]


@pytest.mark.parametrize(("example", "kernel", "sizes"), RUNS)
def test_example_matches_its_reference(example, kernel, sizes):
    run = run_example(example, kernel, sizes, seed=sum(sizes.values()))
    assert run.passed, run.describe()


# Strided inputs and outputs: rows longer than the extent (row stride != extent), and 2-D
# inputs stored transposed (last stride != 1) -- kernels specialised for other strides.
STRIDED = [
    ("softmax", "softmax", {"M": 77, "N": 300}),
    ("softmax", "softmax_f16", {"M": 40, "N": 3001}),
    ("layernorm", "layernorm", {"M": 33, "N": 257}),
    ("matmul", "matmul", {"M": 130, "N": 77, "K": 100}),
    ("transpose", "transpose", {"M": 70, "N": 45}),
    ("row_sum", "row_sum", {"M": 77, "N": 300}),
    ("attention", "attention", {"B": 1, "H": 2, "M": 20, "N": 33, "D": 64}),
]


@pytest.mark.parametrize("layout", ["padded", "transposed"])
@pytest.mark.parametrize(
    ("example", "kernel", "sizes"), STRIDED, ids=[f"{s[1]}-{s[2]['N']}" for s in STRIDED]
)
def test_strided_arguments(example, kernel, sizes, layout):
    run = run_example(example, kernel, sizes, layout=layout, seed=7)
    assert run.passed, run.describe()


@pytest.mark.parametrize("example", ["vector_add", "softmax", "matmul"])
def test_numpy_arguments_are_copied_in_and_out(example):
    kernel = next(iter(CASES[example]))
    sizes = CASES[example][kernel][1]
    run = run_example(example, kernel, sizes, arrays="numpy", seed=3)
    assert run.passed, run.describe()


# Rows per expert, sorted: empty experts (first, inside, last), experts smaller than a tile,
# boundaries inside tiles, and one expert holding most rows.
MOE_SPLITS = [[0, 700, 5, 0, 1300, 37, 1, 0], [128, 128, 128, 1], [3000]]


@pytest.mark.parametrize("rows_per_expert", MOE_SPLITS, ids=lambda s: "-".join(map(str, s)))
def test_moe_gemm_sorted_uneven_experts(rows_per_expert):
    """examples/moe_gemm.tile on torch tensors as a model holds them (weights [E, N, K]),
    against each expert's product in f64; rows must all be written (y starts as NaN)."""
    import torch

    from tilec.gpucheck import EXAMPLES
    from tilec.jit import load_kernel

    kernel = load_kernel(EXAMPLES / "moe_gemm.tile", "moe_gemm")
    torch.manual_seed(0)
    k, n, experts = 520, 392, len(rows_per_expert)
    bounds = [0]
    for count in rows_per_expert:
        bounds.append(bounds[-1] + count)
    x = torch.randn(bounds[-1], k, device="cuda").to(torch.bfloat16)
    w = (torch.randn(experts, n, k, device="cuda") * 0.05).to(torch.bfloat16)
    offsets = torch.tensor(bounds, device="cuda", dtype=torch.int32)
    y = torch.full((bounds[-1], n), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel(x, w, offsets, y)
    torch.cuda.synchronize()
    expected = torch.empty(bounds[-1], n, device="cuda", dtype=torch.float64)
    for e in range(experts):
        lo, hi = bounds[e], bounds[e + 1]
        expected[lo:hi] = x[lo:hi].double() @ w[e].double().T
    scale = expected.abs().max().item()
    error = (y.double() - expected).abs().max().item()
    assert error <= 1.6e-2 * scale, (error, scale)


# Loops that pipeline prefetches in registers (passes/register_prefetch.py): several trips a
# block and a partial last tile, so the load issued past the last iteration and the tile
# carried from mask-bounds' maskless loop into its tail both run.
PREFETCHED = [
    ("cumsum", "cumsum_rows", {"M": 3, "N": 20011}),
    ("cross_entropy", "cross_entropy", {"M": 5, "V": 32003}),
    ("row_sum", "row_sum", {"M": 7, "N": 50001}),
    ("col_sum", "col_sum", {"M": 10007, "N": 300}),
]


@pytest.mark.parametrize(("example", "kernel", "sizes"), PREFETCHED, ids=[p[1] for p in PREFETCHED])
def test_loops_prefetched_in_registers(example, kernel, sizes):
    run = run_example(example, kernel, sizes, seed=11)
    assert run.passed, run.describe()


WALKED = [
    ("layernorm", "layernorm", {"M": 6000, "N": 3001}),
    ("layernorm", "layernorm", {"M": 7, "N": 37}),
    ("rmsnorm", "rmsnorm[T=bf16]", {"M": 300, "N": 5001}),
    ("rmsnorm", "rmsnorm[T=f32]", {"M": 1000, "N": 4096}),
    ("softmax", "softmax", {"M": 700, "N": 5003}),  # nothing to hoist: walked for the prefetch
]


@pytest.mark.parametrize(
    ("example", "kernel", "sizes"), WALKED, ids=[f"{p[1]}-{p[2]['M']}x{p[2]['N']}" for p in WALKED]
)
def test_blocks_walking_rows_with_the_weights_loaded_once(example, kernel, sizes):
    """`walk-tiles` (off by default): persistent blocks walk the rows, `w` (and `b`) loaded
    once a block; what the kernel writes, and the guard bytes around it, as without it."""
    run = run_example(example, kernel, sizes, seed=5, pass_options={"walk-tiles": {"enable": True}})
    assert run.passed, run.describe()
    # and with the walk's next row loaded before this one is reduced (register prefetch)
    ahead = {"walk-tiles": {"enable": True}, "pipeline": {"register_prefetch": 1}}
    run = run_example(example, kernel, sizes, seed=6, pass_options=ahead)
    assert run.passed, run.describe()
