"""Tuning over several GPUs (tilec/tune/devices.py) on the CPU: fake GPUs of different speeds,
each a real spawned measuring process with its own clock (`FakeClock` made again there by its
factory), candidates dealt to whichever is free. The search reaches the same winner as on one
GPU, the final round is timed on the first GPU alone, the work is spread, a measuring process
that dies is recorded and replaced, and GPUs named wrongly are errors naming them."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilec.diagnostics import TileError
from tilec.jit import load_kernel
from tilec.tune import FakeClock, Settings, Tuner, problem_for
from tilec.tune.devices import resolve_gpus

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = {"M": 16, "N": 64}
BEST = {"tile.M": 8, "warps": 2, "assign-layouts.min_blocks_per_sm": 1}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))


def _problem():
    function = load_kernel(ROOT / "examples" / "softmax.tile", "softmax")
    return problem_for(function, SOFTMAX, arch="sm_90a")


def _settings(**kw):
    return Settings(**{"budget_s": 120, "workers": 2, "progress": False, "finalists": 2, **kw})


# Costs and clocks at module level: the measuring processes unpickle them by name.
def eight_rows_on_two_warps(d):
    """One best config (`BEST`), each decision's step away from it costing at least 20%: a
    device 7% slower cannot change which candidate of a batch is fastest."""
    return (
        1.0
        + abs(math.log2(d["tile.M"] / 8))
        + abs(math.log2(d["warps"] / 2)) / 2
        + abs(d["assign-layouts.min_blocks_per_sm"] - 1) / 4
    )


class SlowerOnTheSecond(FakeClock):
    """Fake GPU 1 is 7% slower than GPU 0 on every kernel but the heuristic's: a difference
    by kernel, which the calibration on the heuristic does not see."""

    def time(self, build):
        slower = self.ordinal == 1 and build.config != {}
        return [t * (1.07 if slower else 1.0) for t in super().time(build)]


def dies_on_two_or_four_rows(d):
    """Kills its measuring process on the first two candidates after the heuristic's (one
    on each GPU: each is given to the GPU that has waited longest)."""
    if d["config"] in ({"tile.M": 2}, {"tile.M": 4}) and multiprocessing.parent_process():
        os._exit(3)  # in a measuring process: it dies
    return eight_rows_on_two_warps(d)


def test_two_gpus_reach_the_winner_of_one_and_the_final_round_is_timed_on_the_first():
    problem = _problem()
    one = Tuner(_settings()).run(problem, FakeClock(eight_rows_on_two_warps))
    two = Tuner(_settings(gpus="all")).run(
        problem, SlowerOnTheSecond(eight_rows_on_two_warps, speeds=(1.0, 1.0))
    )
    assert one.stopped == two.stopped == "converged"
    assert one.winner.config == two.winner.config == BEST
    assert one.winner.ms == two.winner.ms == 1.0
    assert two.regret == one.regret
    # The same path: every batch's fastest was the same candidate on either host.
    assert sorted(json.dumps(c.config) for c in one.candidates) == sorted(
        json.dumps(c.config) for c in two.candidates
    )
    assert {c.device for c in one.candidates} == {None}  # one GPU: the tuner's own process
    # The work was spread: candidates timed on each GPU (GPU 1's times are 7% slow).
    timed = [c for c in two.candidates if c.status == "ok"]
    assert {c.device for c in timed} | {c.descent_device for c in timed} >= {0, 1}
    for c in timed:
        cost = eight_rows_on_two_warps(c.decisions)
        assert c.times[0] == (cost * 1.07 if c.device == 1 else cost)
    # The final round (the finalists and the heuristic, timed twice) is GPU 0's alone, times
    # from GPU 1 replaced, not averaged in.
    finalists = [c for c in timed if len(c.times) > 1]
    assert two.heuristic in finalists and two.winner in finalists and len(finalists) == 3
    for c in finalists:
        assert c.device == 0
        assert c.times == [eight_rows_on_two_warps(c.decisions)] * 2
    for c in finalists:
        if c.descent_device is not None:
            assert c.descent_device == 1 and c.descent_times[0] > c.times[0]
    assert two.gpus == [{"gpu": 0, "scale": 1.0}, {"gpu": 1, "scale": 1.0}]
    entry = two.to_json()
    assert entry["winner"]["device"] == 0 and entry["gpus"][1]["gpu"] == 1


class WrongOnFourWarps(FakeClock):
    """Candidates on 4 warps write garbage (the heuristic takes one warp for 16 rows of 64:
    the grid gives any warps the same blocks an SM, and one warp widens a thread's accesses):
    each measuring process checks against its own reference, the heuristic's output on its
    GPU."""

    def outputs(self, build):
        outputs = super().outputs(build)
        if build.decisions.get("warps") == 4:
            outputs = {k: v + 1 for k, v in outputs.items()}
        return outputs


def test_a_measuring_process_that_dies_is_recorded_and_the_search_goes_on():
    # Uniform speeds: GPU 1's times are scaled onto GPU 0's by the heuristic's time.
    clock = WrongOnFourWarps(dies_on_two_or_four_rows, speeds=(1.0, 1.5))
    result = Tuner(_settings(gpus=[0, 1])).run(_problem(), clock)
    assert result.heuristic.decisions["warps"] == 1
    wrong = [c for c in result.candidates if c.status == "wrong"]
    assert wrong and all(c.decisions["warps"] == 4 and not c.times for c in wrong)
    crashed = [c for c in result.candidates if c.status == "crashed"]
    assert sorted(c.config["tile.M"] for c in crashed) == [2, 4]
    assert {c.device for c in crashed} == {0, 1} and not any(c.times for c in crashed)
    for c in crashed:
        assert f"the measuring process of GPU {c.device} died" in c.reason
    # Both processes died: every candidate measured after is a new process's (each GPU's
    # process is started again), and the search goes on to the best.
    last = max(c.index for c in crashed)
    assert any(c.index > last and c.status == "ok" for c in result.candidates)
    assert result.stopped == "converged" and result.winner.config == BEST
    assert result.gpus[1]["scale"] == pytest.approx(1 / 1.5)
    for c in result.candidates:
        if c.status == "ok":
            assert c.ms == pytest.approx(eight_rows_on_two_warps(c.decisions))


def test_gpus_named_twice_or_out_of_range_are_errors_naming_them():
    assert resolve_gpus("all", 2, "gpu") == [0, 1]
    assert resolve_gpus("1,0", 2, "gpu") == [1, 0]
    assert resolve_gpus([1], 2, "gpu") == [1]
    with pytest.raises(TileError, match=r"GPU 0 is named twice in the GPUs to tune on \(0,0\)"):
        resolve_gpus("0,0", 2, "gpu")
    with pytest.raises(TileError, match=r"there is no GPU 2 to tune on \(0,2\): .* GPUs 0 to 1"):
        resolve_gpus("0,2", 2, "gpu")
    with pytest.raises(TileError, match="no GPU to tune on: the gpu clock sees none"):
        resolve_gpus("all", 0, "gpu")
    with pytest.raises(TileError, match="expected 'all' or GPU numbers such as 0,1, got 'one'"):
        resolve_gpus("one", 2, "gpu")
    # Before anything is compiled or spawned, the search says so.
    problem = _problem()
    with pytest.raises(TileError, match="there is no GPU 1 to tune on"):
        Tuner(_settings(gpus=[0, 1])).run(problem, FakeClock(eight_rows_on_two_warps))
    with pytest.raises(TileError, match="cannot be sent to a measuring process"):
        clock = FakeClock(lambda d: 1.0, speeds=(1.0, 1.0))
        Tuner(_settings(gpus="all")).run(problem, clock)


def test_a_measuring_process_sees_its_gpu_as_this_process_numbers_it(monkeypatch):
    from tilec.tune.devices import _visible

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert _visible(1) == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, GPU-5a1f")
    assert (_visible(0), _visible(1)) == ("2", "GPU-5a1f")


class _InThisProcessOnly(FakeClock):
    def factory(self):
        return None


def test_a_clock_that_cannot_leave_the_process_times_on_one_gpu_only():
    with pytest.raises(TileError, match="times in this process only"):
        clock = _InThisProcessOnly(eight_rows_on_two_warps, speeds=(1.0, 1.0))
        Tuner(_settings(gpus="all")).run(_problem(), clock)


def _tilec(*args: str, cache: Path, **env: str):
    return subprocess.run(
        [sys.executable, "-m", "tilec.cli", "tune", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TILEC_CACHE_DIR": str(cache), **env},
        timeout=300,
    )


def test_tune_gpus_on_the_command_line(tmp_path):
    softmax = ["examples/softmax.tile", "-k", "softmax", "--sizes", "M=16,N=64"]
    # No GPU: an error, not a fallback (there is no device to fall back to, and a fake clock
    # would time nothing).
    none = _tilec(*softmax, "--gpus", "all", cache=tmp_path, CUDA_VISIBLE_DEVICES="")
    if none.returncode != 0:  # (on a GPU machine, it tunes)
        assert none.returncode == 1 and "Traceback" not in none.stderr
        assert "there is none here" in none.stderr
    twice = _tilec(*softmax, "--clock", "fake", "--gpus", "0,0", cache=tmp_path)
    assert twice.returncode == 1 and "Traceback" not in twice.stderr
    assert "GPU 0 is named twice" in twice.stderr
    # The fake clock's host has two GPUs: both time candidates; the table says which did.
    both = _tilec(
        *softmax, "--clock", "fake", "--gpus", "all", "--max-candidates", "4", cache=tmp_path
    )
    assert both.returncode == 0, both.stderr
    assert "gpu  status" in both.stdout
    assert (
        "gpus       0, 1 (times x0.935); the final round, the winner and the regret on GPU 0"
        in (both.stdout)
    )
