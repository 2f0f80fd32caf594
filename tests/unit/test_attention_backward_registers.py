"""The register model of tiling on `examples/attention_backward.tile`'s `attention_dkdv`, as the
training model binds it (bf16, through `load_kernel` and `compile_for`): two f32 accumulators,
four dots, k.T and v.T loaded before the loop as the B operands of `q @ k.T` and `do @ v.T` (on
mma.sync each warp holds their fragments for all of K), q and do read by two dots each. At
64x64 tiles on 4 warps the model said 180 words and ptxas spilled 768 bytes at D=64 (232 at
D=128 on 8 warps); the model now counts those fragments and tiles and picks a tiling that
does not spill."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import tilec
from tilec.lowering.ptxas import assemble, find_ptxas

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ATTENTION_BACKWARD = os.path.join(ROOT, "examples", "attention_backward.tile")
ml_dtypes = pytest.importorskip("ml_dtypes")


def _dkdv_arguments(d: int, batch: int = 8, heads: int = 8, length: int = 256) -> tuple:
    def zeros(*shape, dtype=ml_dtypes.bfloat16):
        return np.zeros(shape, dtype)

    x = (batch, heads, length, d)
    rows = (batch, heads, length)
    return (
        *(zeros(*x) for _ in range(4)),  # q, k, v, do
        zeros(*rows, dtype=np.float32),  # lse
        zeros(*rows, dtype=np.float32),  # delta
        zeros(*x),  # dk
        zeros(*x),  # dv
        0.1,
    )


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
@pytest.mark.parametrize("d", [64, 128])
def test_dkdv_in_bf16_does_not_spill(d, monkeypatch, tmp_path):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    kernel = tilec.load_kernel(ATTENTION_BACKWARD, "attention_dkdv")
    compiled = kernel.compile_for(*_dkdv_arguments(d), arch="sm_90a")
    resources = assemble(compiled.ptx, "sm_90a")["attention_dkdv"]
    assert not resources.spills, (resources.registers, resources.spill_stores)


def _tiling_remark(tiles: str, warps: int | None = None) -> str:
    options: dict = {
        "tiling": {
            "extents": "B=8,H=8,S=256,T=256,D=64",
            "exact": "D",
            "arch": "sm_90a",
            "tiles": tiles,
        }
    }
    if warps is not None:
        options["tiling"]["num_warps"] = warps
    pipeline = tilec.compiler.build_pipeline(options=options)
    program = tilec.compile(
        ATTENTION_BACKWARD,
        kernels=["attention_dkdv"],
        options={"dtypes": {"DT": "bf16"}},
        pipeline='assume{all="aligned,unit,divisible"},' + pipeline,
    )
    messages = [r.message for stage in program.stages for r in stage.remarks]
    return next(m for m in messages if "words a thread holds at its busiest" in m)


def test_dkdv_counts_held_b_fragments_and_shared_loads():
    """64x64 tiles pinned on 4 warps (the fewest words: warps [2, 2]): 128 accumulator words,
    64 of p.T's and ds.T's A fragments, 64 of k.T's and v.T's B fragments held for all of K,
    16 each of q's and do's loaded tiles, 8 of one k-step of q's A fragments: 296, over the
    budget of 192 (the old model said 208 there, and 180 on [4, 1], where ptxas used 255
    registers and spilled 768 bytes). Unpinned, the choice is 8 warps, within it (246
    registers, none spilled)."""
    pinned = _tiling_remark("BT=64,BS=64", warps=4)
    assert "296 words a thread holds at its busiest (at most 192" in pinned
    chosen = _tiling_remark("")
    assert "BS=64, BT=64, BD=64, 8 warps (2x4 warp tiles" in chosen, chosen
    words = int(re.search(r"(\d+) words a thread holds", chosen).group(1))
    assert words <= 192
