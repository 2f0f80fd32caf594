"""Regenerate the parser tables shipped next to the grammar:

    python -m tilec.grammar --write-tables [--output FILE]

writes `tile.tables.json` (or FILE) from `tile.lark` with the installed lark. Run it after every
change to the grammar or to the lark version; tests/unit/test_grammar_tables.py fails until the
committed file is what this writes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tilec.frontend.syntax_tables import tables_json
from tilec.grammar import TABLES_PATH, grammar_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tilec.grammar", description=__doc__.splitlines()[0].rstrip(":")
    )
    parser.add_argument(
        "--write-tables",
        action="store_true",
        required=True,
        help=f"write the LALR tables of tile.lark (to {TABLES_PATH.name} unless --output)",
    )
    parser.add_argument("--output", type=Path, default=TABLES_PATH, help="where to write them")
    args = parser.parse_args(argv)
    text = tables_json(grammar_text())
    # Bytes, not text: the file is the same on every platform (no CRLF on Windows).
    args.output.write_bytes(text.encode("utf-8"))
    print(f"wrote {args.output} ({len(text) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
