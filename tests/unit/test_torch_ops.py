"""tilec kernels as PyTorch operators (`tilec.torch.op`), on CPU tensors through the reference
interpreter: the roles and the schema come from the kernel, `opcheck` passes, a compiled
function calls them without a graph break, gradients flow through a backward written as tilec
kernels, and bad arguments get the kernel's located message."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import tilec  # noqa: E402
import tilec.torch as tt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

KERNELS = """
def mul(x: f64[N], w: f64[N], y: f64[N]):
    for tn in tiles(N):
        y[tn] = x[tn] * w[tn]


def scale_(x: f32[M, N], alpha: f32):
    for tm in tiles(M):
        x[tm, :] = x[tm, :] * alpha


def fill(y: f32[N], value: f32):
    for tn in tiles(N):
        y[tn] = zeros([tn], f32) + value


def stats(x: f32[M, N], total: f32[M], peak: f32[M]):
    for tm in tiles(M):
        r = x[tm, :]
        total[tm] = sum(r, axis=1)
        peak[tm] = max(r, axis=1)
"""


def _save_inputs(ctx, inputs, output):
    """The `setup_context` of a backward that needs every input of the forward."""
    ctx.save_for_backward(*inputs)


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    path = tmp_path_factory.mktemp("ops") / "ops.tile"
    path.write_text(textwrap.dedent(KERNELS))
    names = ("mul", "scale_", "fill", "stats")
    made = {n: tt.op(f"tilec_tests::{n}", tilec.load_kernel(path, n)) for n in names}
    made["rmsnorm"] = tt.op(
        "tilec_tests::rmsnorm", tilec.load_kernel(ROOT / "examples" / "rmsnorm.tile", "rmsnorm")
    )
    return made


def test_roles_and_schemas_come_from_the_kernel(ops):
    assert ops["rmsnorm"].schema == "(Tensor x, Tensor w, float eps) -> Tensor"
    assert ops["scale_"].schema == "(Tensor(a0!) x, float alpha) -> ()"
    assert ops["fill"].schema == "(float value, SymInt N) -> Tensor"
    assert ops["stats"].schema == "(Tensor x) -> (Tensor, Tensor)"


def test_the_ops_compute_what_torch_does(ops):
    x = torch.randn(6, 48).bfloat16()
    w = torch.randn(48).bfloat16()
    y = ops["rmsnorm"](x, w, eps=1e-6)
    r = x.float()
    want = r * torch.rsqrt((r * r).mean(1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(y.float(), want, atol=2e-2, rtol=2e-2)
    m = torch.randn(5, 33)
    before = m.clone()
    assert ops["scale_"](m, 3.0) is None
    torch.testing.assert_close(m, before * 3.0)  # mutated in place
    torch.testing.assert_close(ops["fill"](2.5, N=7), torch.full((7,), 2.5))
    total, peak = ops["stats"](m)
    torch.testing.assert_close(total, m.sum(1), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(peak, m.amax(1))


@pytest.mark.parametrize("name", ["rmsnorm", "scale_", "stats", "mul"])
def test_opcheck(ops, name):
    args = {
        "rmsnorm": (torch.randn(4, 32).bfloat16(), torch.randn(32).bfloat16(), 1e-6),
        "scale_": (torch.randn(3, 17), 0.5),
        "stats": (torch.randn(3, 17),),
        "mul": (torch.randn(9, dtype=torch.float64), torch.randn(9, dtype=torch.float64)),
    }[name]
    torch.library.opcheck(ops[name].custom_op, args)


def test_a_compiled_function_calls_the_op_without_a_graph_break(ops):
    def f(x, w):
        return ops["rmsnorm"](x * 2, w, eps=1e-6) + 1

    x = torch.randn(4, 32).bfloat16()
    w = torch.randn(32).bfloat16()
    explained = torch._dynamo.explain(f)(x, w)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, w), f(x, w))


def test_gradients_flow_through_a_backward_of_tilec_ops(ops):
    mul = ops["mul"]

    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return mul(grad, w), mul(grad, x)

    mul.register_autograd(backward, setup_context=_save_inputs)
    x = torch.randn(11, dtype=torch.float64, requires_grad=True)
    w = torch.randn(11, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: mul(a, b), (x, w))


def test_a_recorded_eager_call_runs_the_backward_without_the_dispatcher(ops):
    """An eager call that autograd records takes the operator's own autograd.Function (its
    setup_context and backward, no dispatcher); the gradients are the dispatcher path's, and
    ctx.needs_input_grad indexes the operator's arguments. A module's weight (nn.Parameter)
    counts as a plain tensor."""
    mul = ops["mul"]
    seen = []

    def backward(ctx, grad):
        seen.append(ctx.needs_input_grad)
        x, w = ctx.saved_tensors
        return mul(grad, w), mul(grad, x)

    mul.register_autograd(backward, setup_context=_save_inputs)
    x = torch.nn.Parameter(torch.randn(7, dtype=torch.float64))
    w = torch.randn(7, dtype=torch.float64)
    calls = []
    original = mul._op
    mul._op = lambda *a: calls.append(a) or original(*a)
    try:
        y = mul(x, w)
        assert calls == [] and "Recorded" in type(y.grad_fn).__name__
        (gx,) = torch.autograd.grad(y.sum(), x)
        with torch.autograd.profiler.profile():  # the profiler records: the dispatcher's path
            y2 = mul(x, w)
        assert len(calls) == 1 and "Recorded" not in type(y2.grad_fn).__name__
        (gx2,) = torch.autograd.grad(y2.sum(), x)
    finally:
        mul._op = original
    torch.testing.assert_close(gx, w)
    torch.testing.assert_close(gx2, gx)
    assert seen[0] == (True, False) and seen[1] == (True, False)


def test_an_eager_call_of_plain_tensors_skips_the_dispatcher_and_modes_see_the_op(ops):
    """A plain eager call runs the operator's kernel without torch's dispatcher (~3 µs a
    call); a TorchDispatchMode, the profiler and FakeTensorMode still see the operator."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    x = torch.randn(9, dtype=torch.float64)
    w = torch.randn(9, dtype=torch.float64)
    calls = []
    original = ops["mul"]._op
    ops["mul"]._op = lambda *a: calls.append(a) or original(*a)
    try:
        torch.testing.assert_close(ops["mul"](x, w), x * w)
        assert calls == []  # straight to the kernel
        with Seen() as seen:
            torch.testing.assert_close(ops["mul"](x, w), x * w)
        assert len(calls) == 1 and any("tilec_tests.mul" in op for op in seen.ops), seen.ops
        with torch.autograd.profiler.profile() as prof:
            ops["mul"](x, w)
        assert len(calls) == 2 and any("tilec_tests::mul" in e.name for e in prof.function_events)
    finally:
        ops["mul"]._op = original
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        y = ops["mul"](torch.empty(5, dtype=torch.float64), torch.empty(5, dtype=torch.float64))
    assert y.shape == (5,) and y.dtype == torch.float64


