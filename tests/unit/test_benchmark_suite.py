"""The benchmark suite without a GPU: which workloads `--only` picks, what `plan` runs, every
workload's case built on the CPU at a tiny size (its peers checked against its expected
output), and the report: rows, the geometric mean, the worst workloads, "no peer" and failed
rows, JSON and the chart, from synthetic results."""

from __future__ import annotations

import json
import math

import pytest

from tilec.benchmarks import gpu, report, suite_core
from tilec.benchmarks.gpu import Result
from tilec.benchmarks.suite import WORKLOADS, Context, Implementation, select

# ---------------------------------------------------------------------------------------------
# Selection and plan


def test_only_takes_substrings_globs_and_commas():
    names = ["gemm_nn", "gemm_nt_bf16", "attention", "attention_causal", "softmax", "softmax_f16"]
    assert select("attention", names) == ["attention", "attention_causal"]
    assert select("gemm_*", names) == ["gemm_nn", "gemm_nt_bf16"]
    assert select("*_bf16, SOFTMAX", names) == ["gemm_nt_bf16", "softmax", "softmax_f16"]
    assert select(None, names) == names
    assert select("softmax_f16,softmax_f16", names) == ["softmax_f16"]


def test_a_pattern_that_picks_nothing_is_an_error():
    with pytest.raises(ValueError, match="'gemn' matches no workload"):
        select("softmax,gemn", ["softmax"])


def test_the_suite_holds_the_workloads_of_the_issue():
    expected = {
        *(f"gemm_{layout}{suffix}" for layout in ("nn", "nt", "tn", "tt") for suffix in ("", "_bf16")),
        "bmm", "matmul_bias_gelu", "int8_gemm", "int8_gemm_nt", "fp8_gemm", "attention", "attention_causal", "attention_gqa",
        "attention_window",
        "rmsnorm", "layernorm", "softmax", "softmax_f16", "cross_entropy", "swiglu", "bias_gelu", "dropout", "row_sum",
        "logsumexp", "greedy_token", "seq_mean", "col_sum", "col_sum_atomic", "transpose", "rotary", "head_gate", "vector_add", "embedding", "embedding_bag", "embedding_backward", "histogram", "cumsum_rows",
        "running_max_rows", "topk_softmax", "paged_decode", "moe_gemm",
    }  # fmt: skip
    assert set(WORKLOADS) == expected
    assert (4000, 3000, 1000) in WORKLOADS["gemm_nn"].sizes
    assert WORKLOADS["gemm_tt"].sizes == ((4096, 4096, 4096), (1999, 1001, 3001))
    # J's awkward shapes: every layout at M, N and K none a multiple of 8
    for layout in ("nn", "nt", "tn", "tt"):
        assert any(all(x % 8 for x in size) for size in WORKLOADS[f"gemm_{layout}"].sizes)
    for workload in WORKLOADS.values():
        assert workload.quick, workload.name
        assert bool(workload.small) == (workload.kind == "memory"), workload.name


def test_plan_runs_the_ceilings_first_and_small_sizes_after_the_suite():
    steps = gpu.plan()
    assert [s.name for s in steps[:4]] == ["copy", "f16", "bf16", "int8"]
    tiers = [s.tier for s in steps if s.what == "case"]
    assert tiers == sorted(tiers, key=lambda t: t == "small")  # every suite row, then small
    assert [s.what for s in steps[-2:]] == ["host_overhead", "cold_compile"]


def test_plan_with_only_needs_only_its_ceilings():
    steps = gpu.plan(only="softmax")
    assert [s.name for s in steps if s.what == "ceiling"] == ["copy"]
    assert {s.name for s in steps if s.what == "case"} == {"softmax", "softmax_f16", "topk_softmax"}
    assert not [s for s in steps if s.what in gpu.EXTRAS]
    quick = gpu.plan(only="gemm_nn_bf16", quick=True)
    assert [s.name for s in quick if s.what == "ceiling"] == ["copy", "f16", "bf16"]
    assert [s.tier for s in quick if s.what == "case"] == ["suite"]


def test_the_command_refuses_an_unknown_workload(capsys):
    assert gpu.main(["--only", "nosuchkernel"]) == 1
    assert "matches no workload" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# Every case, built on the CPU

