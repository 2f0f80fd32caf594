"""The compiled-kernel cache: its key names every input and changes with each; entries are
found again, damaged ones are misses; and several processes compiling one kernel at once
leave one whole entry (no GPU needed: the cache holds PTX)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec import kernel_cache
from tilec.kernel_cache import KernelCacheKey
from tilec.runtime import DeviceTensor

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.tile"
SOFTMAX = ROOT / "examples" / "softmax.tile"


def base_key() -> KernelCacheKey:
    return KernelCacheKey("def k(): ...", "k", "{}", "canonicalize", '{"unit": []}', "sm_90a")


def test_the_key_names_every_input():
    assert [f.name for f in dataclasses.fields(KernelCacheKey)] == [
        "source",
        "kernel",
        "options",
        "pipeline",
        "specialization",
        "arch",
        "tilec",
        "llvm",
    ]
    key = base_key()
    assert key.tilec == kernel_cache.tilec_version() and key.tilec.startswith(tilec.__version__)
    assert "LLVM" in key.llvm


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(KernelCacheKey)])
def test_changing_any_input_changes_the_digest(field):
    key = base_key()
    changed = dataclasses.replace(key, **{field: getattr(key, field) + " changed"})
    assert changed.digest() != key.digest()
    assert dataclasses.replace(key).digest() == key.digest()  # and nothing else does


def test_the_tilec_version_follows_its_source_files(tmp_path, monkeypatch):
    """An edited compiler must not reuse old PTX: the version hashes tilec's files."""
    kernel_cache.tilec_version.cache_clear()
    before = kernel_cache.tilec_version()
    real = Path.read_bytes

    def edited(path: Path) -> bytes:
        data = real(path)
        return data + b"# edited" if path.name == "specialize.py" else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    kernel_cache.tilec_version.cache_clear()
    try:
        assert kernel_cache.tilec_version() != before
    finally:
        monkeypatch.undo()
        kernel_cache.tilec_version.cache_clear()
    assert kernel_cache.tilec_version() == before


def test_store_load_and_damaged_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    key = base_key()
    assert kernel_cache.load(key) is None
    assert kernel_cache.store(key, {"ptx": "PTX"})
    assert kernel_cache.load(key)["ptx"] == "PTX"
    (path,) = (tmp_path / "kernels").iterdir()
    path.write_text("{not json")
    assert kernel_cache.load(key) is None
    # An entry recorded for another key (a collision, or a hand-copied file) is a miss.
    other = dataclasses.replace(key, arch="sm_80")
    kernel_cache.store(other, {"ptx": "other"})
    os.replace(tmp_path / "kernels" / f"{other.digest()}.json", path)
    assert kernel_cache.load(key) is None
    monkeypatch.setenv("TILEC_CACHE_DIR", "")
    assert not kernel_cache.store(key, {"ptx": "PTX"})
    assert kernel_cache.load(key) is None


def matmul_arguments(m=100, n=70, k=33):
    return (
        np.zeros((m, k), np.float16),
        np.zeros((k, n), np.float16),
        np.zeros((m, n), np.float16),
    )


def test_jit_compiles_once_then_reads_the_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    first = tilec.load_kernel(MATMUL, "matmul").compile_for(*matmul_arguments(), arch="sm_90a")
    assert not first.from_disk and ".entry matmul" in first.ptx
    again = tilec.load_kernel(MATMUL, "matmul").compile_for(*matmul_arguments(), arch="sm_90a")
    assert again.from_disk and again.ptx == first.ptx and again.abi == first.abi
    assert again.specialization == first.specialization


