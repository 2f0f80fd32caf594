"""Parsing: tile DSL text → a small syntax tree of dataclasses, each node with a `Location`.

This module owns the lark parser for `grammar/tile.lark` (made once per process), its LALR
tables, the indentation post-lexer, and the translation of lark's exceptions into `TileError`s
worded for people ("expected ':' after for-loop header"). The tree's nodes are
`tilec.frontend.syntax_tree`'s (re-exported here: the frontend names them `syntax.Call`, ...);
`tilec.frontend.syntax_builder` builds them from lark's reductions and refuses the Python forms
that tile kernels do not support (while, lambda, class, comprehensions, ...), which the grammar
parses only so that they can be refused with a precise location and a hint.

The tables ship with the grammar, generated, as `grammar/tile.tables.json`, so that no run
analyses the grammar; after changing `tile.lark` (or the lark version), regenerate them with

    python -m tilec.grammar --write-tables

A tables file made for another grammar text or lark is not used: the parser then comes from
tilec's cache directory, or from the grammar itself (see "parser tables" below).

The tree is purely syntactic: names are not resolved and nothing is typed; `sema` does that.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import sys
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from lark import Lark, Token
from lark import __version__ as lark_version
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.grammar import Rule
from lark.lark import PostLex
from lark.lexer import TerminalDef

from tilec.cache import cache_dir, write_atomically
from tilec.diagnostics import Location, TileError, register_source
from tilec.frontend import syntax_tree
from tilec.frontend.syntax_builder import _AstBuilder, _Position
from tilec.frontend.syntax_tree import *  # noqa: F403  (the tree's nodes: syntax.Name, syntax.Call, ...)
from tilec.frontend.syntax_tree import Module
from tilec.grammar import TABLES_COMMAND, TABLES_PATH, grammar_text

__all__ = [*syntax_tree.__all__, "parse_source", "tables_json"]


# ---------------------------------------------------------------------------- the parser

_OPENERS = {"LPAR": "RPAR", "LSQB": "RSQB", "LBRACE": "RBRACE"}
_CLOSERS = {"RPAR", "RSQB", "RBRACE"}
_PYTHON_KEYWORDS = frozenset(keyword.kwlist)
# Python reads a tab as reaching the next multiple of 8; so does lark's reference Indenter.
_TAB_WIDTH = 8


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
