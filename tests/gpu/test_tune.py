"""The tuner on the GPU (tilec.tune with `GpuClock`): its time for the winner agrees with a
separate `time_ms` timing of the pinned winner; a matmul at 4096³ tunes within its budget and
reports candidates per second; `@tilec.jit(autotune=...)` on torch tensors tunes once, and a
cold start from the cache compiles only the winner; the regret run works on one workload."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from tilec.benchmarks.gpu import time_ms
from tilec.jit import JitFunction, load_kernel
from tilec.tune import GpuClock, Settings, Tuner, problem_for, tune
from tilec.tune.space import split_config

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _matmul_reference():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ref", EXAMPLES / "matmul_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_winners_time_agrees_with_a_separate_timing_of_the_pinned_winner():
    sizes = {"M": 2048, "N": 2048, "K": 2048}
    problem = problem_for(load_kernel(EXAMPLES / "matmul.tile", "matmul"), sizes)
    clock = GpuClock(reference=_matmul_reference())
    result = Tuner(Settings(budget_s=12, max_candidates=8, progress=False)).run(problem, clock)
    winner = result.winner
    assert winner.status == "ok" and len(winner.times) >= 3
    # The winner, pinned as `--emit-pins` prints it, timed apart from the tuner.
    options, pass_options = split_config(winner.config)
    pinned = load_kernel(EXAMPLES / "matmul.tile", "matmul", pass_options=pass_options, **options)
    sets = clock.sets
    times = [time_ms(pinned, sets) for _ in range(3)]
    separate = sorted(times)[1]
    spread = max(winner.spread, max(times) / min(times), 1.03)
    assert winner.ms / spread <= separate <= winner.ms * spread, (winner.times, times)


def test_a_4096_cubed_matmul_tunes_within_its_budget():
    sizes = {"M": 4096, "N": 4096, "K": 4096}
    problem = problem_for(load_kernel(EXAMPLES / "matmul.tile", "matmul"), sizes)
    start = time.perf_counter()
    result = Tuner(Settings(budget_s=15, progress=False)).run(problem, GpuClock())
    elapsed = time.perf_counter() - start
    assert elapsed < 15 + 10  # the budget, and the candidate in hand when it ran out
    assert result.winner.ms <= result.heuristic.ms
    print(
        f"matmul 4096³: {len(result.candidates)} candidates in {result.elapsed_s:.1f} s, "
        f"{result.candidates_per_s:.2f} candidates/s; regret {result.regret:.3f}"
    )


def test_autotune_on_torch_tensors_and_a_cold_start_from_the_cache(monkeypatch):
    settings = Settings(budget_s=8, max_candidates=6, progress=False)
    x = torch.randn(4096, 1024, device="cuda")
    y = torch.empty_like(x)
    before = x.clone()
    first = load_kernel(EXAMPLES / "softmax.tile", "softmax", autotune=settings)
    first(x, y)
    torch.cuda.synchronize()
    assert first.tuned is not None and first.tuned["clock"] == "gpu"
    assert torch.equal(x, before)  # tuning ran on copies
    torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)
    # Cold start: a new object finds the winner in the cache and compiles only it.
    monkeypatch.setattr(Tuner, "run", lambda *a: pytest.fail("tuned again"))
    compiled = []
    original = JitFunction.compile_specialized

    def counting(self, *args):
        compiled.append(self.options)
        return original(self, *args)

    monkeypatch.setattr(JitFunction, "compile_specialized", counting)
    cold = load_kernel(EXAMPLES / "softmax.tile", "softmax", autotune=True)
    z = torch.empty_like(x)
    cold(x, z)
    torch.cuda.synchronize()
    assert len(compiled) == 1 and torch.equal(y, z)


def test_tune_reuses_a_cached_winner():
    sizes = {"M": 1024, "N": 1024}
    problem = problem_for(load_kernel(EXAMPLES / "softmax.tile", "softmax"), sizes)
    settings = Settings(budget_s=6, max_candidates=4, progress=False)
    result, entry = tune(problem, GpuClock(), settings)
    assert result is not None
    again, cached = tune(problem, GpuClock(), settings)
    assert again is None and cached["pins"] == entry["pins"]


def test_the_regret_run_on_one_workload(tmp_path):
    from tilec.benchmarks.regret import main

    assert main(["--only", "vector_add", "--budget", "6s", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "regret.json").read_text())
    assert report["summary"]["workloads"] == 1 and report["summary"]["geomean_regret"] >= 1
    (search,) = report["searches"]
    assert search["workload"] == "vector_add" and search["candidates"]


def test_the_block_order_probe_is_a_tuner_sweep():
    from tilec.benchmarks.block_order import sweep

    line = sweep(1024, "f16", (1, 8))
    assert line.startswith("f16 nn 1024^3: cuBLAS ")
    assert " g1 " in line and " g8 " in line and "WRONG" not in line
