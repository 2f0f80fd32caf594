"""Semantic analysis: the syntax tree of a tile program → a checked, typed `Program`.

This module owns the meaning of the tile DSL (docs/language.md is its reference):

* names: arguments, dimensions, loop variables, locals (scoped to the loop that assigns them),
  builtins; unknown or misused names are errors;
* dtypes and promotion (weak Python literals, strong arguments and tiles), symbolic shapes and
  numpy-style broadcasting, rank checks, the typing of every builtin;
* the grid: the kernel's one top-level `tiles()` loop is the launch grid (one axis per
  dimension); `tiles()` loops nested in it run sequentially inside a block and carry the names
  they reassign;
* tensor accesses: per dimension a tile of a loop variable, the whole dimension (':') or a
  scalar index, and whether lanes can fall outside the tensor (a mask);
* kernel options that pin decisions: `@kernel(tile={...}, warps=..., stages=..., split=...)`,
  `tiles(..., tile={...})` and the same options passed from `@tilec.jit`.

The checked program's node types live in `tilec.frontend.checked` (re-exported here) and its
readable dump in `tilec.frontend.dump`; this module is the checker. The checked tree is made
for IR generation to walk without re-deriving anything: each
expression carries its dtype and shape, implicit conversions are explicit `Cast`/`Broadcast`
nodes (so the operands of a `Binary` have identical types), every loop says whether it is the
grid or sequential, and reductions and dots say which lanes of the axes they combine are real.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tilec.diagnostics import Location, TileError
from tilec.frontend import syntax as ast
from tilec.frontend.checked import (
    COMPARISONS,
    DTYPES,
    INT_RANGES,
    KIND_ORDER,
    MATH_FUNCTIONS,
    SYMBOL_RE,
    AccessIndex,
    Assign,
    AxisExtent,
    Binary,
    Broadcast,
    Carried,
    Cast,
    Constant,
    Dim,
    Dimension,
    DimSize,
    Dot,
    DType,
    ExpandDims,
    Expr,
    Full,
    GridLoop,
    IndexKind,
    Iota,
    Kernel,
    KernelOptions,
    Load,
    LoopIndex,
    LoopVar,
    Math,
    Param,
    ParamRef,
    Program,
    Reduce,
    ScalarParam,
    Select,
    SeqLoop,
    Stmt,
    Store,
    TensorAccess,
    TensorParam,
    TileType,
    Transpose,
    Unary,
    VarRef,
    common_dtype,
)
from tilec.frontend.dump import format_expr, format_kernel, format_program

__all__ = [
    "AccessIndex",
    "Assign",
    "AxisExtent",
    "Binary",
    "Broadcast",
    "Carried",
    "Cast",
    "Constant",
    "DType",
    "Dim",
    "DimSize",
    "Dimension",
    "Dot",
    "ExpandDims",
    "Expr",
    "Full",
    "GridLoop",
    "IndexKind",
    "Iota",
    "Kernel",
    "KernelOptions",
    "Load",
    "LoopIndex",
    "LoopVar",
    "Math",
    "Param",
    "ParamRef",
    "Program",
    "Reduce",
    "ScalarParam",
    "Select",
    "SeqLoop",
    "Stmt",
    "Store",
    "TensorAccess",
    "TensorParam",
    "TileType",
    "Transpose",
    "Unary",
    "VarRef",
    "analyze",
    "common_dtype",
    "format_expr",
    "format_kernel",
    "format_program",
]


# ---------------------------------------------------------------------------- analysis entry


OPTION_NAMES = ("tile", "warps", "stages", "split")
_WARP_COUNTS = (1, 2, 4, 8, 16, 32)
_MAX_STAGES = 8
_MAX_SPLIT = 65535  # the split axis is grid axis y or z, which CUDA limits to 65535 blocks
_MAX_GRID_AXES = 3


def analyze(module: ast.Module, options: Mapping[str, object] | None = None) -> Program:
    """Check `module` and return the typed `Program`, or raise the first `TileError`.

    `options` (as given to `@tilec.jit(...)`: `tile={"M": 128}`, `warps=4`, `stages=3`) apply
    to every kernel of the module, over what an `@kernel(...)` decorator in the source says.
    """
    kernel_defs: dict[str, ast.FunctionDef] = {}
    for index, stmt in enumerate(module.body):
        if isinstance(stmt, ast.FunctionDef):
            if stmt.name in kernel_defs:
                first = kernel_defs[stmt.name]
                raise TileError(
                    f"kernel '{stmt.name}' is defined twice",
                    stmt.name_loc,
                    notes=(("first defined here", first.name_loc),),
                )
            kernel_defs[stmt.name] = stmt
        elif index == 0 and isinstance(stmt, ast.ExprStmt) and isinstance(stmt.value, ast.StrLit):
            continue  # the file's docstring
        else:
            raise TileError(
                "only kernel definitions ('def') can appear at the top level",
                stmt.loc,
                hint="put computations inside a kernel's tiles() loop",
            )
    kernels = []
    for definition in kernel_defs.values():
        try:
            kernels.append(_KernelChecker(definition, kernel_defs, options).check())
        except RecursionError:
            raise TileError("expression is too deeply nested", definition.name_loc) from None
    return Program(tuple(kernels), module.filename)


# ---------------------------------------------------------------------------- names

BUILTINS = frozenset(
    [
        *MATH_FUNCTIONS,
        "maximum",
        "minimum",
        "where",
        "sum",
        "max",
        "min",
        "mean",
        "zeros",
        "full",
        "arange",
        "offsets",
        "dot",
        "transpose",
        "tiles",
        "kernel",
        "inf",
    ]
)
_REDUCTIONS = ("sum", "max", "min", "mean")
_PYTHON_FUNCTIONS = {
    "range": "loop over a dimension in tiles: 'for t in tiles(N):'",
    "float": "convert with x.to(f32)",
    "int": "convert with x.to(i32)",
    "bool": "compare to make an i1 value, e.g. x != 0",
    "len": "a dimension's name is its extent: use N",
    "print": None,
    "pow": "use the '**' operator",
    "round": None,
    "isinstance": None,
    "type": None,
    "getattr": None,
    "setattr": None,
    "super": None,
    "open": None,
    "input": None,
    "enumerate": "loop over a dimension in tiles: 'for t in tiles(N):'",
    "zip": "loop over several dimensions at once: 'for tm, tn in tiles(M, N):'",
    "list": None,
    "tuple": None,
    "dict": None,
}
_DTYPE_LIST = ", ".join(DTYPES)
_OPERATORS = {
    "+": "add",
    "-": "sub",
    "*": "mul",
    "/": "div",
    "//": "floordiv",
    "%": "mod",
    "**": "pow",
    "&": "and",
    "|": "or",
    "^": "xor",
    "<<": "shl",
    ">>": "shr",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "==": "eq",
    "!=": "ne",
}


@dataclass(slots=True)
class _Binding:
    type: TileType
    loc: Location
    constant: Constant | None = None  # a weak literal bound once: uses see the literal


@dataclass(slots=True)
class _LoopFrame:
    carried: dict[str, TileType] = field(default_factory=dict)  # in order of first assignment


@dataclass(slots=True)
class _Pin:
    size: int
    loc: Location


# ---------------------------------------------------------------------------- the checker


class _KernelChecker:
    """Checks one kernel definition; `check()` returns the typed `Kernel`."""

    def __init__(
        self,
        definition: ast.FunctionDef,
        kernel_defs: Mapping[str, ast.FunctionDef],
        jit_options: Mapping[str, object] | None,
    ):
        self.definition = definition
        self.kernel_defs = kernel_defs
        self.jit_options = jit_options
        self.dims: dict[str, Dimension] = {}  # by spelling
        self.dims_by_name: dict[str, Dimension] = {}  # by canonical name
        self.params: dict[str, Param] = {}
        self.pins: dict[str, _Pin] = {}  # canonical dim name → pin
        self.scopes: list[dict[str, _Binding]] = []
        self.frames: list[_LoopFrame] = []
        self.loop_vars: dict[str, LoopVar] = {}
        self.tiled_by: dict[str, LoopVar] = {}  # canonical dim name → the var tiling it now
        self.tiled_at: dict[str, Location] = {}  # dim → where a tiles() loop first tiled it
        self.whole_at: dict[str, Location] = {}  # dim → first use of the whole dimension
        self.left_scope: dict[str, Location] = {}  # name → loop it was local to
        self.assignment_counts: dict[str, int] = {}

    # ---------------------------------------------------------------- kernel level

    def check(self) -> Kernel:
        definition = self.definition
        if definition.name in DTYPES:
            raise TileError(
                f"'{definition.name}' is a dtype and cannot name a kernel", definition.name_loc
            )
        decorator_options = self._decorator_options()
        params = self._params()
        if definition.returns is not None and not isinstance(definition.returns, ast.NoneLit):
            raise TileError(
                "a kernel returns nothing",
                _expr_loc(definition.returns),
                hint="remove the return annotation, or write '-> None'",
            )
        options = self._options(decorator_options)
        doc, grid_for = self._split_body()
        _count_assignments(grid_for.body, self.assignment_counts)
        grid = self._grid_loop(grid_for)
        for name, pin in self.pins.items():
            if name in self.whole_at:
                raise TileError(
                    f"the tile size of {self.dims_by_name[name]} cannot be pinned: "
                    "the dimension is used whole",
                    pin.loc,
                    hint="a whole dimension's tile always covers its extent; remove the pin",
                    notes=(("used whole here", self.whole_at[name]),),
                )
        for dim in self.dims_by_name.values():
            dim.whole = dim.name in self.whole_at
        options.tile = {name: pin.size for name, pin in self.pins.items()}
        return Kernel(
            name=definition.name,
            params=params,
            dims=tuple(self.dims_by_name.values()),
            grid=grid,
            options=options,
            doc=doc,
            loc=definition.loc,
        )

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
                        hint="kernel options are: tile, warps, stages, split",
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
            if value is None:
                continue  # not pinned
            if name not in OPTION_NAMES:
                raise TileError(
                    f"unknown kernel option '{name}'",
                    loc,
                    hint="kernel options are: tile, warps, stages, split",
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
            return ScalarParam(param.name, self._dtype(annotation), position, param.loc)
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
        if name in BUILTINS:
            raise TileError(f"'{name}' is a builtin and cannot name {what}", loc)
        if name in self.kernel_defs:
            raise TileError(f"'{name}' is a kernel and cannot name {what}", loc)

    # ---------------------------------------------------------------- body structure

    def _split_body(self) -> tuple[str | None, ast.For]:
        body = list(self.definition.body)
        doc = None
        if body and isinstance(body[0], ast.ExprStmt) and isinstance(body[0].value, ast.StrLit):
            doc = body.pop(0).value.value
        grid: ast.For | None = None
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef):
                raise _nested_function(stmt)
            if isinstance(stmt, ast.For) and grid is None:
                grid = stmt
                continue
            if isinstance(stmt, ast.Pass) or _is_ellipsis(stmt):
                continue
            raise TileError(
                "statements outside the grid loop are not supported",
                stmt.loc,
                hint="a kernel's body is one 'for ... in tiles(...):' loop; put this inside it"
                if grid is None
                else "a kernel has one grid loop; nest further tiles() loops inside it",
            )
        if grid is None:
            raise TileError(
                f"kernel '{self.definition.name}' has no grid loop",
                self.definition.name_loc,
                hint="its body must be a loop over tiles, e.g. 'for tm in tiles(M):'",
            )
        return doc, grid

    def _grid_loop(self, node: ast.For) -> GridLoop:
        self.scopes.append({})
        loop_vars = self._loop_header(node, grid=True)
        body = self._block(node.body)
        self._leave_loop(loop_vars, node.loc)
        return GridLoop(vars=tuple(loop_vars), body=tuple(body), loc=node.loc)

    def _seq_loop(self, node: ast.For) -> SeqLoop:
        self.scopes.append({})
        frame = _LoopFrame()
        self.frames.append(frame)
        loop_vars = self._loop_header(node, grid=False)
        body: tuple[Stmt, ...] = tuple(self._block(node.body))
        self.frames.pop()
        self._leave_loop(loop_vars, node.loc)
        carried = tuple(Carried(name, t) for name, t in frame.carried.items())
        # `for tk, tn in tiles(K, N)` is a nest of loops; each level carries the same names.
        loop: SeqLoop | None = None
        for var in reversed(loop_vars):
            loop = SeqLoop(
                var=var, body=body if loop is None else (loop,), carried=carried, loc=node.loc
            )
        assert loop is not None
        return loop

    def _leave_loop(self, loop_vars: list[LoopVar], loc: Location) -> None:
        scope = self.scopes.pop()
        for name in scope:
            self.left_scope[name] = loc
        for var in loop_vars:
            del self.loop_vars[var.name]
            del self.tiled_by[var.dim.name]
            self.left_scope[var.name] = loc

    def _loop_header(self, node: ast.For, grid: bool) -> list[LoopVar]:
        call = node.iter
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "tiles"
        ):
            callee = (
                call.func.id
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                else None
            )
            if callee == "range":
                raise _unsupported(
                    "range() loops are",
                    _expr_loc(call),
                    "loop over a dimension in tiles: 'for t in tiles(N):'",
                )
            raise TileError(
                "a for-loop must run over tiles(...)",
                _expr_loc(call),
                hint="e.g. 'for tm, tn in tiles(M, N):'",
            )
        if not call.args:
            raise TileError(
                "tiles() needs at least one dimension", call.loc, hint="e.g. tiles(M, N)"
            )
        dims: list[Dimension] = []
        for arg in call.args:
            dim = self._tiles_argument(arg)
            if dim in dims:
                raise TileError(f"dimension {dim} appears twice in tiles()", _expr_loc(arg))
            dims.append(dim)
        for keyword in call.keywords:
            if keyword.name != "tile":
                raise TileError(
                    f"tiles() has no argument '{keyword.name}'",
                    keyword.loc,
                    hint="tiles(dims..., tile={dim: size}) pins tile sizes",
                )
            for dim_name, size, key_loc in self._tile_dict(keyword.value, tuple(dims)):
                self._pin(
                    dim_name,
                    size,
                    key_loc,
                    "a dimension has one tile size per kernel",
                )
        if grid and len(dims) > _MAX_GRID_AXES:
            raise TileError(
                f"the grid has at most {_MAX_GRID_AXES} axes; this tiles() call has {len(dims)}",
                _expr_loc(call.args[_MAX_GRID_AXES]),
                hint="loop over the remaining dimensions with a tiles() loop inside the grid",
            )
        if len(node.targets) != len(dims):
            plural = "s" if len(node.targets) != 1 else ""
            raise TileError(
                f"tiles({', '.join(str(d) for d in dims)}) gives {len(dims)} tile "
                f"{'index' if len(dims) == 1 else 'indices'}, but {len(node.targets)} loop "
                f"variable{plural} {'is' if len(node.targets) == 1 else 'are'} given",
                node.targets[0].loc,
                hint="give one loop variable per dimension: "
                f"'for {', '.join('t' + str(d).lower() for d in dims)} in tiles(...)'",
            )
        loop_vars: list[LoopVar] = []
        for axis, (target, dim) in enumerate(zip(node.targets, dims)):
            self._check_loop_var_name(target)
            if dim.name in self.tiled_by:
                other = self.tiled_by[dim.name]
                raise TileError(
                    f"dimension {dim} is already tiled by '{other.name}'",
                    target.loc,
                    hint="a dimension is tiled by one loop at a time; tile it in sibling "
                    "loops, or give the second use its own dimension name",
                    notes=((f"'{other.name}' is defined here", other.loc),),
                )
            var = LoopVar(
                name=target.id,
                dim=dim,
                element=dim.pinned == 1,
                grid_axis=axis if grid else None,
                loc=target.loc,
            )
            self.loop_vars[var.name] = var
            self.tiled_by[dim.name] = var
            self.tiled_at.setdefault(dim.name, target.loc)
            loop_vars.append(var)
        return loop_vars

    def _tiles_argument(self, arg: ast.Expr) -> Dimension:
        if isinstance(arg, ast.Name):
            dim = self.dims.get(arg.id)
            if dim is not None:
                if dim.name in self.whole_at:
                    raise TileError(
                        f"dimension {dim} cannot be tiled: it is used whole in this kernel",
                        arg.loc,
                        hint="a dimension is either tiled by tiles() or used whole (':')",
                        notes=(("used whole here", self.whole_at[dim.name]),),
                    )
                return dim
            known = ", ".join(str(d) for d in self.dims_by_name.values()) or "none"
            if self._is_known_name(arg.id):
                raise TileError(
                    f"'{arg.id}' is not a dimension",
                    arg.loc,
                    hint=f"tiles() takes dimension names from the argument types: {known}",
                )
            raise TileError(
                f"unknown dimension '{arg.id}'",
                arg.loc,
                hint=_did_you_mean(arg.id, self.dims) or f"the dimensions are: {known}",
            )
        raise TileError(
            "tiles() takes dimension names",
            _expr_loc(arg),
            hint="name the dimension in an argument's type (x: f32[N]) and write tiles(N)",
        )

    def _check_loop_var_name(self, target: ast.Name) -> None:
        name = target.id
        self._check_free_name(name, target.loc, "a loop variable")
        if name in self.params:
            raise TileError(f"loop variable '{name}' hides the argument '{name}'", target.loc)
        if name in self.dims:
            raise TileError(f"loop variable '{name}' hides the dimension '{name}'", target.loc)
        if name in self.loop_vars:
            other = self.loop_vars[name]
            raise TileError(
                f"'{name}' is already a loop variable",
                target.loc,
                notes=((f"'{name}' is defined here", other.loc),),
            )
        if self._binding(name)[0] is not None:
            raise TileError(
                f"loop variable '{name}' hides the local name '{name}'",
                target.loc,
                hint="choose another name for the loop variable",
            )

    # ---------------------------------------------------------------- statements

    def _block(self, stmts: tuple[ast.Stmt, ...]) -> list[Stmt]:
        out: list[Stmt] = []
        for stmt in stmts:
            checked = self._stmt(stmt)
            if checked is not None:
                out.append(checked)
        return out

    def _stmt(self, stmt: ast.Stmt) -> Stmt | None:
        if isinstance(stmt, ast.Assign):
            return self._assign(stmt.target, stmt.value, None, stmt.loc)
        if isinstance(stmt, ast.AugAssign):
            return self._assign(stmt.target, stmt.value, stmt.op, stmt.loc)
        if isinstance(stmt, ast.For):
            return self._seq_loop(stmt)
        if isinstance(stmt, ast.Pass) or _is_ellipsis(stmt):
            return None
        if isinstance(stmt, ast.ExprStmt):
            value = stmt.value
            if isinstance(value, ast.StrLit):
                raise TileError(
                    "a string here has no effect", stmt.loc, hint="write a '#' comment instead"
                )
            self._expr(value)
            hint = "assign it to a name, or store it: out[t] = value"
            if isinstance(value, ast.Compare) and value.op == "==":
                hint = "did you mean '=' (a store or an assignment)?"
            raise TileError("the value of this expression is unused", stmt.loc, hint=hint)
        if isinstance(stmt, ast.FunctionDef):
            raise _nested_function(stmt)
        raise AssertionError(f"unknown statement {stmt!r}")  # pragma: no cover

    def _assign(
        self, target: ast.Expr, value_node: ast.Expr, op: str | None, loc: Location
    ) -> Stmt:
        if isinstance(target, ast.Name):
            self._check_assignable(target)
            value = self._expr(value_node)
            if op is not None:
                current = self._name(target)
                value = self._operator(op, current, value, loc)
                if value.type != current.type:
                    raise TileError(
                        f"'{target.id} {op}= ...' would change '{target.id}' from "
                        f"{current.type} to {value.type}",
                        loc,
                        hint=f"write '{target.id} = {target.id} {op} ...' for a new value of "
                        f"the new type, or convert the right side with .to({current.type.dtype})",
                    )
            return self._bind(target, value)
        if isinstance(target, ast.Subscript):
            access = self._store_target(target)
            value = self._expr(value_node)
            if op is not None:
                current = Load(access=access, type=access.type, loc=access.loc)
                value = self._operator(op, current, value, loc)
            value = self._convert_for_store(value, access)
            return Store(access=access, value=value, loc=_expr_loc(target))
        if isinstance(target, ast.TupleExpr):
            raise _unsupported(
                "unpacking assignment (a, b = ...) is",
                target.loc,
                "assign one name per statement",
            )
        if isinstance(target, ast.Attribute):
            raise TileError("cannot assign to an attribute", target.loc)
        raise TileError("cannot assign to this expression", _expr_loc(target))

    def _check_assignable(self, target: ast.Name) -> None:
        name = target.id
        param = self.params.get(name)
        if isinstance(param, ScalarParam):
            raise TileError(
                f"cannot assign to scalar argument '{name}'",
                target.loc,
                hint="arguments are read-only; assign the new value to another name",
            )
        if isinstance(param, TensorParam):
            raise TileError(
                f"cannot rebind tensor argument '{name}'",
                target.loc,
                hint=f"to write into the tensor, store to a region: {name}[...] = value",
            )
        if name in self.dims:
            raise TileError(f"cannot assign to dimension '{name}'", target.loc)
        if name in self.loop_vars:
            raise TileError(f"cannot assign to loop variable '{name}'", target.loc)
        self._check_free_name(name, target.loc, "a local value")

    def _bind(self, target: ast.Name, value: Expr) -> Assign:
        name = target.id
        binding, depth = self._binding(name)
        current = len(self.scopes) - 1
        if binding is not None and depth < current:
            value = self._convert_for_carried(name, binding, value, target.loc)
            for frame in self.frames[depth:]:
                frame.carried.setdefault(name, binding.type)
        else:
            constant = None
            if (
                isinstance(value, Constant)
                and value.weak
                and self.assignment_counts.get(name, 0) == 1
            ):
                constant = value
            self.scopes[-1][name] = _Binding(value.type, target.loc, constant)
        self.left_scope.pop(name, None)
        return Assign(name=name, value=value, loc=target.loc)

    def _binding(self, name: str) -> tuple[_Binding | None, int]:
        for depth in range(len(self.scopes) - 1, -1, -1):
            binding = self.scopes[depth].get(name)
            if binding is not None:
                return binding, depth
        return None, -1

    def _convert_for_carried(
        self, name: str, binding: _Binding, value: Expr, loc: Location
    ) -> Expr:
        wanted = binding.type
        if value.type == wanted:
            return value
        shape_ok = _broadcast_shapes(value.type.shape, wanted.shape) == wanted.shape
        dtype_ok = value.type.dtype is wanted.dtype or _is_weak(value)
        if shape_ok and dtype_ok:
            value = self._convert(value, wanted.dtype, loc)
            return _broadcast_to(value, wanted.shape)
        raise TileError(
            f"'{name}' changes type in the loop: it is {wanted} before the loop, "
            f"and this assigns {value.type}",
            loc,
            hint=f"a value carried around a loop keeps its type; convert with "
            f".to({wanted.dtype}) or start it with that type",
            notes=((f"'{name}' is first assigned here", binding.loc),),
        )

    def _store_target(self, target: ast.Subscript) -> TensorAccess:
        base = target.value
        if isinstance(base, ast.Name):
            param = self.params.get(base.id)
            if isinstance(param, TensorParam):
                return self._access(param, target.indices, base.loc)
            if isinstance(param, ScalarParam):
                raise TileError(
                    f"cannot assign to scalar argument '{base.id}'",
                    base.loc,
                    hint="arguments are read-only",
                )
        raise TileError(
            "only tensor arguments can be written with [...]",
            _expr_loc(base),
            hint="assign a whole value to a name instead: x = value",
        )

    def _convert_for_store(self, value: Expr, access: TensorAccess) -> Expr:
        wanted = access.type
        if _broadcast_shapes(value.type.shape, wanted.shape) != wanted.shape:
            raise TileError(
                f"cannot store a value of type {value.type} into "
                f"{access.tensor.name}[...], a region of shape {_shape_text(wanted.shape)}",
                value.loc,
                hint="shapes must be equal, or broadcast to the region's shape",
            )
        source, target = value.type.dtype, wanted.dtype
        if (
            source is not target
            and not _is_weak(value)
            and source.kind != target.kind
            and source is not DType.I1
        ):
            raise TileError(
                f"cannot store {source} values into '{access.tensor.name}' ({target}) implicitly",
                value.loc,
                hint=f"convert explicitly with .to({target})",
            )
        value = self._convert(value, target, value.loc)
        return _broadcast_to(value, wanted.shape)

    # ---------------------------------------------------------------- tensor accesses

    def _access(
        self, tensor: TensorParam, indices: tuple[ast.Expr | ast.Slice, ...], loc: Location
    ) -> TensorAccess:
        if len(indices) != tensor.rank:
            where = _expr_loc(indices[tensor.rank]) if len(indices) > tensor.rank else loc
            plural = "s" if tensor.rank != 1 else ""
            raise TileError(
                f"'{tensor.name}' has {tensor.rank} dimension{plural} ({tensor}), "
                f"but {len(indices)} {'index is' if len(indices) == 1 else 'indices are'} given",
                where,
                hint="give one index per dimension: a tile variable, ':' or an integer",
            )
        checked: list[AccessIndex] = []
        for position, (index, dim) in enumerate(zip(indices, tensor.dims)):
            checked.append(self._access_index(tensor, position, index, dim))
        shape = tuple(i.size for i in checked if i.size is not None)
        return TensorAccess(
            tensor=tensor,
            indices=tuple(checked),
            type=TileType(tensor.dtype, shape),
            loc=loc,
        )

    def _access_index(
        self,
        tensor: TensorParam,
        position: int,
        index: ast.Expr | ast.Slice,
        dim: Dimension | int,
    ) -> AccessIndex:
        loc = _expr_loc(index)
        if isinstance(index, ast.Slice):
            if index.lower is not None or index.upper is not None or index.step is not None:
                raise _unsupported(
                    "slices with bounds or steps are",
                    loc,
                    "take part of a dimension with a tile variable from tiles(), or the "
                    "whole dimension with ':'",
                )
            if isinstance(dim, int):
                return AccessIndex(kind=IndexKind.WHOLE, dim=dim, size=dim, loc=loc)
            self._use_whole(dim, loc)
            return AccessIndex(
                kind=IndexKind.WHOLE, dim=dim, size=dim.tile_symbol, masked=True, loc=loc
            )
        if isinstance(index, ast.Name) and index.id in self.loop_vars:
            var = self.loop_vars[index.id]
            if var.dim is not dim:
                if isinstance(dim, int):
                    hint = (
                        f"this dimension has the fixed size {dim}: index it with ':' or an integer"
                    )
                else:
                    hint = f"index dimension {dim} with a loop variable of tiles({dim}), or ':'"
                raise TileError(
                    f"loop variable '{var.name}' runs over {var.dim}, but dimension "
                    f"{position} of '{tensor.name}' is {dim}",
                    loc,
                    hint=hint,
                )
            if var.element:
                value = LoopIndex(var=var, type=TileType(DType.I32), loc=loc)
                return AccessIndex(kind=IndexKind.SCALAR, dim=dim, var=var, value=value, loc=loc)
            return AccessIndex(
                kind=IndexKind.TILE,
                dim=dim,
                var=var,
                size=var.size_symbol,
                masked=True,
                loc=loc,
            )
        if isinstance(index, ast.NoneLit):
            raise TileError(
                "None (a new axis) cannot index a tensor",
                loc,
                hint="add the axis to the loaded tile instead: x[t][:, None]",
            )
        if isinstance(index, ast.EllipsisLit):
            raise _unsupported("'...' in an index is", loc, "give one index per dimension")
        value = self._expr(index)
        if not value.type.is_scalar or not value.type.dtype.is_int:
            raise TileError(
                f"an index must be a loop variable, ':' or an integer scalar, not {value.type}",
                loc,
            )
        if isinstance(value, Constant):
            if value.value < 0:
                raise TileError(
                    "negative indices are not supported",
                    loc,
                    hint="index from the start of the dimension",
                )
            if isinstance(dim, int) and value.value >= dim:
                raise TileError(
                    f"index {value.value} is out of bounds for dimension {position} of "
                    f"'{tensor.name}', of size {dim}",
                    loc,
                )
            if value.weak:
                value = Constant(
                    value=value.value, type=value.type, loc=value.loc
                )  # strong now: it is an index
        return AccessIndex(kind=IndexKind.SCALAR, dim=dim, value=value, loc=loc)

    def _use_whole(self, dim: Dimension, loc: Location) -> None:
        if dim.name in self.tiled_at:
            raise TileError(
                f"dimension {dim} cannot be used whole: it is tiled by a tiles() loop",
                loc,
                hint=f"index it with the loop variable of tiles({dim}) instead of ':'",
                notes=(("tiled here", self.tiled_at[dim.name]),),
            )
        self.whole_at.setdefault(dim.name, loc)

    # ---------------------------------------------------------------- expressions

    def _expr(self, node: ast.Expr | ast.Slice) -> Expr:
        method = _EXPRESSIONS.get(type(node))
        if method is None:
            raise self._not_a_value(node)
        return method(self, node)

    def _not_a_value(self, node: ast.Expr | ast.Slice) -> TileError:
        loc = _expr_loc(node)
        if isinstance(node, ast.Slice):
            return TileError("':' can only appear in an index", loc)
        if isinstance(node, ast.NoneLit):
            return TileError(
                "None is not a value", loc, hint="None can add an axis to a tile: x[:, None]"
            )
        if isinstance(node, ast.StrLit):
            return TileError(
                "strings are not values in tile kernels",
                loc,
                hint="strings may only be docstrings and tile-size keys",
            )
        if isinstance(node, ast.EllipsisLit):
            return TileError("'...' is not a value", loc)
        if isinstance(node, ast.ListExpr):
            return TileError(
                "a list is not a value",
                loc,
                hint="lists only give the shape of zeros() and full()",
            )
        if isinstance(node, ast.TupleExpr):
            return TileError("tuples are not values in tile kernels", loc)
        if isinstance(node, ast.DictExpr):
            return TileError(
                "a dict is not a value", loc, hint="dicts only give tile sizes: tile={...}"
            )
        raise AssertionError(f"unknown expression {node!r}")  # pragma: no cover

    def _int_literal(self, node: ast.IntLit) -> Expr:
        return _int_constant(node.value, node.loc)

    def _float_literal(self, node: ast.FloatLit) -> Expr:
        return Constant(value=node.value, type=TileType(DType.F32), weak=True, loc=node.loc)

    def _bool_literal(self, node: ast.BoolLit) -> Expr:
        return Constant(value=node.value, type=TileType(DType.I1), weak=True, loc=node.loc)

    def _name(self, node: ast.Name) -> Expr:
        name = node.id
        binding, _ = self._binding(name)
        if binding is not None:
            if binding.constant is not None:
                c = binding.constant
                return Constant(value=c.value, type=c.type, weak=True, loc=node.loc)
            return VarRef(name=name, type=binding.type, loc=node.loc)
        var = self.loop_vars.get(name)
        if var is not None:
            if var.element:
                return LoopIndex(var=var, type=TileType(DType.I32), loc=node.loc)
            raise TileError(
                f"'{name}' is a tile of {var.dim}, not a value",
                node.loc,
                hint=f"offsets({name}) gives the indices of the elements it covers",
            )
        param = self.params.get(name)
        if isinstance(param, ScalarParam):
            return ParamRef(param=param, type=TileType(param.dtype), loc=node.loc)
        if isinstance(param, TensorParam):
            example = ", ".join(":" for _ in param.dims)
            raise TileError(
                f"tensor '{name}' must be indexed to read from it",
                node.loc,
                hint=f"read a tile, e.g. {name}[{example}]",
            )
        dim = self.dims.get(name)
        if dim is not None:
            return DimSize(dim=dim, type=TileType(DType.I32), loc=node.loc)
        if name == "inf":
            return Constant(value=math.inf, type=TileType(DType.F32), weak=True, loc=node.loc)
        if name in DTYPES:
            raise TileError(
                f"'{name}' is a dtype, not a value",
                node.loc,
                hint=f"convert a value with x.to({name})",
            )
        if name in BUILTINS:
            raise TileError(f"'{name}' is a function, not a value", node.loc, hint="call it")
        if name in self.kernel_defs:
            raise TileError(f"'{name}' is a kernel, not a value", node.loc)
        if name in self.left_scope:
            loop_line = self.left_scope[name].line
            raise TileError(
                f"'{name}' is only defined inside the loop on line {loop_line}",
                node.loc,
                hint="names assigned in a loop are local to it; assign it before the loop "
                "to carry its value out",
            )
        raise TileError(
            f"unknown name '{name}'", node.loc, hint=_did_you_mean(name, self._visible_names())
        )

    def _is_known_name(self, name: str) -> bool:
        return (
            name in self.params
            or name in self.loop_vars
            or self._binding(name)[0] is not None
            or name in DTYPES
            or name in BUILTINS
        )

    def _visible_names(self) -> list[str]:
        names = [*self.params, *self.dims, *self.loop_vars, "inf"]
        for scope in self.scopes:
            names.extend(scope)
        return names

    def _bin_op(self, node: ast.BinOp) -> Expr:
        if node.op == "@":
            return self._dot(self._expr(node.left), self._expr(node.right), node.loc)
        return self._operator(node.op, self._expr(node.left), self._expr(node.right), node.loc)

    def _compare(self, node: ast.Compare) -> Expr:
        return self._operator(node.op, self._expr(node.left), self._expr(node.right), node.loc)

    def _operator(self, op_text: str, lhs: Expr, rhs: Expr, loc: Location) -> Expr:
        """The binary operator `op_text` ('+', '<', '@', ...) on checked operands."""
        if op_text == "@":
            return self._dot(lhs, rhs, loc)
        return self._binary(_OPERATORS[op_text], lhs, rhs, loc, f"'{op_text}'")

    def _binary(self, op: str, lhs: Expr, rhs: Expr, loc: Location, what: str) -> Expr:
        dtype = _promote(lhs, rhs)
        if op in ("div", "pow") and not dtype.is_float:
            dtype = DType.F32
        elif op in ("add", "sub", "mul", "floordiv", "mod", "maximum", "minimum"):
            if dtype is DType.I1:
                raise TileError(
                    f"{what} needs numbers, not i1 values",
                    loc,
                    hint="convert with .to(i32), or use '|', '&', '^' for logic",
                )
        elif op in ("and", "or", "xor") and dtype.is_float:
            raise TileError(
                f"{what} needs integer or i1 operands, not {dtype}",
                loc,
                hint="compare first to make i1 values: (a > 0) & (b > 0)",
            )
        elif op in ("shl", "shr") and not dtype.is_int:
            raise TileError(f"{what} needs integer operands, not {dtype}", loc)
        shape = _broadcast_shapes(lhs.type.shape, rhs.type.shape)
        if shape is None:
            raise TileError(
                f"cannot broadcast {lhs.type} and {rhs.type} in {what}",
                loc,
                hint="sizes must match or be 1, comparing shapes from the right",
            )
        result_dtype = DType.I1 if op in COMPARISONS else dtype
        if isinstance(lhs, Constant) and isinstance(rhs, Constant) and lhs.weak and rhs.weak:
            return _fold_binary(op, lhs, rhs, result_dtype, loc)
        lhs = _broadcast_to(self._convert(lhs, dtype, loc), shape)
        rhs = _broadcast_to(self._convert(rhs, dtype, loc), shape)
        return Binary(op=op, lhs=lhs, rhs=rhs, type=TileType(result_dtype, shape), loc=loc)

    def _convert(self, value: Expr, dtype: DType, loc: Location) -> Expr:
        """`value` as `dtype`: a constant is converted in place; anything else gets a Cast."""
        if isinstance(value, Constant) and (value.weak or value.type.dtype is not dtype):
            # Once it meets a typed operand, a literal is a constant of that type.
            return Constant(
                value=_convert_constant(value.value, dtype, value.loc, explicit=False),
                type=value.type.with_dtype(dtype),
                loc=value.loc,
            )
        if value.type.dtype is dtype:
            return value
        return Cast(operand=value, type=value.type.with_dtype(dtype), loc=loc)

    def _unary_op(self, node: ast.UnaryOp) -> Expr:
        operand = self._expr(node.operand)
        dtype = operand.type.dtype
        if node.op == "+":
            if dtype is DType.I1:
                raise TileError("unary '+' needs a number, not an i1 value", node.loc)
            return operand
        if node.op == "-":
            if dtype is DType.I1:
                raise TileError(
                    "unary '-' needs a number, not an i1 value",
                    node.loc,
                    hint="use '~' for logical not",
                )
            if isinstance(operand, Constant):
                return _checked_constant(-operand.value, operand, node.loc)
            return Unary(op="neg", operand=operand, type=operand.type, loc=node.loc)
        if dtype.is_float:
            raise TileError(f"'~' needs an integer or i1 operand, not {dtype}", node.loc)
        if isinstance(operand, Constant):
            folded = (not operand.value) if dtype is DType.I1 else ~int(operand.value)
            return _checked_constant(folded, operand, node.loc)
        return Unary(op="not", operand=operand, type=operand.type, loc=node.loc)

    def _attribute(self, node: ast.Attribute) -> Expr:
        if node.attr == "T":
            return self._transpose(self._expr(node.value), node.loc)
        if node.attr == "to":
            raise TileError("'.to' must be called", node.loc, hint="e.g. x.to(f32)")
        self._expr(node.value)
        hint = "tile values have: .to(dtype) and .T"
        if node.attr in ("shape", "dtype"):
            hint = "dimension names (M, N) are values; shapes and dtypes are fixed at compile time"
        raise TileError(f"tile values have no attribute '{node.attr}'", node.loc, hint=hint)

    def _transpose(self, operand: Expr, loc: Location) -> Expr:
        if operand.type.rank != 2:
            raise TileError(f"transpose needs a 2-D tile, not {operand.type}", loc)
        a, b = operand.type.shape
        return Transpose(
            operand=operand, permutation=(1, 0), type=operand.type.with_shape((b, a)), loc=loc
        )

    def _subscript(self, node: ast.Subscript) -> Expr:
        base = node.value
        if isinstance(base, ast.Name):
            param = self.params.get(base.id)
            if isinstance(param, TensorParam):
                access = self._access(param, node.indices, base.loc)
                return Load(access=access, type=access.type, loc=base.loc)
            if isinstance(param, ScalarParam):
                raise TileError(f"scalar argument '{base.id}' cannot be indexed", base.loc)
        value = self._expr(base)
        new_axes: list[int] = []
        kept = 0
        for position, index in enumerate(node.indices):
            if isinstance(index, ast.NoneLit):
                new_axes.append(position)
            elif isinstance(index, ast.Slice) and (
                index.lower is None and index.upper is None and index.step is None
            ):
                kept += 1
            else:
                raise TileError(
                    "a tile value can only be indexed with ':' and None",
                    _expr_loc(index),
                    hint="read parts of a tensor by indexing the tensor argument; "
                    "None adds an axis of size 1: x[:, None]",
                )
        if kept != value.type.rank:
            raise TileError(
                f"indexing a {value.type} value needs one ':' per axis ({value.type.rank}), "
                f"plus None for each new axis",
                node.loc,
            )
        if not new_axes:
            return value
        shape = list(value.type.shape)
        for axis in new_axes:
            shape.insert(axis, 1)
        return ExpandDims(
            operand=value,
            axes=tuple(new_axes),
            type=value.type.with_shape(tuple(shape)),
            loc=node.loc,
        )

    # ---------------------------------------------------------------- calls

    def _call(self, node: ast.Call) -> Expr:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr == "to":
                return self._to_call(node, func)
            if func.attr in BUILTINS:
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
        handler = _BUILTIN_CALLS.get(name)
        if handler is not None:
            return handler(self, node)
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
            hint=_did_you_mean(name, sorted(BUILTINS - {"inf", "kernel"})),
        )

    def _arguments(
        self,
        node: ast.Call,
        name: str,
        positional: tuple[str, ...],
        keyword_only: tuple[str, ...] = (),
        required: int | None = None,
        extra_hint: str | None = None,
    ) -> dict[str, ast.Expr]:
        """Match the call's arguments to parameter names, with errors located on arguments."""
        required = len(positional) if required is None else required
        signature = ", ".join([*positional, *(f"{k}=..." for k in keyword_only)])
        bound: dict[str, ast.Expr] = {}
        if len(node.args) > len(positional):
            extra = node.args[len(positional)]
            count = len(positional)
            raise TileError(
                f"{name}() takes {count} positional argument{'s' if count != 1 else ''}, "
                f"but {len(node.args)} were given",
                _expr_loc(extra),
                hint=extra_hint or f"{name}({signature})",
            )
        for param_name, arg in zip(positional, node.args):
            bound[param_name] = arg
        for keyword in node.keywords:
            if keyword.name not in positional and keyword.name not in keyword_only:
                raise TileError(
                    f"{name}() has no argument '{keyword.name}'",
                    keyword.loc,
                    hint=f"{name}({signature})",
                )
            if keyword.name in bound:
                raise TileError(f"{name}() got two values for '{keyword.name}'", keyword.loc)
            bound[keyword.name] = keyword.value
        for param_name in positional[:required]:
            if param_name not in bound:
                raise TileError(
                    f"{name}() needs the argument '{param_name}'",
                    node.loc,
                    hint=f"{name}({signature})",
                )
        return bound

    def _to_call(self, node: ast.Call, func: ast.Attribute) -> Expr:
        args = self._arguments(node, "to", ("dtype",))
        dtype = self._dtype_argument(args["dtype"])
        operand = self._expr(func.value)
        if operand.type.dtype is dtype:
            return operand
        if isinstance(operand, Constant):
            return Constant(
                value=_convert_constant(operand.value, dtype, func.loc, True, runs=True),
                type=operand.type.with_dtype(dtype),
                loc=func.loc,
            )
        return Cast(operand=operand, type=operand.type.with_dtype(dtype), loc=func.loc)

    def _dtype_argument(self, node: ast.Expr) -> DType:
        if isinstance(node, ast.Name) and node.id in DTYPES:
            return DTYPES[node.id]
        raise TileError("expected a dtype", _expr_loc(node), hint=f"dtypes are: {_DTYPE_LIST}")

    def _math_call(self, node: ast.Call) -> Expr:
        name = node.func.id  # type: ignore[union-attr]
        args = self._arguments(node, name, ("x",))
        operand = self._expr(args["x"])
        dtype = operand.type.dtype
        if name == "abs" and dtype is DType.I1:
            raise TileError("abs() needs a number, not an i1 value", node.loc)
        if _is_weak(operand):
            assert isinstance(operand, Constant)
            if name == "abs":
                return _checked_constant(abs(operand.value), operand, node.loc)
            value = _fold_math(name, operand.value)
            return Constant(value=value, type=TileType(DType.F32), weak=True, loc=node.loc)
        if name != "abs" and not dtype.is_float:
            operand = self._convert(operand, DType.F32, node.loc)
        return Math(fn=name, operand=operand, type=operand.type, loc=node.loc)

    def _min_max_call(self, node: ast.Call) -> Expr:
        name = node.func.id  # type: ignore[union-attr]
        args = self._arguments(node, name, ("a", "b"))
        return self._binary(
            name, self._expr(args["a"]), self._expr(args["b"]), node.loc, f"{name}()"
        )

    def _where_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "where", ("cond", "x", "y"))
        cond = self._expr(args["cond"])
        on_true = self._expr(args["x"])
        on_false = self._expr(args["y"])
        if cond.type.dtype is not DType.I1:
            raise TileError(
                f"where() needs an i1 condition, not {cond.type.dtype}",
                cond.loc,
                hint="compare to make a condition, e.g. where(x > 0, x, 0.0)",
            )
        dtype = _promote(on_true, on_false)
        shape = _broadcast_shapes(cond.type.shape, on_true.type.shape)
        shape = _broadcast_shapes(shape, on_false.type.shape) if shape is not None else None
        if shape is None:
            raise TileError(
                f"cannot broadcast {cond.type}, {on_true.type} and {on_false.type} in where()",
                node.loc,
                hint="sizes must match or be 1, comparing shapes from the right",
            )
        return Select(
            cond=_broadcast_to(cond, shape),
            on_true=_broadcast_to(self._convert(on_true, dtype, node.loc), shape),
            on_false=_broadcast_to(self._convert(on_false, dtype, node.loc), shape),
            type=TileType(dtype, shape),
            loc=node.loc,
        )

    def _reduce_call(self, node: ast.Call) -> Expr:
        kind = node.func.id  # type: ignore[union-attr]
        hint = None
        if kind in ("max", "min") and len(node.args) == 2:
            hint = (
                f"{kind}() reduces one tile; for the element-wise {kind}imum of two values "
                f"use {kind}imum(a, b)"
            )
        elif len(node.args) > 1:
            hint = f"pass the axis by name: {kind}(x, axis=...)"
        args = self._arguments(node, kind, ("x",), ("axis", "keepdims"), extra_hint=hint)
        operand = self._expr(args["x"])
        rank = operand.type.rank
        if rank == 0:
            raise TileError(f"{kind}() needs a tile, not the scalar {operand.type}", operand.loc)
        axis_node = args.get("axis")
        if axis_node is None or isinstance(axis_node, ast.NoneLit):
            axes = tuple(range(rank))
        else:
            axis = _literal_int(axis_node)
            if axis is None:
                raise TileError("axis must be an integer constant (or None)", _expr_loc(axis_node))
            if not -rank <= axis < rank:
                raise TileError(
                    f"axis {axis} is out of range for the {rank}-D tile {operand.type}",
                    _expr_loc(axis_node),
                    hint="axes count from 0; -1 is the last",
                )
            axes = (axis % rank,)
        keepdims = False
        keep_node = args.get("keepdims")
        if keep_node is not None:
            if not isinstance(keep_node, ast.BoolLit):
                raise TileError("keepdims must be True or False", _expr_loc(keep_node))
            keepdims = keep_node.value
        dtype = operand.type.dtype
        if kind == "sum" and not dtype.is_float and dtype.bits < 32:
            dtype = DType.I32  # summing narrow integers (or i1 flags) would overflow
        elif kind == "mean" and not dtype.is_float:
            dtype = DType.F32
        operand = self._convert(operand, dtype, node.loc)
        if keepdims:
            shape = tuple(1 if i in axes else d for i, d in enumerate(operand.type.shape))
        else:
            shape = tuple(d for i, d in enumerate(operand.type.shape) if i not in axes)
        extents = tuple(self._extent(operand.type.shape[a]) for a in axes)
        return Reduce(
            kind=kind,
            operand=operand,
            axes=axes,
            keepdims=keepdims,
            extents=extents,
            type=TileType(dtype, shape),
            loc=node.loc,
        )

    def _extent(self, size: Dim) -> AxisExtent | None:
        if isinstance(size, int):
            return None
        dim = self.dims_by_name[size[1:]]
        return AxisExtent(dim=dim, var=self.tiled_by.get(dim.name))

    def _dot_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "dot", ("a", "b"))
        return self._dot(self._expr(args["a"]), self._expr(args["b"]), node.loc)

    def _dot(self, lhs: Expr, rhs: Expr, loc: Location) -> Expr:
        for side, operand in (("left", lhs), ("right", rhs)):
            if operand.type.rank != 2:
                hint = (
                    "add an axis with x[None, :] or x[:, None]" if operand.type.rank == 1 else None
                )
                raise TileError(
                    f"'@' needs 2-D tiles; the {side} operand is {operand.type}", loc, hint=hint
                )
        if lhs.type.dtype is not rhs.type.dtype:
            raise TileError(
                f"'@' operands must have the same dtype, not {lhs.type.dtype} and {rhs.type.dtype}",
                loc,
                hint=f"convert one side, e.g. .to({lhs.type.dtype})",
            )
        dtype = lhs.type.dtype
        result = _DOT_RESULTS.get(dtype)
        if result is None:
            raise TileError(
                f"'@' does not support {dtype} tiles",
                loc,
                hint="'@' takes f16, bf16, f32, f64 or i8 tiles",
            )
        (m, k), (k2, n) = lhs.type.shape, rhs.type.shape
        if k != k2:
            raise TileError(
                f"'@' inner sizes do not match: {lhs.type} @ {rhs.type}",
                loc,
                hint="the left tile's columns must match the right tile's rows; "
                "transpose with .T if needed",
            )
        return Dot(
            lhs=lhs,
            rhs=rhs,
            contraction=self._extent(k),
            type=TileType(result, (m, n)),
            loc=loc,
        )

    def _shape_argument(self, node: ast.Expr) -> tuple[Dim, ...]:
        if not isinstance(node, (ast.ListExpr, ast.TupleExpr)):
            raise TileError(
                "a shape is a list of sizes", _expr_loc(node), hint="e.g. [tm, tn] or [tm, 1]"
            )
        shape: list[Dim] = []
        for entry in node.elts:
            if isinstance(entry, ast.IntLit):
                if entry.value <= 0:
                    raise TileError("a tile size must be positive", entry.loc)
                shape.append(entry.value)
                continue
            if isinstance(entry, ast.Name):
                var = self.loop_vars.get(entry.id)
                if var is not None:
                    if var.element:
                        raise TileError(
                            f"'{entry.id}' runs over {var.dim} one element at a time; "
                            "it has no size in a tile",
                            entry.loc,
                            hint="use 1 for an axis of one element",
                        )
                    shape.append(var.size_symbol)
                    continue
                dim = self.dims.get(entry.id)
                if dim is not None:
                    shape.append(self._whole_dim_size(dim, entry.loc))
                    continue
            raise TileError(
                "a shape entry is a loop variable, a dimension name or a positive integer",
                _expr_loc(entry),
            )
        return tuple(shape)

    def _whole_dim_size(self, dim: Dimension, loc: Location) -> Dim:
        """The tile size of a whole dimension named in a shape (marks the dimension whole)."""
        self._use_whole(dim, loc)
        return dim.tile_symbol

    def _zeros_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "zeros", ("shape", "dtype"), required=1)
        shape = self._shape_argument(args["shape"])
        dtype = self._dtype_argument(args["dtype"]) if "dtype" in args else DType.F32
        zero = Constant(
            value=_convert_constant(0, dtype, node.loc, False), type=TileType(dtype), loc=node.loc
        )
        return _full(zero, shape, node.loc)

    def _full_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "full", ("shape", "value", "dtype"), required=2)
        shape = self._shape_argument(args["shape"])
        value = self._expr(args["value"])
        if not value.type.is_scalar:
            raise TileError(
                f"full() fills with a scalar, not a tile ({value.type})",
                value.loc,
                hint="broadcast a tile with arithmetic instead, e.g. zeros([...]) + x",
            )
        dtype = self._dtype_argument(args["dtype"]) if "dtype" in args else value.type.dtype
        if _is_weak(value) and KIND_ORDER[value.type.dtype.kind] > KIND_ORDER[dtype.kind]:
            raise TileError(
                f"cannot fill a tile of {dtype} with {value.value}",  # type: ignore[union-attr]
                value.loc,
            )
        if isinstance(value, Constant):
            value = Constant(
                value=_convert_constant(value.value, dtype, value.loc, explicit=True),
                type=TileType(dtype),
                loc=value.loc,
            )
        elif value.type.dtype is not dtype:
            value = Cast(operand=value, type=TileType(dtype), loc=value.loc)
        return _full(value, shape, node.loc)

    def _arange_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "arange", ("n",))
        n = args["n"]
        if not isinstance(n, ast.IntLit) or n.value <= 0:
            raise TileError(
                "arange() needs a positive integer constant",
                _expr_loc(n),
                hint="for the indices of a tile's elements, use offsets(t)",
            )
        return Iota(type=TileType(DType.I32, (n.value,)), loc=node.loc)

    def _offsets_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "offsets", ("t",))
        arg = args["t"]
        if isinstance(arg, ast.Name):
            var = self.loop_vars.get(arg.id)
            if var is not None:
                if var.element:
                    raise TileError(
                        f"'{arg.id}' is a single index: use it directly",
                        arg.loc,
                        hint=f"offsets() is for tiles; '{arg.id}' itself is the index",
                    )
                shape = (var.size_symbol,)
                start = LoopIndex(var=var, type=TileType(DType.I32), loc=arg.loc)
                iota = Iota(type=TileType(DType.I32, shape), loc=node.loc)
                return Binary(
                    op="add",
                    lhs=_broadcast_to(start, shape),
                    rhs=iota,
                    type=TileType(DType.I32, shape),
                    loc=node.loc,
                )
            dim = self.dims.get(arg.id)
            if dim is not None:
                shape = (self._whole_dim_size(dim, arg.loc),)
                return Iota(type=TileType(DType.I32, shape), loc=node.loc)
        raise TileError(
            "offsets() takes a loop variable or a dimension name",
            _expr_loc(arg),
            hint="e.g. offsets(tm)",
        )

    def _transpose_call(self, node: ast.Call) -> Expr:
        args = self._arguments(node, "transpose", ("x",))
        return self._transpose(self._expr(args["x"]), node.loc)


