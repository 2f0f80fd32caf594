"""Helpers for the tests that run kernels in the interpreter before and after passes
(translation validation)."""

from __future__ import annotations

import numpy as np

from tilec.interp import TensorView, prepare_launch
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
    arguments afterwards, and the tile sizes it ran with."""
    args = [np.copy(a) if isinstance(a, np.ndarray) else a for a in inputs]
    launch = prepare_launch(module, name, args, tile_sizes=tile_sizes)
    launch.run()
    outputs = [v.array for v in launch.arguments if isinstance(v, TensorView)]
    return outputs, {s: size for s, (size, _) in launch.tile_sizes.items()}
