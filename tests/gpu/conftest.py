"""GPU tests: they run where a GPU and its driver are, and are skipped everywhere else.

Every test in this folder is marked `gpu` (so `pytest -m gpu` selects them, and `-m "not gpu"`
leaves them out) and skipped when `tilec.runtime` finds no cuda-python, driver or device.

The Triton references come from `triton_references` (a private copy of
tests/reference/triton_kernels.py, loaded with TRITON_INTERPRET unset): the CPU test
tests/unit/test_triton_cpu.py sets TRITON_INTERPRET=1 for its whole process, and Triton would
otherwise run these GPU references in its CPU interpreter when both are collected together.
`python -m tilec.gpucheck` runs this folder in a process of its own anyway.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilec.runtime import gpu_available

GPU = gpu_available()


@pytest.hookimpl(tryfirst=True)  # before `-m gpu` selects by the marks added here
def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="no CUDA GPU and driver (tilec.runtime.gpu_available())")
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)
            if not GPU:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def triton_references():
    from tilec.benchmarks.gpu import load_triton_references

    module = load_triton_references()
    if module is None:
        pytest.skip("Triton is not installed")
    return module


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Kernels compile into a cache of the test session's own (the first test fills it)."""
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tilec-cache"))
