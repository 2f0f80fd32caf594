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
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "write_atomically"]

CACHE_DIR_VARIABLE = "TILEC_CACHE_DIR"


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
