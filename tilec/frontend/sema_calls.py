"""Calls in a kernel: a builtin's call goes to the typing rule its declaration in the registry
(`tilec.frontend.builtins`) names; anything else called is an error that says what was meant
(a method, a kernel, a dtype used as a conversion, a Python builtin, a misspelt builtin).

A part of the checker `tilec.frontend.sema._KernelChecker` (a mixin: its methods use the state
and the other parts' methods of that class)."""

from __future__ import annotations

import dataclasses

from tilec.diagnostics import Location, TileError
from tilec.frontend import syntax as ast
from tilec.frontend.builtins import BUILTIN_NAMES, CALLS
from tilec.frontend.checked import DTYPES, Expr
from tilec.frontend.sema_common import (
    _PYTHON_FUNCTIONS,
    _did_you_mean,
    _expr_loc,
    _refuse_f8,
    _unsupported,
)


class CallChecks:
    """The checker's dispatch of calls."""

    def _call(self, node: ast.Call) -> Expr:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr == "to":
                return self._to_call(node, func)
            if func.attr in BUILTIN_NAMES:
                raise TileError(
                    f"method '.{func.attr}()' is not supported",
                    func.loc,
                    hint=f"call the builtin: {func.attr}(x, ...)",
                )
            self._expr(func.value)
            raise TileError(
                f"tile values have no method '{func.attr}'",
                func.loc,
                hint="tile values have: .to(dtype) and .T",
            )
        if not isinstance(func, ast.Name):
            raise TileError("only builtin functions can be called", _expr_loc(func))
        name = func.id
        builtin = CALLS.get(name)
        if builtin is not None:
            result = builtin.check(self, node)
            if name not in F8_BUILTINS:
                _refuse_f8_operands(result, f"{name}()", func.loc)
            return result
        if name == "tiles":
            raise TileError(
                "tiles() can only be the iterable of a for-loop",
                func.loc,
                hint="e.g. 'for tm in tiles(M):'",
            )
        if name == self.definition.name:
            raise _unsupported(
                "recursion is", func.loc, "tile kernels cannot call themselves or each other"
            )
        if name in self.kernel_defs:
            raise _unsupported(
                f"calling kernel '{name}' from a kernel is",
                func.loc,
                "tile kernels cannot call each other; write the computation inline",
            )
        if name in DTYPES:
            raise TileError(
                f"'{name}(...)' is not a conversion", func.loc, hint=f"convert with x.to({name})"
            )
        if self._is_known_name(name) or name in self.dims or name == "inf":
            raise TileError(f"'{name}' is not a function", func.loc)
        if name in _PYTHON_FUNCTIONS:
            raise _unsupported(f"the Python builtin '{name}' is", func.loc, _PYTHON_FUNCTIONS[name])
        raise TileError(
            f"unknown function '{name}'",
            func.loc,
            hint=_did_you_mean(name, sorted(BUILTIN_NAMES - {"inf", "kernel"})),
        )


# Builtins that take f8 tiles: dot() multiplies them as `@` does (into f32).
F8_BUILTINS = ("dot",)


def _refuse_f8_operands(result: Expr, what: str, loc: Location) -> None:
    """A builtin computes nothing of f8 values: neither its result nor its tile operands
    may be f8 (see `_refuse_f8`)."""
    if not isinstance(result, Expr):
        return
    _refuse_f8(result.type.dtype, what, loc)
    for item in dataclasses.fields(result):
        value = getattr(result, item.name)
        for operand in value if isinstance(value, tuple) else (value,):
            if isinstance(operand, Expr):
                _refuse_f8(operand.type.dtype, what, loc)
