"""The registry of builtin functions: each builtin is declared once, here, and everything the
compiler does with it is found from its declaration (docs/language.md, "Adding a builtin").

A declaration (`Builtin`) names

* `names`: the function name(s) the rule serves (a family, e.g. `sum`/`max`/`min`/`mean`,
  shares one rule that reads the name it was called by);
* `check`: its typing rule, `check(checker, call) -> checked.Expr`, a method of the kernel
  checker's mixins (`sema_builtins`, `sema_random`) or a function (`sema_atomics`,
  `sema_scan`): it binds the arguments, reports misuse at the argument, and builds checked
  nodes;
* `nodes` and `generate`: the checked nodes of its own that the rule builds, and their IR
  generation, `generate(gen, node, env) -> Value` (`irgen_builtins`, `irgen_scan`). A rule
  that builds only nodes of the language itself (constants, operators, loop indices: `zeros`,
  `maximum`, `tile_start`) has none, and `irgen` generates those as for any expression;
* `ops`: the IR ops it becomes, main op first. Each op's interpreter semantics is
  `tilec.interp.semantics.SEMANTICS[op]` and its lowering `tilec.lowering.llvm.LOWERINGS[op]`;
  `tests/unit/test_builtins_registry.py` checks that every op here has both, and that the
  `example` of each name generates its main op.

The checker's call dispatch (`CALLS`), the set of reserved names (`BUILTIN_NAMES`) and irgen's
dispatch for the nodes builtins build (`GENERATORS`) are derived from `REGISTRY`: nothing else
lists builtins.

This module sits above the rules and generators it names (it imports them; they do not import
it): `sema_calls`, `sema_expressions`, `sema_options` and `irgen` consume it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilec.dialects import arith, atomic, math, scan
from tilec.dialects import tile as T
from tilec.dialects.random import PhiloxOp
from tilec.frontend import checked
from tilec.frontend import irgen_builtins as gen
from tilec.frontend import syntax as ast
from tilec.frontend.irgen_scan import scan_expr
from tilec.frontend.sema_atomics import ATOMIC_BUILTINS, atomic_call
from tilec.frontend.sema_builtins import BuiltinChecks as Rules
from tilec.frontend.sema_random import RandomChecks
from tilec.frontend.sema_scan import ARG_REDUCTIONS, SCANS, arg_reduce_call, scan_call, topk_call
from tilec.ir.core import Operation

__all__ = ["BUILTIN_NAMES", "CALLS", "GENERATORS", "REGISTRY", "RESERVED_NAMES", "Builtin"]

Rule = Callable[[Any, ast.Call], checked.Expr]
Generate = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Builtin:
    """One builtin (or a family sharing a rule): see the module's docstring."""

    names: tuple[str, ...]
    check: Rule
    nodes: tuple[type[checked.Expr], ...]
    generate: Generate | None
    ops: tuple[type[Operation], ...]
    # A statement using the builtin inside `for tm, tn in tiles(M, N):` of the test kernel
    # (tests/unit/test_builtins_registry.py: x = a[tm, tn] is an f32 tile); {name} is the name.
    example: str


def _math(name: str, *ops: type[Operation], example: str = "out[tm, tn] = {name}(x)") -> Builtin:
    return Builtin((name,), Rules._math_call, (checked.Math,), gen.math_expr, ops, example)


REGISTRY: tuple[Builtin, ...] = (
    # element-wise math (docs/language.md, "Element-wise math")
    *(_math(name, op) for name, op in gen.UNARY_MATH_OPS.items()),
    _math("abs", math.AbsFOp, arith.SubIOp, arith.MaxSIOp),
    _math("sigmoid", arith.NegFOp, math.ExpOp, arith.AddFOp, arith.DivFOp),
    _math("gelu", math.ErfOp, arith.MulFOp, arith.AddFOp),
    Builtin(
        ("maximum",),
        Rules._min_max_call,
        (),
        None,
        (arith.MaximumFOp, arith.MaxSIOp),
        "out[tm, tn] = {name}(x, 0.0)",
    ),
    Builtin(
        ("minimum",),
        Rules._min_max_call,
        (),
        None,
        (arith.MinimumFOp, arith.MinSIOp),
        "out[tm, tn] = {name}(x, 0.0)",
    ),
    Builtin(
        ("where",),
        Rules._where_call,
        (checked.Select,),
        gen.select_expr,
        (T.SelectOp,),
        "out[tm, tn] = where(x > 0.0, x, 0.0)",
    ),
    # reductions
    Builtin(
        ("sum", "max", "min", "mean"),
        Rules._reduce_call,
        (checked.Reduce,),
        gen.reduce_expr,
        (T.ReduceOp, T.SelectOp, arith.SIToFPOp, arith.DivFOp),
        "v[tn] = {name}(x, axis=0)",
    ),
    # scans and arg-reductions
    Builtin(
        tuple(SCANS),
        scan_call,
        (checked.Scan,),
        scan_expr,
        (scan.ScanOp,),
        "out[tm, tn] = {name}(x, axis=1)",
    ),
    Builtin(
        tuple(ARG_REDUCTIONS),
        arg_reduce_call,
        (checked.ArgReduce,),
        scan_expr,
        (scan.ArgReduceOp, T.SelectOp),
        "r[tm] = {name}(x, axis=1)",
    ),
    Builtin(
        ("topk", "topk_indices"),
        topk_call,
        (checked.TopK,),
        scan_expr,
        (scan.TopKOp, T.SelectOp),
        "r[tm] = sum({name}(x, 4, axis=1), axis=1).to(i32)",
    ),
    # linear algebra
    Builtin(
        ("dot",),
        Rules._dot_call,
        (checked.Dot,),
        gen.dot_expr,
        (T.DotOp,),
        "out[tm, tn] = dot(x, b[tn, tn])",
    ),
    Builtin(
        ("transpose",),
        Rules._transpose_call,
        (checked.Transpose,),
        gen.transpose_expr,
        (T.TransposeOp,),
        "out[tm, tn] = transpose(t[tn, tm])",
    ),
    # creating tiles
    Builtin(
        ("zeros",),
        Rules._zeros_call,
        (),
        None,
        (T.FullOp, arith.ConstantOp),
        "out[tm, tn] = zeros([tm, tn])",
    ),
    Builtin(
        ("full",),
        Rules._full_call,
        (),
        None,
        (T.SplatOp, T.FullOp, arith.ConstantOp),
        "out[tm, tn] = full([tm, tn], a[0, 0])",
    ),
    Builtin(
        ("arange",),
        Rules._arange_call,
        (checked.Iota,),
        gen.iota_expr,
        (T.IotaOp,),
        "out[tm, 0] = sum(arange(16), axis=0).to(f32)",
    ),
    Builtin(
        ("offsets",),
        Rules._offsets_call,
        (checked.Iota,),  # added to the tile's start (a Binary of the language) for a loop variable
        gen.iota_expr,
        (T.IotaOp, arith.AddIOp),
        "out[tm, tn] = x + offsets(tn)[None, :].to(f32)",
    ),
    Builtin(
        ("tile_start", "tile_end"),
        Rules._tile_bound_call,
        (),
        None,
        (arith.IndexCastOp, arith.AddIOp),
        "out[tm, tn] = x + {name}(tn).to(f32)",
    ),
    # random numbers
    Builtin(
        ("rand", "randn", "randint"),
        RandomChecks._random_call,
        (checked.Philox,),
        gen.philox_expr,
        (PhiloxOp,),
        "out[tm, tn] = {name}(seed, offs).to(f32)",
    ),
    # atomics
    Builtin(
        tuple(name for name, kind in ATOMIC_BUILTINS.items() if kind != "cas"),
        atomic_call,
        (checked.Atomic,),
        gen.atomic_expr,
        (atomic.AtomicRMWOp, atomic.AtomicScatterOp),
        "{name}(out[tm, tn], x)",
    ),
    Builtin(
        ("atomic_cas",),
        atomic_call,
        (checked.Atomic,),
        gen.atomic_expr,
        (atomic.AtomicCasOp, atomic.AtomicScatterOp),
        "atomic_cas(flags[tm, tn], 0, 1)",
    ),
)

# Names the language reserves that are not calls: the loop iterable (`for t in tiles(N)`), the
# decorator of a kernel in a Python file, and the constant `inf`.
RESERVED_NAMES = ("tiles", "kernel", "inf")

# The rule of each callable builtin, by name: the checker's call dispatch.
CALLS: dict[str, Builtin] = {name: b for b in REGISTRY for name in b.names}

# Every name a kernel cannot bind or call as its own.
BUILTIN_NAMES = frozenset([*CALLS, *RESERVED_NAMES])


def _generators() -> dict[type[checked.Expr], Generate]:
    table: dict[type[checked.Expr], Generate] = {}
    for b in REGISTRY:
        for node in b.nodes:
            assert b.generate is not None, f"{b.names[0]} names nodes but no generator"
            if table.setdefault(node, b.generate) is not b.generate:
                raise AssertionError(f"{node.__name__} has two generators in the registry")
    return table


# irgen's generator of each checked node a builtin builds, by the node's class.
GENERATORS = _generators()
