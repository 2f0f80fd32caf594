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
from tilec.compiler import DEFAULT_PIPELINE, target_pipeline
from tilec.diagnostics import TileError
from tilec.ir import parse_module, verify
from tilec.lowering import compile_to_ptx
from tilec.lowering.ptxas import _parse_report, assemble, find_ptxas
from tilec.passmanager import PassManager

EXAMPLES = sorted(Path(__file__).resolve().parents[2].joinpath("examples").glob("*.tile"))
# The default pipeline, for arguments of any kind and for the contiguous, aligned tensors
# `@tilec.jit` usually sees (what its `assume` pass then records).
PIPELINES = {
    "any": DEFAULT_PIPELINE,
    "contiguous": f'assume{{all="aligned,unit,divisible"}},{DEFAULT_PIPELINE}',
}
ARCHES = ("sm_80", "sm_90a")
NO_SPILLS = {"vector_add.tile", "softmax.tile", "layernorm.tile", "matmul.tile"}
# Examples with a kernel sm_80 has no instructions for: there the lowering's located error is
# the defined behaviour (tilec/lowering/atomic.py), checked instead of the assembly.
NEEDS_SM90 = {
    "embedding_backward.tile": "atomic add of bf16 needs sm_90 or later",
    "fp8_gemm.tile": "tile.cast to or from f8e4m3 needs sm_90 or later",
}


@functools.cache
def _program(path: Path, arch: str, assumptions: str):
    """The tile IR of `path` after the pipeline as `compile` runs it for `arch` (on sm_90a,
    tiling takes the wgmma path for the matmuls it can)."""
    return tilec.compile(str(path), pipeline=target_pipeline(PIPELINES[assumptions], arch))


def test_ptxas_is_found():
    assert find_ptxas() is not None, "no ptxas: put CUDA on PATH or pip install nvidia-cuda-nvcc"


def test_ptxas_is_found_in_the_wheel_without_path(monkeypatch):
    monkeypatch.setenv("PATH", os.devnull)
    path = find_ptxas()
    assert path is not None and "nvidia" in path, "the test extra installs nvidia-cuda-nvcc"


@pytest.mark.parametrize("assumptions", sorted(PIPELINES))
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_kernel_assembles(example: Path, arch: str, assumptions: str):
    program = _program(example, arch, assumptions)
    if arch == "sm_80" and example.name in NEEDS_SM90:
        with pytest.raises(TileError, match=NEEDS_SM90[example.name]) as error:
            compile_to_ptx(program.module, arch)
        assert error.value.loc is not None and error.value.loc.line > 0
        return
    report = assemble(compile_to_ptx(program.module, arch), arch)
    assert sorted(report) == sorted(program.kernels)
    if example.name in NO_SPILLS:
        for kernel in report.values():
            assert not kernel.spills, (
                f"{kernel.name} on {arch}: {kernel.spill_stores} bytes spill stores, "
                f"{kernel.spill_loads} bytes spill loads ({kernel.registers} registers)"
            )
            assert not kernel.performance_warnings, (kernel.name, arch, assumptions)


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
    assert softmax.performance_warnings == add.performance_warnings == ()


def test_ptxas_performance_losses_are_read_per_kernel():
    text = """\
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized \
due to non wgmma instructions defining accumulator registers of a wgmma between start and end of \
the pipeline stage in the function 'matmul'
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'matmul' for 'sm_90a'
ptxas info    : Function properties for matmul
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers
ptxas info    : Compiling entry function 'add' for 'sm_90a'
ptxas info    : Function properties for add
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers
"""
    report = _parse_report(text)
    (loss,) = report["matmul"].performance_warnings
    assert loss.startswith("C7515: wgmma.mma_async instructions are serialized due to non wgmma")
    assert report["add"].performance_warnings == ()


FLOATS = ("f16", "bf16", "f32", "f64")
INTS = ("i8", "i16", "i32", "i64")
F32_ONLY_MATH = ("exp", "exp2", "log", "log2", "tanh", "erf", "sin", "cos")


def _every_op_kernel(t: str) -> str:
    """A kernel applying every arith/math op and cast to a tile of `t`, each result stored
    (so that LLVM cannot drop it before instruction selection)."""
    ops: list[tuple[str, str, str]] = []  # (name, op text, result element type)
    v = f"tile<64x{t}>"
    if t in FLOATS:
        for op in ("addf", "subf", "mulf", "divf", "maximumf", "minimumf"):
            ops.append((op, f"arith.{op} %v, %v : {v}", t))
        ops.append(("negf", f"arith.negf %v : {v}", t))
        ops.append(("cmp", f"arith.cmpf ult, %v, %v : {v}", "i1"))
        unary = ["absf", "floor", "ceil", "sqrt", "rsqrt"]
        unary += [] if t == "f64" else list(F32_ONLY_MATH)
        for op in unary:
            ops.append((op, f"math.{op} %v : {v}", t))
        ops.append(("fma", f"math.fma %v, %v, %v : {v}", t))
        if t != "f64":
            ops.append(("pow", f"math.powf %v, %v : {v}", t))
        for d in INTS:
            ops.append((f"fptosi_{d}", f"arith.fptosi %v : {v} -> tile<64x{d}>", d))
    else:
        for op in ("addi", "subi", "muli", "divsi", "remsi", "ceildivsi", "maxsi", "minsi"):
            ops.append((op, f"arith.{op} %v, %v : {v}", t))
        for op in ("andi", "ori", "xori", "shli", "shrsi"):
            ops.append((op, f"arith.{op} %v, %v : {v}", t))
        ops.append(("cmp", f"arith.cmpi ult, %v, %v : {v}", "i1"))
        for d in FLOATS:
            ops.append((f"sitofp_{d}", f"arith.sitofp %v : {v} -> tile<64x{d}>", d))
    for d in (*FLOATS, *INTS, "i1"):
        if d != t:
            ops.append((f"cast_{d}", f"tile.cast %v : {v} -> tile<64x{d}>", d))
    outputs = ", ".join(f"%out_{d}: !tile.tensor<Nx{d}>" for d in (*FLOATS, *INTS, "i1"))
    lines = [f"func @every_{t}(%x: !tile.tensor<Nx{t}>, %o: index, {outputs}) {{"]
    lines.append(f"  %v = tile.load %x[%o] : !tile.tensor<Nx{t}> -> {v}")
    for name, text, d in ops:
        lines.append(f"  %{name} = {text}")
        lines.append(f"  tile.store %out_{d}[%o], %{name} : !tile.tensor<Nx{d}>, tile<64x{d}>")
    for kind in ("sum", "prod", "max", "min"):
        lines.append(f"  %{kind} = tile.reduce {kind} %v axis 0 : {v} -> {t}")
        lines.append(f"  %{kind}_t = tile.splat %{kind} : {t} -> {v}")
        lines.append(f"  tile.store %out_{t}[%o], %{kind}_t : !tile.tensor<Nx{t}>, {v}")
    lines += ["  return", "}"]
    return "\n".join(lines)


@pytest.mark.parametrize("arch", ARCHES)
def test_every_arith_and_math_op_of_every_type_assembles(arch: str):
    module = parse_module("\n".join(_every_op_kernel(t) for t in (*FLOATS, *INTS)))
    verify(module)
    PassManager.from_text("assign-layouts").run(module)
    ptx = compile_to_ptx(module, arch)
    report = assemble(ptx, arch)
    assert sorted(report) == sorted(f"every_{t}" for t in (*FLOATS, *INTS))
    assert ptx.count("st.global") > 200  # the results were kept
