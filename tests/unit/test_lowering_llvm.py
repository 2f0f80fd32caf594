"""The lowering to LLVM IR and PTX: kernel signatures and the ABI, the structure of the code
for loads, reductions and dots, constants, and clear errors for what is not lowered yet."""

from __future__ import annotations

import math
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tilec
from tilec.diagnostics import InternalCompilerError, TileError
from tilec.ir import parse_module, verify
from tilec.lowering import compile_to_ptx, kernel_abi, lower_to_llvm, module_abi
from tilec.lowering.llvm_types import bfloat16_bits
from tilec.passmanager import PassManager

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PIPELINE = "canonicalize,cse,specialize,assign-layouts,canonicalize,cse,dce"


def _compiled(example: str, pipeline: str = PIPELINE):
    return tilec.compile(str(EXAMPLES / example), pipeline=pipeline).module


def _lowered_text(module, arch: str = "sm_90a") -> str:
    return str(lower_to_llvm(module, arch))


def _laid_out(text: str, pipeline: str = "specialize,assign-layouts"):
    module = parse_module(text)
    verify(module)
    return PassManager.from_text(pipeline).run(module)


# -- signature and ABI ---------------------------------------------------------------------------


def test_kernel_signature_follows_the_abi():
    module = _compiled("vector_add.tile")
    text = _lowered_text(module)
    assert (
        'define ptx_kernel void @"saxpy"(float %"alpha", ptr addrspace(1) %"x", '
        'i64 %"x.extent.0", i64 %"x.stride.0", ptr addrspace(1) %"y"' in text
    )
    # 8 warps: x and y stream 8 KiB a block (tile of 1024 f32 each), 8 blocks an SM keep 64 KiB
    # in flight (passes/occupancy.py)
    assert '!"reqntidx", i32 256' in text
    abi = module_abi(module)["saxpy"]
    assert [p.name for p in abi.parameters] == [
        "alpha",
        "x",
        "x.extent.0",
        "x.stride.0",
        "y",
        "y.extent.0",
        "y.stride.0",
        "out",
        "out.extent.0",
        "out.stride.0",
    ]
    assert [(p.kind, p.dtype) for p in abi.parameters[:4]] == [
        ("scalar", "f32"),
        ("pointer", "f32"),
        ("extent", "i64"),
        ("stride", "i64"),
    ]
    assert abi.block == (256, 1, 1)
    assert [(g.dim, g.tile) for g in abi.grid] == [("N", 1024)]
    assert abi.shared_bytes == 0


def test_abi_of_attention_grid_and_extents():
    abi = module_abi(_compiled("attention.tile"))["attention"]
    assert [(g.dim, g.tile) for g in abi.grid] == [("B", 1), ("H", 1), ("M", 4)]
    assert abi.max_extents == {"D": 1024}
    assert abi.parameters[-1].name == "scale" and abi.parameters[-1].dtype == "f32"
    q = [p for p in abi.parameters if p.argument == "q"]
    assert [p.kind for p in q] == ["pointer"] + ["extent"] * 4 + ["stride"] * 4


def test_abi_needs_a_laid_out_kernel():
    module = tilec.compile(str(EXAMPLES / "softmax.tile"), pipeline="specialize").module
    with pytest.raises(ValueError, match=r"tilec\.num_warps"):
        kernel_abi(module.functions[0])


# -- code structure ------------------------------------------------------------------------------


def test_loads_and_stores_are_predicated_per_element():
    text = _lowered_text(_compiled("vector_add.tile"))
    # 1024 elements over 256 threads: 4 per thread, per tensor.
    body = text.split('@"vector_add"')[1].split("\n}\n")[0]
    assert body.count("ld.global.b32") == 8
    assert body.count("st.global.b32") == 4
    # bounds: one 32-bit compare per index, whose offset (a block's) fits in 32 bits
    assert "icmp ult i32" in body and "icmp ult i64" in body
    assert "tilec_shared" not in body


def _odd_width_softmax_ptx(monkeypatch) -> str:
    monkeypatch.setenv("TILEC_CACHE_DIR", "")
    x = np.zeros((4096, 5003), np.float32)
    return tilec.load_kernel(EXAMPLES / "softmax.tile", "softmax").compile_for(x, x).ptx


