"""Kernel options and the signature: `@kernel(...)` and `@tilec.jit` options (tile sizes, warps,
stages, split) checked and merged into pins, and the parameters with their dtypes and
dimensions.

A part of the checker `tilec.frontend.sema._KernelChecker` (a mixin: its methods use the state
and the other parts' methods of that class)."""

from __future__ import annotations

from collections.abc import Mapping

from tilec.diagnostics import Location, TileError
from tilec.frontend import syntax as ast
from tilec.frontend.builtins import BUILTIN_NAMES
from tilec.frontend.checked import (
    DTYPES,
    SYMBOL_RE,
    Dimension,
    DType,
    KernelOptions,
    Param,
    ScalarParam,
    TensorParam,
)
from tilec.frontend.sema_common import (
    _DTYPE_LIST,
    OPTION_NAMES,
    _check_count_option,
    _check_tile_size,
    _expr_loc,
    _literal_int,
    _Pin,
)


class OptionChecks:
    """Kernel options and the signature: the checker's methods for them."""

    def _decorator_options(self) -> dict[str, tuple[ast.Expr, Location]]:
        found: dict[str, tuple[ast.Expr, Location]] = {}
        seen_kernel: Location | None = None
        for decorator in self.definition.decorators:
            callee = decorator.func if isinstance(decorator, ast.Call) else decorator
            if not (isinstance(callee, ast.Name) and callee.id == "kernel"):
                raise TileError(
                    "unknown decorator",
                    _expr_loc(decorator),
                    hint="the only decorator in .tile files is @kernel(tile={...}, warps=..., "
                    "stages=..., split=...)",
                )
            if seen_kernel is not None:
                raise TileError(
                    "@kernel is given twice",
                    callee.loc,
                    notes=(("first given here", seen_kernel),),
                )
            seen_kernel = callee.loc
            if not isinstance(decorator, ast.Call):
                continue
            if decorator.args:
                raise TileError(
                    "@kernel takes keyword arguments only",
                    _expr_loc(decorator.args[0]),
                    hint='write @kernel(tile={"M": 128}, warps=4, stages=3)',
                )
            for keyword in decorator.keywords:
                if keyword.name not in OPTION_NAMES:
                    raise TileError(
                        f"unknown kernel option '{keyword.name}'",
                        keyword.loc,
                        hint="kernel options are: tile, warps, stages, split, dtypes",
                    )
                found[keyword.name] = (keyword.value, keyword.loc)
        return found

    def _options(self, from_source: dict[str, tuple[ast.Expr, Location]]) -> KernelOptions:
        options = KernelOptions()
        for name, (value, _) in from_source.items():
            if name == "tile":
                for dim_name, size, key_loc in self._tile_dict(value, None):
                    self._pin(dim_name, size, key_loc, None)
            else:
                number = _literal_int(value)
                if number is None:
                    raise TileError(f"{name} must be an integer constant", _expr_loc(value))
                setattr(options, name, _check_count_option(name, number, _expr_loc(value)))
        if self.jit_options:
            self._apply_jit_options(options)
        return options

    def _apply_jit_options(self, options: KernelOptions) -> None:
        loc = self.definition.name_loc
        assert self.jit_options is not None
        for name, value in self.jit_options.items():
            if value is None or name == "dtypes":
                continue  # not pinned; dtype parameters are bound before (generics.py)
            if name not in OPTION_NAMES:
                raise TileError(
                    f"unknown kernel option '{name}'",
                    loc,
                    hint="kernel options are: tile, warps, stages, split, dtypes",
                )
            if name == "tile":
                if not isinstance(value, Mapping):
                    raise TileError(
                        "option tile must be a dict from dimension name to tile size", loc
                    )
                for key, size in value.items():
                    if not isinstance(key, str):
                        raise TileError(f"tile option key {key!r} is not a dimension name", loc)
                    if isinstance(size, bool) or not isinstance(size, int):
                        raise TileError(f"tile size of {key} must be an integer", loc)
                    dim = self._dim_for_option(key, loc)
                    _check_tile_size(size, loc)
                    self.pins[dim.name] = _Pin(size, loc)
                    dim.pinned = size
            else:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TileError(f"option {name} must be an integer", loc)
                setattr(options, name, _check_count_option(name, value, loc))

    def _tile_dict(
        self, value: ast.Expr, allowed: tuple[Dimension, ...] | None
    ) -> list[tuple[str, int, Location]]:
        if not isinstance(value, ast.DictExpr):
            raise TileError(
                "tile sizes must be a dict literal",
                _expr_loc(value),
                hint='write tile={"M": 128, "N": 64}',
            )
        entries = []
        seen: dict[str, Location] = {}
        for key, size_expr in zip(value.keys, value.values):
            if isinstance(key, ast.StrLit):
                spelling = key.value
            elif isinstance(key, ast.Name):
                spelling = key.id
            else:
                raise TileError(
                    "a tile-size key must be a dimension name", _expr_loc(key), hint='e.g. "M"'
                )
            dim = self._dim_for_option(spelling, key.loc)
            if allowed is not None and dim not in allowed:
                raise TileError(
                    f"{dim} is not a dimension of this tiles() call",
                    key.loc,
                    hint=f"this loop tiles {', '.join(str(d) for d in allowed)}",
                )
            if dim.name in seen:
                raise TileError(f"tile size of {dim} is given twice", key.loc)
            seen[dim.name] = key.loc
            size = _literal_int(size_expr)
            if size is None:
                raise TileError("a tile size must be an integer constant", _expr_loc(size_expr))
            _check_tile_size(size, _expr_loc(size_expr))
            entries.append((dim.name, size, key.loc))
        return entries

    def _dim_for_option(self, spelling: str, loc: Location) -> Dimension:
        dim = self.dims.get(spelling) or self.dims_by_name.get(spelling.upper())
        if dim is None:
            known = ", ".join(str(d) for d in self.dims_by_name.values()) or "none"
            raise TileError(
                f"'{spelling}' is not a dimension of kernel '{self.definition.name}'",
                loc,
                hint=f"its dimensions are: {known}",
            )
        return dim

    def _pin(self, dim_name: str, size: int, loc: Location, conflict_hint: str | None) -> None:
        previous = self.pins.get(dim_name)
        if previous is not None and previous.size != size:
            raise TileError(
                f"tile size of {self.dims_by_name[dim_name]} is pinned to {previous.size} "
                f"elsewhere, and to {size} here",
                loc,
                hint=conflict_hint,
                notes=((f"pinned to {previous.size} here", previous.loc),),
            )
        if previous is None:
            self.pins[dim_name] = _Pin(size, loc)
        self.dims_by_name[dim_name].pinned = size

    # ---------------------------------------------------------------- signature

    def _params(self) -> tuple[Param, ...]:
        params: list[Param] = []
        for position, param in enumerate(self.definition.params):
            if param.name in self.params:
                raise TileError(f"argument '{param.name}' is given twice", param.loc)
            self._check_free_name(param.name, param.loc, "an argument")
            annotation = param.annotation
            if annotation is None:
                raise TileError(
                    f"argument '{param.name}' needs a type",
                    param.loc,
                    hint=f"e.g. '{param.name}: f32[M, N]' for a tensor, "
                    f"'{param.name}: f32' for a scalar",
                )
            checked = self._param_type(param, annotation, position)
            self.params[param.name] = checked
            params.append(checked)
        for name, dim in self.dims.items():
            if name in self.params:
                raise TileError(
                    f"'{name}' is both an argument and a dimension name",
                    dim.loc,
                    hint="rename one of them",
                )
        return tuple(params)

    def _param_type(self, param: ast.Param, annotation: ast.Expr, position: int) -> Param:
        if isinstance(annotation, ast.Name):
            dtype = self._dtype(annotation)
            if dtype.is_f8:
                raise TileError(
                    f"a scalar argument cannot be {dtype}",
                    annotation.loc,
                    hint="f8 is a storage type of tensors: pass the scalar as f32",
                )
            return ScalarParam(param.name, dtype, position, param.loc)
        if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
            dtype = self._dtype(annotation.value)
            dims = tuple(self._signature_dim(index) for index in annotation.indices)
            return TensorParam(param.name, dtype, dims, position, param.loc)
        raise TileError(
            "an argument type is a dtype ('f32') or a tensor type ('f32[M, N]')",
            _expr_loc(annotation),
        )

    def _dtype(self, node: ast.Expr) -> DType:
        if isinstance(node, ast.Name) and node.id in DTYPES:
            return DTYPES[node.id]
        what = f"'{node.id}'" if isinstance(node, ast.Name) else "this"
        raise TileError(
            f"{what} is not a dtype", _expr_loc(node), hint=f"dtypes are: {_DTYPE_LIST}"
        )

    def _signature_dim(self, node: ast.Expr | ast.Slice) -> Dimension | int:
        if isinstance(node, ast.IntLit):
            if node.value <= 0:
                raise TileError("a fixed dimension must be a positive integer", node.loc)
            return node.value
        if not isinstance(node, ast.Name):
            raise TileError(
                "a tensor dimension is a name ('N') or a positive integer",
                _expr_loc(node),
            )
        if node.id in self.dims:
            return self.dims[node.id]
        self._check_free_name(node.id, node.loc, "a dimension")
        name = node.id.upper()
        if not SYMBOL_RE.fullmatch(name):
            raise TileError(
                f"dimension name '{node.id}' must start with a letter and use only ASCII "
                "letters, digits and '_'",
                node.loc,
            )
        if name in self.dims_by_name:
            other = self.dims_by_name[name]
            raise TileError(
                f"dimension names '{other.spelling}' and '{node.id}' differ only in case",
                node.loc,
                hint="dimension names are case-insensitive (they become upper-case symbols)",
                notes=((f"'{other.spelling}' is named here", other.loc),),
            )
        for other in self.dims_by_name.values():
            if other.tile_symbol == name or "B" + name == other.name:
                first, second = (other, node.id) if other.tile_symbol == name else (node.id, other)
                raise TileError(
                    f"dimension name '{node.id}' clashes with the tile-size symbol "
                    f"B{str(first).upper()} of dimension {first}",
                    node.loc,
                    hint=f"rename {second}",
                )
        dim = Dimension(name, node.id, node.loc)
        self.dims[node.id] = dim
        self.dims_by_name[name] = dim
        return dim

    def _check_free_name(self, name: str, loc: Location, what: str) -> None:
        if name in DTYPES:
            raise TileError(f"'{name}' is a dtype and cannot name {what}", loc)
        if name in BUILTIN_NAMES:
            raise TileError(f"'{name}' is a builtin and cannot name {what}", loc)
        if name in self.kernel_defs:
            raise TileError(f"'{name}' is a kernel and cannot name {what}", loc)
