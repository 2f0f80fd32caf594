"""The wheel holds exactly the `tilec` package (with `tilec.passes` and the grammar mapped in
from their top-level folders), its package data and the `tilec` console script; editable
installs import the same names. The README's test command is the one CI runs."""

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    # Build from a clean copy: a stale build/ or *.egg-info/ in the checkout would put files in
    # the wheel (its SOURCES.txt counts as package data) that pyproject.toml no longer names.
    source = tmp_path_factory.mktemp("source") / "tilec"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__"),
    )
    # --no-isolation: build with the test environment's setuptools, so the test needs no network.
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), source],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (path,) = out.glob("tilec-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_has_only_the_tilec_package(wheel):
    names = wheel.namelist()
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"tilec"}


def test_wheel_maps_top_level_folders_into_tilec(wheel):
    names = set(wheel.namelist())
    expected = {
        "tilec/__init__.py",
        "tilec/cli.py",
        "tilec/ir/core.py",
        "tilec/dialects/tile.py",
        "tilec/passes/__init__.py",
        "tilec/passes/canonicalize.py",
        "tilec/grammar/__init__.py",
        "tilec/grammar/tile.lark",
        "tilec/grammar/tile.tables.json",
        "tilec/explore/report.html",
    }
    assert expected <= names, sorted(expected - names)
    # Every source and package-data file of the mapped folders is in the wheel, under tilec/.
    for folder, package in (
        ("tilec", "tilec"),
        ("passes", "tilec/passes"),
        ("runtime", "tilec/runtime"),
        ("grammar", "tilec/grammar"),
    ):
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, folder)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for f in filenames:
                if f.endswith((".py", ".lark", ".html", ".tables.json")):
                    rel = os.path.relpath(os.path.join(dirpath, f), os.path.join(ROOT, folder))
                    assert f"{package}/{rel}" in names, f"{folder}/{rel} is missing from the wheel"


def test_wheel_declares_console_script(wheel):
    entry_points = next(n for n in wheel.namelist() if n.endswith("entry_points.txt"))
    text = wheel.read(entry_points).decode()
    assert "tilec = tilec.cli:main" in text


def test_installed_names_resolve_to_the_repository_folders():
    import tilec.grammar
    import tilec.passes

    assert (
        os.path.dirname(tilec.passes.__file__) == os.path.join(ROOT, "passes")
        or "site-packages" in tilec.passes.__file__
    )
    assert tilec.grammar.__file__.endswith(os.path.join("grammar", "__init__.py"))


def test_console_script_runs():
    exe = os.path.join(os.path.dirname(sys.executable), "tilec")
    result = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    assert result.returncode == 0
    assert result.stdout.startswith("tilec ")


def test_normal_install_of_the_wheel_works(wheel, tmp_path):
    target = tmp_path / "site"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            wheel.filename,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    code = (
        "import tilec, tilec.passes, tilec.cli\n"
        "from importlib.resources import files\n"
        f"assert tilec.__file__.startswith({str(target)!r}), tilec.__file__\n"
        f"assert tilec.passes.__file__.startswith({str(target)!r})\n"
        "assert 'start' in files('tilec.grammar').joinpath('tile.lark').read_text()\n"
        # The parser comes from the tables in the wheel, not from analysing the grammar.
        "from tilec.frontend import syntax\n"
        f"assert str(syntax.TABLES_PATH).startswith({str(target)!r}), syntax.TABLES_PATH\n"
        "assert syntax._get_parser().tables_source == 'shipped'\n"
        # The explorer reads its page template as report.py does.
        "assert '<html' in files('tilec.explore').joinpath('report.html').read_text('utf-8')\n"
        "raise SystemExit(tilec.cli.main(['passes']))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(target), TILEC_CACHE_DIR="")
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "canonicalize:" in result.stdout


def _readme_test_command() -> str:
    """The fenced `sh` block after "Run the tests" in README.md."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    after = text[text.index("Run the tests") :]
    block = after[after.index("```sh\n") + len("```sh\n") :]
    return block[: block.index("```")].strip()


def _ci_command() -> str:
    """The command line `.ci/run` runs: its last line."""
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip()]
    return lines[-1].strip()


def test_readme_test_command_is_what_ci_runs():
    assert _readme_test_command() == _ci_command()
