"""Tuned winners on disk (tilec/tune/cache.py) and `@tilec.jit(autotune=...)`: the key names
every input, stale and broken entries are misses, writes are atomic and safe across processes,
`TILEC_AUTOTUNE=0` forces the heuristics, and a cold start from the cache compiles only the
winner. CPU only: the fake clock."""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
from pathlib import Path

import pytest

from tilec.jit import JitFunction, load_kernel
from tilec.tune import FakeClock, Settings, Tuner, fake_cost, problem_for, tune
from tilec.tune import cache as tune_cache
from tilec.tune.api import tune_key

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"M": 64, "N": 300}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILEC_AUTOTUNE", raising=False)


def _key(**changes) -> tune_cache.TuneKey:
    base = tune_cache.TuneKey("def k(): ...", "k", "{}", "{}", "sm_90a", "NVIDIA H200", "12.8")
    return dataclasses.replace(base, **changes)


def _entry(pins=None) -> dict:
    return {"pins": pins or {"warps": 4}, "regret": 1.1}


def test_every_field_of_the_key_changes_the_digest():
    base = _key()
    for field in dataclasses.fields(base):
        value = getattr(base, field.name)
        assert _key(**{field.name: value + "x"}).digest() != base.digest(), field.name


def test_an_entry_round_trips_and_another_key_misses():
    assert tune_cache.store(_key(), _entry())
    assert tune_cache.load(_key())["pins"] == {"warps": 4}
    assert tune_cache.load(_key(gpu="NVIDIA H100")) is None
    assert tune_cache.load(_key(driver="12.9")) is None


def test_stale_or_broken_entries_are_ignored(tmp_path):
    tune_cache.store(_key(), _entry())
    (path,) = (tmp_path / "cache" / "tuned").rglob("*.json")
    entry = json.loads(path.read_text())
    # Made by another tilec: the digest differs, and a file renamed into place says so.
    entry["key"]["tilec"] = "0.0.1+old"
    path.write_text(json.dumps(entry))
    assert tune_cache.load(_key()) is None
    assert tune_cache.entries_for("def k(): ...", "k") == []
    path.write_text('{"pins": {"warps": 4}, "key": ')  # cut short
    assert tune_cache.load(_key()) is None
    tune_cache.store(_key(), {"pins": "warps=4"})  # not a winner of decisions
    assert tune_cache.load(_key()) is None


def _store_many(directory: str, worker: int) -> None:
    import os

    os.environ["TILEC_CACHE_DIR"] = directory
    for i in range(30):
        tune_cache.store(_key(), {"pins": {"warps": worker}, "i": i, "pad": "x" * 20000})


def test_concurrent_writers_leave_one_whole_entry(tmp_path):
    context = multiprocessing.get_context("spawn")
    writers = [
        context.Process(target=_store_many, args=(str(tmp_path / "cache"), w)) for w in (1, 2, 4)
    ]
    for p in writers:
        p.start()
    for _ in range(50):  # read while they write: a whole entry or none, never half
        entry = tune_cache.load(_key())
        assert entry is None or entry["pins"]["warps"] in (1, 2, 4)
    for p in writers:
        p.join()
        assert p.exitcode == 0
    assert tune_cache.load(_key())["i"] == 29
    left = [p.name for p in (tmp_path / "cache" / "tuned").rglob("*") if p.is_file()]
    assert len(left) == 1 and not left[0].startswith(".")  # no temporary files


def _sixteen_rows(d):
    return 1.0 + abs(math.log2(d["tile.M"] / 16))


def _fake(values):
    return FakeClock(_sixteen_rows)


def test_a_search_is_cached_and_reused_across_objects():
    problem = problem_for(load_kernel(EXAMPLES / "softmax.tile", "softmax"), SIZES, arch="sm_90a")
    settings = Settings(max_candidates=4, workers=2, progress=False)
    result, entry = tune(problem, FakeClock(fake_cost), settings)
    assert result is not None and entry["pins"] == result.pins
    again, cached = tune(problem, FakeClock(fake_cost), settings)
    assert again is None and cached["pins"] == entry["pins"]
    assert cached["candidates"] == json.loads(json.dumps(entry["candidates"]))
    # Another clock (the GPU's) never gets a fake clock's winner.
    other = FakeClock(fake_cost, device="NVIDIA H200")
    assert tune_cache.load(tune_key(problem, other)) is None