def test_an_output_shaped_like_an_input_is_allocated_like_it(ops):
    """`mul`'s y has x's extents and dtype (`torch.empty_like`, contiguous even where x is
    not); rmsnorm's y has x's extents but a dtype parameter x binds; stats' outputs are rows."""
    plan = {name: [like for _dtype, _dims, like in ops[name]._plan] for name in ops}
    assert plan["mul"] == [0] and plan["rmsnorm"] == [0] and plan["stats"] == [None, None]
    x = torch.randn(8, 6, dtype=torch.float64).t()[0]  # a strided view of 8 elements
    w = torch.randn(6, 8, dtype=torch.float64)[1]
    (y,) = ops["mul"]._allocate_unchecked((x, w))
    assert y.shape == (8,) and y.is_contiguous() and y.dtype == torch.float64


def test_bad_arguments_get_the_kernels_located_message(ops):
    rms = ops["rmsnorm"]
    x = torch.randn(4, 32).bfloat16()
    cases = [
        (lambda: rms(x, torch.randn(31).bfloat16(), eps=1e-6), "dimension N is 32 in 'x' but 31"),
        # rmsnorm's dtype parameter T is bf16 or f32, bound by x: w must then agree.
        (lambda: rms(x.float(), torch.randn(32).bfloat16(), eps=1e-6), "must be a torch.float32"),
        (lambda: rms(x.half(), torch.randn(32).half(), eps=1e-6), "a tensor of bf16 or f32"),
        (lambda: rms(x, torch.randn(32).bfloat16()), "missing eps"),
        (lambda: rms(x, torch.randn(32).bfloat16(), epsilon=1.0), "no argument 'epsilon'"),
        (lambda: ops["fill"](1.0), "pass the extent of N by name"),
    ]
    for call, message in cases:
        with pytest.raises(tt.OpError, match=message) as caught:
            call()
        assert isinstance(caught.value, RuntimeError)
        assert "rmsnorm.tile:7:1: error:" in str(caught.value) or "ops.tile" in str(caught.value)
    # Under torch.compile the fake kernel raises it while tracing.
    compiled = torch.compile(lambda a, b: rms(a, b, eps=1e-6), fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="dimension N is 32 in 'x' but 31"):
        compiled(x, torch.randn(31).bfloat16())


