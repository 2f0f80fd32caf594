"""Parsing: tile DSL text → a small syntax tree of dataclasses, each node with a `Location`.

This module owns the lark parser for `grammar/tile.lark` (made once per process), its LALR
tables, the indentation post-lexer, the translation of lark's exceptions into `TileError`s
worded for people ("expected ':' after for-loop header"), and the rejection of Python forms
that tile kernels do not support (while, lambda, class, comprehensions, ...), which the grammar
parses only so that they can be refused here with a precise location and a hint.

The tables ship with the grammar, generated, as `grammar/tile.tables.json`, so that no run
analyses the grammar; after changing `tile.lark` (or the lark version), regenerate them with

    python -m tilec.grammar --write-tables

A tables file made for another grammar text or lark is not used: the parser then comes from
tilec's cache directory, or from the grammar itself (see "parser tables" below).

The tree is purely syntactic: names are not resolved and nothing is typed; `sema` does that.
"""

from __future__ import annotations

import ast as python_ast
import hashlib
import json
import keyword
import sys
import threading
import warnings
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from lark import Lark, Token, Transformer
from lark import __version__ as lark_version
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.grammar import Rule
from lark.lark import PostLex
from lark.lexer import TerminalDef

from tilec.cache import cache_dir, write_atomically
from tilec.diagnostics import Location, TileError, register_source
from tilec.grammar import TABLES_COMMAND, TABLES_PATH, grammar_text

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
    "parse_source",
    "tables_json",
]


# ---------------------------------------------------------------------------- syntax tree
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


# ---------------------------------------------------------------------------- the parser

_OPENERS = {"LPAR": "RPAR", "LSQB": "RSQB", "LBRACE": "RBRACE"}
_CLOSERS = {"RPAR", "RSQB", "RBRACE"}
_PYTHON_KEYWORDS = frozenset(keyword.kwlist)
# Python reads a tab as reaching the next multiple of 8; so does lark's reference Indenter.
_TAB_WIDTH = 8


class _Position:
    """Maps lark's positions (in the text as parsed) to `Location`s in the user's file."""

    __slots__ = ("col_offset", "filename", "line_offset")

    def __init__(self, filename: str, line_offset: int, col_offset: int):
        self.filename = filename
        self.line_offset = line_offset
        self.col_offset = col_offset

    def at(self, line: int, column: int) -> Location:
        # The parser sees the text with one '\n' prepended (see `parse_source`): hence the -1.
        return Location(self.filename, line - 1 + self.line_offset, column + self.col_offset)

    def of(self, token: Token) -> Location:
        return self.at(token.line, token.column)


