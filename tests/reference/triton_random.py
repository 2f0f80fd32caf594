"""Triton kernels that draw tl.rand4x, tl.randn4x and tl.randint4x at counters offset // 4 and
keep word offset % 4, at row-major offsets m * N + n: the streams tilec's rand, randn and
randint must reproduce (tests/gpu/test_random.py loads
this file with `tilec.benchmarks.gpu.load_triton_references(path)`, so that it compiles for
the GPU whatever TRITON_INTERPRET says)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _word(which, w0, w1, w2, w3):
    """w0, w1, w2 or w3, as which (0 to 3) says, element by element."""
    return tl.where(which < 2, tl.where(which == 0, w0, w1), tl.where(which == 2, w2, w3))


@triton.jit
def _streams_kernel(u_ptr, g_ptr, bits_ptr, seed, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    offs = rows[:, None] * N + cols[None, :]
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    counter, which = offs // 4, offs % 4
    u0, u1, u2, u3 = tl.rand4x(seed, counter)
    tl.store(u_ptr + offs, _word(which, u0, u1, u2, u3), mask=inside)
    g0, g1, g2, g3 = tl.randn4x(seed, counter)
    tl.store(g_ptr + offs, _word(which, g0, g1, g2, g3), mask=inside)
    i0, i1, i2, i3 = tl.randint4x(seed, counter)
    tl.store(bits_ptr + offs, _word(which, i0, i1, i2, i3), mask=inside)


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
    counter, which = offs // 4, offs % 4
    u0, u1, u2, u3 = tl.rand4x(seed, counter)
    tl.store(u_ptr + cols, _word(which, u0, u1, u2, u3), mask=inside)
    i0, i1, i2, i3 = tl.randint4x(seed, counter)
    tl.store(bits_ptr + cols, _word(which, i0, i1, i2, i3), mask=inside)


def wide(n: int, seed: int, base: int, device: str = "cuda") -> tuple[torch.Tensor, ...]:
    """(rand, randint) of `seed` at the i64 offsets base, base + 1, ..., base + n - 1."""
    u = torch.empty(n, device=device)
    bits = torch.empty(n, device=device, dtype=torch.int32)
    _wide_kernel[(triton.cdiv(n, 256),)](u, bits, seed, base, n, BLOCK=256)
    return u, bits