TINY = {
    "gemm": (64, 48, 32),
    "bmm": (2, 32, 32, 16),
    "matmul_bias_gelu": (64, 48, 32),
    "int8_gemm": (32, 32, 32),
    "int8_gemm_nt": (20, 24, 40),
    "fp8_gemm": (20, 24, 40),
    "attention": (1, 2, 2, 128, 16),
    "attention_causal": (1, 2, 2, 128, 16),
    "attention_gqa": (1, 4, 2, 128, 16),
    "attention_window": (1, 2, 128, 16, 40),
    "rmsnorm": (8, 64),
    "layernorm": (8, 64),
    "softmax": (8, 64),
    "softmax_f16": (8, 77),
    "cross_entropy": (8, 100),
    "swiglu": (8, 64),
    "bias_gelu": (8, 100),
    "dropout": (64, 128),
    "row_sum": (8, 64),
    "logsumexp": (3, 300),
    "greedy_token": (5, 300),
    "seq_mean": (3, 70, 9),
    "col_sum": (64, 8),
    "col_sum_atomic": (70, 9),
    "cumsum_rows": (8, 100),
    "running_max_rows": (8, 100),
    "topk_softmax": (8, 60),
    "transpose": (8, 16),
    "rotary": (8, 2, 16),
    "head_gate": (8, 2, 24),
    "vector_add": (100,),
    "embedding": (37, 24, 50),
    "embedding_backward": (37, 24, 50),
    "embedding_bag": (37, 24, 6, 5),
    "histogram": (1000, 7),
    "paged_decode": (2, 4, 2, 37, 16),
    "moe_gemm": (4, 20, 2, 24, 40),
}


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_each_case_builds_and_its_eager_peers_are_right(name, monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(suite_core, "DEVICE", "cpu")
    monkeypatch.setattr(gpu, "time_ms", lambda run, sets: 1.0)
    # No torch.compile on the CPU here (it wants a C++ compiler, and is slow): a missing peer.
    monkeypatch.setattr(
        Context,
        "compiled",
        lambda self, f, inputs: Implementation("torch.compile", None, missing="off"),
    )
    context = Context(sets=lambda make, size: [make(), make()], examples=tmp_path)
    workload = WORKLOADS[name]
    size = TINY["gemm" if name.startswith("gemm_") else name]
    torch.manual_seed(0)
    case = workload.build(size, context)
    results = gpu._measure(name, workload.label(size), case.implementations, case.sets,
                           case.expected, case.amount, case.unit, case.rtol)  # fmt: skip
    by_name = {r.implementation: r for r in results}
    assert by_name["tilec"].status == "failed" and "absent" in by_name["tilec"].note
    ran = [r for r in results if r.role == "peer" and r.status != "missing"]
    assert ran, "no peer ran"
    for r in ran:
        if r.status == "failed" and any(s in r.note for s in ("CPU", "cpu", "not implemented")):
            continue  # an operation torch has only on CUDA (int8 matmul, ...)
        assert r.status == "ok" and r.correct, (r.implementation, r.note)
    missing = {r.implementation for r in results if r.status == "missing"}
    assert (
        "torch.compile" in missing
        or name in ("bmm", "moe_gemm", "fp8_gemm")
        or name.startswith(("gemm_", "attention"))
    )
    assert case.amount > 0 and case.unit in ("GB/s", "TFLOP/s", "TOPS")


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_tilec_kernels_agree_with_each_case_in_the_interpreter(name, monkeypatch):
    """The case's inputs, argument order and expected output fit the example's kernel (run by
    tilec's interpreter on CPU tensors)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TILEC_INTERPRET", "1")
    monkeypatch.setattr(suite_core, "DEVICE", "cpu")
    monkeypatch.setattr(gpu, "time_ms", lambda run, sets: 1.0)
    context = Context(sets=lambda make, size: [make()])
    workload = WORKLOADS[name]
    size = TINY["gemm" if name.startswith("gemm_") else name]
    torch.manual_seed(0)
    case = workload.build(size, context)
    tilec = next(i for i in case.implementations if i.role == "tilec")
    if tilec.run is None and "absent" in tilec.missing:
        pytest.skip(tilec.missing)
    (result,) = gpu._measure(
        name, "tiny", [tilec], case.sets, case.expected, 1, case.unit, case.rtol
    )
    assert result.status == "ok" and result.correct, result.note


# ---------------------------------------------------------------------------------------------
# The report, from synthetic results


def _result(workload, size, name, ms, **fields):
    role = fields.pop("role", "tilec" if name == "tilec" else "peer")
    unit = fields.pop("unit", "GB/s")
    rate = fields.pop("rate", 1000.0 / ms if ms == ms else math.nan)
    status = fields.pop("status", "ok")
    correct = fields.pop("correct", True if status == "ok" else None)
    return Result(workload, size, name, ms, rate, unit, correct, spread=1.0, role=role,
                  status=status, **fields).__dict__  # fmt: skip


@pytest.fixture
def synthetic():
    memory = {"kind": "memory", "ceiling": "copy"}
    gemm = {"kind": "compute", "ceiling": "f16", "unit": "TFLOP/s"}
    return [
        _result("ceiling", "1024 MiB", "torch copy_", 0.5, role="ceiling", rate=4000.0, ceiling="copy"),
        _result("ceiling", "cuBLAS f16 8192³", "cuBLAS", 1.7, role="ceiling", unit="TFLOP/s", rate=650.0, ceiling="f16"),
        # gemm: tilec 1.25x cuBLAS; triton slower than cuBLAS
        _result("gemm_nn", "4096 f16", "tilec", 0.25, rate=520.0, **gemm),
        _result("gemm_nn", "4096 f16", "cuBLAS", 0.2, **gemm),
        _result("gemm_nn", "4096 f16", "triton (autotuned)", 0.22, **gemm),
        # softmax: tilec level with torch.compile; the eager peer is slower
        _result("softmax", "8192x4096 f32", "tilec", 0.07, rate=3800.0, **memory),
        _result("softmax", "8192x4096 f32", "torch.compile", 0.07, **memory),
        _result("softmax", "8192x4096 f32", "torch eager", 0.1, eager=True, **memory),
        # attention: tilec 20x behind SDPA, the Triton peer missing
        _result("attention", "B4 H16 S4096 d128", "tilec", 20.0, unit="TFLOP/s", kind="compute", ceiling="f16"),
        _result("attention", "B4 H16 S4096 d128", "SDPA", 1.0, unit="TFLOP/s", kind="compute"),
        _result("attention", "B4 H16 S4096 d128", "triton FA2 (autotuned)", math.nan, status="missing",
                note="Triton is not installed", unit="TFLOP/s"),
        # rmsnorm: tilec fails to compile
        _result("rmsnorm", "8192x4096 bf16", "tilec", math.nan, status="failed", note="examples/rmsnorm.tile absent", **memory),
        _result("rmsnorm", "8192x4096 bf16", "torch.compile", 0.04, **memory),
        # bmm: its only peer is missing
        _result("bmm", "8x1024", "tilec", 0.5, **gemm),
        _result("bmm", "8x1024", "torch.bmm", math.nan, status="missing", note="old torch", **gemm),
        # swiglu: tilec is wrong, and the compiled peer too
        _result("swiglu", "8192x8192 bf16", "tilec", 0.1, correct=False, status="wrong", **memory),
        _result("swiglu", "8192x8192 bf16", "torch.compile", 0.05, correct=False, status="wrong", **memory),
        _result("swiglu", "8192x8192 bf16", "torch eager", 0.2, eager=True, **memory),
        # a small size: tilec slower than eager
        _result("softmax", "256x1024 f32", "tilec", 0.006, tier="small", **memory),
        _result("softmax", "256x1024 f32", "torch.compile", 0.004, tier="small", **memory),
        _result("softmax", "256x1024 f32", "torch eager", 0.005, tier="small", eager=True, **memory),
        _result("host overhead", "1 call", "tilec", 0.009, role="info", unit="µs/call", rate=9.0),
    ]  # fmt: skip


def test_rows_pick_the_fastest_correct_peer(synthetic):
    rows = {(r["workload"], r["tier"]): r for r in report.rows(synthetic)}
    gemm = rows["gemm_nn", "suite"]
    assert gemm["best_peer"] == "cuBLAS" and gemm["ratio"] == pytest.approx(1.25)
    assert gemm["roofline"] == pytest.approx(520 / 650)
    assert rows["softmax", "suite"]["roofline"] == pytest.approx(3800 / 4000)
    swiglu = rows["swiglu", "suite"]
    assert swiglu["best_peer"] == "torch eager"  # the wrong compiled peer cannot be the best
    assert swiglu["status"] == "tilec wrong"
    assert rows["rmsnorm", "suite"]["status"] == "tilec failed"
    bmm = rows["bmm", "suite"]
    assert bmm["status"] == "no peer" and bmm["best_peer"] is None and math.isnan(bmm["ratio"])
    assert rows["softmax", "small"]["eager_ratio"] == pytest.approx(1.2)
    assert ("host overhead", "suite") not in rows and ("ceiling", "suite") not in rows


def test_the_geometric_mean_leaves_out_failed_wrong_and_peerless_rows(synthetic):
    facts = report.summary(report.rows(synthetic))
    s = facts["suite"]
    assert s["counted"] == 3 and s["rows"] == 6
    assert s["geomean"] == pytest.approx((1.25 * 1.0 * 20.0) ** (1 / 3))
    assert s["excluded"] == {"tilec failed": 1, "no peer": 1, "tilec wrong": 1}
    assert [w["workload"] for w in s["worst"]] == ["attention", "gemm_nn", "softmax"]
    assert s["missing_peers"] == 2
    small = facts["small"]
    assert small["geomean"] == pytest.approx(1.5)
    assert small["eager_geomean"] == pytest.approx(1.2)
    assert [w["workload"] for w in small["slower_than_eager"]] == ["softmax"]


def test_the_worst_list_names_each_workload_once():
    gemm = {"kind": "compute", "unit": "TFLOP/s", "ceiling": "f16"}
    results = []
    for size, ratio in (("a", 3.0), ("b", 2.0), ("c", 1.5)):
        results += [
            _result("gemm_nn", size, "tilec", ratio, **gemm),
            _result("gemm_nn", size, "cuBLAS", 1.0, **gemm),
        ]
    results += [
        _result("bmm", "z", "tilec", 1.1, **gemm),
        _result("bmm", "z", "torch.bmm", 1.0, **gemm),
    ]
    worst = report.summary(report.rows(results))["suite"]["worst"]
    assert [(w["workload"], w["size"]) for w in worst] == [("gemm_nn", "a"), ("bmm", "z")]


def test_geometric_mean():
    assert report.geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert report.geometric_mean([2.0, math.nan, 8.0]) == pytest.approx(4.0)
    assert math.isnan(report.geometric_mean([]))


def test_the_table_shows_one_row_per_case_and_the_summary_line(synthetic):
    text = report.table(synthetic)
    lines = text.splitlines()
    assert lines[0].startswith("ceilings (this run): device copy 4000 GB/s; cuBLAS f16 8192³ 650")
    gemm = next(x for x in lines if x.startswith("gemm_nn"))
    assert "cuBLAS" in gemm and "1.250" in gemm and "80.0% f16" in gemm and "yes" in gemm
    assert "vs triton (autotuned) 1.136" in gemm
    attention = next(x for x in lines if x.startswith("attention"))
    assert (
        "20.000" in attention
        and "no peer triton FA2 (autotuned) (Triton is not installed)" in attention
    )
    assert "FAIL" in next(x for x in lines if x.startswith("rmsnorm"))
    assert "tilec FAILED: examples/rmsnorm.tile absent" in text
    bmm = next(x for x in lines if x.startswith("bmm"))
    assert "no peer" in bmm and "no peer torch.bmm (old torch)" in bmm
    swiglu = next(x for x in lines if x.startswith("swiglu"))
    assert "WRONG" in swiglu and "torch.compile WRONG" in swiglu
    summary = next(x for x in lines if x.startswith("geomean tilec/best peer"))
    assert "over 3 of 6 suite rows" in summary and "above 1: tilec slower" in summary
    assert "worst: attention 20.000 (B4 H16 S4096 d128), gemm_nn 1.250" in summary
    assert "1 tilec failed" in summary and "1 no peer" in summary and "1 tilec wrong" in summary
    small = next(x for x in lines if x.startswith("small sizes (target"))
    assert "tilec/eager geomean 1.200" in small and "softmax 1.200" in small
    assert lines.index(small) > lines.index(
        next(x for x in lines if x.startswith("softmax      ") and "256x1024" in x)
    )
    assert "above 1 tilec is slower" in text
    assert lines[-1].startswith("host overhead (1 call): tilec 9")


def test_the_table_reads_results_written_before_roles():
    rows = [
        Result("softmax", "s", "tilec", 0.0695, 3860.0, "GB/s", True, spread=1.01),
        Result("softmax", "s", "torch", 0.108, 2476.0, "GB/s", True, spread=1.0),
        Result("softmax", "s", "triton", 0.0694, 3862.0, "GB/s", True, spread=1.02),
        Result("copy", "1 GiB", "copy", 0.5, 4237.0, "GB/s"),
    ]
    for r in rows:
        r.role = ""
    text = gpu.table([r.__dict__ for r in rows])
    line = next(x for x in text.splitlines() if x.startswith("softmax"))
    assert "triton" in line and "1.001" in line and "1.01/1.02" in line and "91.1% copy" in line


def test_json_is_strict_and_holds_rows_summary_and_results(synthetic, tmp_path):
    path = tmp_path / "suite.json"
    report.write_json(str(path), synthetic, gpu="NVIDIA H200", versions={"torch": "2.11"})
    data = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert data["gpu"] == "NVIDIA H200" and data["ceilings"] == {"copy": 4000.0, "f16": 650.0}
    assert set(data) >= {"summary", "rows", "results", "versions"}
    assert len(data["rows"]) == 7 and len(data["results"]) == len(synthetic)
    bmm = next(r for r in data["rows"] if r["workload"] == "bmm")
    assert bmm["status"] == "no peer" and bmm["ratio"] is None
    assert bmm["peers"] == [
        {"name": "torch.bmm", "ms": None, "status": "missing", "note": "old torch"}
    ]
    assert data["summary"]["suite"]["counted"] == 3


def test_json_is_replaced_whole_so_a_run_cut_off_keeps_the_last_file(synthetic, tmp_path):
    """`--json` is written after every step of a run (`gpu.run`'s `on_step`): each write goes
    beside the file and is renamed over it, so a run killed mid-write leaves the last whole
    file and no partial one."""
    path = tmp_path / "suite.json"
    report.write_json(str(path), synthetic[:3], gpu="NVIDIA H200")
    report.write_json(str(path), synthetic, gpu="NVIDIA H200")
    assert len(json.loads(path.read_text())["results"]) == len(synthetic)
    assert [p.name for p in tmp_path.iterdir()] == ["suite.json"]


def test_the_chart_is_drawn_from_synthetic_results(synthetic, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "ratios.png"
    assert report.chart(synthetic, str(path)) == f"chart written to {path}"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_matplotlib_the_chart_is_skipped_with_a_note(synthetic, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    note = report.chart(synthetic, str(tmp_path / "x.png"))
    assert note.startswith("chart skipped: matplotlib is not installed")
    assert not (tmp_path / "x.png").exists()


def test_a_whole_run_on_the_cpu_gives_the_table_json_and_chart(monkeypatch, tmp_path, capsys):
    """`tilec bench --quick --only ...` end to end with the GPU faked: CPU tensors, tilec's
    kernels in its interpreter, synthetic ceilings and times; every step reaches the table."""
    import dataclasses
    import types

    torch = pytest.importorskip("torch")
    from tilec import runtime

    monkeypatch.setenv("TILEC_INTERPRET", "1")
    monkeypatch.setattr(suite_core, "DEVICE", "cpu")
    monkeypatch.setattr(gpu, "time_ms", lambda run, sets: 1.0)
    monkeypatch.setattr(gpu, "_triton_references", lambda: (None, "Triton is not installed"))
    monkeypatch.setattr(
        Context,
        "compiled",
        lambda self, f, inputs: Implementation("torch.compile", None, missing="off"),
    )
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(L2_cache_size=1 << 20)
    )
    monkeypatch.setattr(runtime, "get_device", lambda: types.SimpleNamespace(name="fake GPU"))

    def ceiling(which, quick):
        unit = "GB/s" if which == "copy" else "TFLOP/s"
        return [Result("ceiling", which, "x", 1.0, 100.0, unit, role="ceiling", ceiling=which)]

    monkeypatch.setattr(gpu, "_ceiling", ceiling)
    for name in ("softmax", "softmax_f16", "topk_softmax", "gemm_tt_bf16", "attention_gqa"):
        tiny = TINY["gemm" if name.startswith("gemm_") else name]
        monkeypatch.setitem(WORKLOADS, name, dataclasses.replace(WORKLOADS[name], quick=(tiny,)))
    json_path, chart_path = tmp_path / "suite.json", tmp_path / "suite.png"
    argv = ["--quick", "--only", "softmax,gemm_tt_bf16,attention_gqa", "--json", str(json_path)]
    assert gpu.main([*argv, "--chart", str(chart_path)]) == 0
    out = capsys.readouterr().out
    assert "fake GPU" in out and "ceilings (this run)" in out
    for name in ("softmax ", "softmax_f16 ", "topk_softmax ", "gemm_tt_bf16 ", "attention_gqa "):
        assert any(line.startswith(name) for line in out.splitlines()), name
    assert "geomean tilec/best peer over 5 of 5 suite rows: 1.000" in out
    data = json.loads(json_path.read_text())
    assert {r["workload"] for r in data["rows"]} == {
        "softmax",
        "softmax_f16",
        "topk_softmax",
        "gemm_tt_bf16",
        "attention_gqa",
    }
    assert all(r["status"] == "ok" for r in data["rows"]), data["rows"]
    assert data["results"][-1]["workload"] == "wall time"
    if chart_path.exists():
        assert chart_path.read_bytes()[:4] == b"\x89PNG"
    else:
        assert "chart skipped" in out
