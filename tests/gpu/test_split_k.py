"""Split-K GEMMs on the GPU (split-reduction of a loop that accumulates a dot, S chosen at
launch by the wgmma SM model): products whose output tiles leave SMs idle and whose K is
long, in every operand layout, f16, bf16 and int8, at awkward shapes, against torch; S chosen
and pinned; repeated launches (the counters must be back at 0), and the same kernel at a
shape whose tiles fill the GPU (not split)."""
# ruff: noqa: F821 - kernel bodies use the tile language's names (f16, tiles, M), not Python's

from __future__ import annotations

import pytest
import torch

import tilec

pytestmark = pytest.mark.gpu


@tilec.jit
def mm_nn(a: f16[M, K], b: f16[K, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc


@tilec.jit
def mm_nt_bf16(a: bf16[M, K], b: bf16[N, K], c: bf16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tn, tk].T
        c[tm, tn] = acc


@tilec.jit
def mm_tn(a: f16[K, M], b: f16[K, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tk, tm].T @ b[tk, tn]
        c[tm, tn] = acc


@tilec.jit
def mm_bias_relu(a: f16[M, K], b: f16[N, K], bias: f32[N], c: f16[M, N]):
    """An epilogue after the split loop: it runs once a tile, in the block that combines."""
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tn, tk].T
        c[tm, tn] = maximum(acc + bias[tn][None, :], 0.0)


@tilec.jit(split=3)
def mm_nn_pinned(a: f16[M, K], b: f16[K, N], c: f16[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc


@tilec.jit
def mm_i8(a: i8[M, K], b: i8[N, K], c: i32[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], i32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tn, tk].T
        c[tm, tn] = acc


def _operands(kernel, m: int, n: int, k: int):
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    if kernel is mm_i8:
        a = torch.randint(-8, 8, (m, k), device="cuda", dtype=torch.int8, generator=g)
        b = torch.randint(-8, 8, (n, k), device="cuda", dtype=torch.int8, generator=g)
        # Products of integers below 8 summed over K: exact in f64 (no int64 GEMM on CUDA).
        expected = a.double() @ b.double().T
        return [a, b], expected, torch.empty(m, n, device="cuda", dtype=torch.int32)
    dtype = torch.bfloat16 if kernel is mm_nt_bf16 else torch.float16
    nt = kernel in (mm_nt_bf16, mm_bias_relu)
    tn = kernel is mm_tn
    a = torch.randn((k, m) if tn else (m, k), device="cuda", dtype=dtype, generator=g)
    b = torch.randn((n, k) if nt else (k, n), device="cuda", dtype=dtype, generator=g)
    a64 = a.double().T if tn else a.double()
    b64 = b.double().T if nt else b.double()
    expected = a64 @ b64
    args = [a, b]
    if kernel is mm_bias_relu:
        bias = torch.randn(n, device="cuda", generator=g)
        args.append(bias)
        expected = (expected + bias.double()).clamp_min(0)
    return args, expected, torch.empty(m, n, device="cuda", dtype=dtype)


def _split_count(kernel, args) -> int:
    arguments = kernel._checker.convert(args)
    kernel._pitch(arguments, None)  # the arguments as the call launched them
    launcher = kernel._launchers[kernel._key(arguments)]
    if launcher.split is None:
        return 1
    grid = launcher.grid(arguments)
    stream = torch.cuda.current_stream().cuda_stream
    full, _ = launcher.split_launch(grid, arguments.extents, args[0].get_device(), stream)
    return full[launcher._split_axis]


CASES = [
    (mm_nn, (1024, 1024, 16384)),
    (mm_nn, (200, 136, 20000)),  # one or two tiles: many splits
    (mm_nn, (1000, 904, 9992)),  # no tile divides M or N
    (mm_nt_bf16, (768, 1024, 12288)),
    (mm_nt_bf16, (520, 1000, 8200)),
    (mm_tn, (512, 512, 32768)),
    (mm_bias_relu, (600, 1100, 10000)),
    (mm_nn_pinned, (300, 300, 4000)),
    (mm_i8, (512, 768, 16384)),
    (mm_nn, (4096, 4096, 1024)),  # the tiles fill the GPU: not split
]


@pytest.mark.parametrize(("kernel", "mnk"), CASES, ids=lambda c: str(c))
def test_split_k_gemms_match_torch_and_repeat(kernel, mnk):
    m, n, k = mnk
    args, expected, c = _operands(kernel, m, n, k)
    for _ in range(3):  # the counters must be back at 0 for the next launch
        c.fill_(0 if c.dtype == torch.int32 else float("nan"))
        kernel(*args, c)
        torch.cuda.synchronize()
        if c.dtype == torch.int32:
            assert torch.equal(c.double(), expected)
        else:
            scale = float(expected.abs().max()) + 1.0
            err = float((c.double() - expected).abs().max())
            tol = (8e-3 if c.dtype == torch.bfloat16 else 1e-3) * scale
            assert err <= tol, f"max error {err} (scale {scale})"
    count = _split_count(kernel, [*args, c])
    if kernel is mm_nn_pinned:
        assert count == 3
    elif mnk == (4096, 4096, 1024):
        assert count == 1
    elif mnk in ((1024, 1024, 16384), (200, 136, 20000), (512, 512, 32768)):
        assert count > 1, "few tiles and a long K: the model should split"


def test_the_gpus_dram_rate_is_what_its_copies_reach():
    """`dram_bytes_per_clock` from the driver's memory clock and bus width: within a fifth
    of what torch's copy of 1 GiB reaches on this GPU, in bytes a model clock."""
    from tilec.passes.wgmma_model import MODEL_CLOCK_OF_PEAK
    from tilec.runtime.device import cuda_modules, dram_bytes_per_clock

    _, driver = cuda_modules()
    attribute = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CLOCK_RATE
    _err, khz = driver.cuDeviceGetAttribute(attribute, torch.cuda.current_device())
    x = torch.empty(1 << 29, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)
    y.copy_(x)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        y.copy_(x)
    end.record()
    end.synchronize()
    copy = 5 * 2 * x.numel() * 2 / (start.elapsed_time(end) * 1e-3)  # bytes a second
    measured = copy / (khz * 1e3 * MODEL_CLOCK_OF_PEAK)
    assert 0.8 < dram_bytes_per_clock(torch.cuda.current_device()) / measured < 1.25
