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
`stages=3`. Compilation happens on first use of `.ir`/`.tir` (or the first call) and is cached.

**Calling a kernel** runs it in the reference interpreter when the environment has
`TILEC_INTERPRET=1` or the decorator says `@tilec.jit(interpret=True)`:

    scale(x, y, 2.0)            # numpy arrays or CPU torch tensors; y is written in place

Arguments go by position or by parameter name; tile sizes are the pinned ones, else the
interpreter's defaults (`tilec.interp.launch`). Running on the GPU arrives with Stage D.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from tilec.compiler import CompiledProgram, compile_program
from tilec.frontend import analyze, parse_function

__all__ = ["JitFunction", "jit"]


class JitFunction:
    """A tile kernel defined in Python. Its compiled forms are attributes."""

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any]):
        self.fn = fn
        options = dict(options)
        # Not a compile option: how calls run.
        self.interpret = bool(options.pop("interpret", False))
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

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Run the kernel on `args` (in the interpreter, for now: see the module docstring)."""
        if not (self.interpret or os.environ.get("TILEC_INTERPRET", "") == "1"):
            raise NotImplementedError(
                f"'{self.fn.__name__}' cannot run on the GPU yet: GPU execution arrives with "
                "Stage D (lowering to PTX and the CUDA runtime); to run it in the reference "
                "interpreter on the CPU, set TILEC_INTERPRET=1 or use @tilec.jit(interpret=True)"
            )
        from tilec.interp import find_kernel, run_kernel
        from tilec.interp.launch import parameter_name

        module = self.compiled.module
        func = find_kernel(module, self.compiled.kernels[0])
        if not kwargs:
            run_kernel(func, None, args)
            return
        names = [parameter_name(a) for a in func.arguments]
        if len(args) > len(names):
            run_kernel(func, None, [*args, *kwargs.values()])  # reports the count
            return
        by_name = dict(zip(names, args))
        for name, value in kwargs.items():
            if name in by_name:
                raise TypeError(f"{self.fn.__name__}() got multiple values for argument '{name}'")
            by_name[name] = value
        run_kernel(func, None, by_name)

    def __repr__(self) -> str:
        return f"<tilec.jit kernel {self.fn.__qualname__}>"


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Decorator: `@tilec.jit` or `@tilec.jit(tile={...}, warps=..., stages=...)`."""
    if fn is not None:
        return JitFunction(fn, options)
    return lambda f: JitFunction(f, options)
