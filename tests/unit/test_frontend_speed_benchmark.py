"""The frontend speed benchmark runs and reports every example kernel (not a timed test)."""

from __future__ import annotations

import json
from pathlib import Path

from tilec.benchmarks import frontend_speed

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_kernels_are_cut_out_with_their_decorators():
    text = (EXAMPLES / "matmul.tile").read_text(encoding="utf-8")
    sources = frontend_speed.kernel_sources(text, "matmul.tile")
    assert list(sources) == ["matmul", "matmul_pinned"]
    assert sources["matmul"].startswith("def matmul(")
    assert sources["matmul_pinned"].startswith('@kernel(tile={"M": 128')
    assert "def matmul_pinned" not in sources["matmul"]


def test_the_benchmark_reports_every_example_kernel(tmp_path, capsys):
    out = tmp_path / "figures.json"
    figures = frontend_speed.main(["--repeat", "1", "--json", str(out)])
    assert json.loads(out.read_text()) == figures
    kernels = figures["kernels"]
    assert {"matmul", "softmax", "attention_causal", "saxpy"} <= set(kernels)
    for k in kernels.values():
        assert k["frontend_ms"] > 0 and k["ops"] > 0
        assert k["frontend_ms"] >= k["parse_ms"]
    assert set(figures["one_time"]) == {
        "import_ms",
        "parser_build_ms",
        "parser_load_ms",
        "parser_shipped_ms",
        "first_compile_ms",
    }
    printed = capsys.readouterr().out
    assert "attention_causal" in printed and "target" in printed
