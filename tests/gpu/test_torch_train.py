"""The training model of examples/torch/ on the GPU: the compiled tilec kernels' gradients
match torch autograd at real sizes, and a few hundred training steps follow eager PyTorch."""

from __future__ import annotations

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from examples.torch import ops, train


def test_causal_attention_backward_on_cuda():
    shape = (2, 4, 257, 64)
    q, k, v = (torch.randn(*shape, device="cuda", requires_grad=True) for _ in range(3))
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    do = torch.randn(*shape, device="cuda")
    (ops.attention(q, k, v, 0.125) * do).sum().backward()
    with sdpa_kernel(SDPBackend.MATH):  # f32 throughout, as the tilec kernels
        want = torch.nn.functional.scaled_dot_product_attention(
            q2, k2, v2, is_causal=True, scale=0.125
        )
    (want * do).sum().backward()
    for got, expected in ((q.grad, q2.grad), (k.grad, k2.grad), (v.grad, v2.grad)):
        torch.testing.assert_close(got, expected, atol=2e-3, rtol=2e-3)


def test_linear_backward_on_cuda():
    x = torch.randn(300, 513, device="cuda", requires_grad=True)
    w = torch.randn(1000, 513, device="cuda", requires_grad=True)
    x2, w2 = (t.detach().clone().requires_grad_() for t in (x, w))
    gy = torch.randn(300, 1000, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    (ops.linear(x, w) * gy).sum().backward()
    (torch.nn.functional.linear(x2, w2) * gy).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(w.grad, w2.grad, atol=1e-3, rtol=1e-3)


def test_the_tilec_model_trains_as_eager_pytorch_on_cuda():
    result = train.main(["--steps", "200", "--device", "cuda", "--config", "small", "--no-compile"])
    tilec_losses = torch.tensor(result["tilec_losses"])
    eager_losses = torch.tensor(result["eager_losses"])
    torch.testing.assert_close(tilec_losses, eager_losses, atol=2e-2, rtol=1e-2)
    assert tilec_losses[-10:].mean() < tilec_losses[:10].mean() - 1.0
    assert result["graph_breaks"] == 0


def test_the_bf16_model_trains_as_eager_pytorch_on_cuda():
    """The same kernels bound to bf16 (tensor cores for every dot) against the eager bf16
    model: bf16's tolerance, which grows with the steps as the two round differently."""
    arguments = ["--steps", "200", "--device", "cuda", "--config", "small", "--no-compile"]
    result = train.main([*arguments, "--dtype", "bf16"])
    tilec_losses = torch.tensor(result["tilec_losses"])
    eager_losses = torch.tensor(result["eager_losses"])
    print("bf16 largest loss difference", result["largest_difference"])
    torch.testing.assert_close(tilec_losses, eager_losses, atol=5e-2, rtol=2e-2)
    assert tilec_losses[-10:].mean() < tilec_losses[:10].mean() - 1.0
