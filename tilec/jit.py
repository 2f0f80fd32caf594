"""`@tilec.jit`: a tile kernel written as a Python function.

    from __future__ import annotations   # annotations such as f16[M, K] stay unevaluated
    import tilec

    @tilec.jit(tile={"M": 64})
    def scale(x: f32[M], y: f32[M], alpha: f32):
        for tm in tiles(M):
            y[tm] = x[tm] * alpha

    print(scale.tir)                      # its tile IR

The function's source is read with `inspect`, its decorators dropped, and it is parsed with
the same grammar as `.tile` files; errors point at the lines of the `.py` file. Options pin
decisions like `@kernel(...)` does in a `.tile` file: `tile={"M": 128}`, `warps=4`,
`stages=3`. Compilation happens on first use of `.ir`/`.tir` and is cached.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from tilec.compiler import CompiledProgram, compile_program
from tilec.frontend import analyze, parse_function

__all__ = ["JitFunction", "jit"]


class JitFunction:
    """A tile kernel defined in Python. Its compiled forms are attributes."""

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any]):
        self.fn = fn
        self.options = options
        functools.update_wrapper(self, fn)

    @functools.cached_property
    def compiled(self) -> CompiledProgram:
        program = analyze(parse_function(self.fn), self.options or None)
        return compile_program(program)

    @property
    def ir(self):
        """The tile IR (a `builtin.module` holding this kernel)."""
        return self.compiled.module

    @property
    def tir(self) -> str:
        """The tile IR as text."""
        return self.compiled.tir

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"'{self.fn.__name__}' cannot run yet: tilec compiles kernels to tile IR today; "
            "running them (the interpreter, then the GPU) is the next stage of the roadmap"
        )

    def __repr__(self) -> str:
        return f"<tilec.jit kernel {self.fn.__qualname__}>"


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Decorator: `@tilec.jit` or `@tilec.jit(tile={...}, warps=..., stages=...)`."""
    if fn is not None:
        return JitFunction(fn, options)
    return lambda f: JitFunction(f, options)
