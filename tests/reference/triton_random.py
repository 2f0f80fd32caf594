"""Triton kernels that draw tl.rand, tl.randn and tl.randint at row-major offsets m * N + n:
the streams tilec's rand, randn and randint must reproduce (tests/gpu/test_random.py loads
this file with `tilec.benchmarks.gpu.load_triton_references(path)`, so that it compiles for
the GPU whatever TRITON_INTERPRET says)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _streams_kernel(u_ptr, g_ptr, bits_ptr, seed, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    offs = rows[:, None] * N + cols[None, :]
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(u_ptr + offs, tl.rand(seed, offs), mask=inside)
    tl.store(g_ptr + offs, tl.randn(seed, offs), mask=inside)
    tl.store(bits_ptr + offs, tl.randint(seed, offs), mask=inside)


def streams(m: int, n: int, seed: int, device: str = "cuda") -> tuple[torch.Tensor, ...]:
    """(rand, randn, randint) of `seed` at offsets m * N + n of an [m, n] grid (i32 offsets)."""
    u = torch.empty(m, n, device=device)
    g = torch.empty(m, n, device=device)
    bits = torch.empty(m, n, device=device, dtype=torch.int32)
    grid = (triton.cdiv(m, 16), triton.cdiv(n, 64))
    _streams_kernel[grid](u, g, bits, seed, m, n, BM=16, BN=64)
    return u, g, bits


@triton.jit
def _wide_kernel(u_ptr, bits_ptr, seed, base, N, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs = cols.to(tl.int64) + base
    inside = cols < N
    tl.store(u_ptr + cols, tl.rand(seed, offs), mask=inside)
    tl.store(bits_ptr + cols, tl.randint(seed, offs), mask=inside)


def wide(n: int, seed: int, base: int, device: str = "cuda") -> tuple[torch.Tensor, ...]:
    """(rand, randint) of `seed` at the i64 offsets base, base + 1, ..., base + n - 1."""
    u = torch.empty(n, device=device)
    bits = torch.empty(n, device=device, dtype=torch.int32)
    _wide_kernel[(triton.cdiv(n, 256),)](u, bits, seed, base, n, BLOCK=256)
    return u, bits
