"""The tile DSL grammar (package data `tilec.grammar`).

`tile.lark` is the one grammar for `.tile` files and for the bodies of `@tilec.jit` functions;
`tilec.frontend.syntax` makes the LALR parser from it once per process. `tile.tables.json`
holds that parser's tables, generated from `tile.lark` so that no run has to analyse the
grammar (a third of a second); after editing the grammar, regenerate it with

    python -m tilec.grammar --write-tables

(a file that does not match the grammar is ignored, not used: tilec then builds the tables
itself and keeps them in its cache directory).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TABLES_COMMAND", "TABLES_PATH", "grammar_text"]

TABLES_PATH = Path(__file__).with_name("tile.tables.json")
TABLES_COMMAND = "python -m tilec.grammar --write-tables"


def grammar_text() -> str:
    """The text of `tile.lark`, which ships next to this module."""
    return Path(__file__).with_name("tile.lark").read_text(encoding="utf-8")
