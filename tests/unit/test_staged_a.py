"""tiling's option `staged_a` on sm_90a: a wgmma dot's A loaded before its loop (attention's q)
is read by descriptor from its buffer every step instead of held in registers. The buffer's
layout (8-row groups in the accumulator's order, blocks of 64 columns at a head dimension of
128) is what the descriptors read, by the hardware's canonical layout; the buffer stays live
while the loop's dots read it (its bytes are not the stages'); the kernel computes what it
computed before, in the interpreter; ptxas takes it without spills; the tuner searches it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tilec
from tests.unit.test_wgmma_lowering import _descriptor_for
from tests.validation import run_kernel
from tilec.benchmarks.wgmma_probe import k_major_address
from tilec.compiler import DEFAULT_PIPELINE
from tilec.diagnostics import TileError
from tilec.interp.runner import random_arguments
from tilec.ir.types import TileType, f16
from tilec.lowering.shared_memory import buffer_offsets, swizzled_offset
from tilec.lowering.wgmma import SWIZZLE_ATOM
from tilec.passes.smem_placement import wgmma_swizzle_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("rows, depth", [(64, 128), (128, 128), (128, 64), (64, 256)])
def test_a_wider_than_an_atom_is_what_the_descriptors_read(rows, depth):
    """q at a head dimension of 128 on one or two warpgroups: rows of 256 bytes in blocks of
    64 columns, 8-row groups in the accumulator's order; warpgroup g's descriptor of k-step kk
    starts 64 g rows into block kk // 4 -- every element the hardware reads for row s of the
    warpgroup is the element stored for the accumulator row it computes."""
    layout, _ = wgmma_swizzle_for(TileType((rows, depth), f16), 0)
    assert layout.interleave == 2 and layout.col_block == (64 if depth > 64 else 0)
    warps = rows // 16
    base = 3 * SWIZZLE_ATOM
    for kk in range(depth // 16):
        for g in range(rows // 64):
            desc = _descriptor_for(base, 0, False, g, kk, depth, rows)
            for s in range(64):
                w = 4 * g + s // 16
                logical = 8 * w + 8 * warps * ((s // 8) % 2) + s % 8
                for kc in range(16):
                    written = base + 2 * swizzled_offset(
                        layout, (rows, depth), logical, 16 * kk + kc
                    )
                    assert k_major_address(desc, s, kc) == written, (g, s, kk, kc)


def _pipeline(extents: str, staged_a: str, stop: str | None = None) -> str:
    passes = DEFAULT_PIPELINE.replace(
        "tiling,", f'tiling{{extents="{extents}" exact="D" staged_a="{staged_a}" producer=0}},'
    )
    if stop is not None:
        passes = passes[: passes.index(stop)].rstrip(",")
    return 'assume{all="aligned,unit,divisible"},' + passes


def _compiled(kernel: str, extents: str, staged_a: str, target: str = "ptx"):
    return tilec.compile(
        str(EXAMPLES / "attention.tile"),
        kernels=[kernel],
        target=target,
        arch="sm_90a",
        pipeline=_pipeline(extents, staged_a),
    )


@pytest.mark.parametrize("kernel", ["attention", "attention_causal"])
def test_q_is_read_by_descriptor_from_bytes_of_its_own(kernel):
    dims = "S=4096,T=4096" if kernel == "attention_causal" else "M=4096,N=4096"
    program = _compiled(kernel, f"B=4,H=16,D=128,{dims}", "shared")
    ptx = program.ptx
    assert "ldmatrix" not in ptx  # no fragments of q
    # q @ k.T: both operands by descriptor (no register A); p @ v: A in registers
    assert re.search(r"m64n(64|128)k16\.f32\.f16\.f16 \{", ptx) and ", p, 1, 1, 0, 0;" in ptx
    func = program.module.lookup(kernel)
    assert func.attributes["tilec.staged_a"].value == "shared"
    offsets = buffer_offsets(func)
    q = next(a for a in offsets if a.result.name_hint == "qt_smem")
    q_end = offsets[q] + 128 * 64 * 2
    for alloc, offset in offsets.items():
        if alloc is not q and alloc.result.type.shape[0] > 1:  # the stages
            end = offset + alloc.result.type.shape[0] * 64 * 128 * 2
            assert q_end <= offset or end <= offsets[q], (offsets[q], offset)
    from tilec.lowering.ptxas import assemble, find_ptxas

    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    report = assemble(ptx, "sm_90a")[kernel]
    assert report.spill_stores == 0 and report.spill_loads == 0


@pytest.mark.parametrize(
    "kernel, extents",
    [
        ("attention", {"B": 1, "H": 2, "M": 80, "N": 208, "D": 64}),
        ("attention_causal", {"B": 1, "H": 1, "S": 144, "T": 144, "D": 128}),
        ("attention_gqa", {"B": 1, "H": 4, "G": 2, "M": 80, "N": 112, "D": 128}),
    ],
)
def test_the_kernel_computes_what_it_did_with_q_in_registers(kernel, extents):
    """In the interpreter, through every pass: bit for bit what the kernel computes with q
    held in registers."""
    text = ",".join(f"{k}={v}" for k, v in extents.items())
    results = []
    for staged_a in ("shared", "registers"):
        program = _compiled(kernel, text, staged_a, target="tir")
        func = program.module.lookup(kernel)
        free = {k: v for k, v in extents.items() if k != "D"}  # D is exact: in the types
        inputs = random_arguments(func, free, seed=5)
        got, _ = run_kernel(program.module, kernel, inputs, None)
        results.append(got)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_a_value_outside_the_choices_is_an_error():
    with pytest.raises(TileError, match="option staged_a must be one of auto, registers, shared"):
        _compiled("attention", "B=1,H=1,M=64,N=64,D=64", "smem")


def test_the_tuner_searches_where_q_is_read_from():
    from tilec.jit import load_kernel
    from tilec.tune.api import problem_for
    from tilec.tune.space import applicable
    from tilec.tune.worker import build_candidate

    function = load_kernel(EXAMPLES / "attention.tile", "attention")
    wide = problem_for(function, {"B": 4, "H": 16, "M": 4096, "N": 4096, "D": 128}, arch="sm_90a")
    tiled = build_candidate(wide, {})  # d128: tiled for a producer warpgroup, q from shared
    assert tiled.decisions["tiling.staged_a"] == "shared"
    assert tiled.decisions["pipeline.warp_specialize"] == 1
    assert tiled.decisions["pipeline.pingpong"] == 1
    assert tiled.decisions["tiling.producer"] == 1
    # One move back to the tiling for the warps alone: 64-row blocks, q in registers, no
    # producer, no turns.
    alone = build_candidate(wide, {"tiling.producer": 0})
    assert alone.status == "built", alone.reason
    got = {k: alone.decisions[k] for k in ("tile.M", "warps", "tiling.staged_a")}
    assert got == {"tile.M": 64, "warps": 4, "tiling.staged_a": "registers"}
    assert alone.decisions["pipeline.warp_specialize"] == 0
    dims = {"B": 4, "H": 16, "M": 4096, "N": 4096, "D": 64}
    problem = problem_for(function, dims, arch="sm_90a")
    heuristic = build_candidate(problem, {})
    assert heuristic.decisions["tiling.staged_a"] == "registers"
    from tilec.ir.parser import parse_module

    kernel = parse_module(heuristic.ir, "x").functions[0]
    names = {d.name: d for d in applicable(kernel, dims, "sm_90a")}
    assert names["tiling.staged_a"].values == ("registers", "shared")
    assert names["tiling.producer"].values == (0, 1)
    assert heuristic.decisions["tiling.producer"] == 0
    built = build_candidate(problem, {"tiling.staged_a": "shared"})
    assert built.status == "built", built.reason
    assert built.decisions["tiling.staged_a"] == "shared"
