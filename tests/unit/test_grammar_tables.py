"""The parser tables shipped with the grammar (grammar/tile.tables.json): the committed file is
what `python -m tilec.grammar --write-tables` writes now, whatever the hash seed; every run uses
it; a parser made from it parses (and rejects) every program as one made from the grammar does;
and a file that does not match the grammar or lark is not used."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilec.diagnostics import TileError
from tilec.frontend import syntax
from tilec.frontend.syntax_lexer import Position
from tilec.grammar import TABLES_COMMAND, TABLES_PATH, grammar_text

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((ROOT / "examples").glob("*.tile")) + sorted(
    (ROOT / "tests" / "frontend_errors").glob("*.tile")
)


def generated_tables(tmp_path: Path, hash_seed: str) -> bytes:
    out = tmp_path / f"tables-{hash_seed}.json"
    result = subprocess.run(
        [sys.executable, "-m", "tilec.grammar", "--write-tables", "--output", str(out)],
        env=dict(os.environ, PYTHONHASHSEED=hash_seed),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out.read_bytes()


def test_the_committed_tables_are_what_the_command_writes(tmp_path):
    # Under these two seeds lark numbers the states differently and lists a terminal's regexp
    # flags in another order: the file must not show it.
    first, second = (generated_tables(tmp_path, seed) for seed in ("0", "7"))
    assert first == second, "the tables file depends on PYTHONHASHSEED"
    if TABLES_PATH.read_bytes() != first:
        pytest.fail(
            f"{TABLES_PATH.name} does not match grammar/tile.lark and lark: run `{TABLES_COMMAND}`"
            " and commit the file",
            pytrace=False,
        )


def test_every_run_uses_the_shipped_tables(monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", "")
    assert syntax._get_parser().tables_source == "shipped"
    assert syntax._Parser().tables_source == "shipped"


def tree(node: object) -> object:
    """A syntax tree as comparable values (the nodes compare by identity)."""
    if dataclasses.is_dataclass(node):
        fields = dataclasses.fields(node)
        return (type(node).__name__, *(tree(getattr(node, f.name)) for f in fields))
    if isinstance(node, (list, tuple)):
        return [tree(item) for item in node]
    return node


def parse_or_error(parser: syntax._Parser, path: Path) -> object:
    try:
        return tree(parser.parse(path.read_text(encoding="utf-8"), Position(path.name, 0, 0)))
    except TileError as error:
        return ("error", error.message, error.loc, error.hint, error.notes)


def test_shipped_tables_parse_every_program_as_the_grammar_does(monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", "")
    shipped = syntax._Parser()
    built = syntax._Parser(shipped_tables=None)
    assert (shipped.tables_source, built.tables_source) == ("shipped", "built")
    results = [(path.name, parse_or_error(shipped, path)) for path in PROGRAMS]
    assert results == [(path.name, parse_or_error(built, path)) for path in PROGRAMS]
    # Both kinds are compared: the examples parse, the error corpus has syntax errors too.
    assert sum(result[0] == "error" for _, result in results) >= 10
    assert sum(result[0] != "error" for _, result in results) >= 20


SKIP = "def f(x: f32[N]):\n    skip\n"


def test_tables_for_an_edited_grammar_are_not_used(monkeypatch, tmp_path):
    # With the shipped tables, `skip` is a name; in the edited grammar it is the pass statement.
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    (function,) = syntax._Parser().parse(SKIP, Position("f.tile", 0, 0))
    assert isinstance(function.body[0], syntax.ExprStmt)
    edited = grammar_text().replace('PASS: "pass"', 'PASS: "skip"')
    assert edited != grammar_text()
    monkeypatch.setattr(syntax, "grammar_text", lambda: edited)
    parser = syntax._Parser()
    assert parser.tables_source == "built"
    (function,) = parser.parse(SKIP, Position("f.tile", 0, 0))
    assert isinstance(function.body[0], syntax.Pass)
    # Built once, then read from the cache, never from the shipped file.
    assert syntax._Parser().tables_source == "cache"


def edit_header(field: str, value: object):
    def edit(document: dict) -> str:
        document["header"][field] = value
        return json.dumps(document)

    return edit


@pytest.mark.parametrize(
    "make_file",
    [
        edit_header("grammar_sha256", "0" * 64),
        edit_header("lark_version", "0.1"),
        edit_header("parser_options", {"parser": "lalr", "lexer": "basic"}),
        lambda document: json.dumps(document)[:100_000],  # cut short
        lambda document: json.dumps({"header": document["header"], "tables": {}}),
    ],
    ids=["other-grammar", "other-lark", "other-options", "truncated", "no-tables"],
)
def test_a_mismatched_or_damaged_tables_file_is_not_used(monkeypatch, tmp_path, make_file):
    monkeypatch.setenv("TILEC_CACHE_DIR", "")
    document = json.loads(TABLES_PATH.read_text(encoding="utf-8"))
    copy = tmp_path / "tile.tables.json"
    copy.write_text(json.dumps(document), encoding="utf-8")
    assert syntax._Parser(shipped_tables=copy).tables_source == "shipped"
    copy.write_text(make_file(document), encoding="utf-8")
    assert syntax._Parser(shipped_tables=copy).tables_source == "built"
    assert syntax._Parser(shipped_tables=tmp_path / "missing.json").tables_source == "built"
