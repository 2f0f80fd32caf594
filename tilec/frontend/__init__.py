"""The tile DSL frontend: source text → syntax tree → checked program (→ tile IR, in `irgen`).

    module = parse_source(text, "foo.tile")      # or parse_file(path), parse_function(fn)
    program = analyze(module)                     # or analyze(module, {"tile": {"M": 128}})
    kernel = program.kernel("matmul")

* `syntax` — the lark parser for `grammar/tile.lark` and the syntax tree (`syntax.Module`);
* `sema` — names, dtypes, shapes, the grid, masks: the checked tree (`sema.Program`) that IR
  generation walks;
* `source` — reading `.tile` files and the source of `@tilec.jit` functions, with locations in
  the original file.

Every mistake in the input raises `tilec.diagnostics.TileError` with a location; nothing else
escapes for bad input. docs/language.md describes the language.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from tilec.frontend import sema, source, syntax
from tilec.frontend.sema import Program, analyze
from tilec.frontend.syntax import Module, parse_source

__all__ = [
    "Module",
    "Program",
    "analyze",
    "check_file",
    "parse_file",
    "parse_function",
    "parse_source",
    "sema",
    "source",
    "syntax",
]


def parse_file(path: str | os.PathLike[str]) -> Module:
    """Parse a `.tile` file."""
    text = source.read_tile_file(path)
    return parse_source(text.text, text.filename, register=False)


def parse_function(fn: Callable[..., object]) -> Module:
    """Parse a Python function (an `@tilec.jit` kernel); locations are those of its `.py` file."""
    text = source.function_source(fn)
    return parse_source(text.text, text.filename, text.line_offset, text.col_offset, register=False)


def check_file(
    path: str | os.PathLike[str], options: Mapping[str, object] | None = None
) -> Program:
    """Parse and analyze a `.tile` file."""
    return analyze(parse_file(path), options)
