"""Where tile programs come from: `.tile` files, and the source of `@tilec.jit` functions.

A Python function's source is read with `inspect`, its decorators are blanked out (their lines
stay, empty, so line numbers do not move), and its body is dedented; the `Source` records how
far it was shifted so that every `Location` names the line and column of the `.py` file. The
whole `.py` file is registered with `tilec.diagnostics`, so errors quote the real line.
"""

from __future__ import annotations

import ast as python_ast
import inspect
import linecache
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tilec.diagnostics import UNKNOWN_LOC, Location, TileError, register_source, relative_name

__all__ = ["Source", "decode_source", "function_source", "read_tile_file"]


@dataclass(frozen=True, slots=True)
class Source:
    """Text to parse, and where it sits in `filename` (its line 1 is line `1 + line_offset`,
    its columns are `col_offset` to the left of the file's)."""

    text: str
    filename: str
    line_offset: int = 0
    col_offset: int = 0


def read_tile_file(path: str | os.PathLike[str]) -> Source:
    """Read a `.tile` file (UTF-8) and register it for error messages."""
    name = relative_name(os.fspath(path))
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise TileError(f"cannot read {name}: {error.strerror}", Location(name, 0, 0)) from None
    text = decode_source(data, name)
    register_source(name, text)
    return Source(text, name)


def decode_source(data: bytes, name: str) -> str:
    """`data` as UTF-8 text; a `TileError` at the line and column of the first byte that is
    not UTF-8 (newlines as the text would count them; universal newlines, as reading the
    file in text mode gives)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        before = data[: error.start].decode("utf-8", "replace")
        before = before.replace("\r\n", "\n").replace("\r", "\n")
        # The error's source line is shown from this text (the file itself is not UTF-8).
        shown = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
        register_source(name, shown)
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        raise TileError(
            f"{name} is not UTF-8 text: byte 0x{data[error.start]:02x} at offset {error.start}",
            Location(name, line, col),
            hint="save the file as UTF-8",
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def function_source(fn: Callable[..., object]) -> Source:
    """The source of a Python function, ready to parse as a tile kernel."""
    fn = inspect.unwrap(fn)
    label = getattr(fn, "__qualname__", repr(fn))
    try:
        lines, first_line = inspect.getsourcelines(fn)  # type: ignore[arg-type]
        path = inspect.getsourcefile(fn) or inspect.getfile(fn)  # type: ignore[arg-type]
    except (OSError, TypeError):
        raise TileError(
            f"cannot read the source of {label}",
            UNKNOWN_LOC,
            hint="@tilec.jit needs a function defined with 'def' in a file",
        ) from None
    name = relative_name(path)
    file_lines = linecache.getlines(path)
    if file_lines:
        register_source(name, "".join(file_lines))
    else:  # pragma: no cover - inspect found the source, so linecache normally has it
        register_source(name, "".join(lines), first_line - 1)

    text, indent = _dedent(lines)
    def_line = _def_line(text, label, Location(name, first_line, 1))
    # Blank the decorator lines rather than dropping them, so line numbers stay those of the file.
    kept = text.split("\n")
    kept[: def_line - 1] = [""] * (def_line - 1)
    return Source("\n".join(kept), name, line_offset=first_line - 1, col_offset=indent)


def _dedent(lines: list[str]) -> tuple[str, int]:
    """Remove the indentation common to all non-blank lines; return the text and its width."""
    margins = [line[: len(line) - len(line.lstrip(" \t"))] for line in lines if line.strip()]
    prefix = margins[0] if margins else ""
    for margin in margins[1:]:
        while not margin.startswith(prefix):
            prefix = prefix[:-1]
    width = len(prefix)
    out = []
    for line in lines:
        line = line.rstrip("\r\n")
        out.append(line[width:] if line.strip() else "")
    return "\n".join(out) + "\n", width


def _def_line(text: str, label: str, loc: Location) -> int:
    """The line (1-based, within `text`) of the function's 'def', after its decorators."""
    try:
        tree = python_ast.parse(text)
    except SyntaxError:
        tree = None
    if tree is None or not tree.body or not isinstance(tree.body[0], python_ast.FunctionDef):
        raise TileError(
            f"the source of {label} is not a 'def' function",
            loc,
            hint="@tilec.jit takes functions defined with 'def' (not lambdas or async functions)",
        )
    return tree.body[0].lineno
