"""ptxas accepts the hot examples compiled with argument facts and the vectorize pass, and
hand-laid-out tiles of 16 bytes per thread become `ld.global.v4`/`st.global.v4`."""

from __future__ import annotations

from pathlib import Path

import pytest

import tilec
from tilec.ir import parse_module
from tilec.lowering import compile_to_ptx
from tilec.lowering.ptxas import assemble
from tilec.passmanager import PassManager

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = (
    'assume{all="aligned,unit,divisible"},canonicalize,cse,specialize,assign-layouts,'
    "vectorize,canonicalize,cse,dce"
)
ARCHES = ("sm_80", "sm_90a")


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("example", ["vector_add", "softmax", "layernorm", "matmul"])
def test_hot_examples_with_facts_assemble_without_spills(example: str, arch: str):
    program = tilec.compile(str(ROOT / "examples" / f"{example}.tile"), pipeline=PIPELINE)
    for kernel in assemble(compile_to_ptx(program.module, arch), arch).values():
        assert not kernel.spills, f"{kernel.name} on {arch} spills"


LAID_OUT = """
#b = #blocked<size_per_thread = [1, 8], threads_per_warp = [8, 4], warps_per_cta = [4, 1], order = [1, 0]>
func @scale(%x: !tile.tensor<MxNxf16>, %y: !tile.tensor<MxNxf16>) attributes {tilec.num_warps = 4} {
  %c0 = arith.constant 0 : index
  %BM = arith.constant 32 : index
  %p = tile.program_id 0
  %row = arith.muli %p, %BM : index
  %v = tile.load %x[%row, %c0] : !tile.tensor<MxNxf16> -> tile<32x64xf16, #b>
  %w = arith.addf %v, %v : tile<32x64xf16, #b>
  tile.store %y[%row, %c0], %w : !tile.tensor<MxNxf16>, tile<32x64xf16, #b>
  return
}
"""


@pytest.mark.parametrize("arch", ARCHES)
def test_sixteen_byte_accesses_assemble(arch: str):
    module = PassManager.from_text('assume{all="aligned,unit,divisible"},vectorize').run(
        parse_module(LAID_OUT)
    )
    ptx = compile_to_ptx(module, arch)
    assert ptx.count("ld.global.v4.b32") == 2 and ptx.count("st.global.v4.b32") == 2
    assert "ld.global.b16" not in ptx
    report = assemble(ptx, arch)
    assert not report["scale"].spills
