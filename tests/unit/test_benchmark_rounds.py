"""The GPU benchmark's timing discipline, without a GPU: the implementations of one case take
turns round by round, each figure is the median of its rounds, the spread is reported, a
failing implementation is reported without stopping the others, a missing one is "missing"
(a peer) or "failed" (tilec), and a slow one runs only a few times."""

from __future__ import annotations

import math

import pytest

from tilec.benchmarks import gpu
from tilec.benchmarks.suite import Implementation


@pytest.fixture
def fake_timer(monkeypatch):
    calls: list[str] = []
    times = {"tilec": [1.0, 3.0, 2.0], "cuBLAS": [2.0, 2.2, 2.0]}

    def time_ms(run, sets):
        name = run(*sets[0])
        calls.append(name)
        return times[name][sum(c == name for c in calls) - 1]

    monkeypatch.setattr(gpu, "time_ms", time_ms)
    monkeypatch.setattr(gpu, "_close", lambda got, expected, rtol: got == expected)
    return calls


def test_rounds_interleave_and_report_median_and_spread(fake_timer):
    implementations = [
        ("tilec", lambda *a: "tilec", lambda: "ok"),
        ("cuBLAS", lambda *a: "cuBLAS", lambda: "ok"),
    ]
    results = gpu._measure("matmul", "n", implementations, [(0,)], "ok", 10**9, "TFLOP/s")
    assert fake_timer == ["tilec", "cuBLAS"] * gpu.ROUNDS
    tilec, cublas = results
    assert tilec.ms == 2.0 and tilec.spread == 3.0 and tilec.correct and tilec.status == "ok"
    assert cublas.ms == 2.0 and cublas.spread == pytest.approx(1.1)
    assert tilec.rate == pytest.approx(10**9 / 2.0 / 1e9)


def test_a_failing_implementation_is_reported_and_the_others_timed(fake_timer):
    def broken(*args):
        raise RuntimeError("launch failed")

    implementations = [("triton", broken, None), ("tilec", lambda *a: "tilec", lambda: "no")]
    failed, tilec = gpu._measure("matmul", "n", implementations, [(0,)], "ok", 1, "TFLOP/s")
    assert math.isnan(failed.ms) and failed.correct is False and "launch failed" in failed.note
    assert failed.status == "failed"
    assert tilec.correct is False and tilec.status == "wrong" and not math.isnan(tilec.ms)
    assert fake_timer == ["tilec"] * gpu.ROUNDS


def test_missing_implementations_are_reported_not_dropped(fake_timer):
    implementations = [
        Implementation("tilec", None, role="tilec", missing="examples/bmm.tile absent"),
        Implementation("triton (autotuned)", None, missing="Triton is not installed"),
        Implementation("cuBLAS", lambda *a: "cuBLAS", lambda: "ok"),
    ]
    tilec, triton, cublas = gpu._measure(
        "bmm", "n", implementations, [(0,)], "ok", 1, "TFLOP/s", tier="suite", kind="compute"
    )
    assert tilec.status == "failed" and "absent" in tilec.note and tilec.role == "tilec"
    assert triton.status == "missing" and triton.note == "Triton is not installed"
    assert cublas.status == "ok" and cublas.kind == "compute"
    assert fake_timer == ["cuBLAS"] * gpu.ROUNDS


def test_outputs_are_not_checked_without_an_expected_value(fake_timer):
    (copy,) = gpu._measure(
        "ceiling", "1 GiB", [("cuBLAS", lambda *a: "cuBLAS", None)], [(0,)], None, 1, "GB/s"
    )
    assert copy.correct is None and copy.status == "ok"


def test_a_slow_implementation_runs_a_few_times(monkeypatch):
    torch = pytest.importorskip("torch")
    clock = {"now": 0.0}
    runs: list[int] = []

    class Event:
        def __init__(self, enable_timing=True):
            self.at = 0.0

        def record(self):
            self.at = clock["now"]

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return other.at - self.at

    def slow(*args):
        runs.append(1)
        clock["now"] += 400.0  # ms

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    assert gpu.time_ms(slow, [()]) == 400.0
    assert len(runs) == 1 + 1 + 3  # the first run, one warm-up, three timed
