"""Parsing: tile DSL text → a small syntax tree of dataclasses, each node with a `Location`.

This module owns `parse_source`, the lark parser for `grammar/tile.lark` (made once per
process), and the translation of lark's exceptions into `TileError`s worded for people
("expected ':' after for-loop header"). Its parts live beside it, each depending only on
those listed before it:

- `syntax_tree`: the node classes, re-exported here (`from tilec.frontend import syntax as
  ast` is how the rest of the compiler reaches them);
- `syntax_lexer`: positions in the user's file and the indentation post-lexer;
- `syntax_builder`: the callbacks that build the tree at each reduction, and the rejection
  of Python forms that tile kernels do not support (while, lambda, class, ...);
- `syntax_tables`: where the LALR tables come from (shipped, cached or built).

The tree is purely syntactic: names are not resolved and nothing is typed; `sema` does that.
"""

from __future__ import annotations

import threading
from pathlib import Path

from lark import Token
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from tilec.diagnostics import Location, TileError, register_source
from tilec.frontend.syntax_builder import AstBuilder
from tilec.frontend.syntax_lexer import CLOSERS, OPENERS, PYTHON_KEYWORDS, Indenter, Position
from tilec.frontend.syntax_tables import load_or_build
from tilec.frontend.syntax_tree import *  # noqa: F403
from tilec.frontend.syntax_tree import Module
from tilec.frontend.syntax_tree import __all__ as _node_names
from tilec.grammar import TABLES_PATH, grammar_text

# The node classes are this module's too: the rest of the compiler imports them from here.
__all__ = [*_node_names, "parse_source"]


class _Parser:
    """The lark parser for the tile grammar, built once, plus the error translator.

    `shipped_tables` is the tables file to try first (None: go straight to the user cache and
    building, as the benchmarks and tests do); `tables_source` says where the tables came from:
    "shipped", "cache" or "built".
    """

    def __init__(self, shipped_tables: Path | None = TABLES_PATH) -> None:
        self.indenter = Indenter()
        self.builder = AstBuilder()
        # What cannot be stored with the tables is given again on every load (as lark's own
        # cache= does).
        runtime = {
            "postlex": self.indenter,
            "transformer": self.builder,
            "lexer_callbacks": {"NAME": self._check_name},
        }
        self.lark, self.tables_source = load_or_build(grammar_text(), runtime, shipped_tables)
        self.literals = {
            t.name: t.pattern.value
            for t in self.lark.terminals
            if t.pattern.type == "str" and not t.name.startswith("_")
        }
        # The parser, its post-lexer and its builder keep per-parse state.
        self.lock = threading.Lock()

    def _check_name(self, token: Token) -> Token:
        # The contextual lexer reads a keyword as NAME where the keyword cannot appear.
        if token.value in PYTHON_KEYWORDS:
            raise TileError(f"unexpected keyword '{token.value}'", self.indenter.position.of(token))
        return token

    def parse(self, text: str, position: Position) -> list:
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

    def translate(self, error: UnexpectedInput, text: str, position: Position) -> TileError:
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
    def _never_closed(unclosed: tuple[int, str], text: str, position: Position) -> TileError:
        offset, char = unclosed
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        return TileError(f"'{char}' was never closed", position.at(line + 1, column))

    def _unexpected_token(self, error: UnexpectedToken, position: Position) -> TileError:
        token = error.token
        kind = token.type
        # `accepts` (what the parser could really take next) is sharper than `expected`.
        expected = set(error.accepts or error.expected)
        indenter = self.indenter
        previous = indenter.previous if token is indenter.last else indenter.last

        loc = self._end_location(position) if kind == "$END" else position.of(token)
        # The contextual lexer reports a misplaced closing bracket itself, before the
        # post-lexer's bracket check sees it.
        if kind in CLOSERS:
            if not indenter.brackets:
                return TileError(f"unmatched '{token.value}'", loc)
            opener = indenter.brackets[-1]
            if OPENERS[opener.type] != kind:
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
        if kind == "EQUAL" and previous is not None and previous.value in PYTHON_KEYWORDS:
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

    def _end_location(self, position: Position) -> Location:
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
    position = Position(filename, line_offset, col_offset)
    body = _get_parser().parse(text, position)
    return Module(tuple(body), filename)
