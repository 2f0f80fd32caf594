"""Triton kernels for the work of tilec's examples: the references tilec is checked against.

They run on the GPU (Stage D's tests, the benchmark suite's peers) and, with `TRITON_INTERPRET=1`
and CPU torch tensors, under Triton's own interpreter on the CPU. They are written the way
Triton's tutorials write them; each wrapper allocates the output and launches the kernel.

`matmul` is the matmul tutorial's kernel (grouped program ids, strided operands) autotuned over
ten configurations, and `attention` the fused-attention tutorial's forward (FlashAttention-2
style: online softmax in base 2, the causal diagonal in a masked pass of its own), autotuned
over six: the benchmark races tilec against Triton at its best, not at one fixed tile. Both take
a fixed configuration instead (`bm=`, `config=`), which is what the CPU interpreter can afford.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _vector_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor, block: int = 1024) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _vector_add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    return out


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)  # f16 rows are exponentiated and summed in f32
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def row_warps(cols: int) -> int:
    """Warps for a one-row-per-program kernel, as Triton's softmax tutorial chose them: more
    warps for longer rows, so that a row is not held by too few threads."""
    block = triton.next_power_of_2(cols)
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


def softmax(x: torch.Tensor, num_warps: int = 4) -> torch.Tensor:
    """Row softmax of a 2-D tensor (f32 or f16, computed in f32), one row per program
    (Triton's default: 4 warps; `row_warps` for the tutorial's choice)."""
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    _softmax_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=num_warps)
    return y


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    y = d * rstd * w + b
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def layernorm(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float, num_warps: int = 4
) -> torch.Tensor:
    """Layer normalization over the last dimension of a 2-D tensor, f32 statistics (Triton's
    default: 4 warps)."""
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    _layernorm_kernel[(rows,)](x, w, b, y, cols, x.stride(0), eps, BLOCK=block, num_warps=num_warps)
    return y


def _matmul_configs() -> list:
    """The matmul tutorial's CUDA configurations, and two larger tiles that suit Hopper."""
    shapes = [  # BLOCK_M, BLOCK_N, BLOCK_K, stages, warps
        (128, 256, 64, 3, 8),
        (64, 256, 32, 4, 4),
        (128, 128, 32, 4, 4),
        (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4),
        (128, 32, 32, 4, 4),
        (64, 32, 32, 5, 2),
        (32, 64, 32, 5, 2),
        (128, 128, 64, 3, 8),
        (256, 128, 64, 3, 8),
    ]
    return [
        triton.Config(
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
            num_stages=stages,
            num_warps=warps,
        )
        for bm, bn, bk, stages, warps in shapes
    ]


@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    # Program ids in groups of GROUP_M rows of blocks, so that blocks running together share
    # their operands in L2 (the tutorial's "grouped ordering").
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    # Rows and columns past the edge wrap around (loads stay in bounds; stores are masked).
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


# Keyed on the extents (Triton adds the operands' dtypes): the layouts of one size and dtype
# share the configuration tuned for the first of them.
_matmul_autotuned = triton.autotune(configs=_matmul_configs(), key=["M", "N", "K"])(_matmul_kernel)


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    bm: int | None = None,
    bn: int | None = None,
    bk: int | None = None,
) -> torch.Tensor:
    """C = A @ B with f32 accumulation; C has A's dtype. `a` and `b` may be any strided 2-D
    views (`b.t()` for a B stored [N, K]). Autotuned over `_matmul_configs()` on the first call
    of each size (keyed on M, N, K and the dtypes); `bm`, `bn`, `bk` pin one tile instead
    (4 warps, 2 stages: what the CPU interpreter runs)."""
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError(f"matmul: inner extents differ ({K} and {K2})")
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    if bm is not None or bn is not None or bk is not None:
        bm, bn, bk = bm or 64, bn or 64, bk or 32
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        _matmul_kernel[grid](
            a, b, c, M, N, K, *strides,
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=4, num_stages=2,
        )  # fmt: skip
        return c

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    _matmul_autotuned[grid](a, b, c, M, N, K, *strides)
    return c


# ---------------------------------------------------------------------------------------------
# Attention forward: Triton's fused-attention tutorial (FlashAttention-2 style).


