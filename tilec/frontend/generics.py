"""Dtype parameters: one kernel written for several element types.

    @kernel(dtypes={"T": [bf16, f16, f32]})
    def scale(x: T[M], y: T[M], alpha: f32):
        for tm in tiles(M):
            y[tm] = (x[tm].to(f32) * alpha).to(T)

`dtypes` declares each dtype parameter (a name starting with an upper-case letter) and the
dtypes it may take, the first being its default. A parameter stands for a dtype wherever one
is written: in argument types, `zeros(shape, T)`, `.to(T)`. A kernel is compiled for one
*binding* of its parameters at a time; the binding comes from the compile options (`dtypes=
{"T": "f16"}`: `@tilec.jit`, `tilec compile --dtype T=f16`), from the tensors of a call (the
jit and `tilec.torch` bind `T` to the dtype of the first tensor argument typed `T`), or else
is the default.

Binding is substitution: the kernel's syntax tree with every `T` replaced by the bound dtype's
name (each at `T`'s own location) is what `sema` checks, so a binding is an ordinary kernel and
the rest of the compiler never sees a parameter. Here the declaration is checked (names,
dtypes, a parameter used as a value's name, one that types no tensor argument) and the
binding chosen; `generic_signature` tells the jit which arguments bind which parameter
without analysing the kernel.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tilec.diagnostics import Location, TileError
from tilec.frontend import syntax as ast
from tilec.frontend.builtins import BUILTIN_NAMES
from tilec.frontend.checked import DTYPES
from tilec.frontend.sema_common import _DTYPE_LIST, _expr_loc

__all__ = ["DtypeParameter", "GenericSignature", "bind_dtypes", "generic_signature"]

_PARAMETER_RE = re.compile(r"[A-Z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class DtypeParameter:
    """A declared dtype parameter: the dtypes it may take (the first is the default), the
    positions of the tensor arguments it types, and where it is declared."""

    name: str
    allowed: tuple[str, ...]
    tensors: tuple[int, ...]
    loc: Location


@dataclass(frozen=True)
class GenericSignature:
    """A kernel's argument names and its dtype parameters (none for most kernels)."""

    arguments: tuple[str, ...]
    parameters: tuple[DtypeParameter, ...]

    def open(self) -> tuple[DtypeParameter, ...]:
        """The parameters a call's tensors bind: those that may take more than one dtype."""
        return tuple(p for p in self.parameters if len(p.allowed) > 1)


def generic_signature(
    definition: ast.FunctionDef, options: Mapping[str, object] | None = None
) -> GenericSignature:
    """The dtype parameters of `definition` as declared in its `@kernel(dtypes=...)` and
    narrowed (or, for a `@tilec.jit` function, declared) by `options["dtypes"]`."""
    declared = _declared(definition, options)
    arguments = tuple(p.name for p in definition.params)
    parameters = []
    for name, (allowed, loc) in declared.items():
        tensors = tuple(
            i
            for i, p in enumerate(definition.params)
            if isinstance(p.annotation, ast.Subscript)
            and isinstance(p.annotation.value, ast.Name)
            and p.annotation.value.id == name
        )
        if not tensors:
            raise TileError(
                f"dtype parameter '{name}' is the dtype of no tensor argument",
                loc,
                hint=f"a call binds {name} to the dtype of a tensor argument typed "
                f"'{name}[...]'; type one that way, or write the dtype itself",
            )
        parameters.append(DtypeParameter(name, allowed, tensors, loc))
    return GenericSignature(arguments, tuple(parameters))


def bind_dtypes(
    definition: ast.FunctionDef, options: Mapping[str, object] | None = None
) -> ast.FunctionDef:
    """`definition` with each dtype parameter replaced by its bound dtype (the one dtype
    `options` leave it, else its default) and the `dtypes` option dropped from its decorator;
    `definition` itself when it declares none."""
    declared = _declared(definition, options)
    if not declared:
        return definition
    generic_signature(definition, options)  # every parameter types a tensor argument
    _check_not_values(definition, declared)
    binding = {name: allowed[0] for name, (allowed, _) in declared.items()}
    return dataclasses.replace(
        _substitute(definition, binding),
        decorators=tuple(_without_dtypes(d) for d in definition.decorators),
    )


# ---------------------------------------------------------------------------------------------
# The declaration


def _declared(
    definition: ast.FunctionDef, options: Mapping[str, object] | None
) -> dict[str, tuple[tuple[str, ...], Location]]:
    """Each parameter's allowed dtypes (in declaration order) and its declaration's place."""
    declared: dict[str, tuple[tuple[str, ...], Location]] = {}
    for decorator in definition.decorators:
        if not isinstance(decorator, ast.Call):
            continue
        for keyword in decorator.keywords:
            if keyword.name == "dtypes":
                declared = _source_declaration(keyword.value, definition)
    given = (options or {}).get("dtypes")
    if given is None:
        return declared
    if not isinstance(given, Mapping):
        raise TileError(
            "option dtypes must be a dict from dtype parameter to a dtype or a list of them",
            definition.name_loc,
            hint='e.g. dtypes={"T": "bf16"}',
        )
    narrowed = dict(declared)
    for name, value in given.items():
        allowed = (value,) if isinstance(value, str) else tuple(value)
        for dtype in allowed:
            if not isinstance(dtype, str) or dtype not in DTYPES:
                raise TileError(
                    f"option dtypes gives {name} {dtype!r}, which is not a dtype",
                    definition.name_loc,
                    hint=f"dtypes are: {_DTYPE_LIST}",
                )
        if name not in declared and not _types_an_argument(definition, name):
            continue  # it binds another kernel's parameter (one option, a file of kernels)
        if name in declared:
            source, loc = declared[name]
            outside = [d for d in allowed if d not in source]
            if outside or not allowed:
                raise TileError(
                    f"dtype parameter {name} cannot be {', '.join(outside) or 'nothing'}: "
                    f"kernel '{definition.name}' declares it one of {', '.join(source)}",
                    definition.name_loc,
                    notes=((f"{name} is declared here", loc),),
                )
            narrowed[name] = (tuple(d for d in source if d in allowed), loc)
        else:
            _check_parameter_name(name, definition.name_loc, definition)
            if not allowed:
                raise TileError(f"dtype parameter {name} is given no dtype", definition.name_loc)
            narrowed[name] = (allowed, definition.name_loc)
    return narrowed