def test_odd_width_rows_compare_each_column_at_each_access_in_32_bits(monkeypatch):
    """softmax over 5003 columns (no tile divides them), specialized as the jit does: 16
    columns per thread, and per column one 32-bit compare at the load and one at the store,
    each of the access's own limit `N - base` (a register) with the column's constant offset;
    none for the sum's padding mask, which fold-padding removes.
    (Before: one predicate per column shared by the load, the store and the sum's mask, which
    ptxas had to pack into a register's bits between them; before that, 64-bit compares.)"""
    ptx = _odd_width_softmax_ptx(monkeypatch)
    assert ".reqntid 512" in ptx  # 16 warps: 16 columns per thread
    assert set(re.findall(r"setp\.\w+\.([su]\d+)", ptx)) == {"s32"}
    compares = re.findall(r"setp\.gt\.s32\s+%p\d+, (%r\d+), (\d+);", ptx)
    # the sum's padding mask is gone (fold-padding), and so are the columns at or past the
    # bound 5120 (`tilec.max_extent`: 5003 rounded up to an eighth of the tile of 8192)
    assert len(compares) == 20
    limits = {register for register, _ in compares}
    assert len(limits) == 2  # the load's and the store's
    columns = sorted(int(k) for _, k in compares)
    assert columns == sorted(2 * list(range(0, 5120, 512)))


def test_odd_width_softmax_sass_keeps_no_predicates_in_registers(monkeypatch):
    """The same kernel's SASS (ptxas on the CPU): no P2R or R2P (predicates saved to a
    register and back), at most 40 registers. Before: 17 P2R and 53 LOP3, most of them
    setting and testing the bits of a register that held the columns' predicates."""
    from tests.unit.test_random import _sass_opcodes
    from tilec.lowering.ptxas import assemble_cubin, find_ptxas

    ptx = _odd_width_softmax_ptx(monkeypatch)
    opcodes = [op.split(".")[0] for op in _sass_opcodes(ptx)]
    assert "P2R" not in opcodes and "R2P" not in opcodes
    assert opcodes.count("ISETP") <= 40 and opcodes.count("FSEL") <= 16  # exp's NaN fix-ups
    if find_ptxas() is not None:
        (resources,) = assemble_cubin(ptx, "sm_90a")[1].values()
        assert resources.registers <= 40


def test_padding_mask_compares_constants_with_one_register(monkeypatch):
    """layernorm over 3001 columns (4 warps, 32 columns a thread): the kernel's padding mask
    `iota < N` (the select of `d * d`, after the mean) is lowered like the accesses' bounds,
    `k < max(N, 0) - base`, so no column's index has to stay in a register of its own until
    the select: every compare of the kernel is with a constant, 24 each for the loads of x, w
    and b, the store and the mask -- the 24 of a thread's 32 columns below the bound 3072
    (`tilec.max_extent`); the 8 past it are padding for any extent the launch allows."""
    monkeypatch.setenv("TILEC_CACHE_DIR", "")
    x = np.zeros((6000, 3001), np.float16)
    w = np.zeros(3001, np.float16)
    kernel = tilec.load_kernel(EXAMPLES / "layernorm.tile", "layernorm")
    ptx = kernel.compile_for(x, w, w, x, np.float32(1e-5)).ptx
    assert ".reqntid 128" in ptx
    assert not re.search(r"setp\.\w+\.s32\s+%p\d+, %r\d+, %r\d+;", ptx)
    assert len(re.findall(r"setp\.gt\.s32\s+%p\d+, %r\d+, \d+;", ptx)) == 5 * 24


def test_accesses_promised_in_bounds_are_plain_llvm_loads_and_stores():
    """vectorize's `in_bounds` on every dimension (one row per block of a fixed row): no
    compares, no predicated inline PTX; LLVM's own vector loads and stores, whose constant
    offsets the NVPTX backend folds into the address (`[%rd+8192]`)."""
    module = tilec.compile(
        str(EXAMPLES / "softmax.tile"),
        pipeline='assume{all="aligned,unit,divisible"},tiling{extents="N=4096" exact=N},'
        "assign-layouts,vectorize,canonicalize,cse,dce",
    ).module
    body = _lowered_text(module).split('@"softmax"')[1].split("\n}\n")[0]
    assert "ld.global" not in body and "st.global" not in body
    assert "icmp ult i64" not in body
    assert re.search(r"load <4 x i32>, ptr addrspace\(1\) %.*, align 16", body)
    assert re.search(r"store <4 x i32> %.*, ptr addrspace\(1\) %.*, align 16", body)
    ptx = compile_to_ptx(module, "sm_90a")
    assert re.search(r"ld\.global\.v4\.b32\s+\{[^}]*\}, \[%rd\d+\+\d+\];", ptx)


def test_softmax_reduces_with_shuffles_in_registers():
    text = _lowered_text(_compiled("softmax.tile"))
    assert text.count("llvm.nvvm.shfl.sync.bfly.f32") >= 10  # 5 xor steps per reduction
    assert 'call float @"llvm.nvvm.fmax.nan.f"' in text  # max.NaN.f32
    # 4 rows of 1024, one warp per row: the row results stay in their warp (#slice layouts)
    # and are broadcast back in registers; no shared memory, no barrier.
    assert "llvm.nvvm.barrier0" not in text
    assert "tilec_shared" not in text


