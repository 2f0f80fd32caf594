"""The suite's compute-bound workloads: GEMMs in every layout, bmm, the MoE grouped GEMM,
the fused epilogue, int8, attention (`tilec.benchmarks.suite` lists them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilec.benchmarks import suite_core
from tilec.benchmarks.suite_core import (
    Case,
    Context,
    Implementation,
    _dtype,
    _eager,
    _elements,
    _randn,
    _x,
)

# ---------------------------------------------------------------------------------------------
# Compute-bound workloads


def _gemm(layout: str, dtype: str) -> Callable[[tuple, Context], Case]:
    """C = op(A) @ op(B), A and B stored as `layout` says ("nt": B stored [N, K])."""

    def build(size: tuple, ctx: Context) -> Case:
        import torch

        m, n, k = size
        a_shape = (m, k) if layout[0] == "n" else (k, m)
        b_shape = (k, n) if layout[1] == "n" else (n, k)

        def views(a: Any, b: Any) -> tuple[Any, Any]:
            return (a if layout[0] == "n" else a.t()), (b if layout[1] == "n" else b.t())

        sets = ctx.sets(lambda: (_randn(a_shape, dtype), _randn(b_shape, dtype)), (m + n) * k * 2)
        c = torch.empty(m, n, device=suite_core.DEVICE, dtype=_dtype(dtype))
        a_view, b_view = views(*sets[0])
        expected = (a_view.double() @ b_view.double()).to(_dtype(dtype))
        kernel = f"gemm_{layout}" + ("_bf16" if dtype == "bf16" else "")
        implementations = [
            ctx.tilec("gemm_layouts.tile", kernel, lambda f: lambda a, b: f(a, b, c), lambda: c),
            Implementation("cuBLAS", lambda a, b: torch.matmul(*views(a, b))),
            ctx.triton_peer("triton (autotuned)", lambda t: lambda a, b: t.matmul(*views(a, b))),
        ]
        # Each rounds its f32 sums to the output type once, as `expected` does: they may differ
        # by an ulp of it (bf16 has 8 bits of mantissa: 2 ulp is 1.6%).
        rtol = 2e-3 if dtype == "f16" else 1.6e-2
        return Case(implementations, sets, expected, 2 * m * n * k, "TFLOP/s", rtol)

    return build


def _gemm_label(dtype: str) -> Callable[[tuple], str]:
    return lambda size: f"{_x(size)} {dtype}"


def _bmm(size: tuple, ctx: Context) -> Case:
    import torch

    z, m, n, k = size
    sets = ctx.sets(
        lambda: (_randn((z, m, k), "f16"), _randn((z, k, n), "f16")), z * (m + n) * k * 2
    )
    c = torch.empty(z, m, n, device=suite_core.DEVICE, dtype=torch.float16)
    a, b = sets[0]
    expected = (a.double() @ b.double()).half()
    implementations = [
        ctx.tilec("bmm.tile", "bmm", lambda f: lambda a, b: f(a, b, c), lambda: c),
        Implementation("torch.bmm", lambda a, b: torch.bmm(a, b)),
    ]
    return Case(implementations, sets, expected, 2 * z * m * n * k, "TFLOP/s")


def moe_routing(tokens: int, experts: int, top_k: int, seed: int = 0) -> list[int]:
    """Rows per expert when `tokens` tokens each pick their `top_k` best of `experts` experts
    by random router logits with a per-expert bias (some experts are more popular, as trained
    routers' are), from a fixed seed: an uneven split, the same on every run."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    bias = torch.randn(experts, generator=generator) * 0.5
    logits = torch.randn(tokens, experts, generator=generator) + bias
    chosen = logits.topk(top_k, dim=1).indices.flatten()
    return torch.bincount(chosen, minlength=experts).tolist()


def _moe_gemm(size: tuple, ctx: Context) -> Case:
    """Sizes are (E, tokens, top_k, K, N): tokens * top_k rows sorted by expert, each expert's
    weight stored [N, K] as nn.Linear keeps it."""
    import torch

    experts, tokens, top_k, k, n = size
    counts = moe_routing(tokens, experts, top_k)
    rows = sum(counts)
    bounds = [0]
    for count in counts:
        bounds.append(bounds[-1] + count)
    offsets = torch.tensor(bounds, device=suite_core.DEVICE, dtype=torch.int32)
    sets = ctx.sets(
        lambda: (_randn((rows, k), "bf16"), _randn((experts, n, k), "bf16", 0.05)),
        (rows + experts * n) * k * 2,
    )
    y = torch.empty(rows, n, device=suite_core.DEVICE, dtype=torch.bfloat16)
    x0, w0 = sets[0]
    expected = torch.empty(rows, n, device=suite_core.DEVICE, dtype=torch.bfloat16)
    for e in range(experts):
        lo, hi = bounds[e], bounds[e + 1]
        expected[lo:hi] = (x0[lo:hi].double() @ w0[e].double().T).to(torch.bfloat16)

    def loop(x: Any, w: Any) -> Any:
        out = torch.empty(rows, n, device=x.device, dtype=x.dtype)
        for e in range(experts):  # the offsets as host integers: no sync in the loop
            lo, hi = bounds[e], bounds[e + 1]
            torch.matmul(x[lo:hi], w[e].T, out=out[lo:hi])
        return out

    implementations = [
        ctx.tilec(
            "moe_gemm.tile", "moe_gemm", lambda f: lambda x, w: f(x, w, offsets, y), lambda: y
        ),
        Implementation("torch loop over experts", loop),
        _grouped_mm_peer(x0, w0, offsets),
        # The same multiply-adds as one dense GEMM ([rows, K] @ [K, N] through cuBLAS): what
        # a grouped GEMM could reach; shown beside the row (it computes something else).
        Implementation("cuBLAS dense GEMM, same work", lambda x, w: x @ w[0].T, role="info"),
    ]
    return Case(implementations, sets, expected, 2 * rows * n * k, "TFLOP/s", 1.6e-2)


def _grouped_mm_peer(x: Any, w: Any, offsets: Any) -> Implementation:
    """`torch._grouped_mm` (sm_90, bf16, 16-byte aligned strides), when this torch has it and
    it runs here: x [rows, K] with w[e].T [K, N] per expert, ends of the groups as offs."""
    import torch

    name = "torch._grouped_mm"
    if not hasattr(torch, "_grouped_mm"):
        return Implementation(name, None, missing="this torch has no torch._grouped_mm")
    ends = offsets[1:].contiguous()

    def run(x: Any, w: Any) -> Any:
        return torch._grouped_mm(x, w.transpose(-2, -1), offs=ends)

    try:
        run(x, w)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except Exception as e:
        return Implementation(name, None, missing=f"{type(e).__name__}: {str(e).strip()[:200]}")
    return Implementation(name, run)


def _matmul_bias_gelu(size: tuple, ctx: Context) -> Case:
    import torch
    import torch.nn.functional as F

    m, n, k = size
    bias = _randn((n,), "f16")
    sets = ctx.sets(lambda: (_randn((m, k), "f16"), _randn((k, n), "f16")), (m + n) * k * 2)
    c = torch.empty(m, n, device=suite_core.DEVICE, dtype=torch.float16)
    a, b = sets[0]
    expected = F.gelu(a.double() @ b.double() + bias.double()).half()

    def expression(a: Any, b: Any) -> Any:
        return F.gelu(a @ b + bias)

    implementations = [
        ctx.tilec(
            "matmul_bias_gelu.tile",
            "matmul_bias_gelu",
            lambda f: lambda a, b: f(a, b, bias, c),
            lambda: c,
        ),
        ctx.compiled(expression, sets[0]),
        _eager("torch eager", expression),
    ]
    # Eager rounds a @ b to f16 before the bias and the gelu: a few ulps more than one rounding.
    return Case(implementations, sets, expected, 2 * m * n * k, "TFLOP/s", 4e-3)


def _int8_gemm(layout: str) -> Callable[[tuple, Context], Case]:
    """int8 GEMM with row and column scales, B stored [K, N] ("nn") or [N, K] ("nt", as
    nn.Linear keeps its weight). The peer takes B as it is stored: `torch._int_mm(a, b)` on a
    row-major [K, N] B (cuBLASLt's slow int8 path: what a user with that layout gets), and on
    the column-major view `b.t()` of an [N, K] B (its fast path)."""

    def build(size: tuple, ctx: Context) -> Case:
        import torch

        m, n, k = size
        b_shape = (k, n) if layout == "nn" else (n, k)

        def operands() -> tuple[Any, Any]:
            a = torch.randint(-128, 128, (m, k), device=suite_core.DEVICE, dtype=torch.int8)
            return a, torch.randint(-128, 128, b_shape, device=suite_core.DEVICE, dtype=torch.int8)

        def b_kn(b: Any) -> Any:
            return b if layout == "nn" else b.t()

        row_scale = torch.rand(m, device=suite_core.DEVICE) * 1e-2
        col_scale = torch.rand(n, device=suite_core.DEVICE) * 1e-2
        sets = ctx.sets(operands, (m + n) * k)
        c = torch.empty(m, n, device=suite_core.DEVICE, dtype=torch.float16)
        a, b = sets[0]
        product = a.double() @ b_kn(b).double()  # exact: |sums| < 2^53
        expected = (product * row_scale.double()[:, None] * col_scale.double()[None, :]).half()

        def expression(a: Any, b: Any) -> Any:
            product = torch._int_mm(a, b_kn(b)).float()
            return (product * row_scale[:, None] * col_scale[None, :]).half()

        kernel = "int8_gemm" if layout == "nn" else "int8_gemm_nt"
        implementations = [
            ctx.tilec(
                "int8_gemm.tile",
                kernel,
                lambda f: lambda a, b: f(a, b, row_scale, col_scale, c),
                lambda: c,
            )
        ]
        if hasattr(torch, "_int_mm"):
            implementations += [
                _eager("torch._int_mm", expression),
                ctx.compiled(expression, sets[0]),
            ]
        else:
            missing = "this torch has no torch._int_mm"
            implementations += [
                Implementation("torch._int_mm", None, missing=missing),
                Implementation("torch.compile", None, missing=missing),
            ]
        return Case(implementations, sets, expected, 2 * m * n * k, "TOPS")

    return build


def _fp8_gemm(size: tuple, ctx: Context) -> Case:
    """An fp8 linear layer: x [M, K] and w [N, K] in f8e4m3 with a scale per row of each, out
    in bf16. The peer is `torch._scaled_mm` with the same row-wise scales (cuBLASLt's fp8
    GEMM); without row-wise support in this torch, the note says so."""
    import torch

    m, n, k = size

    def operands() -> tuple[Any, Any]:
        x = torch.randn(m, k, device=suite_core.DEVICE).to(torch.float8_e4m3fn)
        return x, torch.randn(n, k, device=suite_core.DEVICE).to(torch.float8_e4m3fn)

    x_scale = torch.rand(m, device=suite_core.DEVICE) + 0.5
    w_scale = torch.rand(n, device=suite_core.DEVICE) + 0.5
    sets = ctx.sets(operands, (m + n) * k)
    y = torch.empty(m, n, device=suite_core.DEVICE, dtype=torch.bfloat16)
    x, w = sets[0]
    reference = (x.double() @ w.double().T) * x_scale.double()[:, None] * w_scale.double()[None, :]

    def close(output: Any, rtol: float) -> bool:
        # fp8 wgmma sums in fewer bits than IEEE f32: the largest error over the largest value
        error = (output.double() - reference).abs().max() / reference.abs().max()
        return bool(error < rtol)

    def scaled(x: Any, w: Any) -> Any:
        return torch._scaled_mm(
            x,
            w.t(),
            scale_a=x_scale[:, None],
            scale_b=w_scale[None, :],
            out_dtype=torch.bfloat16,
        )

    implementations = [
        ctx.tilec(
            "fp8_gemm.tile",
            "fp8_gemm",
            lambda f: lambda x, w: f(x, w, x_scale, w_scale, y),
            lambda: y,
        )
    ]
    if hasattr(torch, "_scaled_mm"):
        implementations.append(_eager("torch._scaled_mm (row-wise scales)", scaled))
    else:
        missing = "this torch has no torch._scaled_mm"
        implementations.append(Implementation("torch._scaled_mm", None, missing=missing))
    return Case(implementations, sets, close, 2 * m * n * k, "TFLOP/s", 1e-2)


def _attention(variant: str) -> Callable[[tuple, Context], Case]:
    """`variant`: "plain", "causal" or "gqa". Sizes are (B, H, G, S, D): G K/V heads."""

    def build(size: tuple, ctx: Context) -> Case:
        import torch
        import torch.nn.functional as F

        batch, heads, kv_heads, length, d = size
        causal, scale = variant == "causal", d**-0.5
        q_shape, kv_shape = (batch, heads, length, d), (batch, kv_heads, length, d)

        def inputs() -> tuple[Any, Any, Any]:
            return _randn(q_shape, "f16"), _randn(kv_shape, "f16"), _randn(kv_shape, "f16")

        sets = ctx.sets(inputs, (_elements(q_shape) + 2 * _elements(kv_shape)) * 2)
        o = torch.empty(q_shape, device=suite_core.DEVICE, dtype=torch.float16)
        expected = _attention_reference(*sets[0], scale, causal)
        kernel = {"plain": "attention", "causal": "attention_causal", "gqa": "attention_gqa"}[
            variant
        ]
        sdpa_options: dict[str, Any] = {"is_causal": causal, "scale": scale}
        if variant == "gqa":
            sdpa_options["enable_gqa"] = True
        sdpa = Implementation(
            "SDPA", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **sdpa_options)
        )
        if variant == "gqa":
            try:  # enable_gqa came in torch 2.5
                F.scaled_dot_product_attention(*(t[:1, :, :128] for t in sets[0]), **sdpa_options)
            except Exception as e:
                reason = f"this torch's SDPA: {type(e).__name__}: {str(e)[:200]}"
                sdpa = Implementation("SDPA", None, missing=reason)
        implementations = [
            ctx.tilec(
                "attention.tile", kernel, lambda f: lambda q, k, v: f(q, k, v, o, scale), lambda: o
            ),
            sdpa,
            ctx.triton_peer(
                "triton FA2 (autotuned)",
                lambda t: lambda q, k, v: t.attention(q, k, v, scale, causal=causal),
            ),
        ]
        flops = 4 * batch * heads * length * length * d // (2 if causal else 1)
        return Case(implementations, sets, expected, flops, "TFLOP/s", 4e-3)

    return build


