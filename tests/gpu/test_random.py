"""rand, randn and randint on the GPU: the same stream as Triton's tl.rand4x / tl.randn4x /
tl.randint4x at counter offset // 4 (word offset % 4) on the GPU and as tilec's interpreter --
bit for bit for randint and rand; randn within the few ulps by which the GPU's log, cos and
sin (and Triton's approximate sqrt) may differ -- at awkward shapes and at shapes where four
offsets of a thread share one Philox run (N a multiple of 16), with i32 and i64 seeds and
offsets; and examples/dropout.tile exactly as its reference, with torch's dropout's
statistics."""

# ruff: noqa: F821 - kernel bodies use the tile language's names (f32, tiles, N), not Python's

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import tilec
from tilec.interp import run_kernel

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
# (37, 1000) and the rest: offsets not known to come in runs of 4; (9, 2048): one Philox run
# per 4 elements of a thread.
SHAPES = [(1, 1), (37, 1000), (1000, 1025), (3, 4099), (9, 2048)]
SEEDS = [0, 1234, -5, 2**31 - 1]


@tilec.jit
def streams(u: f32[M, N], g: f32[M, N], bits: i32[M, N], seed: i32):
    for tm, tn in tiles(M, N):
        offs = offsets(tm)[:, None] * N + offsets(tn)[None, :]
        u[tm, tn] = rand(seed, offs)
        g[tm, tn] = randn(seed, offs)
        bits[tm, tn] = randint(seed, offs)


@tilec.jit
def wide(u: f32[N], bits: i32[N], seed: i64, base: i64):
    for tn in tiles(N):
        offs = offsets(tn).to(i64) + base
        u[tn] = rand(seed, offs)
        bits[tn] = randint(seed, offs)


@pytest.fixture(scope="module")
def triton_random():
    from tilec.benchmarks.gpu import load_triton_references

    module = load_triton_references(ROOT / "tests" / "reference" / "triton_random.py")
    if module is None:
        pytest.skip("Triton is not installed")
    return module


def _tilec_streams(m: int, n: int, seed: int):
    u = torch.empty(m, n, device="cuda")
    g = torch.empty(m, n, device="cuda")
    bits = torch.empty(m, n, device="cuda", dtype=torch.int32)
    streams(u, g, bits, seed)
    torch.cuda.synchronize()
    return u, g, bits


def _assert_normal_close(got: torch.Tensor, expected: torch.Tensor) -> None:
    # Box-Muller through log, sqrt and cos: each side's GPU functions are within 2 ulps.
    torch.testing.assert_close(got, expected, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_streams_match_triton_on_the_gpu(triton_random, m, n, seed):
    u, g, bits = _tilec_streams(m, n, seed)
    tu, tg, tbits = triton_random.streams(m, n, seed)
    assert torch.equal(bits, tbits)
    assert torch.equal(u, tu)
    _assert_normal_close(g, tg)


@pytest.mark.parametrize(("m", "n"), [(1, 1), (37, 1000), (130, 257), (5, 4096)])
def test_streams_match_the_interpreter(m, n):
    seed = 2024
    u, g, bits = _tilec_streams(m, n, seed)
    iu, ig = np.zeros((m, n), np.float32), np.zeros((m, n), np.float32)
    ibits = np.zeros((m, n), np.int32)
    run_kernel(streams.compiled, "streams", [iu, ig, ibits, seed])
    np.testing.assert_array_equal(bits.cpu().numpy(), ibits)
    np.testing.assert_array_equal(u.cpu().numpy(), iu)
    np.testing.assert_allclose(g.cpu().numpy(), ig, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize(("seed", "base"), [(7, 0), (2**40 + 7, 2**33 - 100), (-3, 2**32 - 1)])
def test_wide_seeds_and_offsets_match_triton(triton_random, seed, base):
    n = 1000
    u = torch.empty(n, device="cuda")
    bits = torch.empty(n, device="cuda", dtype=torch.int32)
    wide(u, bits, seed, base)
    tu, tbits = triton_random.wide(n, seed, base)
    assert torch.equal(bits, tbits)
    assert torch.equal(u, tu)


@pytest.mark.parametrize("name", ["dropout", "dropout_f16"])
@pytest.mark.parametrize(("m", "n"), [(1, 1), (77, 300), (1000, 1025), (33, 4099), (64, 4096)])
def test_dropout_example_is_its_reference_and_a_dropout(m, n, name):
    from tilec.interp.runner import load_reference, reference_path
    from tilec.jit import load_kernel

    path = ROOT / "examples" / "dropout.tile"
    reference = load_reference(reference_path(path))
    kernel = load_kernel(path, name)
    p, seed = 0.3, 99
    dtype = torch.float16 if name == "dropout_f16" else torch.float32
    x = (torch.randn(m, n, device="cuda") + 3.0).to(dtype)  # no zeros: a kept one is never 0
    y = torch.empty_like(x)
    kernel(x, y, p, seed)
    expected = getattr(reference, name)(
        x.cpu().numpy(), y.cpu().numpy(), np.float32(p), np.int32(seed)
    )
    np.testing.assert_array_equal(y.cpu().numpy(), expected)
    if m * n >= 10000:
        kept = (y != 0).double().mean().item()
        torch_kept = (torch.nn.functional.dropout(x, p) != 0).double().mean().item()
        assert abs(kept - (1 - p)) < 0.01 and abs(torch_kept - (1 - p)) < 0.01
