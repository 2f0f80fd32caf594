"""The wheel holds exactly the `tilec` package (with `tilec.passes` and the grammar mapped in
from their top-level folders) and the `tilec` console script; editable installs import the
same names."""

import os
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    # --no-isolation: build with the test environment's setuptools, so the test needs no network.
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), ROOT],
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
    }
    assert expected <= names, sorted(expected - names)
    # Every source file of the mapped folders is in the wheel, under tilec/.
    for folder, package in (
        ("tilec", "tilec"),
        ("passes", "tilec/passes"),
        ("grammar", "tilec/grammar"),
    ):
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, folder)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for f in filenames:
                if f.endswith((".py", ".lark")):
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
        "raise SystemExit(tilec.cli.main(['passes']))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(target))
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
