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

import numpy as np
import pytest

import tilec
from tests.validation import kernel_dimensions, run_kernel
from tilec.compiler import DEFAULT_PIPELINE
from tilec.interp.runner import random_arguments
from tilec.ir.verifier import verify
from tilec.passmanager import PassContext, parse_pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.tile")))

# Extents that break things: 1, primes, and more than one default tile (16).
SIZE_SETS = [(1, 3, 2), (37, 19, 53)]

# For passes that may reorder float arithmetic: relative to the largest magnitude written.
REORDER_RTOL = 1e-5


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
    context = PassContext()
    for p in parse_pipeline(DEFAULT_PIPELINE):
        before = module.clone()
        context.current_pass = p.name
        p.run(module, context)
        verify(module)
        # The tile sizes the IR after the pass uses (pinned or chosen by it), for both runs.
        after_outputs, tile_sizes = run_kernel(module, name, inputs, None)
        before_outputs, _ = run_kernel(before, name, inputs, tile_sizes)
        for got, expected in zip(after_outputs, before_outputs):
            if p.exact:
                np.testing.assert_array_equal(
                    got, expected, err_msg=f"pass '{p.name}' changed what {name} computes"
                )
            else:
                scale = float(np.max(np.abs(expected.astype(np.float64)), initial=0.0))
                np.testing.assert_allclose(
                    got.astype(np.float64),
                    expected.astype(np.float64),
                    rtol=0,
                    atol=REORDER_RTOL * max(scale, 1.0),
                    err_msg=f"pass '{p.name}' changed what {name} computes beyond its tolerance",
                )


def test_validation_catches_a_wrong_pass():
    """The check can fail: a pass that turns every addition into a subtraction is caught."""
    from tilec.dialects import arith
    from tilec.ir.builder import Builder
    from tilec.passmanager import Pass

    class Miscompile(Pass):
        """Test-only: replaces arith.addf with arith.subf."""

        name = "miscompile"
        summary = "test-only wrong pass"

        def run(self, module, ctx):
            for op in list(module.walk()):
                if isinstance(op, arith.AddFOp):
                    new = Builder.before_op(op).create(arith.SubFOp, lhs=op.lhs, rhs=op.rhs)
                    op.replace_with([new.result])

    path = os.path.join(ROOT, "examples", "vector_add.tile")
    module = tilec.compile(path, kernels=["vector_add"]).module
    func = module.lookup("vector_add")
    inputs = random_arguments(func, {d: 37 for d in kernel_dimensions(func)}, seed=1)
    before = module.clone()
    Miscompile().run(module, PassContext())
    after, sizes = run_kernel(module, "vector_add", inputs, None)
    expected, _ = run_kernel(before, "vector_add", inputs, sizes)
    assert not all(np.array_equal(a, e) for a, e in zip(after, expected))
