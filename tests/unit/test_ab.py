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


def test_a_plan_runs_each_prediction_against_the_heuristic(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            [
                {
                    "workload": "swiglu",
                    "config": {"warps": 4},
                    "predicted": 1.08,
                    "at": "8192x8192 bf16",
                    "why": "the old warps",
                }
            ]
        )
    )
    out = tmp_path / "rows.json"
    assert main(["--plan", str(plan), "--dry-run", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [(r["workload"], r["config"]) for r in rows] == [
        ("swiglu", {}),
        ("swiglu", {"warps": 4}),
    ]
    assert rows[0]["decisions"]["warps"] == 16 and rows[1]["decisions"]["warps"] == 4


def test_the_pending_plan_is_well_formed():
    from pathlib import Path

    from tilec.benchmarks.ab import load_plan
    from tilec.benchmarks.suite import WORKLOADS

    root = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
    for path in root.glob("pending-*.json"):
        for entry in load_plan(str(path)):
            workload = WORKLOADS[entry["workload"]]
            sizes = (*workload.sizes, *workload.small)  # ab times a small size by its label
            if "at" in entry:
                assert entry["at"] in {workload.label(s) for s in sizes}, entry
            else:  # a shape the suite does not list
                assert len(entry["size"]) == len(workload.sizes[0]), entry


def test_a_malformed_plan_is_a_clear_error(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text('[{"workload": "swiglu"}]')
    assert main(["--plan", str(plan), "--dry-run"]) == 1
    assert "expected a list of objects with workload, config, predicted, at" in (
        capsys.readouterr().err
    )


def test_a_shape_the_suite_does_not_list_is_timed_by_size(tmp_path, capsys):
    """`--size` (a plan's `size`) builds the workload's case at any shape of its dimensions:
    the test of a heuristic on shapes nobody fitted it to."""
    out = tmp_path / "ab.json"
    args = ["--only", "transpose", "--size", "3000,96", "--config", "warps=4", "--dry-run"]
    assert main([*args, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {tuple(r["shape"]) for r in rows} == {(3000, 96)}
    assert [r["status"] for r in rows] == ["built", "built"]
    plan = tmp_path / "plan.json"
    entry = {"workload": "transpose", "config": {"warps": 4}, "predicted": 1.0, "size": [3000, 96]}
    plan.write_text(json.dumps([entry]))
    assert main(["--plan", str(plan), "--dry-run", "--json", str(out)]) == 0
    assert {tuple(r["shape"]) for r in json.loads(out.read_text())} == {(3000, 96)}


@pytest.mark.parametrize(
    ("size", "message"),
    [("3000,x", "expected positive integers"), ("3000,96,4", "a size has 2 dimensions")],
)
def test_a_bad_size_is_a_clear_error(size, message, capsys):
    argv = ["--only", "col_sum", "--size", size, "--config", "tile.M=32", "--dry-run"]
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_a_plan_with_a_bad_entry_runs_nothing_and_names_each(tmp_path, capsys):
    """Every entry is resolved before any runs: a plan whose third entry names a size the
    suite lacks (by "at" where "size" was meant) spends no GPU time on the first two, and
    every bad entry is named at once."""
    good = {"workload": "swiglu", "config": {"warps": 4}, "predicted": 1.0, "at": "8192x8192 bf16"}
    bad_at = {**good, "workload": "gemm_nt_bf16", "at": "48x5120x13824 bf16"}
    bad_size = {**good, "workload": "transpose", "size": [1, 2, 3]}
    bad_size.pop("at")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([good, good, bad_at, bad_size]))
    out = tmp_path / "rows.json"
    assert main(["--plan", str(plan), "--dry-run", "--json", str(out)]) == 1
    captured = capsys.readouterr()
    assert "gemm_nt_bf16: no suite size '48x5120x13824 bf16'" in captured.err
    assert '"size": [...]' in captured.err
    assert "transpose: a size has 2 dimensions" in captured.err
    assert "swiglu 8192x8192" not in captured.out and not out.exists()
