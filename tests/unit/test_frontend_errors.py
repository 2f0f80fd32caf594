"""Every wrong program in tests/frontend_errors/ fails with the error its header names.

Each case is one small `.tile` file whose first lines say what must be reported:

    # ERROR: <line>:<col>: <message>
    # HINT: <hint>            (only when the error has a hint)

Line and column count the header lines too. The test checks the message, the position, the hint
and the rendered form: `file:line:col: error: message`, the source line, a caret under `col`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tilec.diagnostics import TileError, relative_name
from tilec.frontend import analyze, parse_file

CORPUS = Path(__file__).resolve().parent.parent / "frontend_errors"
CASES = sorted(CORPUS.glob("*.tile"))
ERROR_HEADER = re.compile(r"# ERROR: (\d+):(\d+): (.+)")
HINT_HEADER = re.compile(r"# HINT: (.+)")


def _expectation(path: Path) -> tuple[int, int, str, str | None]:
    lines = path.read_text(encoding="utf-8").split("\n")
    error = ERROR_HEADER.fullmatch(lines[0])
    assert error, f"{path.name}: the first line must be '# ERROR: line:col: message'"
    hint = HINT_HEADER.fullmatch(lines[1])
    return int(error[1]), int(error[2]), error[3], hint[1] if hint else None


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_wrong_program_reports_its_error(path: Path):
    line, col, message, hint = _expectation(path)
    with pytest.raises(TileError) as caught:
        analyze(parse_file(path))
    error = caught.value
    assert error.message == message
    assert (error.loc.line, error.loc.col) == (line, col)
    assert error.hint == hint

    name = relative_name(str(path))
    assert error.loc.file == name
    rendered = error.render().split("\n")
    source_line = path.read_text(encoding="utf-8").split("\n")[line - 1]
    assert rendered[0] == f"{name}:{line}:{col}: error: {message}"
    assert rendered[1] == source_line
    assert rendered[2] == " " * (col - 1) + "^"
    if hint is not None:
        assert rendered[-1] == f"hint: {hint}"


def test_corpus_has_enough_cases_of_each_kind():
    names = [p.stem for p in CASES]
    assert len(names) >= 45
    assert sum(n.startswith("syntax_") for n in names) >= 10
    assert sum(n.startswith("unsupported_") for n in names) >= 20


def test_unsupported_python_errors_say_so():
    for path in CASES:
        if path.stem.startswith("unsupported_"):
            message = _expectation(path)[2]
            assert "not supported" in message or "cannot return" in message, path.name
