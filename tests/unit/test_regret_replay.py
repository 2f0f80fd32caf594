"""`tilec.benchmarks.regret_replay`: today's heuristic choice looked up among the candidates a
GPU regret run timed (a prediction, never a measurement: a choice nobody timed says so)."""

from __future__ import annotations

from tilec.benchmarks.regret_replay import heuristic_decisions, replay
from tilec.benchmarks.suite import WORKLOADS


def _search(heuristic: dict, candidates: list[tuple[dict, float]]) -> dict:
    rows = [{"decisions": d, "ms": ms, "status": "ok"} for d, ms in candidates]
    best = min(rows, key=lambda c: c["ms"])
    return {
        "kernel": "k",
        "workload": "k",
        "size": "s",
        "heuristic": {"decisions": heuristic, "ms": candidates[0][1]},
        "winner": best,
        "regret": candidates[0][1] / best["ms"],
        "candidates": rows,
    }


def test_a_choice_the_search_timed_gets_the_median_of_its_twins():
    search = _search(
        {"tile.M": 32, "warps": 8},
        [
            ({"tile.M": 32, "warps": 8}, 2.0),
            ({"tile.M": 128, "warps": 4}, 1.0),
            ({"tile.M": 128, "warps": 4}, 1.2),
            ({"tile.M": 128, "warps": 4}, 1.1),
        ],
    )
    row = replay(search, {"tile.M": 128, "warps": 4})
    assert row["now_ms"] == 1.1 and row["predicted_regret"] == 1.1
    assert row["changed"] == "tile.M 32->128, warps 8->4"


def test_a_decision_a_candidate_lacks_differs_from_one_it_has():
    # A split of 1 reports no split: it is not the automatic split's twin.
    search = _search(
        {"tile.M": 32, "split": "auto"},
        [({"tile.M": 32, "split": "auto"}, 2.0), ({"tile.M": 128}, 9.0)],
    )
    row = replay(search, {"tile.M": 128, "split": "auto"})
    assert row["now_ms"] is None and row["predicted_regret"] is None


def test_decisions_added_after_the_run_are_not_compared():
    search = _search({"tile.M": 32}, [({"tile.M": 32}, 2.0), ({"tile.M": 64}, 1.0)])
    row = replay(search, {"tile.M": 64, "tiling.producer": 0})
    assert row["now_ms"] == 1.0


def test_the_heuristic_is_read_back_from_the_suite_call_without_a_gpu():
    workload = WORKLOADS["col_sum"]
    decisions = heuristic_decisions(workload, workload.quick[0])
    assert decisions["tile.N"] == 32 and decisions["split"] == "auto"


def test_the_recorded_code_says_whether_a_time_still_describes_the_choice():
    """A record's candidates carry their code's digest (`Build.code`): the same decisions
    compiled to other code today are another kernel, whose time the record does not hold."""
    search = _search({"tile.M": 32}, [({"tile.M": 32}, 2.0), ({"tile.M": 64}, 1.0)])
    search["candidates"][1]["code"] = "abc"
    assert replay(search, {"tile.M": 64}, "abc")["code"] == "same"
    assert replay(search, {"tile.M": 64}, "def")["code"] == "changed"
    search["candidates"][1]["code"] = None  # a record from before the digests
    assert replay(search, {"tile.M": 64}, "abc")["code"] == "unknown"


def test_a_tuned_candidate_records_its_code_digest():
    from tilec.tune.search import Candidate

    assert Candidate(0, {}, "ok", code="0123abcd").to_json()["code"] == "0123abcd"
