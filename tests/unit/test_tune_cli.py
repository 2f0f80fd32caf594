"""`tilec tune` as a user runs it (a subprocess, the fake clock: no GPU here): the candidates
table, the winner, the regret and the pins to paste; the cache on a second run; the tuned
section of `tilec compile --explain`; and errors that say what is wrong, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ["examples/softmax.tile", "-k", "softmax", "--sizes", "M=64,N=300"]


def tilec(*args: str, cache: Path, **env: str):
    environment = {**os.environ, "TILEC_CACHE_DIR": str(cache), **env}
    return subprocess.run(
        [sys.executable, "-m", "tilec.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=300,
    )


def test_tune_prints_the_candidates_the_winner_the_regret_and_the_pins(tmp_path):
    out = tmp_path / "search.json"
    args = ["tune", *SOFTMAX, "--clock", "fake", "--max-candidates", "5", "--workers", "2"]
    done = tilec(*args, "--emit-pins", "--json", str(out), cache=tmp_path / "c")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("tune softmax (examples/softmax.tile) at M=64,N=300 on sm_90a")
    assert "status" in text and "heuristic ->" in text
    assert "regret" in text and "heuristic time / tuned time" in text
    assert "candidates/s" in text and "stopped: max-candidates" in text
    search = json.loads(out.read_text())
    assert len([c for c in search["candidates"] if c["status"] != "pruned"]) == 5
    assert search["regret"] == search["heuristic"]["ms"] / search["winner"]["ms"]
    pins = text.split("pins (paste above the kernel):\n", 1)[1]
    if search["pins"]:
        assert pins.startswith("@kernel(")
    else:
        assert pins.startswith("# the heuristics' own choice")
    # The second run answers from the cache; --explain shows what was measured.
    again = tilec(*args, cache=tmp_path / "c")
    assert again.returncode == 0 and again.stdout.startswith("(the cached winner")
    explained = tilec(
        "compile", "examples/softmax.tile", "-k", "softmax", "--explain", cache=tmp_path / "c"
    )
    assert explained.returncode == 0, explained.stderr
    assert "tuned     at M=64,N=300 on fake GPU (fake clock)" in explained.stdout
    assert "regret" in explained.stdout and "pins: " in explained.stdout


def test_tune_errors_are_located_and_say_what_to_do(tmp_path):
    cache = tmp_path / "c"
    missing = tilec(
        "tune",
        "examples/softmax.tile",
        "-k",
        "softmax",
        "--sizes",
        "M=64",
        "--clock",
        "fake",
        cache=cache,
    )
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert (
        "examples/softmax.tile:" in missing.stderr and "no size for dimension N" in missing.stderr
    )
    budget = tilec("tune", *SOFTMAX, "--budget", "soon", "--clock", "fake", cache=cache)
    assert budget.returncode == 1 and "--budget: expected a time such as 30s" in budget.stderr
    empty = tilec(
        "tune",
        "examples/matmul.tile",
        "-k",
        "matmul",
        "--sizes",
        "M=128,N=128,K=64",
        "--tile",
        "K=8",
        "--clock",
        "fake",
        cache=cache,
    )
    assert empty.returncode == 1 and "Traceback" not in empty.stderr
    assert "nothing to tune" in empty.stderr and "BK=8" in empty.stderr
    assert "not a multiple of 16" in empty.stderr


def test_without_a_gpu_the_gpu_clock_says_so(tmp_path):
    done = tilec("tune", *SOFTMAX, cache=tmp_path / "c", CUDA_VISIBLE_DEVICES="")
    if done.returncode == 0:  # a GPU machine: it tuned
        assert "gpu clock" in done.stdout
        return
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "there is none here" in done.stderr and "--clock fake" in done.stderr


def test_sweep_times_exactly_the_combinations_given_and_caches_nothing(tmp_path):
    done = tilec(
        "tune",
        "examples/matmul.tile",
        "-k",
        "matmul",
        "--sizes",
        "M=512,N=512,K=64",
        "--clock",
        "fake",
        "--sweep",
        "tiling.group_m=1,2",
        "--sweep",
        "warps=4,8",
        "--json",
        str(tmp_path / "s.json"),
        cache=tmp_path / "c",
    )
    assert done.returncode == 0, done.stderr
    search = json.loads((tmp_path / "s.json").read_text())
    assert search["stopped"] == "swept" and len(search["candidates"]) == 5  # and the heuristic
    configs = [c["config"] for c in search["candidates"][1:]]
    assert {(c["tiling.group_m"], c["warps"]) for c in configs} == {(1, 4), (1, 8), (2, 4), (2, 8)}
    assert not (tmp_path / "c" / "tuned").exists()
    bad = tilec("tune", *SOFTMAX, "--clock", "fake", "--sweep", "warps", cache=tmp_path / "c")
    assert bad.returncode == 1 and "--sweep: expected DECISION=V1,V2" in bad.stderr


def test_tune_searches_a_binding_of_the_kernels_dtype_parameters(tmp_path):
    """`--dtype T=f32` tunes rmsnorm's f32 binding: the report names it, and the bf16 binding
    (its default) is a search and a cache entry of its own."""
    rmsnorm = ["examples/rmsnorm.tile", "-k", "rmsnorm", "--sizes", "M=64,N=300"]
    args = ["tune", *rmsnorm, "--clock", "fake", "--max-candidates", "2", "--workers", "1"]
    cache = tmp_path / "c"
    f32 = tilec(*args, "--dtype", "T=f32", cache=cache)
    assert f32.returncode == 0, f32.stderr
    assert f32.stdout.startswith("tune rmsnorm[T=f32] (examples/rmsnorm.tile) at M=64,N=300")
    again = tilec(*args, "--dtype", "T=f32", cache=cache)
    assert again.stdout.startswith("(the cached winner")
    default = tilec(*args, cache=cache)
    assert default.returncode == 0, default.stderr
    assert default.stdout.startswith("tune rmsnorm (examples/rmsnorm.tile)")
    wrong = tilec(*args, "--dtype", "T=i32", cache=cache)
    assert wrong.returncode == 1 and "dtype parameter T cannot be i32" in wrong.stderr
    assert "Traceback" not in wrong.stderr