def test_a_direct_call_of_a_jit_kernel_compiles_without_a_graph_break():
    """A `@tilec.jit` kernel called inside a compiled function (its output written in place)
    is traced as one `tilec::launch`: fullgraph works, and so do keyword arguments."""
    kernel = tilec.load_kernel(ROOT / "examples" / "rmsnorm.tile", "rmsnorm", interpret=True)

    def f(x, w):
        y = torch.empty_like(x)
        kernel(x * 2, w, y, 1e-6)
        z = torch.empty_like(x)
        kernel(x=x, w=w, y=z, eps=1e-5)
        return y.float() + z.float()

    x = torch.randn(4, 32).bfloat16()
    w = torch.randn(32).bfloat16()
    explained = torch._dynamo.explain(f)(x, w)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, w), f(x, w))  # eager: the interpreter
    graph = str(explained.graphs[0].graph)
    assert graph.count("tilec.launch") == 2, graph


RMSNORM_F32 = """
def rmsnorm_f32(x: f32[M, N], w: f32[N], y: f32[M, N], eps: f32):
    for tm in tiles(M):
        r = x[tm, :]
        y[tm, :] = r * rsqrt(mean(r * r, axis=1, keepdims=True) + eps) * w[:]
"""


def test_rmsnorm_and_swiglu_train_through_their_backward_kernels(tmp_path):
    """examples/rmsnorm_backward.tile and swiglu_backward.tile as the backward of their ops:
    the gradients torch's autograd computes through them match those of the same functions
    written in torch."""
    path = tmp_path / "forward.tile"
    path.write_text(RMSNORM_F32)
    examples = ROOT / "examples"
    norm = tt.op("tilec_tests::rmsnorm_f32", tilec.load_kernel(path, "rmsnorm_f32"))
    norm_dx = tt.op(
        "tilec_tests::rmsnorm_dx",
        tilec.load_kernel(examples / "rmsnorm_backward.tile", "rmsnorm_dx"),
    )
    norm_dw = tt.op(
        "tilec_tests::rmsnorm_dw",
        tilec.load_kernel(examples / "rmsnorm_backward.tile", "rmsnorm_dw"),
    )

    def norm_setup(ctx, inputs, output):
        x, w, eps = inputs
        ctx.save_for_backward(x, w)
        ctx.eps = eps

    def norm_backward(ctx, gy):
        x, w = ctx.saved_tensors
        dx, rstd = norm_dx(x, w, gy.contiguous(), ctx.eps)
        return dx, norm_dw(x, gy.contiguous(), rstd), None

    norm.register_autograd(norm_backward, setup_context=norm_setup)
    swiglu = tt.op("tilec_tests::swiglu", tilec.load_kernel(examples / "swiglu.tile", "swiglu"))
    swiglu_bwd = tt.op(
        "tilec_tests::swiglu_backward",
        tilec.load_kernel(examples / "swiglu_backward.tile", "swiglu_backward"),
    )

    def swiglu_backward(ctx, gy):
        a, b = ctx.saved_tensors
        return swiglu_bwd(a, b, gy.contiguous())

    swiglu.register_autograd(swiglu_backward, setup_context=_save_inputs)

    x = torch.randn(9, 40, requires_grad=True)
    w = torch.randn(40, requires_grad=True)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    g = torch.randn(9, 40)
    (norm(x, w, eps=1e-6) * g).sum().backward()
    want = x2 * torch.rsqrt((x2 * x2).mean(1, keepdim=True) + 1e-6) * w2
    (want * g).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(w.grad, w2.grad, atol=1e-5, rtol=1e-4)

    a = torch.randn(6, 24).bfloat16().requires_grad_()
    b = torch.randn(6, 24).bfloat16().requires_grad_()
    gy = torch.randn(6, 24).bfloat16()
    (swiglu(a, b) * gy).float().sum().backward()
    a2, b2 = a.detach().float().requires_grad_(), b.detach().float().requires_grad_()
    (torch.nn.functional.silu(a2) * b2 * gy.float()).sum().backward()
    torch.testing.assert_close(a.grad.float(), a2.grad, atol=3e-2, rtol=2e-2)
    torch.testing.assert_close(b.grad.float(), b2.grad, atol=3e-2, rtol=2e-2)


