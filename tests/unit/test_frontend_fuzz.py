"""Mutated example programs either compile to verified IR or raise a located `TileError`.

Each example in examples/ is mutated INPUTS_PER_EXAMPLE times (with a fixed seed, so failures
reproduce): tokens deleted, duplicated, swapped or replaced, characters inserted, deleted or
replaced, one to three edits per input. Each mutant goes through the whole frontend: parsing,
analysis, IR generation and verification. No other exception may escape (an
`InternalCompilerError` is a bug), and every error must carry a position and render.

Most mutants stop at a syntax or name error; test_compile_fuzz.py writes programs that reach IR
generation far more often.
"""

from __future__ import annotations

import random
import re
import traceback
import zlib
from pathlib import Path

import pytest

from tilec.compiler import compile_program
from tilec.diagnostics import TileError
from tilec.frontend import analyze, parse_source

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.tile"))
TOTAL_INPUTS = 10_000
INPUTS_PER_EXAMPLE = -(-TOTAL_INPUTS // max(len(EXAMPLES), 1))

# Whitespace runs are tokens too, so that joining the tokens gives the text back exactly.
TOKEN = re.compile(
    r"\n[ \t]*|[ \t]+|#[^\n]*|\w+|\"[^\"\n]*\"|'[^'\n]*'"
    r"|\*\*|//|<<|>>|<=|>=|==|!=|->|\.\.\.|[^\s\w]"
)
# Replacement tokens likely to reach unusual corners: keywords, builtins, odd numbers, layout.
VOCABULARY = [
    *"()[]{}:,.=@*-~",
    *("+=", "**", "//", "->", "...", "_", "'", '"', "\\", "#"),
    *("for", "in", "def", "if", "while", "lambda", "return", "None", "True", "class"),
    *("tiles", "zeros", "full", "arange", "offsets", "where", "sum", "max", "exp", "kernel"),
    *("f16", "f32", "i1", "i8", "inf", ".T", ".to(f16)", "[None, :]"),
    *("0", "1", "-1", "300", "0.5", "1e400", "99999999999999999999999"),
    *("\n", "\n    ", "\n        ", "\t", "@kernel(tile={'M': 1})\n"),
]
CHARACTERS = "()[]{}:,.=+-*/@<>~\"'#\\\n\t 0123456789abcxyzMN_é\x00"


def mutate(rng: random.Random, text: str) -> str:
    tokens = TOKEN.findall(text)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if not tokens:
            break
        operation = rng.randrange(8)
        i = rng.randrange(len(tokens))
        if operation == 0:
            del tokens[i]
        elif operation == 1:
            tokens.insert(i, tokens[i])
        elif operation == 2 and i + 2 < len(tokens):
            tokens[i], tokens[i + 2] = tokens[i + 2], tokens[i]  # skips the space between
        elif operation == 3:
            tokens[i] = rng.choice(tokens)
        elif operation == 4:
            tokens[i] = rng.choice(VOCABULARY)
        else:
            joined = "".join(tokens)
            j = rng.randrange(len(joined))
            if operation == 5:
                joined = joined[:j] + joined[j + 1 :]
            elif operation == 6:
                joined = joined[:j] + rng.choice(CHARACTERS) + joined[j:]
            else:
                joined = joined[:j] + rng.choice(CHARACTERS) + joined[j + 1 :]
            tokens = TOKEN.findall(joined)
    return "".join(tokens)


def test_tokenizer_round_trips_the_examples():
    for path in EXAMPLES:
        text = path.read_text(encoding="utf-8")
        assert "".join(TOKEN.findall(text)) == text


def test_enough_inputs():
    assert len(EXAMPLES) >= 8
    assert INPUTS_PER_EXAMPLE * len(EXAMPLES) >= TOTAL_INPUTS


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_mutated_examples_fail_only_with_tile_errors(path: Path):
    text = path.read_text(encoding="utf-8")
    rng = random.Random(zlib.crc32(path.name.encode()))
    accepted = rejected = 0
    for _ in range(INPUTS_PER_EXAMPLE):
        mutant = mutate(rng, text)
        try:
            compile_program(analyze(parse_source(mutant, "mutant.tile")))
            accepted += 1
        except TileError as error:
            rejected += 1
            assert error.loc.known, f"error without a position: {error.message}\n{mutant}"
            assert error.render().startswith("mutant.tile:")
        except Exception:  # the property under test: nothing else may escape
            pytest.fail(f"{traceback.format_exc()}\nfor input:\n{mutant}")
    # Both outcomes must occur, or the mutations are not exercising the frontend.
    assert accepted > 0 and rejected > 0
