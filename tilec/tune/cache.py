"""Tuned winners on disk: `<cache dir>/tuned/<kernel digest>/<key digest>.json`.

`TuneKey` names everything a winner depends on: the kernel's source text and name, the
author's options (pins, pass options, disabled passes), the specialization (what the
arguments promise, and every extent), the architecture, the GPU's name and driver version,
and tilec's and LLVM's versions (`tilec.kernel_cache`: tilec's includes a hash of its own
source, so an edited compiler never reuses a winner). The clock is in it too: a fake clock's
winner never serves a GPU. The directory is tilec's cache (`tilec.cache.cache_dir`:
`TILEC_CACHE_DIR`, else the user cache directory), and entries are written atomically
(`tilec.cache.write_entry`: a temporary file renamed into place), so a reader sees a whole entry
or none, and an interrupted tuner leaves none at all. Processes that miss one key together tune
it once: `tilec.tune.api.tune` searches under the entry's lock (`tilec.cache.entry_lock`), the
others wait for it and read the winner.

An entry is used only when its recorded key is the one asked for and it holds a winner made of
decisions the tuner knows (`valid`); anything else — another version, a half-understood file
— is a miss: stale entries are ignored, never wrong. `TILEC_AUTOTUNE=0` turns tuned winners off
altogether (`enabled`): `@tilec.jit(autotune=True)` then compiles the heuristics' choice.

Entries of one kernel share a folder (its source and name), so `tilec compile --explain` can
show every tuning of the kernel it explains (`entries_for`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tilec.cache import cache_dir, read_entry, write_entry
from tilec.kernel_cache import llvm_version, tilec_version

__all__ = ["AUTOTUNE_VARIABLE", "TuneKey", "enabled", "entries_for", "load", "store"]

SUBDIRECTORY = "tuned"
AUTOTUNE_VARIABLE = "TILEC_AUTOTUNE"
FORMAT = 1  # the entry layout; another one is a miss


def enabled() -> bool:
    """False when `TILEC_AUTOTUNE=0`: the heuristics decide, no tuned winner is used."""
    return os.environ.get(AUTOTUNE_VARIABLE, "1").strip() != "0"


@dataclass(frozen=True)
class TuneKey:
    """Every input a tuned winner depends on."""

    source: str
    kernel: str
    options: str  # the author's options, canonical JSON
    specialization: str  # the arguments' facts and extents, canonical JSON
    arch: str
    gpu: str
    driver: str
    clock: str = "gpu"
    tilec: str = ""
    llvm: str = ""

    def __post_init__(self) -> None:
        if not self.tilec:
            object.__setattr__(self, "tilec", tilec_version())
        if not self.llvm:
            object.__setattr__(self, "llvm", llvm_version())

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


def kernel_digest(source: str, kernel: str) -> str:
    """The folder of a kernel's entries: a digest of its source text and name."""
    return hashlib.sha256(f"{kernel}\0{source}".encode()).hexdigest()[:24]


def _path(key: TuneKey) -> Path | None:
    directory = cache_dir()
    if directory is None:
        return None
    return directory / SUBDIRECTORY / kernel_digest(key.source, key.kernel) / f"{key.digest()}.json"


def valid(entry: Any) -> bool:
    """Whether `entry` is a whole entry of this format with a winner of known decisions."""
    from tilec.tune.space import PIN_DECISIONS

    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        return False
    pins = entry.get("pins")
    if not isinstance(pins, dict):
        return False
    return all(
        isinstance(name, str) and (name.startswith("tile.") or name in PIN_DECISIONS or "." in name)
        for name in pins
    )


def load(key: TuneKey) -> dict[str, Any] | None:
    """The entry stored under `key`; None when absent, unreadable, stale or made for another
    key."""
    entry = read_entry(_path(key), asdict(key))
    if entry is None or not valid(entry):
        return None
    return entry


def store(key: TuneKey, entry: dict[str, Any]) -> bool:
    """Write `entry` under `key`, atomically; whether it was written."""
    payload = {**entry, "format": FORMAT, "key": asdict(key)}
    return write_entry(_path(key), payload, indent=1, default=str)


def entries_for(source: str, kernel: str) -> list[dict[str, Any]]:
    """Every current entry of a kernel (any specialization, GPU or clock), newest first:
    those made by this tilec and LLVM, whole and valid."""
    directory = cache_dir()
    if directory is None:
        return []
    folder = directory / SUBDIRECTORY / kernel_digest(source, kernel)
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        key = entry.get("key") if isinstance(entry, dict) else None
        if not valid(entry) or not isinstance(key, dict):
            continue
        if key.get("tilec") != tilec_version() or key.get("llvm") != llvm_version():
            continue
        if key.get("source") != source or key.get("kernel") != kernel:
            continue
        found.append(entry)
    return sorted(found, key=lambda e: -float(e.get("tuned_at", 0)))
