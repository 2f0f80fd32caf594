"""tilec's examples against torch (cuBLAS for matmul) and against the Triton kernels of
tests/reference, on the same GPU inputs."""

from __future__ import annotations

import pytest
import torch

import tilec
from tilec.gpucheck import EXAMPLES

pytestmark = pytest.mark.gpu


def close(got, expected, rtol):
    """|got - expected| <= rtol * (|expected| + max |expected|) everywhere (docs/interpreter.md)."""
    got, expected = got.double(), expected.double()
    error = (got - expected).abs()
    allowed = rtol * (expected.abs() + expected.abs().max())
    assert bool((error <= allowed).all()), f"max error {error.max().item():.3g}"


def kernel(example, name):
    return tilec.load_kernel(EXAMPLES / f"{example}.tile", name)


@pytest.mark.parametrize("n", [1, 1000, 4097, 1 << 20])
def test_vector_add(n, triton_references):
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    kernel("vector_add", "vector_add")(x, y, out)
    assert torch.equal(out, x + y)  # one f32 addition: bit-identical
    assert torch.equal(out, triton_references.vector_add(x, y))


@pytest.mark.parametrize(("m", "n"), [(1, 1), (77, 300), (256, 1024), (33, 1025), (64, 4096)])
def test_softmax(m, n, triton_references):
    x = torch.randn(m, n, device="cuda") * 4
    y = torch.full_like(x, float("nan"))
    kernel("softmax", "softmax")(x, y)
    close(y, torch.softmax(x, dim=1), 1e-5)
    close(y, triton_references.softmax(x), 1e-5)


@pytest.mark.parametrize(("m", "n"), [(1, 1), (77, 300), (64, 1024), (16, 4096)])
def test_layernorm(m, n, triton_references):
    x = torch.randn(m, n, device="cuda").half()
    w, b = torch.randn(n, device="cuda").half(), torch.randn(n, device="cuda").half()
    y = torch.full_like(x, float("nan"))
    kernel("layernorm", "layernorm")(x, w, b, y, 1e-5)
    expected = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
    close(y, expected, 4e-3)
    close(y, triton_references.layernorm(x, w, b, 1e-5), 4e-3)


@pytest.mark.parametrize(
    ("m", "n", "k"), [(1, 1, 1), (130, 77, 100), (256, 256, 256), (512, 384, 1000)]
)
def test_matmul_against_cublas_and_triton(m, n, k, triton_references):
    a = torch.randn(m, k, device="cuda").half()
    b = torch.randn(k, n, device="cuda").half()
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    kernel("matmul", "matmul")(a, b, c)
    close(c, torch.matmul(a, b), 2e-3)  # cuBLAS
    close(c, triton_references.matmul(a, b), 2e-3)
    close(c, a.double() @ b.double(), 2e-3)
