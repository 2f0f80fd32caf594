"""The tuner's search (tilec/tune/search.py) on the CPU: real compiles in spawned worker
processes, outputs checked in the interpreter, and a fake clock (a deterministic cost of what
each candidate compiled to) in place of the GPU's."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from tilec.diagnostics import TileError
from tilec.jit import load_kernel
from tilec.tune import FakeClock, Settings, Tuner, build_candidate, problem_for, tune
from tilec.tune import cache as tune_cache

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MATMUL = {"M": 128, "N": 128, "K": 64}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))


def _problem(example="matmul.tile", kernel="matmul", sizes=MATMUL, **options):
    return problem_for(load_kernel(EXAMPLES / example, kernel, **options), sizes, arch="sm_90a")


def prefers_64_rows_and_2_warps(d):
    """Fastest at BM=64 on 2 warps; every step away costs."""
    return 1.0 + abs(np.log2(d["tile.M"] / 64)) + abs(np.log2(d["warps"] / 2)) / 2


def _settings(**kw):
    return Settings(**{"budget_s": 120, "workers": 2, "progress": False, "finalists": 2, **kw})


# Builders the workers run instead of `build_candidate` (module level: spawn imports them).
def crash_on_two_warps(problem, config):
    if config.get("warps") == 2:
        os._exit(3)
    return build_candidate(problem, config)


def hang_on_two_warps(problem, config):
    if config.get("warps") == 2:
        time.sleep(60)
    return build_candidate(problem, config)


def test_the_search_starts_from_the_heuristic_and_descends_to_the_cheapest():
    result = Tuner(_settings()).run(_problem(), FakeClock(prefers_64_rows_and_2_warps))
    assert result.candidates[0].config == {} and result.heuristic.status == "ok"
    assert result.winner.decisions["tile.M"] == 64 and result.winner.decisions["warps"] == 2
    assert result.winner.ms == pytest.approx(1.0)
    assert result.regret == pytest.approx(result.heuristic.ms / result.winner.ms)
    assert result.regret > 1  # the heuristic (BM=128, 8 warps) is not the cheapest here
    assert result.stopped == "converged"
    statuses = {c.status for c in result.candidates}
    assert "pruned" in statuses  # tile sizes that mma.sync cannot take
    pruned = [c for c in result.candidates if c.status == "pruned"]
    assert all(c.reason and not c.times for c in pruned)
    # Configs that compile to the same code are timed once.
    duplicates = [c for c in result.candidates if c.status == "duplicate"]
    assert all(result.candidates[c.same_as].code == c.code for c in duplicates)


def test_max_candidates_bounds_the_compiled_candidates():
    result = Tuner(_settings(max_candidates=5)).run(
        _problem(), FakeClock(prefers_64_rows_and_2_warps)
    )
    assert result.stopped == "max-candidates"
    assert sum(1 for c in result.candidates if c.status != "pruned") == 5


def test_the_budget_stops_the_search():
    start = time.perf_counter()
    result = Tuner(_settings(budget_s=3)).run(_problem(), FakeClock(prefers_64_rows_and_2_warps))
    assert result.stopped == "budget" and time.perf_counter() - start < 30
    assert result.winner.timed


class _WrongOnTwoWarps(FakeClock):
    """A clock whose candidates on 2 warps write garbage (a wrong configuration)."""

    def outputs(self, build):
        outputs = super().outputs(build)
        if build.decisions.get("warps") == 2:
            outputs = {k: v + 1 for k, v in outputs.items()}
        return outputs


def test_a_wrong_result_is_never_timed_and_never_wins():
    result = Tuner(_settings()).run(_problem(), _WrongOnTwoWarps(prefers_64_rows_and_2_warps))
    wrong = [c for c in result.candidates if c.status == "wrong"]
    assert wrong and all(c.decisions["warps"] == 2 and not c.times for c in wrong)
    assert "wrong result: c differs" in wrong[0].reason
    assert result.winner.decisions["warps"] != 2


def test_a_numpy_reference_checks_the_heuristic_too():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ref", EXAMPLES / "matmul_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = Tuner(_settings(max_candidates=3)).run(
        _problem(), FakeClock(prefers_64_rows_and_2_warps, reference=module)
    )
    assert result.heuristic.status == "ok"
    assert all(c.status != "wrong" for c in result.candidates)


def test_a_worker_that_dies_is_recorded_as_crashed_and_the_search_goes_on():
    # Enough candidates for the search to reach decisions after warps (the heuristic's tile
    # takes 12 before the warps batch is done: a budget that ends at the crash shows nothing).
    settings = _settings(builder=crash_on_two_warps, max_candidates=18)
    result = Tuner(settings).run(_problem(), FakeClock(prefers_64_rows_and_2_warps))
    crashed = [c for c in result.candidates if c.status == "crashed"]
    assert [c.config.get("warps") for c in crashed] == [2] * len(crashed) and crashed
    assert "worker process died" in crashed[0].reason
    # The search goes on: a candidate tried after the crash is compiled and timed (or found
    # to be the same code as one that was).
    assert any(c.timed and c.index > crashed[0].index for c in result.candidates)


def test_a_compile_past_the_time_limit_is_abandoned():
    # 12 s: far above a compile on a loaded 2-core machine (a worker's start and imports
    # included), far below the hanging compile's 60 s.
    settings = _settings(builder=hang_on_two_warps, compile_timeout_s=12, max_candidates=12)
    start = time.perf_counter()
    result = Tuner(settings).run(_problem(), FakeClock(prefers_64_rows_and_2_warps))
    assert time.perf_counter() - start < 58  # the hanging compile was not waited for
    timeouts = [c for c in result.candidates if c.status == "timeout"]
    assert any(c.config.get("warps") == 2 for c in timeouts)
    assert "ran past 12 s" in timeouts[0].reason


def test_ctrl_c_keeps_the_measurements_and_caches_nothing(tmp_path):
    calls = []

    def interrupt_on_the_fourth(d):
        calls.append(d)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return prefers_64_rows_and_2_warps(d)

    problem = _problem()
    clock = FakeClock(interrupt_on_the_fourth)
    result, entry = tune(problem, clock, _settings())
    assert result.interrupted and entry["stopped"] == "interrupted"
    assert sum(1 for c in result.candidates if c.status == "ok") == 3
    assert result.winner.timed
    from tilec.tune.api import tune_key

    assert tune_cache.load(tune_key(problem, clock)) is None
    folder = tmp_path / "cache" / "tuned"
    assert not [p for p in folder.rglob("*") if p.is_file()]  # no half entry, no temporary


def test_contradictory_pins_are_an_empty_space_naming_the_constraint():
    problem = _problem(tile={"K": 8})
    with pytest.raises(TileError) as e:
        Tuner(_settings()).run(problem, FakeClock(prefers_64_rows_and_2_warps))
    text = e.value.render()
    assert "nothing to tune" in text and "BK=8" in text and "not a multiple of 16" in text
    assert "empty search space" in text


def test_shapes_too_large_for_any_candidate_are_an_empty_space():
    problem = _problem(tile={"M": 256, "N": 256, "K": 64}, stages=8)
    with pytest.raises(TileError, match="over the limit of 227 KiB"):
        Tuner(_settings()).run(problem, FakeClock(prefers_64_rows_and_2_warps))


def test_a_sweep_tries_exactly_the_configs_given_after_the_heuristic():
    configs = [{"tiling.group_m": g} for g in (1, 2)] + [{"tiling.wgmma": False}]
    problem = _problem(sizes={"M": 512, "N": 512, "K": 64})  # 4 blocks down M: groups of 2
    result = Tuner(_settings()).sweep(problem, FakeClock(prefers_64_rows_and_2_warps), configs)
    assert result.stopped == "swept"
    assert result.candidates[0].config == {}  # first: the reference
    tried = sorted(json.dumps(c.config, sort_keys=True) for c in result.candidates[1:])
    assert tried == sorted(json.dumps(c, sort_keys=True) for c in configs)
    assert result.heuristic.decisions["path"] == "wgmma"
    assert result.candidate_for({"tiling.wgmma": False}).decisions["path"] == "mma"
    assert result.candidate_for({"tiling.group_m": 2}).decisions["tiling.group_m"] == 2
    assert result.candidate_for({"warps": 3}) is None
    # What a probe's row shows: the time of a timed config, or why there is none.
    ms, why = result.outcome({"tiling.wgmma": False})
    assert ms == result.candidate_for({"tiling.wgmma": False}).ms and why == ""
    assert result.outcome({}) == (result.heuristic.ms, "")
    assert result.outcome({"warps": 3}) == (None, "not run")


def test_a_pinned_split_is_other_code_than_the_heuristics():
    # A pinned split count changes the launch (the ABI), not the PTX: the two must be timed
    # apart, not taken for duplicates (the regret run of 0e6dbb9 timed no split candidate).
    function = load_kernel(Path(__file__).parents[2] / "examples" / "col_sum.tile", "col_sum")
    problem = problem_for(function, {"M": 4096, "N": 128}, arch="sm_90a")
    heuristic = build_candidate(problem, {})
    pinned = build_candidate(problem, {"split": 16})
    assert heuristic.status == pinned.status == "built"
    assert heuristic.ptx == pinned.ptx
    assert heuristic.code != pinned.code
    assert pinned.code == build_candidate(problem, {"split": 16}).code


def test_a_budget_spent_before_the_heuristic_is_measured_still_measures_it():
    """The heuristic's configuration is the search's reference: a budget too short to build it
    (here none at all) stops the search after it, not before."""
    result = Tuner(_settings(budget_s=0)).run(_problem(), FakeClock(prefers_64_rows_and_2_warps))
    assert result.stopped == "budget"
    assert result.heuristic.timed and result.winner is result.heuristic


def test_a_problem_from_the_calls_facts_allocates_nothing_whatever_its_size():
    # The jit's autotune and the suite's runner give the specialization of the GPU tensors of
    # the call: the sizes are checked, no host copy of 12 GiB of arguments is made (it once
    # was, and past 4 GiB refused).
    function = load_kernel(EXAMPLES / "matmul.tile", "matmul")
    facts = _problem().specialization
    from tilec.lowering import Specialization

    sizes = {"M": 65536, "N": 65536, "K": 32768}
    problem = problem_for(
        function, sizes, arch="sm_90a", specialization=Specialization.from_json(facts)
    )
    assert problem.extents == sizes
    with pytest.raises(TileError, match="has no dimension 'Q'"):
        problem_for(
            function,
            {**sizes, "Q": 1},
            arch="sm_90a",
            specialization=Specialization.from_json(facts),
        )