def test_autotune_tunes_at_the_first_compile_and_a_cold_start_compiles_only_the_winner(
    monkeypatch,
):
    import numpy as np

    # Enough candidates to reach 16 rows from the heuristic's (1 row a block: 64 rows are
    # fewer blocks than the SMs).
    settings = Settings(max_candidates=6, workers=2, progress=False, clock=_fake)
    x, y = np.zeros((64, 300), np.float32), np.zeros((64, 300), np.float32)
    first = load_kernel(EXAMPLES / "softmax.tile", "softmax", autotune=settings)
    kernel = first.compile_for(x, y, arch="sm_90a")
    assert first.tuned is not None and first.tuned["clock"] == "fake"
    pins = first.tuned["pins"]
    # A new object (a new process would be the same): the winner comes from the cache, no
    # search runs, and only the winner is compiled (from the kernel cache, even).
    monkeypatch.setattr(Tuner, "run", lambda *a: pytest.fail("tuned again"))
    compiled = []
    original = JitFunction.compile_specialized

    def counting(self, *args):
        compiled.append(self.options)
        return original(self, *args)

    monkeypatch.setattr(JitFunction, "compile_specialized", counting)
    cold = load_kernel(EXAMPLES / "softmax.tile", "softmax", autotune=settings)
    again = cold.compile_for(x, y, arch="sm_90a")
    assert cold.tuned["pins"] == pins and len(compiled) == 1
    assert pins == {"tile.M": 16} and again.ptx == kernel.ptx
    assert again.from_disk  # the workers put the winner's PTX in the kernel cache


def test_tilec_autotune_0_forces_the_heuristics(monkeypatch):
    import numpy as np

    monkeypatch.setenv("TILEC_AUTOTUNE", "0")
    monkeypatch.setattr(Tuner, "run", lambda *a: pytest.fail("tuned with TILEC_AUTOTUNE=0"))
    settings = Settings(max_candidates=4, workers=2, progress=False, clock=_fake)
    tuned = load_kernel(EXAMPLES / "softmax.tile", "softmax", autotune=settings)
    plain = load_kernel(EXAMPLES / "softmax.tile", "softmax")
    x = np.zeros((64, 300), np.float32)
    assert tuned.compile_for(x, x, arch="sm_90a").ptx == plain.compile_for(x, x, arch="sm_90a").ptx
    assert tuned.tuned is None


def test_pins_in_the_source_are_not_searched():
    problem = problem_for(
        load_kernel(EXAMPLES / "matmul.tile", "matmul_pinned"),
        {"M": 128, "N": 128, "K": 64},
        arch="sm_90a",
    )
    result = Tuner(Settings(max_candidates=3, workers=2, progress=False)).run(
        problem, FakeClock(fake_cost)
    )
    assert not {"warps", "stages", "tile.M", "tile.N", "tile.K"} & set(result.searched)
    assert "tiling.group_m" in result.searched


def test_a_process_that_misses_a_key_another_is_tuning_waits_for_its_winner(monkeypatch):
    """Ranks starting together tune a key once: `tune` looks again under the entry's lock,
    so one that waited for another's search reads its winner instead of searching."""
    import threading
    import time

    from tilec.cache import entry_lock, lock_path

    problem = problem_for(load_kernel(EXAMPLES / "softmax.tile", "softmax"), SIZES, arch="sm_90a")
    clock = FakeClock(fake_cost)
    key = tune_key(problem, clock)
    monkeypatch.setattr(Tuner, "run", lambda *a: pytest.fail("searched although another had"))
    answer: list = []
    with entry_lock(lock_path(tune_cache.SUBDIRECTORY, key.digest()), 10) as held:
        assert held  # this thread is the process tuning the key
        waiter = threading.Thread(target=lambda: answer.append(tune(problem, clock)))
        waiter.start()
        time.sleep(0.5)
        assert not answer  # it waits on the lock...
        tune_cache.store(key, {"pins": {"warps": 2}, "regret": 1.0, "candidates": []})
    waiter.join(30)
    result, entry = answer[0]  # ...then reads the winner stored under it
    assert result is None and entry["pins"] == {"warps": 2}
