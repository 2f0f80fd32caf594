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
readable dump in `tilec.frontend.dump`; this module is the checker, `_KernelChecker`, whose
rules are split by concern: kernel options and the signature (`sema_options`), loops,
statements and tensor accesses (`sema_statements`), expressions (`sema_expressions`), calls
(`sema_calls`, which dispatches each builtin to the typing rule its declaration in the registry
`tilec.frontend.builtins` names: `sema_builtins`, `sema_random`, `sema_atomics`, `sema_scan`),
and what they share -- scopes, typing helpers (`sema_common`). The checked tree is made
for IR generation to walk without re-deriving anything: each
expression carries its dtype and shape, implicit conversions are explicit `Cast`/`Broadcast`
nodes (so the operands of a `Binary` have identical types), every loop says whether it is the
grid or sequential, and reductions and dots say which lanes of the axes they combine are real.
"""

from __future__ import annotations

from collections.abc import Mapping

from tilec.diagnostics import Location, TileError
from tilec.frontend import syntax as ast
from tilec.frontend.checked import (
    COMPARISONS,
    DTYPES,
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
    Philox,
    Program,
    RangeVar,
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
from tilec.frontend.generics import bind_dtypes
from tilec.frontend.sema_atomics import check_atomic_races
from tilec.frontend.sema_builtins import BuiltinChecks
from tilec.frontend.sema_calls import CallChecks
from tilec.frontend.sema_common import (
    _Binding,
    _count_assignments,
    _expr_loc,
    _LoopFrame,
    _Pin,
)
from tilec.frontend.sema_control import ControlChecks
from tilec.frontend.sema_expressions import ExpressionChecks
from tilec.frontend.sema_options import OptionChecks
from tilec.frontend.sema_random import RandomChecks
from tilec.frontend.sema_statements import StatementChecks
from tilec.frontend.sema_uniform import check_uniformity

__all__ = [
    "COMPARISONS",
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
    "Philox",
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
            bound = bind_dtypes(definition, options)
            kernels.append(_KernelChecker(bound, kernel_defs, options).check())
        except RecursionError:
            raise TileError("expression is too deeply nested", definition.name_loc) from None
    return Program(tuple(kernels), module.filename)


class _KernelChecker(
    OptionChecks,
    StatementChecks,
    ControlChecks,
    ExpressionChecks,
    CallChecks,
    BuiltinChecks,
    RandomChecks,
):
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
        self.range_vars: dict[str, RangeVar] = {}  # the variables of range() loops, by name
        self.tiled_by: dict[str, LoopVar] = {}  # canonical dim name → the var tiling it now
        self.tiled_at: dict[str, Location] = {}  # dim → where a tiles() loop first tiled it
        self.whole_at: dict[str, Location] = {}  # dim → first use of the whole dimension
        self.left_scope: dict[str, Location] = {}  # name → loop it was local to
        # name → (message, hint) for a name an `if` leaves undefined after it
        self.left_why: dict[str, tuple[str, str]] = {}
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
        check_uniformity(grid)
        check_atomic_races(grid)
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
