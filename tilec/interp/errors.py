"""The interpreter's errors. Both are `TileError`s: the CLI prints them as
`file:line:col: error: ...` with the source line, and exits 1.

* `LaunchError` — the arguments or sizes of a launch are wrong (count, dtype, rank, shape,
  sizes that overflow the integer types the kernel computes with, bad tile sizes). It points at
  the kernel's definition and names the parameter, what it expected and what it got.
* `InterpreterError` — an op cannot be executed (shapes that do not line up at run time, an op
  without semantics, a loop with a non-positive step). It points at the op and names the block
  of the grid it happened in.
"""

from __future__ import annotations

from tilec.diagnostics import TileError

__all__ = ["InterpreterError", "LaunchError"]


class InterpreterError(TileError):
    """An op of the kernel could not be executed."""


class LaunchError(TileError):
    """The arguments, sizes or tile sizes of a launch do not fit the kernel."""
