"""The kernels nobody tuned (`tilec.benchmarks.unseen_probe`), each at the heuristics' tiles
for its shapes and at shapes whose tiles the fourteenth session changed (rows filled by runs
of one line, warps spanning rows; rows grown along the axis that leaves no lane idle), against
the torch expression a user would write."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tilec.benchmarks import unseen_probe
from tilec.jit import load_kernel

pytestmark = pytest.mark.gpu

SHAPES = [(c.kernel, c.shape) for c in unseen_probe.CASES] + [
    ("modulate", (2, 4096, 1408)),  # a batch of 2: rows grow along S, runs of 128
    ("modulate", (16, 512, 896)),
    ("modulate", (4, 2048, 640)),
    ("modulate", (3, 77, 1152)),
    ("silu_mul_3d", (32, 513, 768)),
    ("silu_mul_3d", (3, 5, 1000)),
    ("col_cumsum", (30000, 300)),  # split scans
    ("col_cumsum", (7, 5)),
]


@pytest.mark.parametrize(
    ("kernel", "shape"), SHAPES, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v
)
def test_an_unseen_kernel_matches_its_torch_expression(kernel, shape):
    case = next(c for c in unseen_probe.CASES if c.kernel == kernel)
    case = dataclasses.replace(case, shape=shape)
    arguments = case.inputs(case.shape, unseen_probe._torch_new)
    inputs = len(arguments) - case.outputs
    expected = case.torch(*arguments[:inputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    load_kernel(unseen_probe.KERNELS, kernel)(*arguments, *case.scalars)
    torch.cuda.synchronize()
    for got, want in zip(arguments[inputs:], expected):
        torch.testing.assert_close(got.float(), want.float(), rtol=case.rtol, atol=case.atol)
