"""The reference interpreter: tilec's definition of what a kernel computes, on the CPU.

    import tilec, numpy as np
    from tilec.interp import run_kernel

    program = tilec.compile("examples/matmul.tile")
    a = np.random.rand(100, 70).astype(np.float16)
    b = np.random.rand(70, 90).astype(np.float16)
    c = np.zeros((100, 90), np.float16)
    run_kernel(program, "matmul", [a, b, c], tile_sizes={"M": 32})   # writes c in place

It runs IR of every level before lowering to LLVM — symbolic tile IR as the frontend makes it,
and the static IR that tiling and the later passes leave — one block of the grid at a time,
each op on whole tiles with numpy, with the dtype behaviour of the GPU: f16 and bf16 round
after every op, dots accumulate in their accumulator's type, integers wrap around, and masked
loads and stores touch exactly the elements the GPU's would.

* `tilec.interp.semantics` — what every op computes (a table: op class → handler);
* `tilec.interp.numerics` — exact rounding and conversions in the IR's dtypes;
* `tilec.interp.launch` — arguments, symbol binding (extents, tile sizes), the grid;
* `tilec.interp.machine` — the per-block execution state and the walk over blocks;
* `tilec.interp.pipeline` — shared memory and asynchronous copies, with their race checks;
* `tilec.interp.tma` — TMA copies and their mbarriers, with the protocol's checks;
* `tilec.interp.split` — split reductions' workspace and tickets, with their checks;
* `tilec.interp.random` — `tile.philox`, the counter-based random bits;
* `tilec.interp.runner` — `tilec run`: random inputs, numpy references, the report.

Errors are `LaunchError` (bad arguments or sizes: names the parameter, what it expected and
what it got) and `InterpreterError` (an op that cannot execute, at its location); both are
`TileError`s.
"""

from tilec.interp import (  # noqa: F401  (registers those ops' semantics)
    gather,
    pipeline,
    random,
    scan,
    split,
    tma,
    warp_specialize,
)
from tilec.interp.errors import InterpreterError, LaunchError
from tilec.interp.launch import (
    DEFAULT_TILE_SIZE,
    Launch,
    TensorView,
    find_kernel,
    prepare_launch,
    run_kernel,
)
from tilec.interp.machine import BlockState, Trace

__all__ = [
    "DEFAULT_TILE_SIZE",
    "BlockState",
    "InterpreterError",
    "Launch",
    "LaunchError",
    "TensorView",
    "Trace",
    "find_kernel",
    "prepare_launch",
    "run_kernel",
]
