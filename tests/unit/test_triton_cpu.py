"""tilec's results checked against Triton's on the CPU.

The Triton kernels of `tests/reference/triton_kernels.py` run under Triton's own interpreter
(`TRITON_INTERPRET=1`, CPU torch tensors) and tilec's examples run in tilec's interpreter, on
the same inputs. Where both compute the same operations in the same order the results must be
identical; where the order of a sum differs (reductions, dots) they must agree within a few
ulps of the output type.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels are interpreted

import numpy as np
import pytest
import torch

import tilec
from tests.reference import triton_kernels
from tilec.interp import run_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _example(name: str):
    return tilec.compile(os.path.join(ROOT, "examples", f"{name}.tile"))


@pytest.mark.parametrize("n", [1, 37, 1000, 4099])
def test_vector_add_matches_triton(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    out = np.zeros_like(x)
    run_kernel(_example("vector_add"), "vector_add", [x, y, out])
    expected = triton_kernels.vector_add(torch.from_numpy(x), torch.from_numpy(y), block=128)
    np.testing.assert_array_equal(out, expected.numpy())  # one f32 addition: bit-identical


@pytest.mark.parametrize(("m", "n"), [(1, 1), (7, 333), (40, 128), (3, 1025)])
def test_softmax_matches_triton(m, n):
    rng = np.random.default_rng(m * n)
    x = (rng.standard_normal((m, n)) * 4).astype(np.float32)
    y = np.zeros_like(x)
    run_kernel(_example("softmax"), "softmax", [x, y], tile_sizes={"M": 4})
    expected = triton_kernels.softmax(torch.from_numpy(x)).numpy()
    # max and exp are the same; the row sums may add in another order.
    np.testing.assert_allclose(y, expected, rtol=4e-6, atol=1e-9)


@pytest.mark.parametrize(("m", "n"), [(1, 1), (5, 333), (16, 256), (3, 1000)])
def test_layernorm_matches_triton(m, n):
    rng = np.random.default_rng(m + n)
    x = rng.standard_normal((m, n)).astype(np.float16)
    w = rng.standard_normal(n).astype(np.float16)
    b = rng.standard_normal(n).astype(np.float16)
    y = np.zeros_like(x)
    eps = 1e-5
    run_kernel(_example("layernorm"), "layernorm", [x, w, b, y, eps], tile_sizes={"M": 4})
    expected = triton_kernels.layernorm(
        torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), eps
    ).numpy()
    # f32 statistics summed in different orders, then rounded to f16: at most 2 f16 ulps
    # of the largest output apart.
    tolerance = 2 * np.spacing(np.abs(expected.astype(np.float32)).max().astype(np.float16))
    np.testing.assert_allclose(
        y.astype(np.float32), expected.astype(np.float32), rtol=2e-3, atol=float(tolerance)
    )


@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 1), (37, 53, 71), (64, 64, 64), (100, 33, 130)])
def test_matmul_matches_triton(m, n, k):
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    run_kernel(_example("matmul"), "matmul", [a, b, c], tile_sizes={"M": 32, "N": 32, "K": 16})
    expected = triton_kernels.matmul(
        torch.from_numpy(a), torch.from_numpy(b), bm=32, bn=32, bk=16
    ).numpy()
    # Both accumulate in f32 in K-steps of 16 and round once to f16; within one step the order
    # of the products may differ, so allow one f16 ulp.
    ulp = np.spacing(np.abs(expected).astype(np.float16)).astype(np.float32)
    diff = np.abs(c.astype(np.float32) - expected.astype(np.float32))
    assert np.all(diff <= ulp), f"max difference {diff.max()} exceeds one f16 ulp"
