"""Where tilec keeps files worth reusing between runs: the user's cache directory.

Today that is the tile grammar's parser tables when the ones shipped with the grammar do not
match it (an edited grammar, another lark: building them takes a third of a second, loading
them a few milliseconds); compiled kernels will join them with the runtime.

The directory is `$TILEC_CACHE_DIR` when it is set (set to the empty string, it turns caching
off), else the platform's user cache directory for tilec as `platformdirs` knows it
(`~/.cache/tilec` on Linux) — never the working directory.

A cache is only ever an optimisation: when the directory cannot be made or written, tilec
works without it. Files are written under a temporary name and renamed into place, so a reader
never sees half a file, even with several tilec processes at once (lit runs them in parallel).
An entry that is slow to make can be made under `entry_lock`, an inter-process lock file in
`<cache dir>/locks/`, so that processes missing it together make it once (`tilec.kernel_cache`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "entry_lock", "lock_path", "write_atomically"]

CACHE_DIR_VARIABLE = "TILEC_CACHE_DIR"
LOCKS = "locks"  # the subdirectory of the lock files (`lock_path`)


def cache_dir() -> Path | None:
    """tilec's cache directory, created if needed; None when caching is off or impossible."""
    configured = os.environ.get(CACHE_DIR_VARIABLE)
    if configured is not None:
        if not configured:
            return None
        directory = Path(configured)
    else:
        # Imported here: a compile with the shipped parser tables never asks for the directory.
        import platformdirs

        directory = Path(platformdirs.user_cache_dir("tilec", appauthor=False))
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return directory


def write_atomically(path: Path, write: Callable[[Path], None]) -> bool:
    """Have `write` create a file under a fresh temporary name next to `path`, then rename it
    to `path`. Returns whether `path` now holds the new file; on any OS error (or when `write`
    made no file) the temporary file is removed and `path` is left as it was."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        write(temporary)
        os.replace(temporary, path)
        return True
    except OSError:
        return False
    finally:
        if temporary.exists():
            temporary.unlink()


def read_entry(path: Path | None, key: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON object at `path` when it was stored for `key` (its `"key"` field); None when
    absent, unreadable, not an object, or made for another key."""
    if path is None:
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    return entry


def write_entry(path: Path | None, entry: dict[str, Any], **json_options: Any) -> bool:
    """Write the JSON object `entry` at `path` (its directory made), atomically; whether it
    was written."""
    if path is None:
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    text = json.dumps(entry, **json_options)
    return write_atomically(path, lambda fresh: fresh.write_text(text, encoding="utf-8"))


def lock_path(subdirectory: str, name: str) -> Path | None:
    """The lock file of the entry `name` in `subdirectory` (`entry_lock`), None when caching
    is off: `<cache dir>/locks/<subdirectory>/<name>.lock`, in a tree of its own so that the
    entries' folders hold entries only."""
    directory = cache_dir()
    if directory is None:
        return None
    return directory / LOCKS / subdirectory / f"{name}.lock"


@contextlib.contextmanager
def entry_lock(path: Path | None, timeout: float) -> Iterator[bool]:
    """Hold the inter-process lock file at `path` for the body of the `with`; it yields whether
    the lock is held. Another process (or thread) asking for the same lock waits until it is
    released, at most `timeout` seconds, then goes on without it. The lock is `filelock`'s
    (`flock` on Unix), which the OS releases when its holder's process ends, a crash included:
    only a holder that hangs makes others wait out the timeout.

    Nothing locks when `path` is None (caching off), and a lock that cannot be taken (a
    read-only directory, a file system without locks) is the same as a timeout: the body runs
    without it, never an error. A lock only saves work; the entries stay atomic without it."""
    lock = None
    if path is not None:
        import filelock  # imported here: only a process that makes entries pays for it

        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = filelock.FileLock(str(path), timeout=timeout)
            lock.acquire()
        except Exception:  # filelock.Timeout is an OSError; whatever else it raises, go on
            lock = None
    try:
        yield lock is not None
    finally:
        if lock is not None:
            with contextlib.suppress(OSError):
                lock.release()
