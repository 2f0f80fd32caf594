"""tilec: a tile compiler for NVIDIA GPUs that shows and explains every decision it makes.

import tilec
program = tilec.compile("examples/matmul.tile")    # tile IR of every kernel
@tilec.jit
def kernel(...): ...                                 # a kernel written in Python
softmax = tilec.load_kernel("examples/softmax.tile", "softmax")   # callable on GPU tensors
"""

__version__ = "0.1.0"

from tilec._checkout import bind_checkout_packages

bind_checkout_packages()

from tilec.compiler import CompiledProgram, Stage, compile  # noqa: E402 (after the binding)
from tilec.diagnostics import TileError  # noqa: E402
from tilec.jit import JitFunction, jit, load_kernel  # noqa: E402

__all__ = [
    "CompiledProgram",
    "JitFunction",
    "Stage",
    "TileError",
    "__version__",
    "compile",
    "jit",
    "load_kernel",
]
