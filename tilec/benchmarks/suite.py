"""The benchmark suite: every workload tilec races, its sizes, and the best peers it faces.

A workload is one kernel of `examples/` (its name is the kernel's), the sizes it runs at, and a
builder that makes, for one size, a `Case`: the input sets (rotated past the L2 cache), the
expected output (float64 torch where that is cheap), the amount of work (bytes moved or
operations), and the implementations — tilec's kernel and each peer a user would pick instead:

- GEMM (`gemm_{nn,nt,tn,tt}` in f16 and bf16, on the stored operands): cuBLAS through
  `torch.matmul` on the transposed views, and Triton's tutorial matmul autotuned over ten
  configurations (`tests/reference/triton_kernels.py`), on the same views;
- `bmm`: `torch.bmm`; `moe_gemm` (experts' rows sorted, an uneven split from a fixed seed): a
  loop of torch matmuls over the experts and `torch._grouped_mm`, with a dense cuBLAS GEMM of
  the same work beside them (role "info": the ceiling a grouped GEMM aims at);
  `matmul_bias_gelu`: `torch.compile` of `F.gelu(a @ b + bias)` and eager;
  `int8_gemm`: `torch._int_mm` then the scales, eager and compiled;
- attention (plain, causal, grouped-query): SDPA and Triton's fused-attention tutorial forward,
  autotuned over six configurations;
- memory-bound kernels: `torch.compile` of the PyTorch expression (fullgraph, static shapes,
  compiled and warmed up before timing), eager torch, and Triton where a reference exists.

Memory-bound workloads also run at one small size (a few MiB moved), whose target is only
"no slower than eager torch". A peer that this machine lacks (no Triton, a torch without the
operation, a failing `torch.compile`) is an `Implementation` without `run`, whose `missing`
says why: the report shows it as "no peer", never drops it.

Nothing here times anything: `tilec.benchmarks.gpu` measures the cases.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tilec.benchmarks.suite_compute import (
    _attention,
    _attention_label,
    _attention_window,
    _attention_window_label,
    _bmm,
    _fp8_gemm,
    _gemm,
    _gemm_label,
    _int8_gemm,
    _matmul_bias_gelu,
    _moe_gemm,
)
from tilec.benchmarks.suite_core import (
    Case,
    Context,
    Implementation,
    Workload,
    _x,
    select,
)
from tilec.benchmarks.suite_memory import (
    _bias_gelu,
    _col_sum,
    _col_sum_atomic,
    _cross_entropy,
    _cumsum,
    _dropout,
    _embedding,
    _embedding_backward,
    _embedding_bag,
    _greedy_token,
    _head_gate,
    _histogram,
    _layernorm,
    _logsumexp,
    _paged_decode,
    _rmsnorm,
    _rotary,
    _row_sum,
    _running_max,
    _seq_mean,
    _softmax,
    _swiglu,
    _topk_softmax,
    _transpose,
    _vector_add,
)

__all__ = ["WORKLOADS", "Case", "Context", "Implementation", "Workload", "select"]


def _memory(
    name: str, build: Callable, label: Callable, sizes: Any, quick: Any, small: Any
) -> Workload:
    return Workload(name, "memory", build, label, tuple(sizes), tuple(quick), tuple(small))


LONG_K = {
    ("nn", "f16"): [(1024, 1024, 16384)],
    ("nt", "f16"): [(768, 1024, 12288)],
    # ... and the nn.Linear layout at decode sizes (a batch of 16 tokens, one token): the
    # weights streamed once, memory-bound, cuBLAS 1.27-1.36x faster (H100, 2026-12-06)
    ("nt", "bf16"): [(1000, 1000, 10000), (16, 11008, 4096), (1, 4096, 4096)],
    ("tn", "f16"): [(512, 512, 32768)],
}
# M, N and K none a multiple of 8: every operand's rows not 16 bytes apart (odd K makes an
# A stored [M, K] and a B stored [N, K] so; odd M and N the transposed ones), which the launch
# copies into pitched buffers (`tilec.runtime.pitched`) -- timed with the copies.
ODD = {
    ("nn", "f16"): [(3001, 2999, 1999)],
    ("nt", "f16"): [(2049, 3001, 4095)],
    ("tn", "f16"): [(1001, 3001, 2047)],
    ("tt", "f16"): [(1999, 1001, 3001)],
}


def _gemm_workloads() -> list[Workload]:
    big = [(4096, 4096, 4096), (8192, 8192, 8192)]
    quick = [(1024, 1024, 1024)]
    workloads = []
    for dtype in ("f16", "bf16"):
        suffix = "_bf16" if dtype == "bf16" else ""
        for layout in ("nn", "nt", "tn", "tt"):
            sizes = list(big) if layout in ("nn", "nt") else big[:1]
            if layout == "nn" and dtype == "f16":
                sizes += [(2048, 2048, 2048), (1024, 1024, 1024), (4000, 3000, 1000)]
            # Few output tiles and a long K (split-K territory: the tiles alone leave SMs
            # idle), one odd shape per layout.
            sizes += LONG_K.get((layout, dtype), []) + ODD.get((layout, dtype), [])
            workloads.append(
                Workload(
                    f"gemm_{layout}{suffix}",
                    "compute",
                    _gemm(layout, dtype),
                    _gemm_label(dtype),
                    tuple(sizes),
                    tuple(quick),
                    ceiling=dtype,
                )
            )
    return workloads


def _size2(dtype: str) -> Callable[[tuple], str]:
    return lambda size: f"{_x(size)} {dtype}"


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        *_gemm_workloads(),
        Workload(
            "bmm",
            "compute",
            _bmm,
            lambda s: f"{s[0]}x{s[1]}x{s[2]}x{s[3]} f16",
            ((8, 1024, 1024, 1024), (64, 256, 256, 64)),
            ((8, 256, 256, 256),),
            ceiling="f16",
        ),
        Workload(
            "moe_gemm",
            "compute",
            _moe_gemm,
            lambda s: f"E{s[0]} tokens{s[1]} top{s[2]} K{s[3]} N{s[4]} bf16",
            ((8, 4096, 2, 4096, 14336),),
            ((8, 1024, 2, 1024, 2048),),
            ceiling="bf16",
        ),
        Workload(
            "matmul_bias_gelu",
            "compute",
            _matmul_bias_gelu,
            _gemm_label("f16"),
            ((4096, 4096, 4096),),
            ((1024, 1024, 1024),),
            ceiling="f16",
        ),
        Workload(
            "int8_gemm",
            "compute",
            _int8_gemm("nn"),
            _gemm_label("i8"),
            ((4096, 4096, 4096),),
            ((1024, 1024, 1024),),
            ceiling="int8",
        ),
        Workload(
            "int8_gemm_nt",
            "compute",
            _int8_gemm("nt"),
            _gemm_label("i8"),
            ((4096, 4096, 4096), (8192, 8192, 8192), (3000, 5000, 1536)),
            ((1024, 1024, 1024),),
            ceiling="int8",
        ),
        Workload(
            "fp8_gemm",
            "compute",
            _fp8_gemm,
            _gemm_label("e4m3"),
            # cuBLASLt's fp8 needs N and K multiples of 16: the odd extent is M
            ((4096, 4096, 4096), (8192, 8192, 8192), (3000, 5120, 1536)),
            ((1024, 1024, 1024),),
            ceiling="fp8",
        ),
        Workload(
            "attention",
            "compute",
            _attention("plain"),
            _attention_label,
            # B8 H16 S1024: short sequences, where a block's fixed cost weighs most
            (
                (4, 16, 16, 4096, 128),
                (4, 16, 16, 4096, 64),
                (1, 8, 8, 1537, 128),
                (8, 16, 16, 1024, 128),
            ),
            ((1, 4, 4, 1024, 64),),
            ceiling="f16",
        ),
        Workload(
            "attention_causal",
            "compute",
            _attention("causal"),
            _attention_label,
            ((4, 16, 16, 4096, 128), (4, 16, 16, 4096, 64)),
            ((1, 4, 4, 1024, 64),),
            ceiling="f16",
        ),
        Workload(
            "attention_gqa",
            "compute",
            _attention("gqa"),
            _attention_label,
            ((2, 32, 8, 2048, 128),),
            ((1, 8, 2, 1024, 64),),
            ceiling="f16",
        ),
        Workload(
            "attention_window",
            "compute",
            _attention_window,
            _attention_window_label,
            ((4, 16, 4096, 128, 1024), (2, 16, 8192, 64, 2048)),
            ((1, 4, 1024, 64, 256),),
            ceiling="f16",
        ),
        _memory(
            "rmsnorm",
            _rmsnorm,
            _size2("bf16"),
            [(8192, 4096), (4096, 5001)],
            [(4096, 1024)],
            [(512, 1024)],
        ),
        _memory(
            "layernorm",
            _layernorm,
            _size2("f16"),
            [(8192, 8192), (8192, 1024), (6000, 3001)],
            [(4096, 1024)],
            [(512, 1024)],
        ),
        _memory(
            "softmax",
            _softmax("f32"),
            _size2("f32"),
            [(8192, 4096), (4096, 16384), (32768, 1024), (4096, 5003)],
            [(4096, 1024)],
            [(256, 1024)],
        ),
        _memory(
            "softmax_f16",
            _softmax("f16"),
            _size2("f16"),
            [(8192, 3077)],
            [(1024, 3077)],
            [(256, 3077)],
        ),
        _memory(
            "cross_entropy",
            _cross_entropy,
            _size2("f32"),
            [(4096, 32000)],
            [(512, 32000)],
            [(16, 32000)],
        ),
        _memory(
            "embedding",
            _embedding,
            lambda s: f"{s[0]}x{s[1]} bf16, {s[2]} ids",
            [(32000, 4096, 16384)],
            [(32000, 1024, 4096)],
            [(4096, 1024, 1024)],
        ),
        _memory(
            "embedding_bag",
            _embedding_bag,
            lambda s: f"{s[0]}x{s[1]} f32, {s[2]} bags of 1-{s[3]} ids",
            [(1000000, 128, 16384, 64), (50000, 1000, 4096, 20)],
            [(100000, 128, 4096, 32)],
            [(10000, 64, 512, 16)],
        ),
        _memory(
            "embedding_backward",
            _embedding_backward,
            lambda s: f"{s[0]}x{s[1]} bf16 grads, {s[2]} ids",
            [(32000, 4096, 16384)],
            [(32000, 1024, 4096)],
            [(4096, 1024, 1024)],
        ),
        _memory(
            "histogram",
            _histogram,
            lambda s: f"{s[0]} i32 into {s[1]} bins",
            [(2**26, 256)],
            [(2**22, 256)],
            [(2**20, 256)],
        ),
        _memory(
            "paged_decode",
            _paged_decode,
            lambda s: f"B{s[0]} H{s[1]} G{s[2]} ctx{s[3]} d{s[4]} f16, pages of 16",
            [(64, 32, 32, 4096, 128)],
            [(16, 32, 32, 1024, 128)],
            [(4, 8, 8, 512, 64)],
        ),
        _memory(
            "bias_gelu",
            _bias_gelu,
            _size2("f16"),
            [(8192, 8192), (4096, 5000)],
            [(2048, 2048)],
            [(512, 1000)],
        ),
        _memory("swiglu", _swiglu, _size2("bf16"), [(8192, 8192)], [(2048, 2048)], [(512, 1024)]),
        _memory("dropout", _dropout, _size2("f16"), [(8192, 8192)], [(2048, 2048)], [(512, 1024)]),
        _memory(
            "row_sum",
            _row_sum,
            _size2("f32"),
            [(8192, 8192), (16, 4194304)],
            [(4096, 1024)],
            [(512, 1024)],
        ),
        _memory(
            "logsumexp",
            _logsumexp,
            _size2("f32"),
            [(16, 4194304), (8192, 8192)],
            [(64, 262144)],
            [(16, 32000)],
        ),
        _memory(
            "seq_mean",
            _seq_mean,
            _size2("f32"),
            [(16, 4096, 1024), (4, 30011, 1000)],
            [(8, 2048, 512)],
            [(4, 1024, 256)],
        ),
        _memory(
            "col_sum",
            _col_sum,
            _size2("f32"),
            [(65536, 128), (262144, 512)],
            [(16384, 128)],
            [(4096, 128)],
        ),
        _memory(
            "col_sum_atomic",
            _col_sum_atomic,
            _size2("f32"),
            [(65536, 128), (262144, 512)],
            [(16384, 128)],
            [(4096, 128)],
        ),
        _memory(
            "cumsum_rows",
            _cumsum,
            _size2("f32"),
            [(4096, 16384), (65536, 256), (3000, 10007)],
            [(2048, 2048)],
            [(256, 1024)],
        ),
        _memory(
            "running_max_rows",
            _running_max,
            _size2("bf16"),
            [(4096, 16384), (3000, 10007)],
            [(2048, 2048)],
            [(256, 1024)],
        ),
        _memory(
            "greedy_token",
            _greedy_token,
            _size2("f32"),
            [(64, 128256), (4096, 32000)],
            [(512, 32000)],
            [(16, 32000)],
        ),
        _memory(
            "topk_softmax",
            _topk_softmax,
            _size2("f32"),
            [(65536, 64), (16384, 256)],
            [(4096, 64)],
            [(1024, 64)],
        ),
        _memory(
            "transpose", _transpose, _size2("f32"), [(8192, 8192)], [(2048, 2048)], [(512, 512)]
        ),
        _memory(
            "rotary",
            _rotary,
            lambda s: f"S{s[0]} H{s[1]} D{s[2]} f16",
            [(8192, 32, 128)],
            [(1024, 8, 128)],
            [(512, 8, 128)],
        ),
        _memory(
            "head_gate",
            _head_gate,
            lambda s: f"S{s[0]} H{s[1]} D{s[2]} f16",
            [(8192, 32, 128), (5000, 12, 96)],
            [(1024, 8, 128)],
            [(512, 8, 128)],
        ),
        _memory(
            "vector_add",
            _vector_add,
            lambda s: f"N=2^{int(math.log2(s[0]))} f32",
            [(1 << 28,)],
            [(1 << 24,)],
            [(1 << 18,)],
        ),
    ]
}