class _Indenter(PostLex):
    """Python-style INDENT/DEDENT from newlines, with bracket tracking.

    Unlike lark's stock `Indenter` it reports bracket and indentation mistakes as `TileError`s
    with positions, places INDENT/DEDENT tokens on the first character of the new line (so an
    "unexpected indent" points where the user looks), and remembers what the error translator
    needs: the open brackets, the first token of every logical line, and the last two tokens.
    """

    always_accept = ("_NEWLINE",)

    def __init__(self) -> None:
        self.position = _Position("", 0, 0)
        self.reset()

    def reset(self) -> None:
        self.brackets: list[Token] = []
        self.indents: list[int] = [0]
        self.line_heads: list[Token] = []
        self.last: Token | None = None
        self.previous: Token | None = None

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        self.reset()
        return self._process(stream)

    def _emit(self, token: Token) -> Token:
        self.previous, self.last = self.last, token
        return token

    def _process(self, stream: Iterator[Token]) -> Iterator[Token]:
        at_line_start = True
        newline: Token | None = None
        for token in stream:
            kind = token.type
            if kind == "_NEWLINE":
                if self.brackets:
                    continue  # inside brackets, lines join as in Python
                newline = token
                yield self._emit(token)
                yield from self._indentation(token)
                at_line_start = True
                continue
            if at_line_start:
                self.line_heads.append(token)
                at_line_start = False
            if kind in _OPENERS:
                self.brackets.append(token)
            elif kind in _CLOSERS:
                if not self.brackets:
                    raise TileError(f"unmatched '{token.value}'", self.position.of(token))
                opener = self.brackets.pop()
                if _OPENERS[opener.type] != kind:
                    raise TileError(
                        f"closing '{token.value}' does not match '{opener.value}'",
                        self.position.of(token),
                        notes=((f"'{opener.value}' opened here", self.position.of(opener)),),
                    )
            yield self._emit(token)
        if self.brackets:
            opener = self.brackets[-1]
            raise TileError(f"'{opener.value}' was never closed", self.position.of(opener))
        while len(self.indents) > 1:
            self.indents.pop()
            yield self._emit(self._layout_token("_DEDENT", newline))

    def _layout_token(self, kind: str, newline: Token | None) -> Token:
        """An INDENT/DEDENT placed at the first character after `newline`."""
        if newline is None:
            return Token(kind, "", 0, 1, 1, 1, 1, 0)
        return Token(
            kind,
            "",
            newline.end_pos,
            newline.end_line,
            newline.end_column,
            newline.end_line,
            newline.end_column,
            newline.end_pos,
        )

    def _indentation(self, newline: Token) -> Iterator[Token]:
        indent_text = newline.value.rsplit("\n", 1)[1]
        width = 0
        for ch in indent_text:
            width = (width // _TAB_WIDTH + 1) * _TAB_WIDTH if ch == "\t" else width + 1
        if width > self.indents[-1]:
            self.indents.append(width)
            yield self._emit(self._layout_token("_INDENT", newline))
            return
        while width < self.indents[-1]:
            self.indents.pop()
            yield self._emit(self._layout_token("_DEDENT", newline))
        if width != self.indents[-1]:
            raise TileError(
                "unindent does not match any outer indentation level",
                self.position.at(newline.end_line, newline.end_column),
            )


def _unsupported(what: str, loc: Location, hint: str | None = None) -> TileError:
    return TileError(f"{what} not supported in tile kernels", loc, hint=hint)


_STATEMENT_HINTS = {
    "while": (
        "'while' loops are",
        "loop over a dimension in tiles with 'for t in tiles(N):'",
    ),
    "try": ("'try' statements are", "tile kernels cannot raise or catch exceptions"),
    "with": ("'with' statements are", None),
    "class": ("classes are", "a .tile file holds kernel definitions ('def') only"),
    "async": ("'async' is", None),
    "break": ("'break' is", "tiles() loops always run over the whole dimension"),
    "continue": ("'continue' is", "mask the values instead, with where(cond, a, b)"),
    "raise": ("'raise' is", "tile kernels cannot raise exceptions"),
    "del": ("'del' is", None),
    "assert": ("'assert' is", None),
    "global": ("'global' is", "kernels see only their arguments and local names"),
    "nonlocal": ("'nonlocal' is", "kernels see only their arguments and local names"),
    "import": ("'import' is", "tile builtins (tiles, zeros, exp, sum, ...) are always in scope"),
    "from": ("'import' is", "tile builtins (tiles, zeros, exp, sum, ...) are always in scope"),
    "yield": ("'yield' is", "write results into an output tensor: out[t] = value"),
    "await": ("'await' is", None),
}


class _AstBuilder(Transformer):
    """Inline lark callbacks (one per grammar rule) that build the syntax tree directly.

    Called by the LALR parser at every reduction, so no intermediate parse tree is made.
    """

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)
        self.position = _Position("", 0, 0)

    # -- helpers

    def _loc(self, token: Token) -> Location:
        return self.position.of(token)

    def _reject_statement(self, token: Token) -> TileError:
        what, hint = _STATEMENT_HINTS[token.value]
        return _unsupported(what, self._loc(token), hint)

    def _fold_binops(self, children: list) -> Expr:
        result = children[0]
        for i in range(1, len(children), 2):
            op = children[i]
            result = BinOp(op.value, result, children[i + 1], self._loc(op))
        return result

    # -- module and statements

    def start(self, children: list) -> list:
        return _flatten_statements(children)

    def suite(self, children: list) -> tuple:
        return tuple(_flatten_statements(children))

    def simple_stmt(self, children: list) -> list:
        return [c for c in children if c is not None]

    def expr_stmt(self, children: list) -> ExprStmt:
        (value,) = children
        return ExprStmt(value, _loc_of(value))

    def assign(self, children: list) -> Assign:
        if len(children) > 2:
            raise _unsupported(
                "chained assignment (a = b = value) is",
                _loc_of(children[1]),
                "assign one name per statement",
            )
        target, value = children
        return Assign(target, value, _loc_of(target))

    def augassign(self, children: list) -> AugAssign:
        target, op, value = children
        return AugAssign(target, op.value[:-1], value, self._loc(op))

    def annassign(self, children: list) -> None:
        raise _unsupported(
            "variable annotations are",
            _loc_of(children[0]),
            "types are inferred: write 'x = value'",
        )

    def pass_stmt(self, children: list) -> Pass:
        return Pass(self._loc(children[0]))

    def return_stmt(self, children: list) -> None:
        token, value = children
        if value is not None:
            raise TileError(
                "tile kernels cannot return a value",
                self._loc(token),
                hint="write results into an output tensor argument: out[t] = value",
            )
        raise _unsupported("'return' is", self._loc(token), "a kernel ends at the end of its body")

    def _reject_first_token(self, children: list) -> None:
        raise self._reject_statement(children[0])

    break_stmt = continue_stmt = raise_stmt = del_stmt = assert_stmt = _reject_first_token
    global_stmt = nonlocal_stmt = import_stmt = _reject_first_token
    while_stmt = try_stmt = with_stmt = classdef = async_stmt = _reject_first_token
    yield_expr = yield_from = await_expr = _reject_first_token

    def if_stmt(self, children: list) -> If:
        # IF test suite (ELIF test suite)* [ELSE suite]: the placeholders are None without
        # an 'else'.
        *arms, else_token, orelse = children
        orelse = () if else_token is None else orelse
        for i in range(len(arms) - 3, -1, -3):
            keyword_token, test, body = arms[i : i + 3]
            orelse = (If(test, body, orelse, self._loc(keyword_token)),)
        return orelse[0]

    def for_stmt(self, children: list) -> For:
        for_token, targets, _in, iterable, body = children[:5]
        if len(children) > 5 and children[5] is not None:
            raise _unsupported(
                "'else' after a for-loop is",
                self._loc(children[5]),
                "tiles() loops always run to completion; put the code after the loop",
            )
        elements = targets.elts if isinstance(targets, TupleExpr) else (targets,)
        for target in elements:
            if not isinstance(target, Name):
                raise TileError(
                    "a loop variable must be a plain name",
                    _loc_of(target),
                    hint="write 'for tm, tn in tiles(M, N):'",
                )
        return For(tuple(elements), iterable, body, self._loc(for_token))

    def funcdef(self, children: list) -> FunctionDef:
        def_token, name, params, returns, body = children
        return FunctionDef(
            name.value,
            tuple(params or ()),
            returns,
            body,
            (),
            self._loc(def_token),
            self._loc(name),
        )

    def parameters(self, children: list) -> list:
        return children

    def param(self, children: list) -> Param:
        name, annotation, default = children
        if default is not None:
            raise _unsupported(
                "default argument values are",
                _loc_of(default),
                "pass every argument at launch; pin compile-time choices with @kernel(...)",
            )
        return Param(name.value, annotation, self._loc(name))

    def star_param(self, children: list) -> None:
        if len(children) < 2 or children[1] is None:
            raise _unsupported(
                "keyword-only markers ('*') are",
                self._loc(children[0]),
                "list every kernel argument by name, with its type",
            )
        raise _unsupported(
            "'*args' parameters are",
            self._loc(children[0]),
            "list every kernel argument by name, with its type",
        )

    def star_star_param(self, children: list) -> None:
        raise _unsupported(
            "'**kwargs' parameters are",
            self._loc(children[0]),
            "list every kernel argument by name, with its type",
        )

    def slash_param(self, children: list) -> None:
        raise _unsupported("positional-only markers ('/') are", self._loc(children[0]))

    def decorator(self, children: list) -> Expr:
        return children[1]

    def decorated(self, children: list) -> FunctionDef:
        *decorators, definition = children
        definition.decorators = tuple(decorators)
        return definition

    # -- expressions that tile kernels do not have

    def ternary(self, children: list) -> None:
        raise _unsupported(
            "conditional expressions ('a if c else b') are",
            self._loc(children[1]),
            "use where(c, a, b)",
        )

    def walrus(self, children: list) -> None:
        raise _unsupported(
            "assignment expressions (':=') are",
            self._loc(children[0]),
            "assign in a statement of its own",
        )

    def lambdef(self, children: list) -> None:
        raise _unsupported("lambda is", self._loc(children[0]), "write the expression inline")

    def _bool_chain(self, children: list) -> BoolOp:
        result = children[0]
        for i in range(1, len(children), 2):
            keyword_token = children[i]
            result = BoolOp(keyword_token.value, result, children[i + 1], self._loc(keyword_token))
        return result

    or_test = and_test = _bool_chain

    def not_test(self, children: list) -> BoolOp:
        keyword_token, operand = children
        return BoolOp("not", operand, None, self._loc(keyword_token))

    def comp_for(self, children: list) -> None:
        for_token = next(c for c in children if isinstance(c, Token) and c.type == "FOR")
        raise _unsupported(
            "comprehensions are",
            self._loc(for_token),
            "tiles are whole values: write the element-wise expression directly",
        )

    def star_expr(self, children: list) -> None:
        raise _unsupported("starred expressions ('*x') are", self._loc(children[0]))

    def star_argument(self, children: list) -> None:
        raise _unsupported(
            "'*args' arguments are", self._loc(children[0]), "pass each argument explicitly"
        )

    def star_star_argument(self, children: list) -> None:
        raise _unsupported(
            "'**kwargs' arguments are", self._loc(children[0]), "pass each argument explicitly"
        )

    def star_star_item(self, children: list) -> None:
        raise _unsupported("'**' in dict literals is", self._loc(children[0]))

    def set(self, children: list) -> None:
        raise _unsupported("set literals are", self._loc(children[0]))

    # -- expressions

    def comparison(self, children: list) -> Compare:
        exprs = []
        ops: list[list[Token]] = []
        for child in children:
            if isinstance(child, Token):
                if exprs and len(ops) < len(exprs):
                    ops.append([child])
                else:
                    ops[-1].append(child)
            else:
                exprs.append(child)
        first = ops[0]
        text = " ".join(t.value for t in first)
        if text in ("in", "not in", "is", "is not"):
            raise _unsupported(
                f"'{text}' is",
                self._loc(first[0]),
                "compare values with ==, !=, <, <=, > or >=" if text.startswith("is") else None,
            )
        if len(ops) > 1:
            raise _unsupported(
                "chained comparisons are",
                self._loc(ops[1][0]),
                "combine two comparisons with '&': (a < b) & (b < c)",
            )
        return Compare(text, exprs[0], exprs[1], self._loc(first[0]))

    expr = xor_expr = and_expr = shift_expr = arith_expr = term = _fold_binops

    def power(self, children: list) -> BinOp:
        base, op, exponent = children
        return BinOp("**", base, exponent, self._loc(op))

    def unary(self, children: list) -> UnaryOp:
        op, operand = children
        return UnaryOp(op.value, operand, self._loc(op))

    def call(self, children: list) -> Call:
        func, arguments = children
        args: list[Expr] = []
        keywords: list[Keyword] = []
        for argument in arguments or ():
            if isinstance(argument, Keyword):
                if any(k.name == argument.name for k in keywords):
                    raise TileError(f"keyword argument '{argument.name}' is repeated", argument.loc)
                keywords.append(argument)
            elif keywords:
                raise TileError("positional argument follows keyword argument", _loc_of(argument))
            else:
                args.append(argument)
        return Call(func, tuple(args), tuple(keywords), _loc_of(func))

    def arguments(self, children: list) -> list:
        return children

    def generator_argument(self, children: list) -> None:  # pragma: no cover - comp_for raises
        raise _unsupported("comprehensions are", _loc_of(children[0]))

    def keyword_argument(self, children: list) -> Keyword:
        name, value = children
        return Keyword(name.value, value, self._loc(name))

    def subscript(self, children: list) -> Subscript:
        value, indices = children
        return Subscript(value, tuple(indices), _loc_of(value))

    def subscriptlist(self, children: list) -> list:
        return [c for c in children if c is not None]

    def slice(self, children: list) -> Slice:
        parts: list[Expr | None] = [None, None, None]
        part = 0
        first_colon: Token | None = None
        for child in children:
            if isinstance(child, Token):
                first_colon = first_colon or child
                part += 1
            elif child is not None:
                parts[part] = child
        assert first_colon is not None
        return Slice(parts[0], parts[1], parts[2], self._loc(first_colon))

    def attribute(self, children: list) -> Attribute:
        value, name = children
        return Attribute(value, name.value, self._loc(name))

    def empty_tuple(self, children: list) -> TupleExpr:
        return TupleExpr((), self._loc(children[0]))

    def tuple(self, children: list) -> TupleExpr:
        elts = tuple(c for c in children[1:] if c is not None)
        return TupleExpr(elts, _loc_of(elts[0]))

    def testlist_tuple(self, children: list) -> TupleExpr:
        elts = tuple(c for c in children if c is not None)
        return TupleExpr(elts, _loc_of(elts[0]))

    tuple_target = testlist_tuple

    def list(self, children: list) -> ListExpr:
        return ListExpr(tuple(c for c in children[1:] if c is not None), self._loc(children[0]))

    def dict(self, children: list) -> DictExpr:
        pairs = [c for c in children[1:] if c is not None]
        return DictExpr(
            tuple(k for k, _ in pairs), tuple(v for _, v in pairs), self._loc(children[0])
        )

    def key_value(self, children: list) -> tuple[Expr, Expr]:
        return children[0], children[1]

    def name(self, children: list) -> Name:
        (token,) = children
        return Name(token.value, self._loc(token))

    def number(self, children: list) -> IntLit | FloatLit:
        (token,) = children
        text = token.value.replace("_", "")
        loc = self._loc(token)
        kind = token.type
        if kind == "IMAG_NUMBER":
            raise _unsupported("complex numbers are", loc)
        if kind == "FLOAT_NUMBER":
            return FloatLit(float(text), loc)
        return IntLit(int(text, 0) if kind != "DEC_NUMBER" else int(text), loc)

    def string(self, children: list) -> StrLit:
        parts = []
        for token in children:
            prefix = token.value[: len(token.value) - len(token.value.lstrip("rRuUbBfF"))]
            if "f" in prefix.lower():
                raise _unsupported("f-strings are", self._loc(token))
            if "b" in prefix.lower():
                raise _unsupported("bytes literals are", self._loc(token))
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    parts.append(python_ast.literal_eval(token.value))
            except (SyntaxError, ValueError) as error:
                raise TileError("invalid string literal", self._loc(token)) from error
        return StrLit("".join(parts), self._loc(children[0]))

    def ellipsis(self, children: list) -> EllipsisLit:
        return EllipsisLit(self._loc(children[0]))

    def none(self, children: list) -> NoneLit:
        return NoneLit(self._loc(children[0]))

    def true(self, children: list) -> BoolLit:
        return BoolLit(True, self._loc(children[0]))

    def false(self, children: list) -> BoolLit:
        return BoolLit(False, self._loc(children[0]))

    def paren_yield(self, children: list) -> None:  # pragma: no cover - yield_expr raises
        raise _unsupported("'yield' is", self._loc(children[0]))


