"""The training model of examples/torch/ on CPU tensors, in the reference interpreter: the
linear and attention operators' gradients (tilec backward kernels) match torch autograd of
F.linear and of SDPA, and a few training steps of the tilec model give eager PyTorch's losses,
in f32 and in bf16 (the same kernels, their dtype parameter bound to bf16)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilec.torch as tt  # noqa: E402
from examples.torch import ops, train  # noqa: E402


def _leaves(*shapes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=generator).requires_grad_() for s in shapes]


def test_linear_gradients_are_those_of_f_linear():
    x, w = _leaves((2, 5, 7), (6, 7))
    x2, w2 = (t.detach().clone().requires_grad_() for t in (x, w))
    gy = torch.randn(2, 5, 6)
    y = ops.linear(x, w)
    (y * gy).sum().backward()
    want = torch.nn.functional.linear(x2, w2)
    (want * gy).sum().backward()
    torch.testing.assert_close(y, want)
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(w.grad, w2.grad)


def test_causal_attention_gradients_are_those_of_sdpa():
    """FlashAttention-2's backward (delta, dK/dV over key tiles, dQ over query tiles) against
    autograd of scaled_dot_product_attention(is_causal=True)."""
    q, k, v = _leaves((1, 2, 6, 4), (1, 2, 6, 4), (1, 2, 6, 4), seed=1)
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    do = torch.randn(1, 2, 6, 4)
    o = ops.attention(q, k, v, 0.5)
    (o * do).sum().backward()
    want = torch.nn.functional.scaled_dot_product_attention(q2, k2, v2, is_causal=True, scale=0.5)
    (want * do).sum().backward()
    torch.testing.assert_close(o, want)
    for got, expected in ((q.grad, q2.grad), (k.grad, k2.grad), (v.grad, v2.grad)):
        torch.testing.assert_close(got, expected)


def test_rotary_backward_is_the_rotation_by_the_opposite_angle():
    (x,) = _leaves((4, 2, 6), seed=2)
    x2 = x.detach().clone().requires_grad_()
    angles = torch.rand(4, 3) * 6
    gy = torch.randn(4, 2, 6)
    (ops.rotary(x, angles.cos(), angles.sin()) * gy).sum().backward()
    from examples.torch import reference

    (reference.rotary(x2, angles.cos(), angles.sin()) * gy).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


def test_the_tilec_model_trains_as_eager_pytorch():
    result = train.main(["--steps", "3", "--device", "cpu", "--config", "tiny", "--no-explain"])
    torch.testing.assert_close(
        torch.tensor(result["tilec_losses"]),
        torch.tensor(result["eager_losses"]),
        atol=1e-5,
        rtol=1e-5,
    )
    assert result["tilec_losses"][-1] < result["tilec_losses"][0]


def test_the_bf16_model_trains_as_eager_pytorch_to_bf16_rounding():
    result = train.main(
        ["--steps", "3", "--device", "cpu", "--config", "tiny", "--no-explain", "--dtype", "bf16"]
    )
    losses = torch.tensor(result["tilec_losses"])
    # Both sides round activations and gradients to bf16 (unit roundoff 2**-8), at different
    # places (tilec's kernels once, after f32 arithmetic; torch's ops after each op in the
    # eager matmuls' epilogues): a few roundoffs of the loss after three steps, no more.
    torch.testing.assert_close(losses, torch.tensor(result["eager_losses"]), atol=0, rtol=2**-7)
    assert losses[-1] < losses[0]


def test_bf16_gradients_of_linear_and_attention_follow_torch():
    x, w = (t.detach().bfloat16().requires_grad_() for t in _leaves((9, 33), (17, 33), seed=3))
    gy = torch.randn(9, 17).bfloat16()
    (ops.linear(x, w) * gy).sum().backward()
    x2, w2 = (t.detach().float().requires_grad_() for t in (x, w))
    (torch.nn.functional.linear(x2, w2) * gy.float()).sum().backward()
    for got, want in ((x.grad, x2.grad), (w.grad, w2.grad)):
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), want, atol=2e-2, rtol=2**-7)
    q, k, v = (t.detach().bfloat16().requires_grad_() for t in _leaves(*[(1, 2, 17, 8)] * 3))
    do = torch.randn(1, 2, 17, 8).bfloat16()
    (ops.attention(q, k, v, 0.35) * do).sum().backward()
    q2, k2, v2 = (t.detach().float().requires_grad_() for t in (q, k, v))
    want = torch.nn.functional.scaled_dot_product_attention(q2, k2, v2, is_causal=True, scale=0.35)
    (want * do.float()).sum().backward()
    # p and ds are rounded to bf16 before their dots (as FlashAttention does).
    for got, expected in ((q.grad, q2.grad), (k.grad, k2.grad), (v.grad, v2.grad)):
        torch.testing.assert_close(got.float(), expected, atol=3e-2, rtol=2e-2)


def test_the_tilec_model_has_no_graph_breaks():
    model = train.Decoder(train.CONFIGS["tiny"])
    assert train.graph_breaks(model, "cpu") == 0


def _model_op_arguments(dtype):
    """Each operator of examples/torch/ops.py with small arguments of `dtype` (the schema's
    tensors; i32 ids and targets; f32 angles and statistics), for opcheck."""
    g = torch.Generator().manual_seed(7)

    def t(*shape, dt=dtype):
        return torch.randn(*shape, generator=g).to(dt)

    ids = torch.randint(0, 5, (6,), generator=g, dtype=torch.int32)
    lse, delta = t(1, 2, 6, dt=torch.float32), t(1, 2, 6, dt=torch.float32)
    q, k, v, o = (t(1, 2, 6, 4) for _ in range(4))
    return {
        "_linear": (t(5, 7), t(6, 7)),
        "_linear_dx": (t(5, 6), t(6, 7)),
        "_linear_dw": (t(5, 6), t(5, 7)),
        "_rmsnorm": (t(5, 8), t(8), 1e-6),
        "_rmsnorm_dx": (t(5, 8), t(8), t(5, 8), 1e-6),
        "_rmsnorm_dw": (t(5, 8), t(5, 8), t(5, dt=torch.float32).abs()),
        "_swiglu": (t(5, 8), t(5, 8)),
        "_swiglu_backward": (t(5, 8), t(5, 8), t(5, 8)),
        "_rotary": (t(6, 2, 2, 3), t(6, 3, dt=torch.float32), t(6, 3, dt=torch.float32)),
        "_attention": (q, k, v, 0.5),
        "_attention_delta": (o, t(1, 2, 6, 4)),
        "_attention_dkdv": (q, k, v, t(1, 2, 6, 4), lse, delta, 0.5),
        "_attention_dq": (q, k, v, t(1, 2, 6, 4), lse, delta, 0.5),
        "_cross_entropy": (t(6, 9), ids),
        "_cross_entropy_backward": (t(6, 9), ids, t(6, dt=torch.float32)),
        "_embedding": (t(5, 4), ids),
        "_embedding_backward": (t(6, 4), ids, torch.zeros(5, 4, dtype=dtype)),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_opcheck_passes_for_every_operator_of_the_model(dtype):
    """torch.library.opcheck (schema, fake tensors, autograd registration, AOT dispatch) for
    each tilec operator the model uses, at both of its dtypes."""
    arguments = _model_op_arguments(dtype)
    operators = {name: op for name, op in vars(ops).items() if isinstance(op, tt.TilecOp)}
    assert set(operators) == set(arguments)
    for name, op in operators.items():
        torch.library.opcheck(op.custom_op, arguments[name])


def test_the_tilec_model_trains_under_torch_compile():
    """torch.compile of the tilec model's loss (fullgraph; AOTAutograd traces the operators'
    backward kernels too): two bf16 steps, timed beside the others."""
    result = train.main(
        [
            "--steps",
            "2",
            "--device",
            "cpu",
            "--config",
            "tiny",
            "--no-explain",
            "--dtype",
            "bf16",
            "--compile-tilec",
        ]
    )
    assert result["tokens_per_second"]["tilec + torch.compile"] > 0
    # The same init, data and kernels as the eager tilec run: the same losses, to rounding
    # (Inductor-free aot_eager on the CPU; the glue may round in another order).
    torch.testing.assert_close(
        torch.tensor(result["tilec_compiled_losses"]),
        torch.tensor(result["tilec_losses"]),
        atol=0,
        rtol=2**-7,
    )