def _types_an_argument(definition: ast.FunctionDef, name: str) -> bool:
    for param in definition.params:
        annotation = param.annotation
        if isinstance(annotation, ast.Subscript):
            annotation = annotation.value
        if isinstance(annotation, ast.Name) and annotation.id == name:
            return True
    return False


def _source_declaration(
    value: ast.Expr, definition: ast.FunctionDef
) -> dict[str, tuple[tuple[str, ...], Location]]:
    example = 'write dtypes={"T": [f16, bf16, f32]}'
    if not isinstance(value, ast.DictExpr):
        raise TileError("dtype parameters are a dict literal", _expr_loc(value), hint=example)
    declared: dict[str, tuple[tuple[str, ...], Location]] = {}
    for key, dtypes in zip(value.keys, value.values):
        if isinstance(key, ast.StrLit):
            name = key.value
        elif isinstance(key, ast.Name):
            name = key.id
        else:
            raise TileError("a dtype parameter is a name", _expr_loc(key), hint=example)
        _check_parameter_name(name, key.loc, definition)
        if name in declared:
            raise TileError(f"dtype parameter {name} is declared twice", key.loc)
        elements = dtypes.elts if isinstance(dtypes, (ast.ListExpr, ast.TupleExpr)) else None
        if not elements:
            raise TileError(
                f"dtype parameter {name} needs a non-empty list of dtypes",
                _expr_loc(dtypes),
                hint=example,
            )
        allowed: list[str] = []
        for element in elements:
            dtype = element.id if isinstance(element, ast.Name) else None
            dtype = element.value if isinstance(element, ast.StrLit) else dtype
            if dtype not in DTYPES:
                raise TileError(
                    "this is not a dtype", _expr_loc(element), hint=f"dtypes are: {_DTYPE_LIST}"
                )
            if dtype in allowed:
                raise TileError(f"{dtype} is listed twice for {name}", _expr_loc(element))
            allowed.append(dtype)
        declared[name] = (tuple(allowed), key.loc)
    if not declared:
        raise TileError("dtypes declares no dtype parameter", _expr_loc(value), hint=example)
    return declared


def _check_parameter_name(name: str, loc: Location, definition: ast.FunctionDef) -> None:
    if not isinstance(name, str) or not _PARAMETER_RE.fullmatch(name):
        raise TileError(
            f"dtype parameter {name!r} must start with an upper-case letter and use only "
            "ASCII letters, digits and '_'",
            loc,
            hint="e.g. T, DT, ACC",
        )
    if name in DTYPES or name in BUILTIN_NAMES:
        raise TileError(f"'{name}' is a {'dtype' if name in DTYPES else 'builtin'}", loc)


def _check_not_values(
    definition: ast.FunctionDef, declared: Mapping[str, tuple[tuple[str, ...], Location]]
) -> None:
    """A dtype parameter names nothing else: no argument, dimension, loop variable or value."""

    def refuse(name: str, loc: Location, what: str) -> None:
        if name in declared:
            raise TileError(
                f"'{name}' is a dtype parameter of kernel '{definition.name}' and cannot name "
                f"{what}",
                loc,
                notes=((f"{name} is declared here", declared[name][1]),),
            )

    for param in definition.params:
        refuse(param.name, param.loc, "an argument")
        annotation = param.annotation
        if isinstance(annotation, ast.Subscript):
            for index in annotation.indices:
                if isinstance(index, ast.Name):
                    refuse(index.id, index.loc, "a dimension")

    def statements(body: Sequence[ast.Stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.Assign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
                refuse(stmt.target.id, stmt.target.loc, "a value")
            elif isinstance(stmt, ast.For):
                for target in stmt.targets:
                    refuse(target.id, target.loc, "a loop variable")
                statements(stmt.body)
            elif isinstance(stmt, ast.If):
                statements(stmt.body)
                statements(stmt.orelse)

    statements(definition.body)


# ---------------------------------------------------------------------------------------------
# Substitution


def _substitute(node: Any, binding: Mapping[str, str]) -> Any:
    """`node` rebuilt with each `Name` of a parameter replaced by its dtype's name."""
    if isinstance(node, ast.Name):
        dtype = binding.get(node.id)
        return node if dtype is None else ast.Name(dtype, node.loc)
    if isinstance(node, tuple):
        return tuple(_substitute(n, binding) for n in node)
    if not dataclasses.is_dataclass(node) or isinstance(node, Location):
        return node
    changes = {}
    for field in dataclasses.fields(node):
        if field.name in ("decorators", "loc", "name_loc"):
            continue
        value = getattr(node, field.name)
        new = _substitute(value, binding)
        if new is not value:
            changes[field.name] = new
    return dataclasses.replace(node, **changes) if changes else node


def _without_dtypes(decorator: ast.Expr) -> ast.Expr:
    if not isinstance(decorator, ast.Call):
        return decorator
    keywords = tuple(k for k in decorator.keywords if k.name != "dtypes")
    return dataclasses.replace(decorator, keywords=keywords)
