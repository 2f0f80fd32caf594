"""The suite's memory-bound workloads, each against `torch.compile` of its expression and
eager torch (`tilec.benchmarks.suite` lists them)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from tilec.benchmarks import suite_core
from tilec.benchmarks.suite_compute import _attention_reference
from tilec.benchmarks.suite_core import (
    Case,
    Context,
    Implementation,
    _dtype,
    _eager,
    _randn,
)

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
    y = torch.empty(m, n, device=suite_core.DEVICE, dtype=torch.bfloat16)
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
    y = torch.empty(m, n, device=suite_core.DEVICE, dtype=torch.float16)
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
        y = torch.empty(m, n, device=suite_core.DEVICE, dtype=_dtype(dtype))
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
        target = torch.randint(0, v, (m,), device=suite_core.DEVICE)
        return _randn((m, v), "f32", 2.0), target.int(), target  # i32 for tilec, i64 for torch

    sets = ctx.sets(inputs, m * v * 4)
    loss = torch.empty(m, device=suite_core.DEVICE)
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
    y = torch.empty(m, n, device=suite_core.DEVICE, dtype=torch.bfloat16)
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
    y = torch.empty(m, n, device=suite_core.DEVICE, dtype=torch.float16)
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
    sets = ctx.sets(lambda: (torch.rand(m, n, device=suite_core.DEVICE),), m * n * 4)
    out = torch.empty(m, device=suite_core.DEVICE)
    expected = sets[0][0].double().sum(1).float()

    def expression(x: Any) -> Any:
        return x.sum(1)

    tilec = ctx.tilec("row_sum.tile", "row_sum", lambda f: lambda x: f(x, out), lambda: out)
    return _memory_case(ctx, tilec, expression, sets, expected, m * n * 4 + m * 4, 1e-5)


def _logsumexp(size: tuple, ctx: Context) -> Case:
    import torch

    m, n = size
    sets = ctx.sets(lambda: (_randn((m, n), "f32", 4.0),), m * n * 4)
    out = torch.empty(m, device=suite_core.DEVICE)
    expected = torch.logsumexp(sets[0][0].double(), 1).float()

    def expression(x: Any) -> Any:
        return torch.logsumexp(x, 1)

    tilec = ctx.tilec("logsumexp.tile", "logsumexp", lambda f: lambda x: f(x, out), lambda: out)
    return _memory_case(ctx, tilec, expression, sets, expected, m * n * 4 + m * 4, 1e-5)


def _greedy_token(size: tuple, ctx: Context) -> Case:
    import torch

    m, v = size
    sets = ctx.sets(lambda: (_randn((m, v), "f32", 4.0),), m * v * 4)
    token = torch.empty(m, device=suite_core.DEVICE, dtype=torch.int32)
    expected = torch.argmax(sets[0][0], 1)  # the first index of the maximum, as the kernel's

    def expression(x: Any) -> Any:
        return torch.argmax(x, 1)

    tilec = ctx.tilec(
        "topk_softmax.tile", "greedy_token", lambda f: lambda x: f(x, token), lambda: token
    )
    return _memory_case(ctx, tilec, expression, sets, expected, m * v * 4 + m * 4, 0.0)


def _bias_gelu(size: tuple, ctx: Context) -> Case:
    import torch

    m, n = size
    bias = _randn((n,), "f16")
    sets = ctx.sets(lambda: (_randn((m, n), "f16"),), m * n * 2)
    y = torch.empty(m, n, device=suite_core.DEVICE, dtype=torch.float16)

    def expression(x: Any) -> Any:
        return torch.nn.functional.gelu(x.float() + bias.float()).half()

    expected = torch.nn.functional.gelu(sets[0][0].double() + bias.double()).half()
    tilec = ctx.tilec("bias_gelu.tile", "bias_gelu", lambda f: lambda x: f(x, bias, y), lambda: y)
    return _memory_case(ctx, tilec, expression, sets, expected, 2 * m * n * 2 + n * 2, 2e-3)


def _seq_mean(size: tuple, ctx: Context) -> Case:
    import torch

    b, s, d = size
    sets = ctx.sets(lambda: (_randn((b, s, d), "f32"),), b * s * d * 4)
    out = torch.empty(b, d, device=suite_core.DEVICE)
    expected = sets[0][0].double().mean(1).float()

    def expression(x: Any) -> Any:
        return x.mean(1)

    tilec = ctx.tilec("seq_mean.tile", "seq_mean", lambda f: lambda x: f(x, out), lambda: out)
    return _memory_case(ctx, tilec, expression, sets, expected, b * s * d * 4 + b * d * 4, 1e-5)


def _col_sum(size: tuple, ctx: Context) -> Case:
    import torch

    m, n = size
    sets = ctx.sets(lambda: (torch.rand(m, n, device=suite_core.DEVICE),), m * n * 4)
    out = torch.empty(n, device=suite_core.DEVICE)
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
    sets = ctx.sets(lambda: (torch.rand(m, n, device=suite_core.DEVICE),), m * n * 4)
    out = torch.empty(n, device=suite_core.DEVICE)
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
    sets = ctx.sets(lambda: (torch.rand(m, n, device=suite_core.DEVICE),), m * n * 4)
    y = torch.empty(m, n, device=suite_core.DEVICE)
    expected = sets[0][0].double().cumsum(1).float()

    def expression(x: Any) -> Any:
        return torch.cumsum(x, 1)

    tilec = ctx.tilec("cumsum.tile", "cumsum_rows", lambda f: lambda x: f(x, y), lambda: y)
    return _memory_case(ctx, tilec, expression, sets, expected, 2 * m * n * 4, 1e-5)


def _running_max(size: tuple, ctx: Context) -> Case:
    import torch

    m, n = size
    sets = ctx.sets(lambda: (_randn((m, n), "bf16", 1.0),), m * n * 2)
    y = torch.empty(m, n, device=suite_core.DEVICE, dtype=torch.bfloat16)
    expected = sets[0][0].cummax(1).values  # exact: a max rounds nothing

    def expression(x: Any) -> Any:
        return torch.cummax(x, 1).values

    tilec = ctx.tilec("cumsum.tile", "running_max_rows", lambda f: lambda x: f(x, y), lambda: y)
    return _memory_case(ctx, tilec, expression, sets, expected, 2 * m * n * 2, 0.0)


def _topk_softmax(size: tuple, ctx: Context) -> Case:
    import torch

    t, e = size
    sets = ctx.sets(lambda: (_randn((t, e), "f32", 2.0),), t * e * 4)
    weights = torch.empty(t, 2, device=suite_core.DEVICE)
    experts = torch.empty(t, 2, device=suite_core.DEVICE, dtype=torch.int32)

    def route(logits: Any) -> Any:
        # The router as a model writes it: softmax, top-2, renormalised weights; both results
        # in one tensor so that the check compares the experts chosen too.
        top, index = torch.topk(torch.softmax(logits, 1), 2, dim=1)
        return torch.cat((top / top.sum(1, keepdim=True), index.to(top.dtype)), 1)

    probabilities = torch.softmax(sets[0][0].double(), 1)
    top = torch.topk(probabilities, 2, dim=1).values

    def expected(got: Any, rtol: float) -> bool:
        """Right weights, and experts whose probabilities (in double) are the top two's: a
        near-tie two f32 computations may order either way (the inputs are random each run,
        and ~1e-7 apart in 4M pairs happens) is right either way; a wrong expert is not."""
        index = got[:, 2:].round().long()
        if index.min() < 0 or index.max() >= e or (index[:, 0] == index[:, 1]).any():
            return False  # out of range, or one expert twice (a tie must give both)
        chosen = probabilities.gather(1, index)
        weights = top / top.sum(1, keepdim=True)
        scale = rtol * (top.abs() + top.abs().max())
        return bool(
            ((got[:, :2].double() - weights).abs() <= rtol * (weights + 1)).all()
            and ((chosen - top).abs() <= scale).all()
        )

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
    sets = ctx.sets(lambda: (torch.randn(m, n, device=suite_core.DEVICE),), m * n * 4)
    y = torch.empty(n, m, device=suite_core.DEVICE)
    expected = sets[0][0].t().contiguous()

    def expression(x: Any) -> Any:
        return x.t().contiguous()

    tilec = ctx.tilec("transpose.tile", "transpose", lambda f: lambda x: f(x, y), lambda: y)
    return _memory_case(ctx, tilec, expression, sets, expected, 2 * m * n * 4, 0.0)


def _rotary(size: tuple, ctx: Context) -> Case:
    import torch

    s, h, d = size
    half = d // 2
    angles = (
        torch.arange(s, device=suite_core.DEVICE)[:, None]
        * torch.rand(half, device=suite_core.DEVICE)[None, :]
    )
    cos_t, sin_t = angles.cos(), angles.sin()
    sets = ctx.sets(lambda: (_randn((s, h, 2, half), "f16"),), s * h * d * 2)
    y = torch.empty(s, h, 2, half, device=suite_core.DEVICE, dtype=torch.float16)

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


def _head_gate(size: tuple, ctx: Context) -> Case:
    import torch

    s, h, d = size
    gate = torch.rand(s, d, device=suite_core.DEVICE)
    sets = ctx.sets(lambda: (_randn((s, h, d), "f16"),), s * h * d * 2)
    y = torch.empty(s, h, d, device=suite_core.DEVICE, dtype=torch.float16)
    expected = (sets[0][0].double() * gate.double()[:, None, :]).half()

    def expression(x: Any) -> Any:
        return (x.float() * gate[:, None, :]).half()

    tilec = ctx.tilec("head_gate.tile", "head_gate", lambda f: lambda x: f(x, gate, y), lambda: y)
    moved = 2 * s * h * d * 2 + s * d * 4
    return _memory_case(ctx, tilec, expression, sets, expected, moved, 2e-3)


def _vector_add(size: tuple, ctx: Context) -> Case:
    import torch

    (n,) = size
    sets = ctx.sets(
        lambda: (torch.rand(n, device=suite_core.DEVICE), torch.rand(n, device=suite_core.DEVICE)),
        2 * n * 4,
    )
    out = torch.empty(n, device=suite_core.DEVICE)
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
    sets = ctx.sets(lambda: (torch.randint(0, v, (m,), device=suite_core.DEVICE),), m * 8)
    out = torch.empty(m, d, device=suite_core.DEVICE, dtype=torch.bfloat16)
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


def _embedding_bag(size: tuple, ctx: Context) -> Case:
    """Sums of bags of table rows (examples/embedding_bag.tile, `F.embedding_bag` with mode
    "sum"): sizes (V, D, B, L), bags of 1..L ids (lengths from a fixed seed) padded to L. Peers:
    `F.embedding_bag` on the ids flattened with offsets (eager), and `torch.compile` of the
    masked gather-sum `(table[ids] * mask[..., None]).sum(1)` (Inductor fuses it)."""
    import torch
    import torch.nn.functional as F

    v, d, bags, width = size
    table = _randn((v, d), "f32")
    generator = torch.Generator(device="cpu").manual_seed(11)
    drawn = torch.randint(1, width + 1, (bags,), generator=generator)
    used = int(drawn.sum())  # ids summed, over all bags
    lengths = drawn.to(suite_core.DEVICE).int()
    mask = torch.arange(width, device=suite_core.DEVICE)[None, :] < lengths[:, None]
    offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)[:-1]]).long()
    # Only the ids rotate: the table is past the L2 cache, and random ids read all of it.
    sets = ctx.sets(
        lambda: (torch.randint(0, v, (bags, width), device=suite_core.DEVICE, dtype=torch.int32),),
        bags * width * 4,
    )
    out = torch.empty(bags, d, device=suite_core.DEVICE)
    ids = sets[0][0]
    expected = (table.double()[ids.long()] * mask[..., None]).sum(1).float()

    def expression(ids: Any) -> Any:
        return (table[ids] * mask[..., None]).sum(1)

    def eager(ids: Any) -> Any:
        return F.embedding_bag(ids[mask].long(), table, offsets, mode="sum")

    tilec = ctx.tilec(
        "embedding_bag.tile",
        "embedding_bag",
        lambda f: lambda ids: f(table, ids, lengths, out),
        lambda: out,
    )
    moved = used * d * 4 + bags * d * 4 + used * 4  # the rows summed, the sums, the ids read
    return _memory_case(
        ctx,
        tilec,
        expression,
        sets,
        expected,
        moved,
        1e-5,
        eager=eager,
        eager_name="F.embedding_bag",
    )


def _embedding_backward(size: tuple, ctx: Context) -> Case:
    """The gradient of F.embedding for its table (examples/embedding_backward.tile): each run
    zeroes the table (a memset, timed with the kernel, as the peers allocate a zeroed one),
    then scatter-adds the gradient rows by atomics. Peers: torch's own backward
    (`aten.embedding_dense_backward`, what autograd runs) and `index_add_`, compiled."""
    import torch

    v, d, m = size
    sets = ctx.sets(
        lambda: (_randn((m, d), "bf16"), torch.randint(0, v, (m,), device=suite_core.DEVICE)),
        m * d * 2,
    )
    grad_table = torch.empty(v, d, device=suite_core.DEVICE, dtype=torch.bfloat16)
    grad_out, ids = sets[0]
    expected = torch.zeros(v, d, device=suite_core.DEVICE, dtype=torch.float64)
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
        lambda: (torch.randint(0, bins, (n,), device=suite_core.DEVICE, dtype=torch.int32),), n * 4
    )
    counts = torch.empty(bins, device=suite_core.DEVICE, dtype=torch.int32)
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
    table = (
        torch.randperm(batch * per_sequence, device=suite_core.DEVICE)
        .view(batch, per_sequence)
        .int()
    )
    lens = torch.full((batch,), context, device=suite_core.DEVICE, dtype=torch.int32)
    # Only the queries rotate: the caches are past the L2 cache at the suite's sizes.
    sets = ctx.sets(lambda: (_randn((batch, heads, d), "f16"),), batch * heads * d * 2)
    o = torch.empty(batch, heads, d, device=suite_core.DEVICE, dtype=torch.float16)

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
