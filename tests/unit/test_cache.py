"""tilec's cache directory, and the parser tables kept in it when the shipped ones do not match
the grammar: where they go (never the working directory), that they are used, that a damaged
file is replaced, that TILEC_CACHE_DIR= turns caching off, and that a compile with the shipped
tables writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilec import cache
from tilec.frontend import syntax
from tilec.frontend.syntax_lexer import Position

TILEC = os.path.join(os.path.dirname(sys.executable), "tilec")

GOOD = """\
def scale(x: f32[N], y: f32[N], alpha: f32):
    for tn in tiles(N):
        y[tn] = x[tn] * alpha
"""


@pytest.fixture
def clean_environment(monkeypatch, tmp_path):
    """A home directory of our own, and no cache settings from the caller."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv(cache.CACHE_DIR_VARIABLE, raising=False)
    return home


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the XDG layout")
def test_the_default_is_the_xdg_cache_home(clean_environment, monkeypatch, tmp_path):
    assert cache.cache_dir() == clean_environment / ".cache" / "tilec"
    assert (clean_environment / ".cache" / "tilec").is_dir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "tilec"
    # A relative XDG_CACHE_HOME is ignored: it would put files in the working directory.
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    assert cache.cache_dir() == clean_environment / ".cache" / "tilec"


def test_the_variable_chooses_or_disables_the_directory(clean_environment, monkeypatch, tmp_path):
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, "")
    assert cache.cache_dir() is None


def test_an_unusable_directory_means_no_cache(clean_environment, monkeypatch, tmp_path):
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(tmp_path / "file" / "cache"))
    assert cache.cache_dir() is None


def test_write_atomically_renames_a_finished_file(tmp_path):
    target = tmp_path / "data.bin"
    assert cache.write_atomically(target, lambda fresh: fresh.write_bytes(b"new"))
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["data.bin"]


def test_write_atomically_leaves_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")

    def fail_halfway(fresh: Path) -> None:
        fresh.write_bytes(b"ne")
        raise OSError("disk full")

    assert not cache.write_atomically(target, fail_halfway)
    assert not cache.write_atomically(target, lambda fresh: None)  # made no file
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["data.bin"]


def compile_in(
    tmp_path: Path, cache_setting: str | None, home: Path
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME",)}
    env["HOME"] = str(home)
    env.pop(cache.CACHE_DIR_VARIABLE, None)
    if cache_setting is not None:
        env[cache.CACHE_DIR_VARIABLE] = cache_setting
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "k.tile").write_text(GOOD)
    return subprocess.run(
        [TILEC, "compile", "k.tile"], capture_output=True, text=True, check=False, cwd=work, env=env
    )


def test_a_compile_with_the_shipped_tables_writes_no_cache(tmp_path):
    home = tmp_path / "home"
    result = compile_in(tmp_path, None, home)
    assert result.returncode == 0, result.stderr
    assert not home.exists()
    # Nothing was written next to the program.
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["k.tile"]


def parser_without_shipped_tables() -> syntax._Parser:
    """A parser made as when the shipped tables do not match the grammar."""
    parser = syntax._Parser(shipped_tables=None)
    (kernel,) = parser.parse(GOOD, Position("k.tile", 0, 0))
    assert isinstance(kernel, syntax.FunctionDef) and kernel.name == "scale"
    return parser


def test_unshipped_parser_tables_are_cached_and_reused(monkeypatch, tmp_path):
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    assert parser_without_shipped_tables().tables_source == "built"
    (tables,) = (tmp_path / "cache").iterdir()
    assert tables.name.startswith("tile-parser-") and tables.suffix == ".pickle"
    stamp = tables.stat().st_mtime_ns
    assert parser_without_shipped_tables().tables_source == "cache"
    assert tables.stat().st_mtime_ns == stamp  # read, not rewritten


def test_a_damaged_cache_file_is_replaced(monkeypatch, tmp_path):
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    parser_without_shipped_tables()
    (tables,) = (tmp_path / "cache").iterdir()
    tables.write_bytes(b"not a parser\n" + b"\x00" * 64)
    assert parser_without_shipped_tables().tables_source == "built"
    assert tables.stat().st_size > 10_000
    assert parser_without_shipped_tables().tables_source == "cache"


def test_an_empty_setting_writes_no_cache(clean_environment, monkeypatch):
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, "")
    assert parser_without_shipped_tables().tables_source == "built"
    assert not any(clean_environment.iterdir())
