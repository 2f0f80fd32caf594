"""Execution: the grid one block at a time, each block op by op.

A block's `BlockState` holds everything that belongs to one program of the grid: its program
id and the value of every SSA value it has computed (numpy arrays for tiles, numpy scalars for
scalars, `TensorView`s for tensor arguments). What an op *means* is not here but in
`tilec.interp.semantics`, one handler per op kind; this module only walks blocks, calls the
handlers, and checks that every result has the shape and dtype its type promises (which is how
shapes that do not line up at run time are caught, at the op that produced them).

Extending it:

* **Asynchronous copies** (the pipelined levels) keep their in-flight state per block in
  `BlockState.async_state`; `tilec.interp.pipeline` lands them at their wait and reports
  races with `state.error(op, ...)`. Shared buffers are values like tiles.
* **Observers**: `trace(op, state, result)` runs after every op, which is what comparing two
  runs of the same kernel op by op (translation validation) needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects import scf
from tilec.dialects.builtin import ReturnOp
from tilec.interp.atomic import block_order
from tilec.interp.cluster import cluster_dims, clusters, run_cluster
from tilec.interp.errors import InterpreterError
from tilec.interp.numerics import dtype_of
from tilec.interp.semantics import SEMANTICS
from tilec.ir.core import Block, Operation, Value
from tilec.ir.types import TileType, Type, is_scalar

if TYPE_CHECKING:
    from tilec.interp.launch import Launch

__all__ = ["BlockState", "Trace", "execute"]

Trace = Callable[[Operation, "BlockState", Any], None]

_TERMINATORS = (scf.YieldOp, ReturnOp)


class BlockState:
    """The execution state of one program (block) of the grid."""

    __slots__ = ("async_state", "launch", "program_id", "trace", "values")

    def __init__(self, launch: Launch, program_id: tuple[int, ...], trace: Trace | None = None):
        self.launch = launch
        self.program_id = program_id
        self.values: dict[Value, Any] = {}
        self.trace = trace
        self.async_state: Any = None  # copies in flight and shared buffers (interp.pipeline)

    def run_block(self, block: Block, args: list[Any]) -> list[Any]:
        """Run `block` with its arguments bound to `args`; the values its terminator yields."""
        values = self.values
        for a, v in zip(block.args, args):
            values[a] = v
        for op in block.ops:
            if isinstance(op, _TERMINATORS):
                return [values[v] for v in op.operands]
            handler = SEMANTICS.get(type(op))
            if handler is None:
                raise self.error(op, "has no semantics in the interpreter")
            result = handler(self, op, [values[v] for v in op.operands])
            results = op.results
            if len(results) == 1:
                result = values[results[0]] = self._checked(op, results[0], result)
            elif results:
                result = [self._checked(op, r, v) for r, v in zip(results, result)]
                values.update(zip(results, result))
            if self.trace is not None:
                self.trace(op, self, result)
        return []

    def error(self, op: Operation, message: str, hint: str | None = None) -> InterpreterError:
        """An `InterpreterError` about `op`, located at it, naming this block."""
        where = ", ".join(map(str, self.program_id))
        return InterpreterError(
            f"'{op.name}' {message} (in the block with program id ({where}))", op.loc, hint=hint
        )

    def _checked(self, op: Operation, r: Value, value: Any) -> Any:
        """`value`, the result `r` of `op`, checked against `r`'s type (its shape at this
        launch's extents, its dtype). The checks are kept by result, whose identity hashes
        at no cost (a type's hash walks its shape and layout)."""
        checks = self.launch.result_checks
        check = checks.get(r)
        if check is None:
            check = checks[r] = _result_check(self.launch, r.type)
        kind, shape, dtype = check
        t = r.type
        if kind == "tile":
            if value.shape != shape and not _matches(value.shape, shape):
                raise self.error(
                    op,
                    f"computed a tile of shape {_shape_text(value.shape)}, but its type {t} is "
                    f"{_shape_text(shape)} here ({self._symbols_of(t)})",
                )
        elif kind == "scalar":
            if isinstance(value, np.ndarray):
                value = value[()]
        else:
            return value
        if value.dtype != dtype:
            raise AssertionError(
                f"interpreter bug: '{op.name}' produced {value.dtype} for a result of type {t}"
            )
        return value

    def _symbols_of(self, t: Type) -> str:
        names = [d for d in getattr(t, "shape", ()) if isinstance(d, str)]
        symbols = self.launch.symbols
        return ", ".join(f"{n}={symbols[n]}" for n in dict.fromkeys(names)) or "static"


def _result_check(launch: Launch, t: Type) -> tuple[str, Any, Any]:
    if isinstance(t, TileType):
        return "tile", launch.shape(t), dtype_of(t)
    if is_scalar(t):
        return "scalar", (), dtype_of(t)
    return "other", None, None


def _matches(actual: tuple[int, ...], expected: tuple[int | None, ...]) -> bool:
    return len(actual) == len(expected) and all(
        e is None or a == e for a, e in zip(actual, expected)
    )


def _shape_text(shape: tuple[int | None, ...]) -> str:
    return "x".join("?" if d is None else str(d) for d in shape) or "scalar"


def execute(launch: Launch, trace: Trace | None = None) -> None:
    """Run every block of `launch`'s grid, axis 0 slowest (shuffled when the kernel has
    atomics: `tilec.interp.atomic`; cluster by cluster when it runs in clusters:
    `tilec.interp.cluster`)."""
    body = launch.func.body.block
    dims = cluster_dims(launch.func)
    with np.errstate(all="ignore"):  # inf, NaN and wrap-around are results, not warnings
        if dims is not None:  # the blocks of a cluster together (tilec.interp.cluster)
            for members in clusters(launch.grid, dims):
                run_cluster(launch, members, trace)
            return
        for program_id in block_order(launch.grid, launch.block_seed, launch.grid_axes):
            BlockState(launch, program_id, trace).run_block(body, launch.arguments)