_EXPRESSIONS: dict[type, Callable[[_KernelChecker, object], Expr]] = {
    ast.IntLit: _KernelChecker._int_literal,
    ast.FloatLit: _KernelChecker._float_literal,
    ast.BoolLit: _KernelChecker._bool_literal,
    ast.Name: _KernelChecker._name,
    ast.BinOp: _KernelChecker._bin_op,
    ast.Compare: _KernelChecker._compare,
    ast.UnaryOp: _KernelChecker._unary_op,
    ast.Call: _KernelChecker._call,
    ast.Attribute: _KernelChecker._attribute,
    ast.Subscript: _KernelChecker._subscript,
}

_BUILTIN_CALLS: dict[str, Callable[[_KernelChecker, ast.Call], Expr]] = {
    **{name: _KernelChecker._math_call for name in MATH_FUNCTIONS},
    "maximum": _KernelChecker._min_max_call,
    "minimum": _KernelChecker._min_max_call,
    "where": _KernelChecker._where_call,
    **{name: _KernelChecker._reduce_call for name in _REDUCTIONS},
    "dot": _KernelChecker._dot_call,
    "zeros": _KernelChecker._zeros_call,
    "full": _KernelChecker._full_call,
    "arange": _KernelChecker._arange_call,
    "offsets": _KernelChecker._offsets_call,
    "transpose": _KernelChecker._transpose_call,
}

