"""Hand-laid-out tiles of 16 bytes per thread become `ld.global.v4`/`st.global.v4` that ptxas
accepts. (The examples compiled with argument facts, spill-free: `test_ptxas.py`.)"""

from __future__ import annotations

import pytest

from tilec.ir import parse_module
from tilec.lowering import compile_to_ptx
from tilec.lowering.ptxas import assemble
from tilec.passmanager import PassManager

ARCHES = ("sm_80", "sm_90a")


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
