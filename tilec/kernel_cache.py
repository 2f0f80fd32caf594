"""The on-disk cache of compiled kernels: PTX and ABI, keyed by everything that can change them.

    key = KernelCacheKey(source, "softmax", options, pipeline, specialization, "sm_90a")
    entry = load(key)          # {"ptx": ..., "abi": ..., "specialization": ...} or None
    store(key, entry)
    entry, from_disk = load_or_compile(key, compile_entry)   # what the jit does

`KernelCacheKey` names every input of a compilation, and nothing else: the kernel's source
text and name, its pinned options, the pipeline (which carries the extents `specialize` was
given), the argument specialization, the architecture, tilec's version (its version number and
a hash of its own source files, so that an edited compiler never reuses old PTX) and LLVM's.
Changing any one changes the digest (`tests/unit/test_kernel_cache.py` checks each).

Entries live in `<cache dir>/kernels/<digest>.json` (`tilec.cache.cache_dir`: `TILEC_CACHE_DIR`,
else the user's cache directory). They are written under a temporary name and renamed into
place: a reader sees one whole file or none, and of writers the last rename wins. An entry that
cannot be read, or whose recorded key differs from the one asked for, is a miss.

A miss is compiled once, however many processes share the cache and miss it together (the
ranks of a distributed job starting at once): `load_or_compile` takes the entry's lock,
`<cache dir>/locks/kernels/<digest>.lock` (`tilec.cache.entry_lock`), looks again, and only
then compiles and stores; the others wait on the lock, then find the entry. A holder that dies
releases the lock with its process; one that hangs for `LOCK_TIMEOUT_S` is given up on and
its waiters compile for themselves. With caching off nothing locks, and where the lock cannot
be taken (a read-only cache) each process compiles, as before the lock. Each process then
loads the PTX on its own device; the cubins the runtime makes from it are cached beside it, in
`cubin/`, by cuda.core.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tilec.cache import cache_dir, entry_lock, lock_path, read_entry, write_entry

__all__ = [
    "KernelCacheKey",
    "llvm_version",
    "load",
    "load_or_compile",
    "store",
    "tilec_version",
]

SUBDIRECTORY = "kernels"
# How long a process waits for another to compile an entry before compiling it itself: far
# beyond any one compile (a cold matmul takes under a second), so only a hung holder reaches it.
LOCK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class KernelCacheKey:
    """Every input that can change a compiled kernel."""

    source: str  # the source text the kernel was parsed from
    kernel: str  # the kernel's name in it
    options: str  # its pinned options (`tile`, `warps`, `stages`), as canonical JSON
    pipeline: str  # the passes it went through, with their options
    specialization: str  # what the arguments promise, as canonical JSON
    arch: str  # "sm_90a"
    tilec: str = ""  # filled with `tilec_version()` when left empty
    llvm: str = ""  # filled with `llvm_version()` when left empty

    def __post_init__(self) -> None:
        if not self.tilec:
            object.__setattr__(self, "tilec", tilec_version())
        if not self.llvm:
            object.__setattr__(self, "llvm", llvm_version())

    def digest(self) -> str:
        """The SHA-256 of every field (the entry's file name)."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


@functools.cache
def tilec_version() -> str:
    """tilec's version number and a hash of the source files that compile kernels."""
    import tilec
    import tilec.grammar
    import tilec.passes

    h = hashlib.sha256()
    roots = [Path(m.__file__).parent for m in (tilec, tilec.passes, tilec.grammar)]
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".lark") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return f"{tilec.__version__}+{h.hexdigest()[:16]}"


@functools.cache
def llvm_version() -> str:
    """llvmlite's version and that of the LLVM inside it."""
    import llvmlite
    import llvmlite.binding as llvm

    return f"llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm.llvm_version_info))}"


def _path(key: KernelCacheKey) -> Path | None:
    directory = cache_dir()
    if directory is None:
        return None
    return directory / SUBDIRECTORY / f"{key.digest()}.json"


def load(key: KernelCacheKey) -> dict[str, Any] | None:
    """The entry stored under `key`, or None (absent, unreadable, or made for another key)."""
    return read_entry(_path(key), asdict(key))


def store(key: KernelCacheKey, entry: dict[str, Any]) -> bool:
    """Write `entry` (JSON data) under `key`, atomically. Whether it was written."""
    return write_entry(_path(key), {**entry, "key": asdict(key)})


def load_or_compile(
    key: KernelCacheKey, compile_entry: Callable[[], dict[str, Any]]
) -> tuple[dict[str, Any], bool]:
    """`(entry, from_disk)`: the entry stored under `key`, else the one `compile_entry()`
    makes, stored. A miss is compiled under the entry's lock, after looking again: of the
    processes that miss together, one compiles and the others find its entry (module
    docstring)."""
    entry = load(key)
    if entry is not None:
        return entry, True
    with entry_lock(lock_path(SUBDIRECTORY, key.digest()), LOCK_TIMEOUT_S):
        entry = load(key)  # compiled by the holder we waited for
        if entry is not None:
            return entry, True
        entry = compile_entry()
        store(key, entry)
    return entry, False
