"""`python -m tilec.benchmarks.ab`: configurations parsed as the tuner's, and the CPU dry run
that shows what each compiles to before a GPU times it."""

from __future__ import annotations

import json

import pytest

from tilec.benchmarks.ab import main, parse_config
from tilec.diagnostics import TileError


def test_a_config_is_the_tuners_names_and_values():
    assert parse_config("tile.M=32, tile.N=128,warps=4") == {
        "tile.M": 32,
        "tile.N": 128,
        "warps": 4,
    }
    assert parse_config("hoist-loads.enable=false") == {"hoist-loads.enable": False}


@pytest.mark.parametrize("text", ["warps", "=4", "warps=", "tile.M=32,warps"])
def test_a_malformed_config_is_a_clear_error(text):
    with pytest.raises(TileError, match="expected DECISION=VALUE"):
        parse_config(text)


def test_the_dry_run_says_which_configs_compile_to_the_heuristics_code(tmp_path, capsys):
    out = tmp_path / "ab.json"
    assert (
        main(
            [
                "--only",
                "col_sum",
                "--config",
                "tile.M=32,tile.N=128",
                "--config",
                "hoist-loads.enable=false",
                "--dry-run",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    rows = [r for r in json.loads(out.read_text()) if r["workload"] == "col_sum"]
    assert [r["config"] for r in rows] == [
        {},
        {"tile.M": 32, "tile.N": 128},
        {"hoist-loads.enable": False},
    ]
    heuristic, before, off = rows
    assert heuristic["decisions"]["tile.N"] == 32 and before["decisions"]["tile.N"] == 128
    assert not before["same_as_heuristic"]
    assert off["same_as_heuristic"]  # column sums have no load to move
    assert "measures nothing" in capsys.readouterr().out


def test_no_config_is_a_usage_error():
    with pytest.raises(SystemExit):
        main(["--only", "col_sum", "--dry-run"])