def test_every_input_of_a_jit_compilation_reaches_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    kernel = tilec.load_kernel(MATMUL, "matmul")
    args = matmul_arguments()
    digests = {
        "base": kernel.compile_for(*args, arch="sm_90a").key.digest(),
        "arch": kernel.compile_for(*args, arch="sm_80").key.digest(),
        "options": tilec.load_kernel(MATMUL, "matmul", warps=8)
        .compile_for(*args, arch="sm_90a")
        .key.digest(),
        # Extents that divide by 16: another specialization.
        "specialization": kernel.compile_for(
            *matmul_arguments(96, 64, 32), arch="sm_90a"
        ).key.digest(),
        "kernel": tilec.load_kernel(MATMUL, "matmul_pinned")
        .compile_for(*args, arch="sm_90a")
        .key.digest(),
    }
    assert len(set(digests.values())) == len(digests), digests
    softmax = tilec.load_kernel(SOFTMAX, "softmax")
    x = np.zeros((4, 1000), np.float32)
    wider = np.zeros((4, 1500), np.float32)
    narrow = softmax.compile_for(x, x, arch="sm_90a")
    wide = softmax.compile_for(wider, wider, arch="sm_90a")
    # whole N by its bound: 1000 columns -> 1024, 1500 -> 1536 (an eighth of the tile of 2048)
    assert 'extents="N=1024,M=64"' in narrow.pipeline and 'extents="N=1536,M=64"' in wide.pipeline
    assert narrow.abi.max_extents == {"N": 1024} and wide.abi.max_extents == {"N": 1536}
    assert narrow.key.digest() != wide.key.digest()
    # Other extents by size class: 4 and 40 rows share one (64), 4000 rows is another.
    taller = np.zeros((40, 1000), np.float32)
    tallest = np.zeros((4000, 1000), np.float32)
    assert softmax.compile_for(taller, taller, arch="sm_90a").key.digest() == narrow.key.digest()
    assert softmax.compile_for(tallest, tallest, arch="sm_90a").key.digest() != narrow.key.digest()
    # An extent that fills its tile is fixed in the kernel (its masks fold): another kernel,
    # whose ABI has the extent as a fixed one that launches must match.
    full = np.zeros((4, 1024), np.float32)
    exact = softmax.compile_for(full, full, arch="sm_90a")
    assert "exact=N" in exact.pipeline and "exact" not in narrow.pipeline
    assert exact.key.digest() != narrow.key.digest()
    assert {p.dim for p in exact.abi.parameters if p.kind == "extent"} == {"M", 1024}


def test_specialization_reaches_the_ptx(monkeypatch):
    """Unit strides become constants: a contiguous variant reads fewer parameters."""
    monkeypatch.setenv("TILEC_CACHE_DIR", "")
    kernel = tilec.load_kernel(SOFTMAX, "softmax")

    def tensor(strides, address=1 << 20):
        return DeviceTensor(address, (64, 300), strides, "f32", 0)

    contiguous = kernel.compile_for(tensor((300, 1)), tensor((300, 1)), arch="sm_90a")
    assert contiguous.specialization.unit == {"x.stride.1", "y.stride.1"}
    assert contiguous.specialization.aligned == {"x", "y"}
    # M = 64 divides by 16; N = 300 and the row stride 300 do not.
    assert contiguous.specialization.divisible == {"x.extent.0", "y.extent.0"}
    padded = kernel.compile_for(tensor((640, 2), 1028), tensor((320, 1)), arch="sm_90a")
    assert padded.specialization.unit == {"y.stride.1"}
    assert padded.specialization.aligned == {"y"}  # 1028 is 4-byte aligned only
    assert padded.specialization.divisible == {
        "x.extent.0",
        "y.extent.0",
        "x.stride.0",
        "y.stride.0",
    }
    assert contiguous.ptx.count("ld.param") < padded.ptx.count("ld.param")


WORKER = """
import hashlib, json, sys, time
import numpy as np
import tilec
start = float(sys.argv[1])
while time.time() < start:
    time.sleep(0.001)
kernel = tilec.load_kernel(sys.argv[2], "matmul")
args = [np.zeros((100, 33), np.float16), np.zeros((33, 70), np.float16),
        np.zeros((100, 70), np.float16)]
compiled = kernel.compile_for(*args, arch="sm_90a")
print(json.dumps({"from_disk": compiled.from_disk,
                  "ptx": hashlib.sha256(compiled.ptx.encode()).hexdigest()}))
"""


def test_four_processes_compiling_at_once_share_one_cache(tmp_path):
    env = {**os.environ, "TILEC_CACHE_DIR": str(tmp_path / "cache")}
    start = time.time() + 3  # every process imports tilec, then they compile together
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(start), str(MATMUL)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert len({r["ptx"] for r in reports}) == 1
    entries = list((tmp_path / "cache" / "kernels").iterdir())
    assert len(entries) == 1 and entries[0].suffix == ".json"  # no temporary files left
    entry = json.loads(entries[0].read_text())
    assert hashlib.sha256(entry["ptx"].encode()).hexdigest() == reports[0]["ptx"]
    late = subprocess.run(
        [sys.executable, "-c", WORKER, "0", str(MATMUL)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert json.loads(late.stdout.strip().splitlines()[-1]) == {**reports[0], "from_disk": True}
