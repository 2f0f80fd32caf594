"""Ranks share compiled kernels: processes that start together on one cache compile each
specialization once (the entry's lock; the others wait, then read the entry), all get the same
PTX, and each runs the kernel itself (here in the interpreter). A lock whose holder hangs is
given up on after the timeout, one whose holder died is free at once, and a cache where no lock
can be made, or nothing written, still works. No GPU needed: the cache holds PTX.

The interpreter keeps nothing on disk (`tilec.jit`): what is shared is the compile to PTX."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pytest

import tilec
import tilec.lowering
from tilec import cache, kernel_cache

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "examples" / "softmax.tile"
RANKS = 4
ROWS, COLUMNS = 8, 100


def softmax_arrays(seed: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).standard_normal((ROWS, COLUMNS)).astype(np.float32)
    return x, np.zeros_like(x)


def softmax_reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def count_ptx_compiles(patch) -> list[str]:
    """Record each compile to PTX (the expensive step a cache hit skips) in the list returned;
    `patch(module, name, value)` installs the hook."""
    compiles: list[str] = []
    real = tilec.lowering.compile_to_ptx

    def counted(module, arch, *args, **kwargs):
        compiles.append(arch)
        return real(module, arch, *args, **kwargs)

    patch(tilec.lowering, "compile_to_ptx", counted)
    return compiles


def _rank(cache_directory: str, rank: int, barrier, results) -> None:
    """One rank: compile softmax's specialization for sm_90a through the shared cache, starting
    with the others, then run the kernel in the interpreter on its own data."""
    try:
        os.environ[cache.CACHE_DIR_VARIABLE] = cache_directory
        compiles = count_ptx_compiles(setattr)
        kernel = tilec.load_kernel(SOFTMAX, "softmax")
        x, y = softmax_arrays(rank)
        kernel_cache.tilec_version(), kernel_cache.llvm_version()  # hashed before the start
        barrier.wait(timeout=120)
        compiled = kernel.compile_for(x, y, arch="sm_90a")
        tilec.load_kernel(SOFTMAX, "softmax", interpret=True)(x, y)
        results.put((rank, len(compiles), compiled.from_disk, compiled.ptx, y))
    except BaseException:
        results.put((rank, traceback.format_exc()))


def test_ranks_starting_together_compile_a_specialization_once(tmp_path):
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(RANKS)
    results = context.Queue()
    ranks = [
        context.Process(target=_rank, args=(str(tmp_path), rank, barrier, results))
        for rank in range(RANKS)
    ]
    for process in ranks:
        process.start()
    reports = {}
    for _ in ranks:
        report = results.get(timeout=300)
        assert len(report) == 5, report[1]  # a rank's traceback
        rank, compiles, from_disk, ptx, y = report
        reports[rank] = compiles, from_disk, ptx
        x, _ = softmax_arrays(rank)
        np.testing.assert_allclose(y, softmax_reference(x), rtol=1e-5, atol=1e-6)
    for process in ranks:
        process.join(timeout=60)
        assert process.exitcode == 0
    # One rank compiled; the three others waited on the lock and read its entry.
    assert sorted(compiles for compiles, _, _ in reports.values()) == [0, 0, 0, 1]
    assert sorted(from_disk for _, from_disk, _ in reports.values()) == [False, True, True, True]
    assert len({ptx for _, _, ptx in reports.values()}) == 1
    assert ".entry softmax" in reports[0][2]
    (entry,) = (tmp_path / "kernels").iterdir()
    assert json.loads(entry.read_text())["ptx"] == reports[0][2]
    (lock,) = (tmp_path / "locks" / "kernels").iterdir()
    assert lock.name == entry.with_suffix(".lock").name


def softmax_key() -> kernel_cache.KernelCacheKey:
    return tilec.load_kernel(SOFTMAX, "softmax").compile_for(*softmax_arrays(0), arch="sm_90a").key


HOLDER = """
import sys, time
import filelock
lock = filelock.FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(120)
"""


@pytest.fixture
def hold_lock():
    """`hold_lock(path)`: a process that holds the lock at `path` until it is killed (by the
    end of the test at the latest)."""
    holders: list[subprocess.Popen] = []

    def hold(path: Path) -> subprocess.Popen:
        path.parent.mkdir(parents=True, exist_ok=True)
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True
        )
        holders.append(holder)
        assert holder.stdout.readline().strip() == "held"
        return holder

    yield hold
    for holder in holders:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_a_lock_whose_holder_hangs_is_given_up_on(tmp_path, monkeypatch, hold_lock):
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, "")
    key = softmax_key()
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(tmp_path))
    monkeypatch.setattr(kernel_cache, "LOCK_TIMEOUT_S", 0.5)
    compiles = count_ptx_compiles(monkeypatch.setattr)
    hold_lock(cache.lock_path("kernels", key.digest()))
    start = time.perf_counter()
    kernel = tilec.load_kernel(SOFTMAX, "softmax")
    compiled = kernel.compile_for(*softmax_arrays(0), arch="sm_90a")
    waited = time.perf_counter() - start
    assert compiles == ["sm_90a"] and not compiled.from_disk and waited >= 0.5
    assert kernel_cache.load(key)["ptx"] == compiled.ptx  # stored all the same


def test_a_lock_whose_holder_died_is_free_at_once(tmp_path, monkeypatch, hold_lock):
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(tmp_path))
    path = cache.lock_path("kernels", "0" * 64)
    holder = hold_lock(path)
    with cache.entry_lock(path, timeout=0.2) as held:
        assert not held  # held by a live process
    holder.kill()  # SIGKILL: no cleanup in the holder; the OS releases its lock
    holder.wait()
    start = time.perf_counter()
    with cache.entry_lock(path, timeout=30) as held:
        assert held
    assert time.perf_counter() - start < 10  # not the timeout


def test_no_lock_when_caching_is_off(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, "")
    assert cache.lock_path("kernels", "0" * 64) is None
    with cache.entry_lock(None, timeout=0) as held:
        assert not held
    compiled = tilec.load_kernel(SOFTMAX, "softmax").compile_for(*softmax_arrays(0), arch="sm_90a")
    assert not compiled.from_disk and ".entry softmax" in compiled.ptx


def test_a_lock_that_cannot_be_made_means_compiling_without_it(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, "")
    key = softmax_key()
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(tmp_path))
    # A directory where the lock file should be: no lock can be opened there, even by root.
    cache.lock_path("kernels", key.digest()).mkdir(parents=True)
    compiles = count_ptx_compiles(monkeypatch.setattr)
    kernel = tilec.load_kernel(SOFTMAX, "softmax")
    first = kernel.compile_for(*softmax_arrays(0), arch="sm_90a")
    again = tilec.load_kernel(SOFTMAX, "softmax").compile_for(*softmax_arrays(1), arch="sm_90a")
    assert compiles == ["sm_90a"] and not first.from_disk and again.from_disk
    assert again.ptx == first.ptx


def test_a_read_only_cache_still_works(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(directory))
    x, y = softmax_arrays(0)
    filled = tilec.load_kernel(SOFTMAX, "softmax").compile_for(x, y, arch="sm_90a")
    before = sorted(directory.rglob("*"))
    folders = [directory, *(p for p in before if p.is_dir())]
    for folder in folders:
        folder.chmod(0o555)
    try:
        read_only = not os.access(directory, os.W_OK)  # root writes anyway
        compiles = count_ptx_compiles(monkeypatch.setattr)
        found = tilec.load_kernel(SOFTMAX, "softmax").compile_for(x, y, arch="sm_90a")
        assert found.from_disk and found.ptx == filled.ptx and compiles == []
        wide = np.zeros((ROWS, 3000), np.float32)  # another specialization: a miss
        missed = tilec.load_kernel(SOFTMAX, "softmax").compile_for(wide, wide, arch="sm_90a")
        assert not missed.from_disk and compiles == ["sm_90a"]
        if read_only:
            assert sorted(directory.rglob("*")) == before  # no lock, no entry written
    finally:
        for folder in folders:
            folder.chmod(0o755)