_DOT_RESULTS = {
    DType.F16: DType.F32,
    DType.BF16: DType.F32,
    DType.F32: DType.F32,
    DType.F64: DType.F64,
    DType.I8: DType.I32,
}


# ---------------------------------------------------------------------------- helpers


def _expr_loc(node: object) -> Location:
    return node.loc  # type: ignore[attr-defined]


def _is_ellipsis(stmt: ast.Stmt) -> bool:
    return isinstance(stmt, ast.ExprStmt) and isinstance(stmt.value, ast.EllipsisLit)


def _is_weak(value: Expr) -> bool:
    return isinstance(value, Constant) and value.weak


def _unsupported(what: str, loc: Location, hint: str | None = None) -> TileError:
    return TileError(f"{what} not supported in tile kernels", loc, hint=hint)


def _nested_function(stmt: ast.FunctionDef) -> TileError:
    return _unsupported(
        "nested functions are", stmt.loc, "define kernels at the top level of the file"
    )


def _did_you_mean(name: str, candidates) -> str | None:
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"did you mean '{matches[0]}'?" if matches else None


def _shape_text(shape: tuple[Dim, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _literal_int(node: ast.Expr) -> int | None:
    """The value of an integer literal, possibly negated; None for anything else."""
    if isinstance(node, ast.IntLit):
        return node.value
    if isinstance(node, ast.UnaryOp) and node.op == "-" and isinstance(node.operand, ast.IntLit):
        return -node.operand.value
    return None


# The largest tile size a pin may give: far more than a block holds, and small enough that
# sizes, offsets and the compiler's own arrays stay modest (a pin of 2**63 exhausted memory).
MAX_TILE_SIZE = 1 << 16


def _check_tile_size(size: int, loc: Location) -> None:
    if size < 1 or size & (size - 1):
        raise TileError(
            f"a tile size must be a power of two, not {size}",
            loc,
            hint="e.g. 16, 32, 64, 128; 1 iterates the dimension one element at a time",
        )
    if size > MAX_TILE_SIZE:
        raise TileError(
            f"a tile size must be at most {MAX_TILE_SIZE}, not {size}",
            loc,
            hint="e.g. 16, 32, 64, 128; a dimension used whole (':') needs no pin",
        )


def _check_count_option(name: str, value: int, loc: Location) -> int:
    if name == "warps" and value not in _WARP_COUNTS:
        raise TileError(
            f"warps must be one of {', '.join(map(str, _WARP_COUNTS))}, not {value}", loc
        )
    if name == "stages" and not 1 <= value <= _MAX_STAGES:
        raise TileError(f"stages must be between 1 and {_MAX_STAGES}, not {value}", loc)
    if name == "split" and not 1 <= value <= _MAX_SPLIT:
        raise TileError(
            f"split must be between 1 and {_MAX_SPLIT}, not {value}",
            loc,
            hint="split=1 leaves the kernel unsplit; without split= the launch chooses",
        )
    return value


def _count_assignments(stmts: tuple[ast.Stmt, ...], counts: dict[str, int]) -> None:
    for stmt in stmts:
        if isinstance(stmt, (ast.Assign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
            counts[stmt.target.id] = counts.get(stmt.target.id, 0) + 1
        elif isinstance(stmt, ast.For):
            _count_assignments(stmt.body, counts)


def _promote(a: Expr, b: Expr) -> DType:
    """The dtype of a binary operation's operands (see docs/language.md, "Promotion")."""
    a_weak, b_weak = _is_weak(a), _is_weak(b)
    if a_weak != b_weak:
        weak, strong = (a, b) if a_weak else (b, a)
        weak_kind, strong_kind = weak.type.dtype.kind, strong.type.dtype.kind
        if KIND_ORDER[weak_kind] <= KIND_ORDER[strong_kind]:
            return strong.type.dtype
        return weak.type.dtype
    return common_dtype(a.type.dtype, b.type.dtype)


def _broadcast_shapes(a: tuple[Dim, ...] | None, b: tuple[Dim, ...]) -> tuple[Dim, ...] | None:
    if a is None:
        return None
    if a == b:
        return a
    result: list[Dim] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x == y or y == 1:
            result.append(x)
        elif x == 1:
            result.append(y)
        else:
            return None
    return tuple(reversed(result))


def _broadcast_to(value: Expr, shape: tuple[Dim, ...]) -> Expr:
    if value.type.shape == shape:
        return value
    return Broadcast(operand=value, type=value.type.with_shape(shape), loc=value.loc)


def _full(value: Expr, shape: tuple[Dim, ...], loc: Location) -> Expr:
    if not shape:
        return value
    return Full(value=value, type=TileType(value.type.dtype, shape), loc=loc)


def _int_constant(value: int, loc: Location) -> Constant:
    low, high = INT_RANGES[DType.I64]
    if not low <= value <= high:
        raise TileError("integer constant does not fit in 64 bits", loc)
    low32, high32 = INT_RANGES[DType.I32]
    dtype = DType.I32 if low32 <= value <= high32 else DType.I64
    return Constant(value=value, type=TileType(dtype), weak=True, loc=loc)


def _checked_constant(value: bool | int | float, like: Constant, loc: Location) -> Constant:
    """A folded constant of `like`'s dtype and weakness, range-checked."""
    dtype = like.type.dtype
    if like.weak and dtype.is_int:
        return _int_constant(int(value), loc)
    if dtype.is_int:
        value = _convert_constant(value, dtype, loc, explicit=False)
    return Constant(value=value, type=like.type, weak=like.weak, loc=loc)


def _convert_constant(
    value: bool | int | float, dtype: DType, loc: Location, explicit: bool, runs: bool = False
) -> bool | int | float:
    """A constant as `dtype`. `runs`: folds `.to(dtype)`, which gives what the conversion
    gives at run time (floats truncate and saturate, NaN gives 0; integers wrap); otherwise
    a value the type cannot hold is an error, and so is a fraction unless `explicit`."""
    if dtype is DType.I1:
        return bool(value)
    if dtype.is_float:
        return float(value)
    low, high = INT_RANGES[dtype]
    if runs:
        if isinstance(value, float):
            return 0 if math.isnan(value) else math.trunc(max(low, min(high, value)))
        return (int(value) - low) % (high - low + 1) + low
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TileError(f"cannot convert {value} to {dtype}", loc)
        if not explicit and value != int(value):
            raise TileError(f"the constant {value} is not an integer ({dtype})", loc)
    value = int(value)
    if not low <= value <= high:
        raise TileError(f"the constant {value} does not fit in {dtype}", loc)
    return value


_MAX_SHIFT = 64


def _fold_binary(op: str, lhs: Constant, rhs: Constant, dtype: DType, loc: Location) -> Constant:
    """Evaluate an operator on two weak literals, with Python semantics and range checks."""
    a, b = lhs.value, rhs.value
    operand_dtype = _promote(lhs, rhs)
    if op in ("div", "pow") or operand_dtype.is_float:
        a, b = float(a), float(b)
    else:
        a, b = int(a), int(b)
    try:
        if op in ("shl", "shr") and (b < 0 or b >= _MAX_SHIFT):
            raise TileError(f"shift count {b} is out of range", loc)
        if op == "pow" and isinstance(a, float):
            result: bool | int | float = math.pow(a, b) if a or b >= 0 else math.inf
        else:
            result = _PYTHON_OPERATORS[op](a, b)
    except ZeroDivisionError:
        raise TileError("division by zero in a constant expression", loc) from None
    except OverflowError:
        result = math.inf
    except ValueError:  # e.g. a negative number to a fractional power
        result = math.nan
    if dtype is DType.I1:
        result = bool(result)
        return Constant(value=result, type=TileType(DType.I1), weak=True, loc=loc)
    if isinstance(result, float):
        return Constant(value=result, type=TileType(DType.F32), weak=True, loc=loc)
    return _int_constant(int(result), loc)


_PYTHON_OPERATORS: dict[str, Callable] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "pow": lambda a, b: a**b,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b,
    "shr": lambda a, b: a >> b,
    "maximum": max,
    "minimum": min,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
}


def _fold_math(fn: str, x: bool | int | float) -> float | int:
    x = float(x)
    try:
        if fn == "abs":
            return abs(x)
        if fn == "rsqrt":
            return 1.0 / math.sqrt(x) if x else math.inf
        if fn == "sigmoid":
            return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0
        if fn == "gelu":
            return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))
        if fn == "exp2":
            return 2.0**x
        if fn == "log" and x == 0:
            return -math.inf
        if fn == "log2" and x == 0:
            return -math.inf
        return float(getattr(math, fn)(x))
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan
