"""The syntax tree of a tile program: plain slotted dataclasses, each node with a `Location`,
built by the parser (`tilec.frontend.syntax`, which re-exports them: the frontend names them
`syntax.Name`, `syntax.Call`, ...). The tree is purely syntactic: names are not resolved and
nothing is typed; `sema` does that."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from tilec.diagnostics import Location

__all__ = [
    "Assign",
    "Attribute",
    "AugAssign",
    "BinOp",
    "BoolLit",
    "BoolOp",
    "Call",
    "Compare",
    "DictExpr",
    "EllipsisLit",
    "Expr",
    "ExprStmt",
    "FloatLit",
    "For",
    "FunctionDef",
    "If",
    "IntLit",
    "Keyword",
    "ListExpr",
    "Module",
    "Name",
    "NoneLit",
    "Param",
    "Pass",
    "Slice",
    "Stmt",
    "StrLit",
    "Subscript",
    "TupleExpr",
    "UnaryOp",
]

# Nodes are plain slotted dataclasses (cheap to build: the parser makes thousands per file).
# They are not meant to be mutated after parsing.


@dataclass(slots=True, eq=False)
class Name:
    id: str
    loc: Location


@dataclass(slots=True, eq=False)
class IntLit:
    value: int
    loc: Location


@dataclass(slots=True, eq=False)
class FloatLit:
    value: float
    loc: Location


@dataclass(slots=True, eq=False)
class BoolLit:
    value: bool
    loc: Location


@dataclass(slots=True, eq=False)
class NoneLit:
    loc: Location


@dataclass(slots=True, eq=False)
class StrLit:
    value: str
    loc: Location


@dataclass(slots=True, eq=False)
class EllipsisLit:
    loc: Location


@dataclass(slots=True, eq=False)
class BinOp:
    """`left op right`; `op` is the operator's text ('+', '@', '//', ...), `loc` its position."""

    op: str
    left: Expr
    right: Expr
    loc: Location


@dataclass(slots=True, eq=False)
class UnaryOp:
    op: str  # '-', '+' or '~'
    operand: Expr
    loc: Location


@dataclass(slots=True, eq=False)
class BoolOp:
    """`a and b`, `a or b` (two operands; longer chains nest to the left) and `not a`
    (`right` is None); `loc` is the keyword's position."""

    op: str  # 'and', 'or', 'not'
    left: Expr
    right: Expr | None
    loc: Location


@dataclass(slots=True, eq=False)
class Compare:
    """One comparison (chains are rejected by the parser); `loc` is the operator's position."""

    op: str  # '<', '<=', '>', '>=', '==', '!='
    left: Expr
    right: Expr
    loc: Location


@dataclass(slots=True, eq=False)
class Keyword:
    name: str
    value: Expr
    loc: Location  # of the name


@dataclass(slots=True, eq=False)
class Call:
    func: Expr
    args: tuple[Expr, ...]
    keywords: tuple[Keyword, ...]
    loc: Location  # of the callee (the attribute name for method calls)


@dataclass(slots=True, eq=False)
class Attribute:
    value: Expr
    attr: str
    loc: Location  # of the attribute name


@dataclass(slots=True, eq=False)
class Slice:
    lower: Expr | None
    upper: Expr | None
    step: Expr | None
    loc: Location  # of the first ':'


@dataclass(slots=True, eq=False)
class Subscript:
    value: Expr
    indices: tuple[Expr | Slice, ...]
    loc: Location  # of the subscripted expression's start


@dataclass(slots=True, eq=False)
class ListExpr:
    elts: tuple[Expr, ...]
    loc: Location  # of '['


@dataclass(slots=True, eq=False)
class TupleExpr:
    elts: tuple[Expr, ...]
    loc: Location


@dataclass(slots=True, eq=False)
class DictExpr:
    keys: tuple[Expr, ...]
    values: tuple[Expr, ...]
    loc: Location  # of '{'


Expr = Union[
    Name,
    IntLit,
    FloatLit,
    BoolLit,
    NoneLit,
    StrLit,
    EllipsisLit,
    BinOp,
    UnaryOp,
    BoolOp,
    Compare,
    Call,
    Attribute,
    Subscript,
    ListExpr,
    TupleExpr,
    DictExpr,
]


@dataclass(slots=True, eq=False)
class ExprStmt:
    value: Expr
    loc: Location


@dataclass(slots=True, eq=False)
class Assign:
    target: Expr
    value: Expr
    loc: Location  # of the target


@dataclass(slots=True, eq=False)
class AugAssign:
    target: Expr
    op: str  # the binary operator without '=': '+', '@', ...
    value: Expr
    loc: Location  # of the operator


@dataclass(slots=True, eq=False)
class Pass:
    loc: Location


@dataclass(slots=True, eq=False)
class For:
    targets: tuple[Name, ...]
    iter: Expr
    body: tuple[Stmt, ...]
    loc: Location  # of 'for'


@dataclass(slots=True, eq=False)
class If:
    """`if test: body else: orelse`; an `elif` is an `If` alone in `orelse`."""

    test: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    loc: Location  # of 'if' (or 'elif')


@dataclass(slots=True, eq=False)
class Param:
    name: str
    annotation: Expr | None
    loc: Location


@dataclass(slots=True, eq=False)
class FunctionDef:
    name: str
    params: tuple[Param, ...]
    returns: Expr | None
    body: tuple[Stmt, ...]
    decorators: tuple[Expr, ...]
    loc: Location  # of 'def'
    name_loc: Location


Stmt = Union[ExprStmt, Assign, AugAssign, Pass, For, If, FunctionDef]


@dataclass(slots=True, eq=False)
class Module:
    body: tuple[Stmt, ...]
    filename: str