def test_matmul_dot_is_a_loop_of_fmas_over_shared_operands():
    module = _compiled("matmul.tile")
    text = _lowered_text(module)
    kernel = text.split('@"matmul"(')[1].split("\n}\n")[0]
    assert "dot.k:" in kernel
    # 64x64 accumulator over 128 threads: 32 accumulators per thread, one FMA each per k.
    assert kernel.count('call float @"llvm.fma.f32"') == 32
    # Each thread holds 8 consecutive columns of 4 rows: 4 values of a, 8 of b per k.
    assert kernel.count("load half, ptr addrspace(3)") == 4 + 8
    ptx = compile_to_ptx(module, "sm_80")
    assert ".extern .shared .align 16 .b8 tilec_shared[];" in ptx
    assert re.search(r"\.reqntid 256", ptx)  # matmul_pinned: 8 warps


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"])
def test_every_architecture_gets_ptx(arch):
    ptx = compile_to_ptx(_compiled("softmax.tile"), arch)
    assert f".target {arch}" in ptx
    assert ".visible .entry softmax(" in ptx


def test_f16_cast_and_math_round_once_from_f32():
    module = _laid_out(
        """
func @k(%x: !tile.tensor<Nxf16>, %o: index) {
  %v = tile.load %x[%o] : !tile.tensor<Nxf16> -> tile<128xf16>
  %e = math.exp %v : tile<128xf16>
  %w = tile.cast %e : tile<128xf16> -> tile<128xbf16>
  %h = tile.cast %w : tile<128xbf16> -> tile<128xf16>
  tile.store %x[%o], %h : !tile.tensor<Nxf16>, tile<128xf16>
  return
}
""",
        "assign-layouts",
    )
    text = _lowered_text(module)
    assert "fpext half" in text and "fptrunc float" in text and "to bfloat" in text
    ptx = compile_to_ptx(module, "sm_80")
    assert "cvt.rn.f16.f32" in ptx and "cvt.rn.bf16.f32" in ptx and "ex2.approx" in ptx


def test_scf_if_merges_with_phis():
    module = _laid_out(
        """
func @k(%x: !tile.tensor<Nxf32>, %o: index, %c: i1) {
  %v = tile.load %x[%o] : !tile.tensor<Nxf32> -> tile<128xf32>
  %r = scf.if %c -> (tile<128xf32>) {
    %a = arith.addf %v, %v : tile<128xf32>
    scf.yield %a : tile<128xf32>
  } else {
    scf.yield %v : tile<128xf32>
  }
  tile.store %x[%o], %r : !tile.tensor<Nxf32>, tile<128xf32>
  return
}
""",
        "assign-layouts",
    )
    text = _lowered_text(module)
    assert "if.then:" in text and "if.else:" in text and "if.end:" in text
    assert text.count("phi  float") == 1  # 128 elements over 128 threads: one slot
    assert '%"c" to' not in text and 'i8 %"c"' in text  # an i1 scalar is passed as a byte


# -- constants -----------------------------------------------------------------------------------


def test_bfloat16_constants_round_to_nearest_even():
    rng = np.random.default_rng(1)
    values = np.concatenate(
        [
            rng.standard_normal(2000) * 10.0 ** rng.integers(-40, 39, 2000),
            [0.0, -0.0, 1.0, 1.00390625, 1.01171875, 3.3895313892515355e38, 1e39, -1e-45, 1e-40],
        ]
    )
    for v in values:
        with np.errstate(over="ignore"):
            expected = np.asarray(v, dtype=np.float64).astype(ml_dtypes.bfloat16).view(np.uint16)
        assert bfloat16_bits(float(v)) == int(expected), v
    assert bfloat16_bits(math.inf) == 0x7F80 and bfloat16_bits(-math.inf) == 0xFF80
    assert bfloat16_bits(math.nan) == 0x7FC0


# -- what is not lowered -------------------------------------------------------------------------


def test_unlowered_op_is_an_internal_error_naming_it():
    module = _laid_out(
        """
func @k(%x: !tile.tensor<Nxf32>, %o: index) {
  %v = tile.load %x[%o] : !tile.tensor<Nxf32> -> tile<128xf32>
  %r = arith.remf %v, %v : tile<128xf32>
  tile.store %x[%o], %r : !tile.tensor<Nxf32>, tile<128xf32>
  return
}
""",
        "assign-layouts",
    )
    with pytest.raises(InternalCompilerError, match=r"'arith.remf'.* is not lowered to LLVM yet"):
        lower_to_llvm(module, "sm_90a")