def _attention_configs() -> list:
    shapes = [  # BLOCK_M, BLOCK_N, stages, warps (BLOCK_N divides BLOCK_M: the causal band)
        (128, 128, 3, 8),
        (128, 64, 3, 4),
        (128, 64, 4, 8),
        (128, 32, 3, 4),
        (64, 64, 4, 4),
        (64, 32, 4, 4),
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=stages, num_warps=warps)
        for bm, bn, stages, warps in shapes
    ]


@triton.jit
def _attention_inner(
    acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n, lo, hi, qk_scale,
    MASKED: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = tl.load(k_ptrs + start_n * stride_kn)  # [HEAD_DIM, BLOCK_N]: K transposed
        qk = tl.dot(q, k)
        if MASKED:  # the diagonal band of a causal mask
            keep = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(keep, 0.0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptrs + start_n * stride_vn)  # [BLOCK_N, HEAD_DIM]
        acc += tl.dot(p.to(v.dtype), v)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _attention_kernel(
    Q, K, V, Out, sm_scale,
    stride_qz, stride_qh, stride_qm, stride_qd,
    stride_kz, stride_kh, stride_kn, stride_kd,
    stride_vz, stride_vh, stride_vn, stride_vd,
    stride_oz, stride_oh, stride_om, stride_od,
    H, GROUP, N_CTX_Q, N_CTX_K,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    off_kv = off_h // GROUP  # grouped-query attention: GROUP query heads share a K/V head
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + off_z * stride_qz + off_h * stride_qh
    q_ptrs += offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    k_ptrs = K + off_z * stride_kz + off_kv * stride_kh
    k_ptrs += offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd
    v_ptrs = V + off_z * stride_vz + off_kv * stride_vh
    v_ptrs += offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
    q = tl.load(q_ptrs, mask=offs_m[:, None] < N_CTX_Q, other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # exp(x) = exp2(x * log2(e))
    if CAUSAL:  # the blocks left of the diagonal unmasked, then the diagonal band masked
        acc, l_i, m_i = _attention_inner(
            acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n,
            0, start_m * BLOCK_M, qk_scale, False, BLOCK_N,
        )  # fmt: skip
        acc, l_i, m_i = _attention_inner(
            acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n,
            start_m * BLOCK_M, (start_m + 1) * BLOCK_M, qk_scale, True, BLOCK_N,
        )  # fmt: skip
    else:
        acc, l_i, m_i = _attention_inner(
            acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n,
            0, N_CTX_K, qk_scale, False, BLOCK_N,
        )  # fmt: skip
    acc = acc / l_i[:, None]
    o_ptrs = Out + off_z * stride_oz + off_h * stride_oh
    o_ptrs += offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_CTX_Q)


_attention_autotuned = triton.autotune(
    configs=_attention_configs(), key=["N_CTX_Q", "N_CTX_K", "HEAD_DIM", "CAUSAL"]
)(_attention_kernel)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    causal: bool = False,
    config: dict | None = None,
) -> torch.Tensor:
    """softmax(q @ k.T * scale) @ v for q [B, H, M, D] and k, v [B, G, N, D] (G divides H:
    grouped-query attention when G < H), forward only. The key length must be a multiple of
    128 (the tutorial's kernel masks no key tile), and causal attention needs M == N. Autotuned
    over `_attention_configs()` per (M, N, D, causal); `config` ({"BLOCK_M", "BLOCK_N",
    "num_warps", "num_stages"}) pins one instead."""
    batch, heads, m, d = q.shape
    kv_heads, n = k.shape[1], k.shape[2]
    if heads % kv_heads or v.shape != k.shape or k.shape[0] != batch or k.shape[3] != d:
        raise ValueError(f"attention: shapes q {tuple(q.shape)}, k {tuple(k.shape)} disagree")
    if n % 128 or (causal and m != n) or d not in (16, 32, 64, 128, 256):
        raise ValueError(f"attention: unsupported extents M={m} N={n} D={d} causal={causal}")
    o = torch.empty_like(q)
    arguments = (
        q, k, v, o, scale, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        heads, heads // kv_heads, m, n,
    )  # fmt: skip
    if config is not None:
        grid = (triton.cdiv(m, config["BLOCK_M"]), batch * heads)
        _attention_kernel[grid](
            *arguments, HEAD_DIM=d, CAUSAL=causal,
            BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
            num_warps=config.get("num_warps", 4), num_stages=config.get("num_stages", 2),
        )  # fmt: skip
        return o

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]), batch * heads)

    _attention_autotuned[grid](*arguments, HEAD_DIM=d, CAUSAL=causal)
    return o
