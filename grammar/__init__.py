"""The tile DSL grammar (package data `tilec.grammar`).

`tile.lark` is the one grammar for `.tile` files and for the bodies of `@tilec.jit` functions;
`tilec.frontend.syntax` builds the LALR parser from it once per process.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["grammar_text"]


def grammar_text() -> str:
    """The text of `tile.lark`, which ships next to this module."""
    return Path(__file__).with_name("tile.lark").read_text(encoding="utf-8")