def _flatten_statements(children: list) -> list:
    statements = []
    for child in children:
        if isinstance(child, (list, tuple)):
            statements.extend(child)
        elif child is not None:
            statements.append(child)
    return statements


def _loc_of(node: object) -> Location:
    loc = getattr(node, "loc", None)
    if isinstance(loc, Location):
        return loc
    raise AssertionError(f"syntax node without a location: {node!r}")


# ---------------------------------------------------------------------------- parser tables
# The LALR tables come, in this order, from `grammar/tile.tables.json` (generated, shipped in
# the package) when its header names this grammar text and this lark; from tilec's cache
# directory (a pickle written by an earlier run); or from analysing the grammar (about 0.4 s,
# most of the start-up time of a `tilec compile`), after which they are written to the cache.

# The options the tables are analysed with; the runtime ones are given on every load.
_TABLE_OPTIONS = {"parser": "lalr", "lexer": "contextual", "maybe_placeholders": True}


def _tables_header(grammar: str) -> dict[str, object]:
    """What the shipped tables file must say of itself to be used for `grammar`."""
    return {
        "generated_by": TABLES_COMMAND,
        "grammar_sha256": hashlib.sha256(grammar.encode()).hexdigest(),
        "lark_version": lark_version,
        "parser_options": _TABLE_OPTIONS,
    }