def _attention_reference(
    q: Any, k: Any, v: Any, scale: float, causal: bool, window: int | None = None
) -> Any:
    """softmax(q k^T scale) v in f32, one batch element at a time (the scores of a whole
    B4 H16 S4096 batch would be 4 GiB); `window`: each query sees itself and the `window - 1`
    keys before it (a causal sliding window)."""
    import torch

    groups = q.shape[1] // k.shape[1]
    outputs = []
    keep = None
    if causal or window is not None:
        rows = torch.arange(q.shape[2], device=q.device)[:, None]
        keys = torch.arange(k.shape[2], device=q.device)[None, :]
        keep = keys <= rows
        if window is not None:
            keep = keep & (keys > rows - window)
    for z in range(q.shape[0]):
        kz = k[z].float().repeat_interleave(groups, dim=0)
        vz = v[z].float().repeat_interleave(groups, dim=0)
        s = q[z].float() @ kz.transpose(-1, -2) * scale
        if keep is not None:
            s = s.masked_fill(~keep, float("-inf"))
        outputs.append((torch.softmax(s, dim=-1) @ vz).half())
        del s
    return torch.stack(outputs)


def _attention_window(size: tuple, ctx: Context) -> Case:
    """Causal sliding-window attention (`examples/attention_window.tile`): each query sees
    itself and the W - 1 keys before it. Sizes are (B, H, S, D, W). The peers a user has:
    SDPA with the window as a boolean mask, and FlexAttention (`torch.compile` of
    `flex_attention` with the window as a block mask, which skips the tiles it hides)."""
    import torch
    import torch.nn.functional as F

    batch, heads, length, d, window = size
    scale = d**-0.5
    shape = (batch, heads, length, d)

    def inputs() -> tuple[Any, Any, Any]:
        return _randn(shape, "f16"), _randn(shape, "f16"), _randn(shape, "f16")

    sets = ctx.sets(inputs, 3 * _elements(shape) * 2)
    o = torch.empty(shape, device=suite_core.DEVICE, dtype=torch.float16)
    expected = _attention_reference(*sets[0], scale, False, window)
    rows = torch.arange(length, device=suite_core.DEVICE)[:, None]
    keys = torch.arange(length, device=suite_core.DEVICE)[None, :]
    mask = (keys <= rows) & (keys > rows - window)
    sdpa = Implementation(
        "SDPA (window as a mask)",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale),
    )
    implementations = [
        ctx.tilec(
            "attention_window.tile",
            "attention_window",
            lambda f: lambda q, k, v: f(q, k, v, o, scale, window),
            lambda: o,
        ),
        sdpa,
        _flex_window(ctx, sets[0], length, window, scale),
    ]
    seen = sum(min(i + 1, window) for i in range(length))  # the (query, key) pairs computed
    flops = 4 * batch * heads * d * seen
    return Case(implementations, sets, expected, flops, "TFLOP/s", 4e-3)


def _flex_window(ctx: Context, inputs: Any, length: int, window: int, scale: float) -> Any:
    """FlexAttention over the window's block mask, compiled as its docs say it must be (a
    missing peer, saying why, where this torch has none or it does not compile here)."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        def visible(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return (kv_idx <= q_idx) & (kv_idx > q_idx - window)

        blocks = create_block_mask(visible, None, None, length, length, device=suite_core.DEVICE)
    except Exception as e:  # torch before 2.5, or a device it does not build masks on
        reason = f"FlexAttention: {type(e).__name__}: {str(e).strip()[:200]}"
        return Implementation("FlexAttention", None, missing=reason)
    compiled = ctx.compiled(
        lambda q, k, v: flex_attention(q, k, v, block_mask=blocks, scale=scale), inputs
    )
    compiled.name = "FlexAttention (torch.compile)"
    return compiled


def _attention_window_label(size: tuple) -> str:
    batch, heads, length, d, window = size
    return f"B{batch} H{heads} S{length} d{d} window {window}"


def _attention_label(size: tuple) -> str:
    batch, heads, kv_heads, length, d = size
    groups = f" G{kv_heads}" if kv_heads != heads else ""
    return f"B{batch} H{heads}{groups} S{length} d{d}"
