"""The pass explorer's page without a browser: the data embedded in it (every stage, diffs,
remarks at their ops, source lines, layout and swizzle pictures computed by the lowering's
own functions, PTX resources, errors), that it is self-contained, and `tilec explore` as a
user runs it. tests/browser drives the page itself."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.compiler import DEFAULT_PIPELINE
from tilec.explore import build_report, report_data
from tilec.lowering.ptxas import find_ptxas

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.tile"
TILEC = os.path.join(os.path.dirname(sys.executable), "tilec")
ASSUME = 'assume{all="aligned,unit,divisible"},' + DEFAULT_PIPELINE
DATA = re.compile(r'<script type="application/json" id="report-data">(.*?)</script>', re.S)

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")


def embedded_data(html: str) -> dict:
    found = DATA.findall(html)
    assert len(found) == 1
    return json.loads(found[0])


def u16(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<u2")


@pytest.fixture(scope="module")
def matmul():
    # sm_80: the mma.sync tiling whose pictures the tests below know (sm_90a takes wgmma:
    # test_wgmma_swizzle_pictures_are_permutations_of_each_row).
    compiled = tilec.compile(
        MATMUL, kernels=["matmul"], pipeline=ASSUME, target="ptx", arch="sm_80", keep_going=True
    )
    assert compiled.error is None
    return compiled, report_data(compiled)


def test_wgmma_swizzle_pictures_are_permutations_of_each_row():
    compiled = tilec.compile(
        MATMUL, kernels=["matmul"], pipeline=ASSUME, target="ptx", arch="sm_90a"
    )
    data = report_data(compiled)
    pictures = [data["pictures"][i] for i in stage(data, "smem-placement")["pictures"]]
    swizzles = [p for p in pictures if p["kind"] == "swizzle"]
    assert len(swizzles) == 2
    assert any("interleave" in p["layout"] for p in swizzles)
    assert any("col_block" in p["layout"] for p in swizzles)
    for p in swizzles:
        for row in p["chunks"]:
            assert sorted(row) == list(range(len(row)))


def stage(data: dict, name: str) -> dict:
    return next(s for s in data["stages"] if s["name"] == name)


def test_every_stage_is_in_the_report(matmul):
    compiled, data = matmul
    assert [s["name"] for s in data["stages"]] == [s.name for s in compiled.stages]
    assert [s["text"] for s in data["stages"]] == [s.ir for s in compiled.stages]
    assert data["source"] == MATMUL.read_text()
    assert data["kernels"] == ["matmul"]
    assert data["error"] is None


def test_diffs_are_against_the_stage_before(matmul):
    compiled, data = matmul
    stages = data["stages"]
    assert stages[0]["diff"] is None  # nothing before the frontend
    for before, after, shown in zip(compiled.stages, compiled.stages[1:], stages[1:]):
        if shown["language"] != "tir":
            continue
        assert shown["previous"] == before.name
        assert (shown["diff"] == []) == (before.ir == after.ir), after.name
    tiling = stage(data, "tiling")["diff"]
    assert any(line.startswith("+") and "tilec.num_warps" in line for line in tiling)
    assert any(line.startswith("-") and "tile.symbol" in line for line in tiling)
    # LLVM IR is not compared with tile IR, nor PTX with LLVM IR.
    assert stage(data, "lower-to-llvm")["diff"] is None
    assert stage(data, "ptx")["diff"] is None


def test_diff_keeps_removed_lines_that_look_like_its_header():
    from tilec.explore.report import _diff

    assert _diff("a\n-- x\n++ y\n", "a\n") == ["@@ -1,3 +1 @@", " a", "--- x", "-++ y"]
    assert _diff("same\n", "same\n") == []


def test_remarks_are_at_the_lines_of_their_ops(matmul):
    compiled, data = matmul
    placed = 0
    for made, shown in zip(compiled.stages, data["stages"]):
        assert [r["message"] for r in shown["remarks"]] == [r.message for r in made.remarks]
        lines = shown["text"].splitlines()
        for r in shown["remarks"]:
            if r["line"] is not None:
                op_name = r["op"].split(".", 1)[1]  # `func` for builtin.func
                assert op_name in lines[r["line"]], (r, lines[r["line"]])
                placed += 1
    swizzles = [r for r in stage(data, "smem-placement")["remarks"] if "XOR" in r["message"]]
    assert len(swizzles) == 2 and all(r["op"] == "tile.alloc_shared" for r in swizzles)
    assert placed > 10


def test_ir_lines_know_their_source_lines(matmul):
    _, data = matmul
    frontend = stage(data, "frontend")
    source = data["source"].splitlines()
    lines = frontend["text"].splitlines()
    assert len(frontend["locs"]) == len(lines)
    dot = next(i for i, line in enumerate(lines) if "tile.dot" in line)
    assert "@" in source[frontend["locs"][dot] - 1]  # acc += a[tm, tk] @ b[tk, tn]
    store = next(i for i, line in enumerate(lines) if "tile.store" in line)
    assert source[frontend["locs"][store] - 1].strip().startswith("c[tm, tn] = acc")


def test_layout_picture_is_the_lowering_s_thread_map(matmul):
    _, data = matmul
    pictures = [data["pictures"][i] for i in stage(data, "assign-layouts")["pictures"]]
    mma = next(p for p in pictures if p["layout"].startswith("#mma"))
    assert (mma["rows"], mma["cols"], mma["warps"]) == (128, 128, 4)
    owner = u16(mma["owner"]).reshape(128, 128)
    slot = u16(mma["slot"]).reshape(128, 128)
    # An m16n8k16 accumulator: lane l holds rows l/4 and l/4 + 8 (times the warps along M),
    # columns 2(l%4) and 2(l%4)+1 of each 8-column group (as_blocked's documented pattern).
    assert owner[0, 0] == 0 and owner[0, 1] == 0 and owner[0, 2] == 1 and owner[1, 0] == 4
    assert owner[0, 8] == 32  # warps interleave every 8 columns along N
    assert slot[0, 0] == 0 and slot[0, 1] == 1
    counts = np.bincount(owner.ravel(), minlength=128)
    assert (counts == mma["slots"]).all()  # every thread owns as many elements as registers
    operands = [p for p in pictures if p["layout"].startswith("#dot_operand")]
    assert all("note" in p and "owner" not in p for p in operands)


def test_swizzle_picture_follows_swizzled_offset(matmul):
    _, data = matmul
    pictures = [data["pictures"][i] for i in stage(data, "smem-placement")["pictures"]]
    swizzles = [p for p in pictures if p["kind"] == "swizzle"]
    assert len(swizzles) == 2
    for p in swizzles:
        for r, row in enumerate(p["chunks"]):
            assert sorted(row) == list(range(len(row)))  # a permutation of the row's chunks
            phase = (r // p["per_phase"]) % p["max_phase"]
            assert all(row[c ^ phase] == c for c in range(len(row)))
        # The chunk that rows 0..7 keep at logical column 0 lands on 8 different places.
        assert len({row.index(0) for row in p["chunks"][:8]}) == min(8, len(p["chunks"][0]))


def test_pictures_appear_once_however_many_stages_show_them(matmul):
    _, data = matmul
    titles = [p["title"] for p in data["pictures"]]
    assert len(titles) == len(set(titles))
    assert stage(data, "frontend")["pictures"] == []  # no layouts before tiling
    assert stage(data, "dce")["pictures"]


@needs_ptxas
def test_resources_come_from_ptxas():
    compiled = tilec.compile(MATMUL, kernels=["matmul"], pipeline=ASSUME, target="cubin")
    data = report_data(compiled)
    resources = data["kernel_resources"]["matmul"]
    assert resources["registers"] == compiled.resources["matmul"].registers > 0
    assert resources["dynamic_shared"] >= 65536  # 4 stages of two 8 KiB operand tiles
    assert resources["performance_warnings"] == []
    assert data["stages"][-1]["language"] == "ptxas"
    assert "registers" in data["explain"]


@needs_ptxas
def test_ptxas_performance_losses_reach_the_page():
    compiled = tilec.compile(MATMUL, kernels=["matmul"], pipeline=ASSUME, target="cubin")
    loss = "C7515: wgmma.mma_async instructions are serialized due to ..."
    compiled.resources = {
        name: dataclasses.replace(r, performance_warnings=(loss,))
        for name, r in compiled.resources.items()
    }
    data = report_data(compiled)
    assert data["kernel_resources"]["matmul"]["performance_warnings"] == [loss]
    assert "performance loss ${esc(w)}" in build_report(compiled)  # the page draws them


def test_page_is_self_contained_and_holds_the_data(matmul):
    compiled, data = matmul
    html = build_report(compiled)
    assert embedded_data(html) == json.loads(json.dumps(data))
    assert len(html.encode()) < 2_000_000
    for external in ("<link", "src=", "@import", "url(", "//fonts"):
        assert external not in html
    # The one URL is the SVG namespace, which names and fetches nothing.
    assert set(re.findall(r"https?://[^\s\"'`]+", html)) == {"http://www.w3.org/2000/svg"}
    assert "/*@TILEC_REPORT_DATA@*/" not in html and "@TILEC_REPORT_TITLE@" not in html


def test_source_cannot_end_the_embedded_data():
    source = (
        "# </script><!-- not the end\n"
        "def scale(x: f32[N], y: f32[N]):\n"
        "    for tn in tiles(N):\n"
        "        y[tn] = x[tn] * 2.0\n"
    )
    compiled = tilec.compile(source, target="ptx", keep_going=True)
    assert compiled.error is None
    assert embedded_data(build_report(compiled))["source"] == source


def test_a_failing_pass_shows_the_stages_before_it_and_the_error():
    compiled = tilec.compile(
        MATMUL,
        kernels=["matmul"],
        options={"tile": {"M": 256, "N": 256, "K": 256}, "stages": 4},
        target="ptx",
        keep_going=True,
    )
    data = report_data(compiled)
    assert compiled.failed_stage == "tiling"
    *good, failed = data["stages"]
    assert [s["name"] for s in good] == [s.name for s in compiled.stages]
    assert failed["name"] == "tiling" and failed["language"] == "error"
    assert failed["error"]["loc"] == [3, 1]  # def matmul(...)
    assert "shared memory" in failed["error"]["message"]
    assert data["error"] == failed["error"]
    assert data["kernel_resources"] == {} and data["explain"] is None


def test_a_source_that_does_not_parse_shows_the_source_and_the_error():
    source = "def k(a: f32[N]):\n    for t in tiles(N):\n        a[t] = a[t] +\n"
    compiled = tilec.compile(source, target="ptx", keep_going=True)
    data = report_data(compiled)
    assert data["source"] == source
    assert [s["name"] for s in data["stages"]] == ["frontend"]
    assert data["stages"][0]["error"]["loc"][0] == 3
    assert "error:" in data["stages"][0]["error"]["text"]


# -- tilec explore ----------------------------------------------------------------------------


def explore(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TILEC, "explore", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


def test_explore_writes_the_page(tmp_path):
    result = explore(str(MATMUL), "-k", "matmul", "-o", "report.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "report.html" in result.stdout
    data = embedded_data((tmp_path / "report.html").read_text())
    assert data["kernels"] == ["matmul"]
    assert [s["name"] for s in data["stages"]][:2] == ["frontend", "canonicalize"]
    assert any(s["language"] == "ptx" for s in data["stages"])


def test_explore_names_the_page_after_the_file(tmp_path):
    (tmp_path / "vec.tile").write_text((ROOT / "examples" / "vector_add.tile").read_text())
    result = explore("vec.tile", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "vec.html").is_file()


def test_explore_takes_compile_s_pins(tmp_path):
    result = explore(
        str(MATMUL),
        "-k",
        "matmul",
        "--tile",
        "M=64,N=64,K=32",
        "--warps",
        "4",
        "--assume",
        "aligned,unit,divisible",
        "--disable",
        "pipeline",
        "-o",
        "r.html",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    data = embedded_data((tmp_path / "r.html").read_text())
    names = [s["name"] for s in data["stages"]]
    assert names[1] == "assume" and "pipeline" not in names
    assert '["BM", 64]' in stage(data, "tiling")["text"]


def test_explore_lists_the_kernels_for_an_unknown_one(tmp_path):
    result = explore(str(MATMUL), "-k", "matmull", "-o", "r.html", cwd=tmp_path)
    assert result.returncode == 1
    assert "error: no kernel named 'matmull'" in result.stderr
    assert "matmul, matmul_pinned" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_explore_rejects_a_malformed_pin_and_writes_nothing(tmp_path):
    result = explore(str(MATMUL), "--tile", "M=big", "-o", "r.html", cwd=tmp_path)
    assert result.returncode == 1
    assert "--tile: expected DIM=SIZE" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_explore_of_a_failing_source_still_writes_the_page(tmp_path):
    (tmp_path / "k.tile").write_text(
        "def k(a: f32[N]):\n    for t in tiles(N):\n        a[t] = b[t]\n"
    )
    result = explore("k.tile", "-o", "r.html", cwd=tmp_path)
    assert result.returncode == 1
    assert "k.tile:3:" in result.stderr and "error:" in result.stderr
    data = embedded_data((tmp_path / "r.html").read_text())
    assert data["error"]["loc"][0] == 3 and data["stages"][-1]["error"] == data["error"]


def test_explore_reads_stdin(tmp_path):
    source = (ROOT / "examples" / "vector_add.tile").read_text()
    result = explore("-", "-o", "r.html", cwd=tmp_path, stdin=source)
    assert result.returncode == 0, result.stderr
    assert embedded_data((tmp_path / "r.html").read_text())["source"] == source
