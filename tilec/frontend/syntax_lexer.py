"""What the tile parser reads: positions in the user's file, and the Python-style post-lexer.

`Position` maps lark's line and column (in the text as parsed, which has a newline prepended) to
the `Location` in the user's file. `Indenter` turns newlines into INDENT/DEDENT tokens,
joins lines inside brackets, and reports bracket and indentation mistakes as located
`TileError`s; it also remembers the tokens that `syntax`'s error translator looks back at.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterator

from lark import Token
from lark.lark import PostLex

from tilec.diagnostics import Location, TileError

__all__ = ["CLOSERS", "OPENERS", "PYTHON_KEYWORDS", "Indenter", "Position"]

OPENERS = {"LPAR": "RPAR", "LSQB": "RSQB", "LBRACE": "RBRACE"}
CLOSERS = {"RPAR", "RSQB", "RBRACE"}
PYTHON_KEYWORDS = frozenset(keyword.kwlist)
# Python reads a tab as reaching the next multiple of 8; so does lark's reference Indenter.
_TAB_WIDTH = 8


class Position:
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


class Indenter(PostLex):
    """Python-style INDENT/DEDENT from newlines, with bracket tracking.

    Unlike lark's stock `Indenter` it reports bracket and indentation mistakes as `TileError`s
    with positions, places INDENT/DEDENT tokens on the first character of the new line (so an
    "unexpected indent" points where the user looks), and remembers what the error translator
    needs: the open brackets, the first token of every logical line, and the last two tokens.
    """

    always_accept = ("_NEWLINE",)

    def __init__(self) -> None:
        self.position = Position("", 0, 0)
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
            if kind in OPENERS:
                self.brackets.append(token)
            elif kind in CLOSERS:
                if not self.brackets:
                    raise TileError(f"unmatched '{token.value}'", self.position.of(token))
                opener = self.brackets.pop()
                if OPENERS[opener.type] != kind:
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