def tables_json(grammar: str) -> str:
    """The text of the shipped tables file for `grammar`: a header and lark's tables.

    The tables are lark's own serialized form (`Lark.memo_serialize`, what `Lark.save`
    pickles), with the LALR states numbered in a fixed order and the sets sorted, so that the
    same grammar and lark give the same file whatever PYTHONHASHSEED and Python.
    """
    # Of the runtime options only the post-lexer's always_accept shapes the tables.
    parser = Lark(grammar, **_TABLE_OPTIONS, postlex=_Indenter())
    data, memo = parser.memo_serialize([TerminalDef, Rule])
    data["options"] = {k: v for k, v in data["options"].items() if k != "postlex"}
    data["parser"]["parser"] = _number_states_canonically(data["parser"]["parser"])
    for entry in memo.values():
        if "pattern" in entry:  # a terminal: its regexp flags are a set
            entry["pattern"]["flags"] = sorted(entry["pattern"]["flags"])
    document = {"header": _tables_header(grammar), "tables": {"data": data, "memo": memo}}
    return json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n"


def _number_states_canonically(table: dict) -> dict:
    """lark's serialized parse table with its states and tokens numbered in a fixed order.

    lark numbers the states in the iteration order of a set of item sets, which follows
    Python's string hashes. Here they are numbered breadth-first from the start state, each
    state's transitions taken in the order of their symbols' names, and the tokens (the
    symbols) in the order of their names. An action is (0, next state) for a shift or a goto,
    (1, rule) for a reduction.
    """
    names = table["tokens"]
    states = {
        state: {names[token]: action for token, action in actions.items()}
        for state, actions in table["states"].items()
    }
    number: dict[int, int] = {}
    queue = deque(table["start_states"][start] for start in sorted(table["start_states"]))
    for state in queue:
        number.setdefault(state, len(number))
    while queue:
        actions = states[queue.popleft()]
        for symbol in sorted(actions):
            kind, target = actions[symbol]
            if kind == 0 and target not in number:
                number[target] = len(number)
                queue.append(target)
    if len(number) != len(states):  # pragma: no cover - every LR(0) state has a way in
        raise AssertionError("parse table: a state is not reachable from the start state")
    symbols = sorted({symbol for actions in states.values() for symbol in actions})
    token = {symbol: i for i, symbol in enumerate(symbols)}
    renumbered = {}
    for state in sorted(states, key=number.__getitem__):
        actions = {}
        for symbol in sorted(states[state]):
            kind, target = states[state][symbol]
            actions[token[symbol]] = [kind, number[target] if kind == 0 else target]
        renumbered[number[state]] = actions
    return {
        **table,
        "tokens": dict(enumerate(symbols)),
        "states": renumbered,
        "start_states": {start: number[s] for start, s in table["start_states"].items()},
        "end_states": {start: number[s] for start, s in table["end_states"].items()},
    }


