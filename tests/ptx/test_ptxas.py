"""ptxas accepts the PTX of every kernel of every example, for sm_80 and sm_90a, and the hot
kernels (vector add, softmax, layernorm, matmul) spill nothing to local memory.

No GPU is needed: ptxas comes from PATH or from the `nvidia-cuda-nvcc` wheel of the test extra,
and these tests fail (never skip) when it is missing.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

import tilec
from tilec.lowering import compile_to_ptx
from tilec.lowering.ptxas import _parse_report, assemble, find_ptxas

EXAMPLES = sorted(Path(__file__).resolve().parents[2].joinpath("examples").glob("*.tile"))
PIPELINE = "canonicalize,cse,specialize,assign-layouts,canonicalize,cse,dce"
ARCHES = ("sm_80", "sm_90a")
NO_SPILLS = {"vector_add.tile", "softmax.tile", "layernorm.tile", "matmul.tile"}


@functools.cache
def _program(path: Path):
    return tilec.compile(str(path), pipeline=PIPELINE)


def test_ptxas_is_found():
    assert find_ptxas() is not None, "no ptxas: put CUDA on PATH or pip install nvidia-cuda-nvcc"


def test_ptxas_is_found_in_the_wheel_without_path(monkeypatch):
    monkeypatch.setenv("PATH", os.devnull)
    path = find_ptxas()
    assert path is not None and "nvidia" in path, "the test extra installs nvidia-cuda-nvcc"


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_kernel_assembles(example: Path, arch: str):
    program = _program(example)
    report = assemble(compile_to_ptx(program.module, arch), arch)
    assert sorted(report) == sorted(program.kernels)
    if example.name in NO_SPILLS:
        for kernel in report.values():
            assert not kernel.spills, (
                f"{kernel.name} on {arch}: {kernel.spill_stores} bytes spill stores, "
                f"{kernel.spill_loads} bytes spill loads ({kernel.registers} registers)"
            )


def test_ptxas_report_is_read_per_kernel():
    text = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'softmax' for 'sm_90a'
ptxas info    : Function properties for softmax
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 122 registers, used 1 barriers, 16 bytes smem
ptxas info    : Compiling entry function 'add' for 'sm_90a'
ptxas info    : Function properties for add
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers
"""
    report = _parse_report(text)
    softmax, add = report["softmax"], report["add"]
    assert (softmax.registers, softmax.spill_stores, softmax.spill_loads) == (122, 4, 12)
    assert (softmax.stack_frame, softmax.static_shared, softmax.barriers) == (8, 16, 1)
    assert softmax.spills and not add.spills and add.registers == 40
