"""Translation validation: every pass of the default pipeline preserves what every example
computes.

Each example kernel is compiled, then the default pipeline runs one pass at a time; after each
pass the kernel runs in the reference interpreter on the same random inputs (and the same tile
sizes) as before the pass, and its outputs are compared: bit for bit when the pass is `exact`,
within a stated tolerance when it may reorder floating-point arithmetic. A pass joins this
check by being in `tilec.compiler.DEFAULT_PIPELINE`; there is no test to write per pass.
"""

from __future__ import annotations

import glob
import os

import pytest

import tilec
from tests.validation import check_each_pass, kernel_dimensions
from tilec.compiler import DEFAULT_PIPELINE
from tilec.interp.runner import random_arguments

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.tile")))

# Extents that break things: 1, primes, and more than one default tile (16).
SIZE_SETS = [(1, 3, 2), (37, 19, 53)]


def _cases():
    for path in EXAMPLES:
        program = tilec.compile(path)
        for name in program.kernels:
            for sizes in SIZE_SETS:
                yield pytest.param(path, name, sizes, id=f"{os.path.basename(path)}:{name}:{sizes}")


@pytest.mark.parametrize(("path", "name", "sizes"), list(_cases()))
def test_every_pass_preserves_results(path, name, sizes):
    module = tilec.compile(path, kernels=[name]).module
    func = module.lookup(name)
    dims = kernel_dimensions(func)
    pins = func.attributes.get("tilec.pinned_tiles")
    pinned = dict(pins.value) if pins is not None else {}
    # Dimensions iterated one element at a time (batch, heads) stay small: each element is a
    # block of the grid, and awkward sizes matter for the tiled dimensions.
    extents = {
        d: 2 if pinned.get("B" + d) == 1 else sizes[i % len(sizes)] for i, d in enumerate(dims)
    }
    inputs = random_arguments(func, extents, seed=len(dims))
    check_each_pass(module, name, DEFAULT_PIPELINE, inputs)
