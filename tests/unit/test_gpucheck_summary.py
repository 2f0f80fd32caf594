"""gpucheck without a GPU: it reads compute-sanitizer's verdicts (memcheck's and racecheck's
summary lines, as the H200's compute-sanitizer printed them), and puts the benchmark suite's
table last, its JSON and chart under $OUT."""

from __future__ import annotations

import pytest

from tilec.gpucheck import sanitizer_errors

RACY = """\
========= Error: Race reported between Write access at softmax+0x1b80 in softmax.tile:12
=========     and Read access at softmax+0x1710 in softmax.tile:12 [140 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
"""


@pytest.mark.parametrize(
    ("output", "errors"),
    [
        ("========= ERROR SUMMARY: 0 errors\n", 0),
        ("========= ERROR SUMMARY: 3 errors\n", 3),
        ("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n", 0),
        (RACY, 2),
        ("========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n", 1),
        ("Traceback (most recent call last):\n", None),
    ],
)
def test_summaries_are_read(output, errors):
    assert sanitizer_errors(output) == errors


def test_the_benchmarks_end_the_output_and_land_in_out(monkeypatch, tmp_path, capsys):
    """gpucheck's benchmark part without a GPU: the suite's results (synthetic here) go into
    $OUT/gpucheck.json as the report's rows and summary, the chart beside it, the table last."""
    import json
    import types

    from tilec import gpucheck, runtime
    from tilec.benchmarks import gpu

    seen = {}

    def fake_run(*, quick, only, progress):
        seen.update(quick=quick, only=only)
        return [
            gpu.Result(
                "gemm_nn", "4096", "tilec", 0.25, 550.0, "TFLOP/s", True, role="tilec"
            ).__dict__,
            gpu.Result(
                "gemm_nn", "4096", "cuBLAS", 0.2, 687.0, "TFLOP/s", True, role="peer"
            ).__dict__,
        ]

    monkeypatch.setattr(gpu, "run", fake_run)
    monkeypatch.setattr(runtime, "get_device", lambda: types.SimpleNamespace(name="NVIDIA H200"))
    monkeypatch.setenv("OUT", str(tmp_path))
    code = gpucheck.main(["--skip-tests", "--skip-sanitizer", "--only", "gemm_nn"])
    assert code == 0 and seen == {"quick": False, "only": "gemm_nn"}
    data = json.loads((tmp_path / "gpucheck.json").read_text())
    assert data["gpu"] == "NVIDIA H200"
    assert data["benchmarks"]["rows"][0]["best_peer"] == "cuBLAS"
    assert data["benchmarks"]["summary"]["suite"]["geomean"] == pytest.approx(1.25)
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("geomean tilec/best peer over 1 of 1 suite rows: 1.250")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert any("chart skipped" in line for line in out)
    else:
        assert (tmp_path / "suite_ratios.png").is_file()


def test_an_only_pattern_that_picks_nothing_stops_gpucheck_first(monkeypatch, capsys):
    from tilec import gpucheck

    assert gpucheck.main(["--skip-tests", "--skip-sanitizer", "--only", "gemn"]) == 2
    assert "matches no workload" in capsys.readouterr().err
