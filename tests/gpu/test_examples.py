"""Every kernel of every example, on the GPU, at several sizes (awkward ones included), against
the example's numpy reference, with every output inside a guard region that must stay
untouched (`tilec.gpucheck.run_example`)."""

from __future__ import annotations

import pytest

from tilec.gpucheck import CASES, run_example

pytestmark = pytest.mark.gpu

RUNS = [
    pytest.param(example, kernel, sizes, id=f"{kernel}-" + "-".join(map(str, sizes.values())))
    for example, kernels in CASES.items()
    for kernel, sizes_list in kernels.items()
    for sizes in sizes_list
]


@pytest.mark.parametrize(("example", "kernel", "sizes"), RUNS)
def test_example_matches_its_reference(example, kernel, sizes):
    run = run_example(example, kernel, sizes, seed=sum(sizes.values()))
    assert run.passed, run.describe()


# Strided inputs and outputs: rows longer than the extent (row stride != extent), and 2-D
# inputs stored transposed (last stride != 1) -- kernels specialised for other strides.
STRIDED = [
    ("softmax", "softmax", {"M": 77, "N": 300}),
    ("layernorm", "layernorm", {"M": 33, "N": 257}),
    ("matmul", "matmul", {"M": 130, "N": 77, "K": 100}),
    ("transpose", "transpose", {"M": 70, "N": 45}),
    ("row_sum", "row_sum", {"M": 77, "N": 300}),
    ("attention", "attention", {"B": 1, "H": 2, "M": 20, "N": 33, "D": 64}),
]


@pytest.mark.parametrize("layout", ["padded", "transposed"])
@pytest.mark.parametrize(("example", "kernel", "sizes"), STRIDED, ids=[s[1] for s in STRIDED])
def test_strided_arguments(example, kernel, sizes, layout):
    run = run_example(example, kernel, sizes, layout=layout, seed=7)
    assert run.passed, run.describe()


@pytest.mark.parametrize("example", ["vector_add", "softmax", "matmul"])
def test_numpy_arguments_are_copied_in_and_out(example):
    kernel = next(iter(CASES[example]))
    sizes = CASES[example][kernel][1]
    run = run_example(example, kernel, sizes, arrays="numpy", seed=3)
    assert run.passed, run.describe()
