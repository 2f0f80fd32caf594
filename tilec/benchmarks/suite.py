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

import fnmatch
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["WORKLOADS", "Case", "Context", "Implementation", "Workload", "select"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEVICE = "cuda"  # where the inputs live (the CPU tests build small cases on "cpu")


@dataclass
class Implementation:
    """One way to do a case's work. `run(*inputs)` returns the result, or writes it where
    `output()` reads it. `run` None: not available here, `missing` says why."""

    name: str
    run: Callable[..., Any] | None
    output: Callable[[], Any] | None = None
    role: str = "peer"  # "tilec", "peer", "ceiling", "info" (shown beside the row, unchecked)
    missing: str = ""
    eager: bool = False  # eager torch: the target of the small sizes


@dataclass
class Case:
    """One workload at one size, ready to check and time."""

    implementations: list[Implementation]
    sets: list[Sequence[Any]]
    # None: outputs are not checked; a function (output, rtol) -> bool: whether an output is
    # right where peers need not agree element by element (random numbers from other streams)
    expected: Any
    amount: float  # bytes moved (unit GB/s) or operations (TFLOP/s, TOPS)
    unit: str
    rtol: float = 2e-3


@dataclass
class Context:
    """What a builder needs from the machine: input sets sized past the L2 cache, the Triton
    references (None, and why not), and the GPU's torch."""

    sets: Callable[[Callable[[], Sequence[Any]], int], list[Sequence[Any]]]
    triton: Any = None
    triton_missing: str = "Triton is not installed"
    examples: Path = EXAMPLES

    def tilec(
        self, file: str, kernel: str, make: Callable[[Any], Callable[..., Any]], output: Any
    ) -> Implementation:
        """tilec's kernel `kernel` of `examples/FILE`; `make(kernel)` is its runner. A file
        that is missing or does not compile gives an implementation that failed, saying why."""
        from tilec.jit import load_kernel

        path = self.examples / file
        if not path.is_file():
            return Implementation("tilec", None, role="tilec", missing=f"examples/{file} absent")
        try:
            loaded = load_kernel(path, kernel)
        except Exception as e:  # a TileError, or an internal one: the row shows it
            text = e.render() if hasattr(e, "render") else f"{type(e).__name__}: {e}"
            return Implementation("tilec", None, role="tilec", missing=text.strip()[:400])
        return Implementation("tilec", make(loaded), output, role="tilec")

    def triton_peer(self, name: str, make: Callable[[Any], Callable[..., Any]]) -> Implementation:
        if self.triton is None:
            return Implementation(name, None, missing=self.triton_missing)
        return Implementation(name, make(self.triton))

    def compiled(self, function: Callable[..., Any], inputs: Sequence[Any]) -> Implementation:
        """`torch.compile(function, fullgraph=True, dynamic=False)`, compiled and run once on
        `inputs` here, before anything is timed."""
        import torch

        try:
            import torch._dynamo

            for knob in ("cache_size_limit", "recompile_limit"):  # the name moved in 2.6
                if hasattr(torch._dynamo.config, knob):
                    setattr(
                        torch._dynamo.config, knob, max(64, getattr(torch._dynamo.config, knob))
                    )
            compiled = torch.compile(function, fullgraph=True, dynamic=False)
            compiled(*inputs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except Exception as e:
            reason = f"torch.compile failed: {type(e).__name__}: {str(e).strip()[:200]}"
            return Implementation("torch.compile", None, missing=reason)
        return Implementation("torch.compile", compiled)


@dataclass(frozen=True)
class Workload:
    """A kernel of the suite: its sizes (`small`: the few-MiB size of a memory-bound kernel;
    `quick`: what `--quick` runs instead of all) and the builder of its cases."""

    name: str
    kind: str  # "compute" or "memory"
    build: Callable[[tuple, Context], Case]
    label: Callable[[tuple], str]
    sizes: tuple[tuple, ...]
    quick: tuple[tuple, ...]
    small: tuple[tuple, ...] = field(default=())
    ceiling: str = "copy"  # the roofline: "copy" bandwidth, or cuBLAS's "f16", "bf16", "int8"


def select(patterns: str | Sequence[str] | None, names: Sequence[str]) -> list[str]:
    """The names that any of the comma-separated `patterns` picks: an fnmatch pattern when it
    has `*?[`, else a substring; case-insensitive. Raises ValueError for a pattern that picks
    nothing (a typo should not run an empty suite)."""
    if patterns is None:
        return list(names)
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    wanted = [p.strip().lower() for p in patterns if p.strip()]
    if not wanted:
        return list(names)
    chosen = []
    for pattern in wanted:
        glob = any(c in pattern for c in "*?[")
        hits = [
            n
            for n in names
            if (fnmatch.fnmatchcase(n.lower(), pattern) if glob else pattern in n.lower())
        ]
        if not hits:
            raise ValueError(f"'{pattern}' matches no workload (workloads: {', '.join(names)})")
        chosen += hits
    return [n for n in names if n in chosen]


# ---------------------------------------------------------------------------------------------
# Helpers


def _dtype(name: str) -> Any:
    import torch

    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[name]


def _randn(shape: Sequence[int], dtype: str, scale: float = 1.0) -> Any:
    import torch

    return (torch.randn(*shape, device=DEVICE) * scale).to(_dtype(dtype))


def _eager(name: str, run: Callable[..., Any]) -> Implementation:
    return Implementation(name, run, eager=True)


def _elements(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _x(size: Sequence[Any]) -> str:
    return "x".join(str(s) for s in size)


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
        c = torch.empty(m, n, device=DEVICE, dtype=_dtype(dtype))
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
    c = torch.empty(z, m, n, device=DEVICE, dtype=torch.float16)
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
    offsets = torch.tensor(bounds, device=DEVICE, dtype=torch.int32)
    sets = ctx.sets(
        lambda: (_randn((rows, k), "bf16"), _randn((experts, n, k), "bf16", 0.05)),
        (rows + experts * n) * k * 2,
    )
    y = torch.empty(rows, n, device=DEVICE, dtype=torch.bfloat16)
    x0, w0 = sets[0]
    expected = torch.empty(rows, n, device=DEVICE, dtype=torch.bfloat16)
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
    c = torch.empty(m, n, device=DEVICE, dtype=torch.float16)
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


def _int8_gemm(size: tuple, ctx: Context) -> Case:
    import torch

    m, n, k = size

    def operands() -> tuple[Any, Any]:
        a = torch.randint(-128, 128, (m, k), device=DEVICE, dtype=torch.int8)
        return a, torch.randint(-128, 128, (k, n), device=DEVICE, dtype=torch.int8)

    row_scale = torch.rand(m, device=DEVICE) * 1e-2
    col_scale = torch.rand(n, device=DEVICE) * 1e-2
    sets = ctx.sets(operands, (m + n) * k)
    c = torch.empty(m, n, device=DEVICE, dtype=torch.float16)
    a, b = sets[0]
    product = a.double() @ b.double()  # exact: |sums| < 2^53
    expected = (product * row_scale.double()[:, None] * col_scale.double()[None, :]).half()

    def expression(a: Any, b: Any) -> Any:
        return (torch._int_mm(a, b).float() * row_scale[:, None] * col_scale[None, :]).half()

    implementations = [
        ctx.tilec(
            "int8_gemm.tile",
            "int8_gemm",
            lambda f: lambda a, b: f(a, b, row_scale, col_scale, c),
            lambda: c,
        )
    ]
    if hasattr(torch, "_int_mm"):
        implementations += [_eager("torch._int_mm", expression), ctx.compiled(expression, sets[0])]
    else:
        missing = "this torch has no torch._int_mm"
        implementations += [
            Implementation("torch._int_mm", None, missing=missing),
            Implementation("torch.compile", None, missing=missing),
        ]
    return Case(implementations, sets, expected, 2 * m * n * k, "TOPS")


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
        o = torch.empty(q_shape, device=DEVICE, dtype=torch.float16)
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


def _attention_reference(q: Any, k: Any, v: Any, scale: float, causal: bool) -> Any:
    """softmax(q k^T scale) v in f32, one batch element at a time (the scores of a whole
    B4 H16 S4096 batch would be 4 GiB)."""
    import torch

    groups = q.shape[1] // k.shape[1]
    outputs = []
    for z in range(q.shape[0]):
        kz = k[z].float().repeat_interleave(groups, dim=0)
        vz = v[z].float().repeat_interleave(groups, dim=0)
        s = q[z].float() @ kz.transpose(-1, -2) * scale
        if causal:
            keep = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
            s = s.masked_fill(~keep, float("-inf"))
        outputs.append((torch.softmax(s, dim=-1) @ vz).half())
        del s
    return torch.stack(outputs)


def _attention_label(size: tuple) -> str:
    batch, heads, kv_heads, length, d = size
    groups = f" G{kv_heads}" if kv_heads != heads else ""
    return f"B{batch} H{heads}{groups} S{length} d{d}"


# ---------------------------------------------------------------------------------------------
# Memory-bound workloads: each against torch.compile of its expression and eager torch.


def _memory_case(
    ctx: Context,
    tilec: Implementation,
    expression: Callable[..., Any],
    sets: list[Sequence[Any]],
    expected: Any,
    moved: int,
    rtol: float,
    *,
    eager: Callable[..., Any] | None = None,
    eager_name: str = "torch eager",
    triton: Implementation | None = None,
) -> Case:
    implementations = [
        tilec,
        ctx.compiled(expression, sets[0]),
        _eager(eager_name, eager or expression),
    ]
    if triton is not None:
        implementations.append(triton)
    return Case(implementations, sets, expected, moved, "GB/s", rtol)


def _rmsnorm(size: tuple, ctx: Context) -> Case:
    import torch

    m, n = size
    eps = 1e-6
    w = _randn((n,), "bf16")
    sets = ctx.sets(lambda: (_randn((m, n), "bf16"),), m * n * 2)
    y = torch.empty(m, n, device=DEVICE, dtype=torch.bfloat16)
    x = sets[0][0].double()
    expected = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.double()).bfloat16()

    def expression(x: Any) -> Any:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).bfloat16()

    eager, name = expression, "torch eager"
    if hasattr(torch.nn.functional, "rms_norm"):  # fused in recent torch
        eager, name = (lambda x: torch.nn.functional.rms_norm(x, (n,), w, eps)), "F.rms_norm"
    tilec = ctx.tilec("rmsnorm.tile", "rmsnorm", lambda f: lambda x: f(x, w, y, eps), lambda: y)
    moved = 2 * m * n * 2 + n * 2
    return _memory_case(
        ctx, tilec, expression, sets, expected, moved, 1.6e-2, eager=eager, eager_name=name
    )


def _layernorm(size: tuple, ctx: Context) -> Case:
    import torch
    import torch.nn.functional as F

    m, n = size
    eps = 1e-5
    w, b = _randn((n,), "f16"), _randn((n,), "f16")
    sets = ctx.sets(lambda: (_randn((m, n), "f16"),), m * n * 2)
    y = torch.empty(m, n, device=DEVICE, dtype=torch.float16)
    expected = F.layer_norm(sets[0][0].double(), (n,), w.double(), b.double(), eps).half()

    def expression(x: Any) -> Any:
        return F.layer_norm(x, (n,), w, b, eps)

    tilec = ctx.tilec(
        "layernorm.tile", "layernorm", lambda f: lambda x: f(x, w, b, y, eps), lambda: y
    )
    triton = ctx.triton_peer(
        "triton", lambda t: lambda x: t.layernorm(x, w, b, eps, num_warps=t.row_warps(n))
    )
    moved = 2 * m * n * 2 + 2 * n * 2
    return _memory_case(ctx, tilec, expression, sets, expected, moved, 4e-3, triton=triton)


def _softmax(dtype: str) -> Callable[[tuple, Context], Case]:
    def build(size: tuple, ctx: Context) -> Case:
        import torch

        m, n = size
        width = 4 if dtype == "f32" else 2
        sets = ctx.sets(lambda: (_randn((m, n), dtype, 4.0),), m * n * width)
        y = torch.empty(m, n, device=DEVICE, dtype=_dtype(dtype))
        expected = torch.softmax(sets[0][0].double(), dim=1).to(_dtype(dtype))

        def expression(x: Any) -> Any:
            return torch.softmax(x, dim=1)

        kernel = "softmax" if dtype == "f32" else "softmax_f16"
        tilec = ctx.tilec("softmax.tile", kernel, lambda f: lambda x: f(x, y), lambda: y)
        triton = ctx.triton_peer(
            "triton", lambda t: lambda x: t.softmax(x, num_warps=t.row_warps(n))
        )
        rtol = 1e-5 if dtype == "f32" else 2e-3
        return _memory_case(
            ctx, tilec, expression, sets, expected, 2 * m * n * width, rtol, triton=triton
        )

    return build


def _cross_entropy(size: tuple, ctx: Context) -> Case:
    import torch
    import torch.nn.functional as F

    m, v = size

    def inputs() -> tuple[Any, Any, Any]:
        target = torch.randint(0, v, (m,), device=DEVICE)
        return _randn((m, v), "f32", 2.0), target.int(), target  # i32 for tilec, i64 for torch

    sets = ctx.sets(inputs, m * v * 4)
    loss = torch.empty(m, device=DEVICE)
    logits, _target32, target = sets[0]
    logits64 = logits.double()
    expected = (torch.logsumexp(logits64, 1) - logits64.gather(1, target[:, None])[:, 0]).float()

    def expression(logits: Any, _target32: Any, target: Any) -> Any:
        return F.cross_entropy(logits, target, reduction="none")

    tilec = ctx.tilec(
        "cross_entropy.tile",
        "cross_entropy",
        lambda f: lambda x, t32, t: f(x, t32, loss),
        lambda: loss,
    )
    moved = m * v * 4 + m * 4 + m * 4
    return _memory_case(ctx, tilec, expression, sets, expected, moved, 1e-5)


def _swiglu(size: tuple, ctx: Context) -> Case:
    import torch
    import torch.nn.functional as F

    m, n = size
    sets = ctx.sets(lambda: (_randn((m, n), "bf16"), _randn((m, n), "bf16")), 2 * m * n * 2)
    y = torch.empty(m, n, device=DEVICE, dtype=torch.bfloat16)
    a, b = (t.double() for t in sets[0])
    expected = (a * torch.sigmoid(a) * b).bfloat16()

    def expression(a: Any, b: Any) -> Any:
        return F.silu(a) * b

    tilec = ctx.tilec("swiglu.tile", "swiglu", lambda f: lambda a, b: f(a, b, y), lambda: y)
    return _memory_case(ctx, tilec, expression, sets, expected, 3 * m * n * 2, 1.6e-2)


def _dropout(size: tuple, ctx: Context) -> Case:
    import torch
    import torch.nn.functional as F

    m, n = size
    p, seed = 0.1, 1234
    sets = ctx.sets(lambda: (_randn((m, n), "f16"),), m * n * 2)
    y = torch.empty(m, n, device=DEVICE, dtype=torch.float16)
    scaled = sets[0][0].double() / (1 - p)

    def is_dropout(got: Any, rtol: float) -> bool:
        """Every element 0 or x / (1 - p), and 1 - p of them kept: torch draws its mask from
        its own generator, so no peer agrees with tilec element by element (tilec's stream is
        checked exactly against Triton's in tests/gpu/test_random.py)."""
        got = got.double()
        kept = got != 0
        # f16's subnormals (below 2^-14) are 2^-24 apart: a relative bound alone fails them
        close = (got - scaled).abs() <= rtol * scaled.abs() + 2.0**-23
        fraction = kept.double().mean().item()
        spread = 6 * math.sqrt(p * (1 - p) / got.numel()) + 1e-3
        return bool((close | ~kept).all()) and abs(fraction - (1 - p)) <= spread

    def expression(x: Any) -> Any:
        return F.dropout(x, p, training=True)

    tilec = ctx.tilec(
        "dropout.tile", "dropout_f16", lambda f: lambda x: f(x, y, p, seed), lambda: y
    )
    # Bytes a dropout must move: x read and y written once (torch's also stores its mask).
    return _memory_case(ctx, tilec, expression, sets, is_dropout, 2 * m * n * 2, 1e-3)


def _row_sum(size: tuple, ctx: Context) -> Case:
    import torch

    m, n = size
    # Positive values: the sums do not cancel, so f32 sums in any order stay close.
    sets = ctx.sets(lambda: (torch.rand(m, n, device=DEVICE),), m * n * 4)
    out = torch.empty(m, device=DEVICE)
    expected = sets[0][0].double().sum(1).float()

    def expression(x: Any) -> Any:
        return x.sum(1)

    tilec = ctx.tilec("row_sum.tile", "row_sum", lambda f: lambda x: f(x, out), lambda: out)
    return _memory_case(ctx, tilec, expression, sets, expected, m * n * 4 + m * 4, 1e-5)


def _col_sum(size: tuple, ctx: Context) -> Case:
    import torch

    m, n = size
    sets = ctx.sets(lambda: (torch.rand(m, n, device=DEVICE),), m * n * 4)
    out = torch.empty(n, device=DEVICE)
    expected = sets[0][0].double().sum(0).float()

    def expression(x: Any) -> Any:
        return x.sum(0)

    tilec = ctx.tilec("col_sum.tile", "col_sum", lambda f: lambda x: f(x, out), lambda: out)
    return _memory_case(ctx, tilec, expression, sets, expected, m * n * 4 + n * 4, 1e-5)


def _col_sum_atomic(size: tuple, ctx: Context) -> Case:
    """Column sums by atomics (examples/col_sum_atomic.tile): each run zeroes `out` first (a
    memset, timed with the kernel); the bytes are col_sum's."""
    import torch

    m, n = size
    sets = ctx.sets(lambda: (torch.rand(m, n, device=DEVICE),), m * n * 4)
    out = torch.empty(n, device=DEVICE)
    expected = sets[0][0].double().sum(0).float()

    def expression(x: Any) -> Any:
        return x.sum(0)

    def make(kernel: Any) -> Callable[..., Any]:
        def run(x: Any) -> None:
            out.zero_()
            kernel(x, out)

        return run

    tilec = ctx.tilec("col_sum_atomic.tile", "col_sum_atomic", make, lambda: out)
    return _memory_case(ctx, tilec, expression, sets, expected, m * n * 4 + n * 4, 1e-5)


def _cumsum(size: tuple, ctx: Context) -> Case:
    import torch

    m, n = size
    # Positive values: running sums do not cancel, so f32 sums in any order stay close.
    sets = ctx.sets(lambda: (torch.rand(m, n, device=DEVICE),), m * n * 4)
    y = torch.empty(m, n, device=DEVICE)
    expected = sets[0][0].double().cumsum(1).float()

    def expression(x: Any) -> Any:
        return torch.cumsum(x, 1)

    tilec = ctx.tilec("cumsum.tile", "cumsum_rows", lambda f: lambda x: f(x, y), lambda: y)
    return _memory_case(ctx, tilec, expression, sets, expected, 2 * m * n * 4, 1e-5)


def _topk_softmax(size: tuple, ctx: Context) -> Case:
    import torch

    t, e = size
    sets = ctx.sets(lambda: (_randn((t, e), "f32", 2.0),), t * e * 4)
    weights = torch.empty(t, 2, device=DEVICE)
    experts = torch.empty(t, 2, device=DEVICE, dtype=torch.int32)

    def route(logits: Any) -> Any:
        # The router as a model writes it: softmax, top-2, renormalised weights; both results
        # in one tensor so that the check compares the experts chosen too.
        top, index = torch.topk(torch.softmax(logits, 1), 2, dim=1)
        return torch.cat((top / top.sum(1, keepdim=True), index.to(top.dtype)), 1)

    expected = route(sets[0][0].double()).float()
    tilec = ctx.tilec(
        "topk_softmax.tile",
        "topk_softmax",
        lambda f: lambda x: f(x, weights, experts),
        lambda: torch.cat((weights, experts.float()), 1),
    )
    return _memory_case(ctx, tilec, route, sets, expected, t * e * 4 + t * 2 * 8, 1e-5)


def _transpose(size: tuple, ctx: Context) -> Case:
    import torch

    m, n = size
    sets = ctx.sets(lambda: (torch.randn(m, n, device=DEVICE),), m * n * 4)
    y = torch.empty(n, m, device=DEVICE)
    expected = sets[0][0].t().contiguous()

    def expression(x: Any) -> Any:
        return x.t().contiguous()

    tilec = ctx.tilec("transpose.tile", "transpose", lambda f: lambda x: f(x, y), lambda: y)
    return _memory_case(ctx, tilec, expression, sets, expected, 2 * m * n * 4, 0.0)


def _rotary(size: tuple, ctx: Context) -> Case:
    import torch

    s, h, d = size
    half = d // 2
    angles = torch.arange(s, device=DEVICE)[:, None] * torch.rand(half, device=DEVICE)[None, :]
    cos_t, sin_t = angles.cos(), angles.sin()
    sets = ctx.sets(lambda: (_randn((s, h, 2, half), "f16"),), s * h * d * 2)
    y = torch.empty(s, h, 2, half, device=DEVICE, dtype=torch.float16)

    def rotate(x: Any, c: Any, t: Any) -> Any:
        # NeoX's half split: the first half of each head against the second.
        x1, x2 = x[:, :, 0, :], x[:, :, 1, :]
        c, t = c[:, None, :], t[:, None, :]
        return torch.stack((x1 * c - x2 * t, x2 * c + x1 * t), dim=2)

    expected = rotate(sets[0][0].double(), cos_t.double(), sin_t.double()).half()

    def expression(x: Any) -> Any:
        return rotate(x.float(), cos_t, sin_t).half()

    tilec = ctx.tilec("rotary.tile", "rotary", lambda f: lambda x: f(x, cos_t, sin_t, y), lambda: y)
    moved = 2 * s * h * d * 2 + 2 * s * half * 4
    return _memory_case(ctx, tilec, expression, sets, expected, moved, 2e-3)


def _vector_add(size: tuple, ctx: Context) -> Case:
    import torch

    (n,) = size
    sets = ctx.sets(lambda: (torch.rand(n, device=DEVICE), torch.rand(n, device=DEVICE)), 2 * n * 4)
    out = torch.empty(n, device=DEVICE)
    x, y = sets[0]
    expected = x + y

    def expression(x: Any, y: Any) -> Any:
        return x + y

    tilec = ctx.tilec(
        "vector_add.tile", "vector_add", lambda f: lambda x, y: f(x, y, out), lambda: out
    )
    triton = ctx.triton_peer("triton", lambda t: lambda x, y: t.vector_add(x, y))
    return _memory_case(ctx, tilec, expression, sets, expected, 3 * n * 4, 0.0, triton=triton)


def _embedding(size: tuple, ctx: Context) -> Case:
    import torch
    import torch.nn.functional as F

    v, d, m = size
    table = _randn((v, d), "bf16")
    # Only the ids rotate: the table (262 MB at 32000 x 4096) is past the L2 cache already,
    # and random ids read rows from all of it.
    sets = ctx.sets(lambda: (torch.randint(0, v, (m,), device=DEVICE),), m * 8)
    out = torch.empty(m, d, device=DEVICE, dtype=torch.bfloat16)
    expected = table[sets[0][0]]

    def expression(ids: Any) -> Any:
        return F.embedding(ids, table)

    tilec = ctx.tilec(
        "embedding.tile", "embedding", lambda f: lambda ids: f(table, ids, out), lambda: out
    )
    moved = 2 * m * d * 2 + m * 8  # each looked-up row read and written, and the ids
    return _memory_case(
        ctx, tilec, expression, sets, expected, moved, 0.0, eager_name="F.embedding"
    )


def _embedding_backward(size: tuple, ctx: Context) -> Case:
    """The gradient of F.embedding for its table (examples/embedding_backward.tile): each run
    zeroes the table (a memset, timed with the kernel, as the peers allocate a zeroed one),
    then scatter-adds the gradient rows by atomics. Peers: torch's own backward
    (`aten.embedding_dense_backward`, what autograd runs) and `index_add_`, compiled."""
    import torch

    v, d, m = size
    sets = ctx.sets(
        lambda: (_randn((m, d), "bf16"), torch.randint(0, v, (m,), device=DEVICE)), m * d * 2
    )
    grad_table = torch.empty(v, d, device=DEVICE, dtype=torch.bfloat16)
    grad_out, ids = sets[0]
    expected = torch.zeros(v, d, device=DEVICE, dtype=torch.float64)
    expected = expected.index_add_(0, ids, grad_out.double()).bfloat16()

    def expression(grad_out: Any, ids: Any) -> Any:
        table = torch.zeros(v, d, device=grad_out.device, dtype=grad_out.dtype)
        return table.index_add_(0, ids, grad_out)

    def eager(grad_out: Any, ids: Any) -> Any:
        return torch.ops.aten.embedding_dense_backward(grad_out, ids, v, -1, False)

    def make(kernel: Any) -> Callable[..., Any]:
        def run(grad_out: Any, ids: Any) -> None:
            grad_table.zero_()
            kernel(grad_out, ids, grad_table)

        return run

    tilec = ctx.tilec("embedding_backward.tile", "embedding_backward", make, lambda: grad_table)
    moved = v * d * 2 + m * d * 2 + m * 8  # the table written, the gradient rows and ids read
    return _memory_case(
        ctx,
        tilec,
        expression,
        sets,
        expected,
        moved,
        1.6e-2,
        eager=eager,
        eager_name="embedding_dense_backward",
    )


def _histogram(size: tuple, ctx: Context) -> Case:
    """Counts of int32 values in [0, bins) (examples/histogram.tile): each run zeroes the
    counts first (timed with the kernel); peer torch.bincount."""
    import torch

    n, bins = size
    sets = ctx.sets(
        lambda: (torch.randint(0, bins, (n,), device=DEVICE, dtype=torch.int32),), n * 4
    )
    counts = torch.empty(bins, device=DEVICE, dtype=torch.int32)
    expected = torch.bincount(sets[0][0].long(), minlength=bins).int()

    def expression(values: Any) -> Any:
        return torch.bincount(values, minlength=bins).int()

    def make(kernel: Any) -> Callable[..., Any]:
        def run(values: Any) -> None:
            counts.zero_()
            kernel(values, counts)

        return run

    tilec = ctx.tilec("histogram.tile", "histogram", make, lambda: counts)
    return _memory_case(
        ctx, tilec, expression, sets, expected, n * 4 + bins * 4, 0.0, eager_name="torch.bincount"
    )


def _paged_decode(size: tuple, ctx: Context) -> Case:
    """Sizes are (B, H, G, context, D): one decode step of B sequences of `context` tokens,
    their K/V in pages of 16 scattered through a cache in a random order. The peers gather
    each sequence's pages, then SDPA (eager, and torch.compile of the same)."""
    import torch
    import torch.nn.functional as F

    batch, heads, kv_heads, context, d = size
    page, scale = 16, d**-0.5
    per_sequence = -(-context // page)
    k_cache = _randn((batch * per_sequence, kv_heads, page, d), "f16")
    v_cache = _randn((batch * per_sequence, kv_heads, page, d), "f16")
    table = torch.randperm(batch * per_sequence, device=DEVICE).view(batch, per_sequence).int()
    lens = torch.full((batch,), context, device=DEVICE, dtype=torch.int32)
    # Only the queries rotate: the caches are past the L2 cache at the suite's sizes.
    sets = ctx.sets(lambda: (_randn((batch, heads, d), "f16"),), batch * heads * d * 2)
    o = torch.empty(batch, heads, d, device=DEVICE, dtype=torch.float16)

    def gathered(cache: Any) -> Any:  # [B, G, context, D]
        tokens = cache[table.long()].permute(0, 2, 1, 3, 4)
        tokens = tokens.reshape(batch, kv_heads, per_sequence * page, d)[:, :, :context]
        return tokens.repeat_interleave(heads // kv_heads, dim=1)

    def expression(q: Any) -> Any:
        k, v = gathered(k_cache), gathered(v_cache)
        return F.scaled_dot_product_attention(q[:, :, None], k, v, scale=scale)[:, :, 0]

    q = sets[0][0]
    k, v = gathered(k_cache), gathered(v_cache)
    expected = _attention_reference(q[:, :, None], k, v, scale, False)[:, :, 0]
    del k, v
    tilec = ctx.tilec(
        "paged_decode.tile",
        "paged_decode",
        lambda f: lambda q: f(q, k_cache, v_cache, table, lens, o, scale),
        lambda: o,
    )
    # What a decode step must move: every cached token's K and V once, q and o, the table.
    moved = 2 * batch * context * kv_heads * d * 2 + 2 * batch * heads * d * 2 + table.numel() * 4
    return _memory_case(
        ctx, tilec, expression, sets, expected, moved, 4e-3, eager_name="gather + SDPA"
    )


def _memory(
    name: str, build: Callable, label: Callable, sizes: Any, quick: Any, small: Any
) -> Workload:
    return Workload(name, "memory", build, label, tuple(sizes), tuple(quick), tuple(small))


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
            _int8_gemm,
            _gemm_label("i8"),
            ((4096, 4096, 4096),),
            ((1024, 1024, 1024),),
            ceiling="int8",
        ),
        Workload(
            "attention",
            "compute",
            _attention("plain"),
            _attention_label,
            ((4, 16, 16, 4096, 128), (4, 16, 16, 4096, 64), (1, 8, 8, 1537, 128)),
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
        _memory("rmsnorm", _rmsnorm, _size2("bf16"), [(8192, 4096)], [(4096, 1024)], [(512, 1024)]),
        _memory(
            "layernorm",
            _layernorm,
            _size2("f16"),
            [(8192, 8192), (8192, 1024)],
            [(4096, 1024)],
            [(512, 1024)],
        ),
        _memory(
            "softmax",
            _softmax("f32"),
            _size2("f32"),
            [(8192, 4096), (4096, 16384), (32768, 1024)],
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
            [(4096, 16384), (65536, 256)],
            [(2048, 2048)],
            [(256, 1024)],
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
            "vector_add",
            _vector_add,
            lambda s: f"N=2^{int(math.log2(s[0]))} f32",
            [(1 << 28,)],
            [(1 << 24,)],
            [(1 << 18,)],
        ),
    ]
}
