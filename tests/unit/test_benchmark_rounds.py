"""The GPU benchmark's timing discipline, without a GPU: the implementations of one size take
turns round by round, each figure is the median of its rounds, the spread is reported, and a
failing implementation is reported without stopping the others."""

from __future__ import annotations

import math

import pytest

from tilec.benchmarks import gpu


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
    assert tilec.ms == 2.0 and tilec.spread == 3.0 and tilec.correct
    assert cublas.ms == 2.0 and cublas.spread == pytest.approx(1.1)
    assert tilec.rate == pytest.approx(10**9 / 2.0 / 1e9)


def test_a_failing_implementation_is_reported_and_the_others_timed(fake_timer):
    def broken(*args):
        raise RuntimeError("launch failed")

    implementations = [("triton", broken, None), ("tilec", lambda *a: "tilec", lambda: "no")]
    failed, tilec = gpu._measure("matmul", "n", implementations, [(0,)], "ok", 1, "TFLOP/s")
    assert math.isnan(failed.ms) and failed.correct is False and "launch failed" in failed.note
    assert tilec.correct is False and fake_timer == ["tilec"] * gpu.ROUNDS


def test_the_table_shows_three_decimal_ratios_and_spreads():
    rows = [
        gpu.Result("softmax", "s", "tilec", 0.0695, 3860.0, "GB/s", True, spread=1.01),
        gpu.Result("softmax", "s", "torch", 0.108, 2476.0, "GB/s", True, spread=1.0),
        gpu.Result("softmax", "s", "triton", 0.0694, 3862.0, "GB/s", True, spread=1.02),
        gpu.Result("copy", "1 GiB", "copy", 0.5, 4237.0, "GB/s"),
    ]
    text = gpu.table([r.__dict__ for r in rows])
    line = next(x for x in text.splitlines() if x.startswith("softmax"))
    assert "1.001" in line and "1.01/1.00/1.02" in line
