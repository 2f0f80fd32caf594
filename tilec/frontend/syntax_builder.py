"""The building of the syntax tree (`tilec.frontend.syntax_tree`) from lark's reductions, and
the rejection of Python forms that tile kernels do not support (while, lambda, class,
comprehensions, ...), which the grammar parses only so that they can be refused here with a
precise location and a hint. `_Position` maps lark's positions to the user's file.

Used by the parser, `tilec.frontend.syntax`."""

from __future__ import annotations

import ast as python_ast
import warnings

from lark import Token, Transformer

from tilec.diagnostics import Location, TileError
from tilec.frontend.syntax_tree import (
    Assign,
    Attribute,
    AugAssign,
    BinOp,
    BoolLit,
    BoolOp,
    Call,
    Compare,
    DictExpr,
    EllipsisLit,
    Expr,
    ExprStmt,
    FloatLit,
    For,
    FunctionDef,
    If,
    IntLit,
    Keyword,
    ListExpr,
    Name,
    NoneLit,
    Param,
    Pass,
    Slice,
    StrLit,
    Subscript,
    TupleExpr,
    UnaryOp,
)


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