def _load_shipped_tables(path: Path, grammar: str, runtime: dict) -> Lark | None:
    """The parser from the shipped tables file, or None when it is absent, unreadable, or
    made for another grammar text, other options or another lark."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if document["header"] != _tables_header(grammar):
            return None
        tables = document["tables"]
        # JSON keys are strings; lark's memo, token and state numbers are ints.
        table = tables["data"]["parser"]["parser"]
        table["tokens"] = {int(k): v for k, v in table["tokens"].items()}
        table["states"] = {
            int(state): {int(token): action for token, action in actions.items()}
            for state, actions in table["states"].items()
        }
        tables["memo"] = {int(k): v for k, v in tables["memo"].items()}
        # Lark.load takes no options; _load is the loader behind lark's cache= and standalone.
        return Lark.__new__(Lark)._load(tables, **runtime)
    except Exception:  # missing or damaged: fall back (test_grammar_tables checks it is used)
        return None


def _load_or_build(grammar: str, runtime: dict, shipped_tables: Path | None) -> tuple[Lark, str]:
    """The LALR parser for `grammar`, and where its tables came from: "shipped", "cache" or
    "built". A cache file's name holds a hash of the grammar and the options, and the lark
    and Python versions, so a file is only ever read by the tilec it was made for; one that
    cannot be loaded is rebuilt and replaced."""
    if shipped_tables is not None:
        parser = _load_shipped_tables(shipped_tables, grammar, runtime)
        if parser is not None:
            return parser, "shipped"
    directory = cache_dir()
    path = None
    if directory is not None:
        key = hashlib.sha256((grammar + repr(_TABLE_OPTIONS)).encode()).hexdigest()[:16]
        python = "".join(map(str, sys.version_info[:2]))
        path = directory / f"tile-parser-{key}-lark{lark_version}-py{python}.pickle"
        try:
            with open(path, "rb") as tables:
                return Lark.__new__(Lark)._load(tables, **runtime), "cache"
        except Exception:  # missing, damaged, or from another lark: build it (again)
            pass
    parser = Lark(grammar, **_TABLE_OPTIONS, **runtime)
    if path is not None:

        def save(fresh: Path) -> None:
            with open(fresh, "wb") as tables:
                parser.save(tables, exclude_options=tuple(runtime))

        # Written under another name, then renamed: concurrent readers see a whole file.
        write_atomically(path, save)
    return parser, "built"


class _Parser:
    """The lark parser for the tile grammar, built once, plus the error translator.

    `shipped_tables` is the tables file to try first (None: go straight to the user cache and
    building, as the benchmarks and tests do); `tables_source` says where the tables came from:
    "shipped", "cache" or "built".
    """

    def __init__(self, shipped_tables: Path | None = TABLES_PATH) -> None:
        self.indenter = _Indenter()
        self.builder = _AstBuilder()
        # What cannot be stored with the tables is given again on every load (as lark's own
        # cache= does).
        runtime = {
            "postlex": self.indenter,
            "transformer": self.builder,
            "lexer_callbacks": {"NAME": self._check_name},
        }
        self.lark, self.tables_source = _load_or_build(grammar_text(), runtime, shipped_tables)
        self.literals = {
            t.name: t.pattern.value
            for t in self.lark.terminals
            if t.pattern.type == "str" and not t.name.startswith("_")
        }
        # The parser, its post-lexer and its builder keep per-parse state.
        self.lock = threading.Lock()

    def _check_name(self, token: Token) -> Token:
        # The contextual lexer reads a keyword as NAME where the keyword cannot appear.
        if token.value in _PYTHON_KEYWORDS:
            raise TileError(f"unexpected keyword '{token.value}'", self.indenter.position.of(token))
        return token

    def parse(self, text: str, position: _Position) -> list:
        with self.lock:
            self.indenter.position = position
            self.builder.position = position
            try:
                # The leading '\n' makes an indented first line an INDENT token, so that it is
                # reported as an unexpected indent like every other line.
                return self.lark.parse("\n" + text + "\n")
            except UnexpectedInput as error:
                raise self.translate(error, text, position) from None
            except LarkError as error:  # pragma: no cover - lark internals
                raise TileError(f"invalid syntax ({error})", position.at(2, 1)) from None

    # -- turning lark's exceptions into messages for people

    def translate(self, error: UnexpectedInput, text: str, position: _Position) -> TileError:
        unclosed = _first_unclosed_bracket(text)
        if isinstance(error, UnexpectedCharacters):
            error_offset = error.pos_in_stream - 1
            if unclosed is not None and unclosed[0] < error_offset:
                return self._never_closed(unclosed, text, position)
            return _bad_character(text, error_offset, position.at(error.line, error.column))
        if not isinstance(error, UnexpectedToken):  # pragma: no cover - LALR raises only these
            return TileError("invalid syntax", position.at(error.line, error.column))
        token = error.token
        token_offset = (token.start_pos or 0) - 1 if token.type != "$END" else len(text)
        if unclosed is not None and unclosed[0] < token_offset:
            return self._never_closed(unclosed, text, position)
        return self._unexpected_token(error, position)

    @staticmethod
    def _never_closed(unclosed: tuple[int, str], text: str, position: _Position) -> TileError:
        offset, char = unclosed
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        return TileError(f"'{char}' was never closed", position.at(line + 1, column))

    def _unexpected_token(self, error: UnexpectedToken, position: _Position) -> TileError:
        token = error.token
        kind = token.type
        # `accepts` (what the parser could really take next) is sharper than `expected`.
        expected = set(error.accepts or error.expected)
        indenter = self.indenter
        previous = indenter.previous if token is indenter.last else indenter.last

        loc = self._end_location(position) if kind == "$END" else position.of(token)
        # The contextual lexer reports a misplaced closing bracket itself, before the
        # post-lexer's bracket check sees it.
        if kind in _CLOSERS:
            if not indenter.brackets:
                return TileError(f"unmatched '{token.value}'", loc)
            opener = indenter.brackets[-1]
            if _OPENERS[opener.type] != kind:
                return TileError(
                    f"closing '{token.value}' does not match '{opener.value}'",
                    loc,
                    notes=((f"'{opener.value}' opened here", position.of(opener)),),
                )
        if "_INDENT" in expected and kind != "_INDENT":
            header = self._header_before(token)
            if header is not None:
                what = {
                    "def": "function definition",
                    "for": "'for' statement",
                }.get(header.value, f"'{header.value}' statement")
                return TileError(
                    f"expected an indented block after {what} on line {position.of(header).line}",
                    loc,
                )
            return TileError("expected an indented block", loc)
        if kind == "$END":
            return TileError("unexpected end of file", loc)
        if kind == "_INDENT":
            return TileError("unexpected indent", loc)
        if "COLON" in expected and not indenter.brackets:
            head = self._head_of_line(token)
            if head is not None and head.value in _HEADER_NAMES:
                return TileError(f"expected ':' after {_HEADER_NAMES[head.value]}", loc)
        if "IN" in expected and not indenter.brackets:
            head = self._head_of_line(token)
            if head is not None and head.value == "for":
                return TileError(
                    f"expected 'in' after the loop variables, found {_describe(token)}", loc
                )
        wants_operand = {"NAME", "DEC_NUMBER", "LPAR"} <= expected
        if wants_operand and previous is not None and previous.type not in ("_NEWLINE",):
            found = _describe(token)
            if previous.value and previous.type not in ("_INDENT", "_DEDENT"):
                return TileError(
                    f"expected an expression after '{previous.value}', found {found}", loc
                )
            return TileError(f"expected an expression, found {found}", loc)
        if kind == "EQUAL" and previous is not None and previous.value in _PYTHON_KEYWORDS:
            return TileError(
                f"'{previous.value}' is a Python keyword and cannot be assigned to",
                position.of(previous),
            )
        if kind == "EQUAL":
            return TileError(
                "unexpected '='", loc, hint="use '==' to compare; assignments are statements"
            )
        if (
            previous is not None
            and previous.type in _OPERAND_ENDS
            and kind in _OPERAND_STARTS
            and ("COMMA" in expected or kind == "NAME")
        ):
            return TileError(
                f"unexpected {_describe(token)}",
                loc,
                hint=f"is a ',' or an operator missing after '{previous.value}'?",
            )
        if kind == "_NEWLINE":
            return TileError("unexpected end of line", loc, hint=self._expected_hint(expected))
        return TileError(f"unexpected {_describe(token)}", loc, hint=self._expected_hint(expected))

    def _expected_hint(self, expected: set[str]) -> str | None:
        words = sorted(
            {_TOKEN_WORDS.get(name) or _quote(self.literals.get(name)) for name in expected}
            - {None}
        )
        if not words or len(words) > 4:
            return None
        if len(words) == 1:
            return f"expected {words[0]}"
        return f"expected {', '.join(words[:-1])} or {words[-1]}"

    def _head_of_line(self, token: Token) -> Token | None:
        for head in reversed(self.indenter.line_heads):
            if head.line <= token.line:
                return head
        return None

    def _header_before(self, token: Token) -> Token | None:
        if token.type == "$END":
            return self.indenter.line_heads[-1] if self.indenter.line_heads else None
        for head in reversed(self.indenter.line_heads):
            if head.line < token.line and head is not token:
                return head
        return None

    def _end_location(self, position: _Position) -> Location:
        last = self.indenter.last
        if last is None:
            return position.at(2, 1)
        return position.at(last.line, last.column)


_HEADER_NAMES = {
    "for": "for-loop header",
    "def": "function signature",
    "if": "'if' condition",
    "elif": "'elif' condition",
    "else": "'else'",
    "while": "'while' condition",
    "with": "'with' items",
    "class": "class name",
    "try": "'try'",
    "except": "'except' clause",
    "finally": "'finally'",
}

_TOKEN_WORDS = {
    "NAME": "a name",
    "DEC_NUMBER": "a number",
    "HEX_NUMBER": "a number",
    "OCT_NUMBER": "a number",
    "BIN_NUMBER": "a number",
    "FLOAT_NUMBER": "a number",
    "IMAG_NUMBER": "a number",
    "STRING": "a string",
    "LONG_STRING": "a string",
    "_NEWLINE": "end of line",
    "_INDENT": "an indented block",
    "_DEDENT": "end of block",
    "$END": "end of file",
}

_OPERAND_ENDS = {
    "NAME",
    "DEC_NUMBER",
    "HEX_NUMBER",
    "OCT_NUMBER",
    "BIN_NUMBER",
    "FLOAT_NUMBER",
    "STRING",
    "LONG_STRING",
    "RPAR",
    "RSQB",
    "RBRACE",
    "TRUE",
    "FALSE",
    "NONE",
}
_OPERAND_STARTS = _OPERAND_ENDS - {"RPAR", "RSQB", "RBRACE"} | {"LPAR", "LSQB", "LBRACE"}


def _quote(literal: str | None) -> str | None:
    return f"'{literal}'" if literal is not None else None


def _describe(token: Token) -> str:
    kind = token.type
    if kind in ("_NEWLINE", "_INDENT", "_DEDENT", "$END"):
        return _TOKEN_WORDS[kind]
    if kind in ("STRING", "LONG_STRING"):
        return "a string"
    if kind == "NAME":
        return f"name '{token.value}'"
    return f"'{token.value}'"


def _bad_character(text: str, offset: int, loc: Location) -> TileError:
    char = text[offset] if 0 <= offset < len(text) else ""
    if char in ("'", '"'):
        return TileError("unterminated string", loc)
    if char.isdigit():
        return TileError(
            "invalid number literal",
            loc,
            hint="integers are written without leading zeros: 12, 0x1f, 1_000",
        )
    if char == "!":
        return TileError(
            "unexpected character '!'", loc, hint="use '~' for element-wise not, '!=' to compare"
        )
    if char == "\\":
        return TileError("a line continuation '\\' must end its line", loc)
    if char.isprintable() and not char.isspace():
        return TileError(f"unexpected character '{char}'", loc)
    return TileError(f"unexpected character U+{ord(char or ' '):04X}", loc)


def _first_unclosed_bracket(text: str) -> tuple[int, str] | None:
    """The innermost bracket still open at the end of `text` (offset, char), if any.

    A light scan that skips comments and strings; the parser's own tracking stops at the first
    error, which is too early to tell whether a bracket is closed later on.
    """
    stack: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "#":
            end = text.find("\n", i)
            i = n if end == -1 else end
            continue
        if ch in "'\"":
            quote = text[i : i + 3] if text[i : i + 3] in ("'''", '"""') else ch
            end = i + len(quote)
            while end < n and not text.startswith(quote, end):
                if text[end] == "\\":
                    end += 1
                elif text[end] == "\n" and len(quote) == 1:
                    break
                end += 1
            i = end + len(quote)
            continue
        if ch in "([{":
            stack.append((i, ch))
        elif ch in ")]}" and stack:
            stack.pop()
        i += 1
    return stack[-1] if stack else None


_parser: _Parser | None = None
_parser_lock = threading.Lock()


def _get_parser() -> _Parser:
    global _parser
    if _parser is None:
        with _parser_lock:
            if _parser is None:
                _parser = _Parser()
    return _parser


def parse_source(
    text: str,
    filename: str,
    line_offset: int = 0,
    col_offset: int = 0,
    *,
    register: bool = True,
) -> Module:
    """Parse tile DSL `text` into a `Module`, or raise a located `TileError`.

    `line_offset`/`col_offset` shift every reported position: the text's line 1 is line
    `1 + line_offset` of `filename`, and its columns are `col_offset` further right (for the
    body of a dedented Python function). `register` records the text so that errors can quote
    it; pass False when the caller registered the whole file itself.
    """
    if register:
        register_source(filename, text, line_offset)
    position = _Position(filename, line_offset, col_offset)
    body = _get_parser().parse(text, position)
    return Module(tuple(body), filename)
