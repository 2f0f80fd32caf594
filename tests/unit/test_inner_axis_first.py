"""tiling's block order for kernels without dots (`BlockOrder.inner_axis_first`,
passes/tiling_order.py): the grid axis walking the innermost dimension the blocks move goes
first (CUDA's x), weighed by each access's bytes; ties keep the declared order; option
`inner_first=false` keeps it always. The reordered kernel computes what the declared one did
(interpreter)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilec
from tests.validation import run_kernel
from tilec.interp.runner import random_arguments
from tilec.passes.specialize import attribute_pairs
from tilec.passmanager import PassContext, parse_pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tiled(source: str, name: str, inner_first: bool = True):
    path = os.path.join(ROOT, "examples", source) if source.endswith(".tile") else source
    module = tilec.compile(path, kernels=[name]).module
    before = module.clone()
    context = PassContext()
    flag = "true" if inner_first else "false"
    for p in parse_pipeline(f"canonicalize,cse,tiling{{inner_first={flag}}}"):
        p.run(module, context)
    order = [str(dim) for dim, _ in attribute_pairs(module.lookup(name), "tilec.grid")]
    return before, module, order, [r.message for r in context.remarks]


@pytest.mark.parametrize(
    ("source", "name", "declared", "chosen"),
    [
        # x[ts, h, :]: neighbouring heads are D elements apart, neighbouring position tiles
        # BS * H * D; the gate g[ts, :] is the same tile for every head
        ("head_gate.tile", "head_gate", ["S", "H"], ["H", "S"]),
        ("rotary.tile", "rotary", ["S", "H"], ["H", "S"]),
        # a 2-D element-wise kernel: N runs along the rows
        ("swiglu.tile", "swiglu", ["M", "N"], ["N", "M"]),
        # a transpose reads along N and writes along M, the same bytes: as declared
        ("transpose.tile", "transpose", ["M", "N"], ["M", "N"]),
    ],
)
def test_the_axis_along_memory_goes_first(source, name, declared, chosen):
    _, _, order, remarks = _tiled(source, name)
    assert order == chosen
    moved = [r for r in remarks if r.startswith("block order:")]
    if chosen != declared:
        assert moved and moved[0].startswith(f"block order: {chosen[0]} first (grid axis 0, x)")
        assert "innermost dimension" in moved[0]
    else:
        assert not moved
    _, _, kept, _ = _tiled(source, name, inner_first=False)
    assert kept == declared


@pytest.mark.parametrize(
    ("source", "name", "sizes"),
    [
        ("head_gate.tile", "head_gate", {"S": 37, "H": 3, "D": 16}),
        ("swiglu.tile", "swiglu", {"M": 9, "N": 70}),
    ],
)
def test_the_reordered_grid_computes_the_same(source, name, sizes):
    before, after, _, _ = _tiled(source, name)
    inputs = random_arguments(before.lookup(name), sizes, seed=3)
    got, used = run_kernel(after, name, inputs, None)
    want, _ = run_kernel(before, name, inputs, used)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
