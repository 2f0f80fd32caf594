"""Helpers for the tests that run kernels in the interpreter before and after passes
(translation validation)."""

from __future__ import annotations

import numpy as np

from tilec.interp.runner import run_on_copies
from tilec.ir.types import TensorType


def kernel_dimensions(func) -> list[str]:
    """The named dimensions of a kernel's tensor arguments, in order of first appearance."""
    dims: list[str] = []
    for arg in func.arguments:
        if isinstance(arg.type, TensorType):
            dims += [d for d in arg.type.shape if isinstance(d, str) and d not in dims]
    return dims


def run_kernel(module, name: str, inputs: list, tile_sizes: dict[str, int] | None = None):
    """Run kernel `name` of `module` in the interpreter on copies of `inputs`: its tensor
    arguments afterwards, and the tile sizes it ran with (`run_on_copies`)."""
    return run_on_copies(module, name, inputs, tile_sizes)


# For passes that may reorder float arithmetic: relative to the largest magnitude written.
REORDER_RTOL = 1e-5


def check_each_pass(module, name: str, pipeline: str, inputs: list):
    """Run `pipeline` on `module` one pass at a time; after each, kernel `name` must compute in
    the interpreter what it computed before the pass (on the same inputs and tile sizes): bit
    for bit when the pass is `exact`, else within `REORDER_RTOL` of the largest magnitude.
    The passes' `PassContext` (their remarks)."""
    from tilec.ir.verifier import verify
    from tilec.passmanager import PassContext, parse_pipeline

    context = PassContext()
    for p in parse_pipeline(pipeline):
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
    return context
