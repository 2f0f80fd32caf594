"""Vector `red` for float atomic adds nobody reads the old values of: vectorize gives them
runs (16 bytes: v8 of bf16, v4 of f32) where the facts allow, the sm_90 lowering issues one
`red.global.add.v*` a run (PTX 8.1), older targets one element each, and ptxas takes it."""

from __future__ import annotations

import os

import pytest

import tilec
from tilec.lowering.ptxas import assemble, find_ptxas

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EMBEDDING_BACKWARD = os.path.join(ROOT, "examples", "embedding_backward.tile")
FACTS = 'assume{all="aligned,unit,divisible"},'


# The kernel's two bindings: bf16 gradients with i64 ids (its default), f32 with i32.
BF16 = {"T": "bf16", "I": "i64"}
F32 = {"T": "f32", "I": "i32"}


def _compile(dtypes: dict[str, str], arch: str, facts: str = FACTS, target: str = "ptx"):
    from tilec.compiler import DEFAULT_PIPELINE

    return tilec.compile(
        EMBEDDING_BACKWARD,
        kernels=["embedding_backward"],
        options={"dtypes": dtypes},
        pipeline=facts + DEFAULT_PIPELINE,
        target=target,
        arch=arch,
    )


def _scatters(program):
    return [op for op in program.module.walk() if op.name == "tile.atomic_scatter"]


@pytest.mark.parametrize(
    ("dtypes", "width", "instruction"),
    [
        (BF16, 8, "red.relaxed.gpu.global.add.noftz.v8.bf16"),
        (F32, 4, "red.relaxed.gpu.global.add.v4.f32"),
    ],
)
def test_float_scatter_adds_move_sixteen_bytes_a_red(dtypes, width, instruction):
    program = _compile(dtypes, "sm_90a")
    (scatter,) = _scatters(program)
    assert scatter.attributes["vector"].value == width
    assert instruction in program.ptx
    assert ".version 8.1" in program.ptx
    # No scalar red is left beside the vector ones.
    scalar = instruction.replace(f"v{width}.", "")
    assert scalar + " " not in program.ptx


def test_older_targets_take_one_element_a_red():
    program = _compile(F32, "sm_80")
    assert "red.relaxed.gpu.global.add.f32 " in program.ptx
    assert ".v4.f32" not in program.ptx


def test_without_alignment_facts_each_element_is_its_own_red():
    program = _compile(BF16, "sm_90a", facts="")
    (scatter,) = _scatters(program)
    assert "vector" not in scatter.attributes
    assert "red.relaxed.gpu.global.add.noftz.bf16 " in program.ptx


def test_an_atomic_whose_old_values_are_read_stays_scalar():
    source = (
        "def counted(x: f32[N], acc: f32[N], old: f32[N]):\n"
        "    for tn in tiles(N):\n"
        "        old[tn] = atomic_add(acc[tn], x[tn])\n"
    )
    from tilec.compiler import DEFAULT_PIPELINE

    program = tilec.compile(source, pipeline=FACTS + DEFAULT_PIPELINE, target="ptx", arch="sm_90a")
    assert ".v4.f32" not in program.ptx
    assert "atom.relaxed.gpu.global.add.f32" in program.ptx


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
@pytest.mark.parametrize("dtypes", [BF16, F32])
def test_ptxas_assembles_the_vector_reds(dtypes):
    resources = assemble(_compile(dtypes, "sm_90a").ptx, "sm_90a")
    assert not resources["embedding_backward"].spills
