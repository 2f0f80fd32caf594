"""The tile parser's LALR tables: the shipped tables file, the user cache, or the grammar.

The tables come, in this order, from `grammar/tile.tables.json` (generated, shipped in the
package) when its header names this grammar text and this lark; from tilec's cache directory
(a pickle written by an earlier run); or from analysing the grammar (about 0.4 s, most of the
start-up time of a `tilec compile`), after which they are written to the cache.

The shipped file is generated so that no run analyses the grammar; after changing
`tile.lark` (or the lark version), regenerate it with

    python -m tilec.grammar --write-tables

A tables file made for another grammar text or lark is not used.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import deque
from pathlib import Path

from lark import Lark
from lark import __version__ as lark_version
from lark.grammar import Rule
from lark.lexer import TerminalDef

from tilec.cache import cache_dir, write_atomically
from tilec.frontend.syntax_lexer import Indenter
from tilec.grammar import TABLES_COMMAND

__all__ = ["load_or_build", "tables_json"]

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
    parser = Lark(grammar, **_TABLE_OPTIONS, postlex=Indenter())
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


def load_or_build(grammar: str, runtime: dict, shipped_tables: Path | None) -> tuple[Lark, str]:
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
