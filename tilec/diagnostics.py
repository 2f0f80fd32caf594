"""User-facing diagnostics: source locations, `TileError`, and how errors are printed.

Every error a user can cause (bad IR text, a verifier failure, a wrong `.tile` program, an
unknown pass) is a `TileError` carrying a `Location`. It renders as

    file:line:col: error: message
      the source line
          ^
    hint: one line that says what to do (optional)

Internal failures are not `TileError`s; `internal_error` wraps them with the pass name and a
path to the IR that triggered them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = [
    "UNKNOWN_LOC",
    "InternalCompilerError",
    "Location",
    "SourceFile",
    "TileError",
    "format_bytes",
    "register_source",
    "source_line",
]


@dataclass(frozen=True, slots=True)
class Location:
    """A point in a source file (1-based line and column). `file` may be '' when unknown."""

    file: str
    line: int
    col: int

    @property
    def known(self) -> bool:
        return self.line > 0

    def __str__(self) -> str:
        if not self.known:
            return self.file or "<unknown>"
        return f"{self.file}:{self.line}:{self.col}"


UNKNOWN_LOC = Location("", 0, 0)


class SourceFile:
    """Text of one source with fast offset→(line, col) lookup."""

    __slots__ = ("_line_starts", "name", "text")

    def __init__(self, name: str, text: str):
        self.name = name
        self.text = text
        starts = [0]
        find = text.find
        pos = find("\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = find("\n", pos + 1)
        self._line_starts = starts

    def location(self, offset: int, line_offset: int = 0) -> Location:
        from bisect import bisect_right

        index = bisect_right(self._line_starts, offset) - 1
        return Location(self.name, index + 1 + line_offset, offset - self._line_starts[index] + 1)

    def line(self, number: int) -> str | None:
        if 1 <= number <= len(self._line_starts):
            start = self._line_starts[number - 1]
            end = self.text.find("\n", start)
            return self.text[start : end if end != -1 else len(self.text)]
        return None


# Sources registered by the parsers, so that an error raised much later (a verifier, a pass)
# can still quote the line it points at. Keyed by the name used in `Location.file`.
_SOURCES: dict[str, tuple[str, int]] = {}


def register_source(name: str, text: str, line_offset: int = 0) -> None:
    """Remember `text` as the contents of `name`, whose first line is line `1 + line_offset`."""
    _SOURCES[name] = (text, line_offset)


def source_line(loc: Location) -> str | None:
    """The text of the line `loc` points at: from a registered source, else from disk."""
    if not loc.known:
        return None
    if loc.file in _SOURCES:
        text, line_offset = _SOURCES[loc.file]
        lines = text.split("\n")
        index = loc.line - 1 - line_offset
        return lines[index] if 0 <= index < len(lines) else None
    try:
        with open(loc.file, encoding="utf-8") as f:
            for number, text in enumerate(f, 1):
                if number == loc.line:
                    return text.rstrip("\n")
    except OSError:
        return None
    return None


class TileError(Exception):
    """An error in the user's input, with the location it concerns.

    `notes` are extra located lines ("note: previous definition is here").
    """

    def __init__(
        self,
        message: str,
        loc: Location = UNKNOWN_LOC,
        *,
        hint: str | None = None,
        notes: tuple[tuple[str, Location], ...] = (),
    ):
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.hint = hint
        self.notes = notes

    def render(self) -> str:
        """The full message as printed by the CLI."""
        parts = [_render_one("error", self.message, self.loc)]
        for text, loc in self.notes:
            parts.append(_render_one("note", text, loc))
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.render()


def _render_one(kind: str, message: str, loc: Location) -> str:
    head = f"{loc}: {kind}: {message}" if loc.file or loc.known else f"{kind}: {message}"
    line = source_line(loc)
    if line is None:
        return head
    # Tabs keep their width so the caret lines up with what the terminal shows.
    caret_pad = "".join("\t" if ch == "\t" else " " for ch in line[: max(loc.col - 1, 0)])
    return f"{head}\n{line}\n{caret_pad}^"


class InternalCompilerError(Exception):
    """A bug in tilec: names the pass and where the IR that triggered it was saved."""

    def __init__(self, pass_name: str, cause: BaseException, ir_path: str | None):
        self.pass_name = pass_name
        self.cause = cause
        self.ir_path = ir_path
        where = f"; the IR it ran on is saved in {ir_path}" if ir_path else ""
        super().__init__(
            f"internal compiler error in pass '{pass_name}': "
            f"{type(cause).__name__}: {cause}{where}\n"
            "This is a bug in tilec; please report it with that file."
        )


def relative_name(path: str) -> str:
    """`path` as the user gave it, or relative to the working directory when shorter."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if len(rel) < len(path) else path


def format_bytes(n: int) -> str:
    """A size as remarks and `--explain` print it: 512 B, 16 KiB, 1.5 KiB."""
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} B"
