"""`skip-unit-factor` in attention's PTX and SASS: the rescale `acc * alpha` behind a vote and
a uniform branch, for d64 and d128, plain and causal; ptxas (on the CPU) spills nothing and
reports no wgmma serialization; in the SASS the branch jumps over exactly the rescale's
FMULs, and the loop grows by a few instructions only. The interpreter's results are the
same with and without the mark (translation validation runs the pass on every example)."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

import pytest

import tilec
from tilec.compiler import build_pipeline
from tilec.lowering.ptxas import assemble, assemble_cubin, wgmma_serializers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ATTENTION = os.path.join(ROOT, "examples", "attention.tile")
VOTE = re.compile(
    r"vote\.sync\.any\.pred\s+(%p\d+), %p\d+, -1;\s*\n\s*not\.pred\s+(%p\d+), \1;\s*\n"
    r"\s*@\2 bra\s+\S+;\s*\n((?:\s*mul\.rn\.f32[^\n]*\n)+)"
)


def _ptx(kernel: str, d: int, disable: tuple[str, ...] = ()) -> str:
    extents = f"D={d},M=4096,N=4096,S=4096,T=4096,B=4,H=16"
    # 64-row blocks without a producer warpgroup (tiling's option producer = 0): the SASS
    # below reads the computing warps' loop, which a producer's loop would come before.
    tiling = {"extents": extents, "exact": "D", "arch": "sm_90a", "producer": 0}
    pipeline = build_pipeline(disable=disable, options={"tiling": tiling})
    return tilec.compile(
        ATTENTION,
        kernels=[kernel],
        target="ptx",
        arch="sm_90a",
        pipeline=f'assume{{all="aligned,unit,divisible" positive="scale"}},{pipeline}',
    ).ptx


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("kernel", ["attention", "attention_causal"])
def test_the_rescale_is_behind_a_vote_and_assembles_without_spills(kernel, d):
    ptx = _ptx(kernel, d)
    skipped = VOTE.findall(ptx)
    # One rescale a loop (mask-bounds splits the key loop in two): d / 2 multiplies a thread
    # (a 64 x d accumulator on a warpgroup), one factor per row a thread holds (2 rows).
    assert len(skipped) == 2
    assert all(len(re.findall(r"mul\.rn\.f32", body)) == d // 2 for *_, body in skipped)
    assert len(re.findall(r"setp\.neu\.f32\s+%p\d+, %r\d+, 0f3F800000;", ptx)) == 4
    resources = assemble(ptx, "sm_90a")[kernel]
    assert not resources.spills
    assert resources.performance_warnings == ()
    assert wgmma_serializers(ptx) == {}
    assert "vote.sync" not in _ptx(kernel, d, disable=("skip-unit-factor",))


def _cuobjdump() -> str | None:
    from tests.unit.test_warp_specialize import _cuobjdump as find

    return find()


_SASS = re.compile(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);")


def _main_loop(ptx: str) -> list[str]:
    """The SASS of the kernel's first loop (attention's unmasked key steps): from the target of
    the first backward branch to it."""
    cubin, _ = assemble_cubin(ptx, "sm_90a")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        text = subprocess.run(
            [_cuobjdump(), "-sass", path], capture_output=True, text=True, check=True
        ).stdout
    code = [(int(a, 16), s.strip()) for a, s in _SASS.findall(text)]
    for address, instruction in code:
        target = re.search(r"BRA\s+0x([0-9a-f]+)", instruction)
        if target and int(target.group(1), 16) < address:
            return [s for a, s in code if int(target.group(1), 16) <= a <= address]
    raise AssertionError("no loop in the SASS")


@pytest.mark.skipif(_cuobjdump() is None, reason="no cuobjdump (Triton's copy neither)")
def test_the_skipped_path_leaves_out_the_multiplies_and_the_taken_one_costs_a_few():
    ptx = _ptx("attention", 128)
    loop = _main_loop(ptx)
    plain = _main_loop(_ptx("attention", 128, disable=("skip-unit-factor",)))
    vote = next(i for i, s in enumerate(loop) if s.startswith("VOTE.ANY"))
    branch = next(i for i, s in enumerate(loop) if i > vote and re.search(r"BRA\s+0x", s))
    skipped = loop[branch + 1 : branch + 1 + 64]
    assert all(s.startswith("FMUL") for s in skipped)
    assert not loop[branch + 65].startswith("FMUL")
    # Not skipped: a compare or two, the vote and the branch more than without the pass.
    assert len(plain) <= len(loop) <= len(plain) + 8