def test_f64_transcendentals_are_an_error_at_their_source():
    module = _laid_out(
        """
func @k(%x: !tile.tensor<Nxf64>, %o: index) {
  %v = tile.load %x[%o] : !tile.tensor<Nxf64> -> tile<128xf64>
  %s = math.sqrt %v : tile<128xf64>
  %r = math.exp %s : tile<128xf64>
  tile.store %x[%o], %r : !tile.tensor<Nxf64>, tile<128xf64>
  return
}
""",
        "assign-layouts",
    )
    with pytest.raises(TileError, match=r"exp\(\) of f64 values is not supported yet") as e:
        lower_to_llvm(module, "sm_90a")
    assert "x.to(f32)" in (e.value.hint or "")


def test_f64_transcendental_in_a_tile_file_is_a_located_error(tmp_path):
    source = tmp_path / "e64.tile"
    source.write_text(
        "def k(x: f64[N], y: f64[N]):\n    for t in tiles(N):\n        y[t] = tanh(x[t])\n"
    )
    with pytest.raises(TileError) as e:
        tilec.compile(str(source), target="ptx")
    assert (e.value.loc.line, e.value.loc.col) == (3, 16)
    assert "tanh() of f64 values" in e.value.render()

    source.write_text(
        "def k(x: f64[N], y: f64[N]):\n    for t in tiles(N):\n        y[t] = x[t] ** 3.0\n"
    )
    with pytest.raises(TileError) as e:
        tilec.compile(str(source), target="ptx")
    assert "x ** y of f64 values" in e.value.message and "(x.to(f32) ** y)" in e.value.hint


def test_unspecialized_kernels_are_rejected():
    module = tilec.compile(str(EXAMPLES / "vector_add.tile")).module
    with pytest.raises(InternalCompilerError, match="run specialize"):
        lower_to_llvm(module, "sm_90a")


def test_unknown_architecture_is_a_user_error():
    with pytest.raises(TileError, match="unknown architecture 'sm_70'"):
        lower_to_llvm(_compiled("vector_add.tile"), "sm_70")


def test_a_loop_whose_body_reads_scratch_ends_each_iteration_at_a_barrier():
    """The body's last exchange reads scratch that its next iteration writes again: the
    lowering puts a barrier right before the back-edge, and none after the loop's exit.
    (Without defer-reduction, which would move the row sum's exchange out of the loop.)"""
    from tilec.compiler import DEFAULT_PIPELINE

    source = Path(__file__).resolve().parents[1] / "lit" / "lowering" / "scratch_barriers.tile"
    program = tilec.compile(
        str(source),
        kernels=["in_a_loop"],
        target="llvm",
        arch="sm_90a",
        options={"tile": {"M": 2, "N": 1024}, "warps": 8},
        pipeline=DEFAULT_PIPELINE.replace("defer-reduction,", ""),
    )
    lines = [line.strip() for line in program.llvm.splitlines()]
    (back_edge,) = [
        i for i, line in enumerate(lines) if 'label %"loop.body", label %"loop.exit"' in line
    ]
    touches = [line for line in lines[:back_edge] if "barrier0" in line or "addrspace(3) %" in line]
    assert touches[-1].startswith('call void @"llvm.nvvm.barrier0"()'), touches[-3:]
    for label in ("loop.exit:", "loop.end:"):  # each block, up to the next label
        start = lines.index(label) + 1
        stop = next(
            i for i in range(start, len(lines)) if lines[i].endswith(":") or lines[i] == "}"
        )
        assert not any("barrier0" in line for line in lines[start:stop]), label


def test_tanh_and_erf_take_the_approximate_units_where_their_error_analysis_allows(tmp_path):
    """tanh's `2/(e + 1)` and erf's `e^Q` reach the result scaled down (by at most 0.8 and
    0.19: `tilec.lowering.mathlib`), so they use `ex2.approx` and `rcp.approx` without an
    IEEE division or the exponent's correction (its accuracy: tests/gpu/
    test_defined_semantics.py). `exp` keeps its correction."""
    source = tmp_path / "t.tile"
    source.write_text(
        "def k(x: f32[N], t: f32[N], e: f32[N], g: f32[N]):\n    for n in tiles(N):\n"
        "        t[n] = tanh(x[n])\n        e[n] = erf(x[n])\n        g[n] = exp(x[n])\n"
    )
    ptx = tilec.compile(str(source), target="ptx").ptx
    assert ptx.count("rcp.approx.ftz.f32") >= 1 and "div.rn.f32" not in ptx
    assert ptx.count("ex2.approx") >= 3  # tanh's, erf's, exp's