def test_cross_entropy_trains_through_its_backward_kernel():
    """examples/cross_entropy.tile as an op, examples/cross_entropy_backward.tile its backward:
    the logits' gradient matches torch's `F.cross_entropy(reduction="none")`."""
    examples = ROOT / "examples"
    loss_op = tt.op(
        "tilec_tests::cross_entropy",
        tilec.load_kernel(examples / "cross_entropy.tile", "cross_entropy"),
    )
    backward_op = tt.op(
        "tilec_tests::cross_entropy_backward",
        tilec.load_kernel(examples / "cross_entropy_backward.tile", "cross_entropy_backward"),
    )

    def backward(ctx, gloss):
        logits, target = ctx.saved_tensors
        return backward_op(logits, target, gloss.contiguous()), None

    loss_op.register_autograd(backward, setup_context=_save_inputs)
    logits = torch.randn(7, 300, requires_grad=True)
    target = torch.randint(0, 300, (7,), dtype=torch.int32)
    weights = torch.rand(7)
    loss = loss_op(logits, target)
    (loss * weights).sum().backward()
    logits2 = logits.detach().clone().requires_grad_()
    want = torch.nn.functional.cross_entropy(logits2, target.long(), reduction="none")
    torch.testing.assert_close(loss, want, atol=1e-5, rtol=1e-5)
    (want * weights).sum().backward()
    torch.testing.assert_close(logits.grad, logits2.grad, atol=1e-6, rtol=1e-5)


def test_dynamic_shapes_trace_the_operator_once():
    """dynamic=True: the fake kernel allocates outputs of symbolic extents, so new row counts
    reuse the one traced graph (without it: one static graph, then one dynamic one)."""
    from torch._dynamo.testing import CompileCounterWithBackend

    op = tt.op(
        "tilec_tests::rmsnorm_dynamic", tilec.load_kernel(ROOT / "examples" / "rmsnorm.tile")
    )

    def f(x, w):
        return op(x * 2, w, eps=1e-6) + 1

    w = torch.randn(16).bfloat16()
    for dynamic, frames in ((True, 1), (None, 2)):
        torch._dynamo.reset()
        counter = CompileCounterWithBackend("aot_eager")
        compiled = torch.compile(f, backend=counter, fullgraph=True, dynamic=dynamic)
        for rows in (3, 5, 9, 33):
            x = torch.randn(rows, 16).bfloat16()
            torch.testing.assert_close(compiled(x, w), f(x, w))
        assert counter.frame_count == frames


def test_a_backward_through_an_operator_without_one_is_an_error(ops):
    x = torch.randn(6, 48, requires_grad=True)
    total, _ = ops["stats"](x)
    assert total.requires_grad
    with pytest.raises(tt.OpError, match="has no backward: a gradient cannot flow through it"):
        total.sum().backward()
    with torch.no_grad():  # nothing recorded: the call skips the autograd kernel
        total, peak = ops["stats"](x)
    assert not total.requires_grad
    torch.testing.assert_close(peak, x.detach().amax(1))


def test_an_operator_that_mutates_takes_no_backward_and_compiles(ops):
    with pytest.raises(tt.OpError, match="writes into 'x' in place"):
        ops["scale_"].register_autograd(lambda ctx, g: g)

    def f(m):
        m = m * 1
        ops["scale_"](m, 3.0)
        return m + 1

    m = torch.randn(3, 5)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(m), m * 3 + 1)
