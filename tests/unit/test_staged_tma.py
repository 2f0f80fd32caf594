"""The producer copies what the consumers would stage (passes/pipeline_staged_tma.py, pipeline's
option `staged_tma`): attention's q at d128, tiled for a producer warpgroup, arrives by the
TMA unit on an mbarrier of its own; the kernel computes bit for bit what it did before
pipelining (partial query tiles: the unit's zeros stand for the load's padding); the
interpreter catches consumers that read q without waiting; persistent blocks keep the
consumers' staging; the option's values."""

from __future__ import annotations

import numpy as np
import pytest

import tilec
from tests.unit.test_tma_copies import EXAMPLES
from tests.validation import run_kernel
from tilec.compiler import DEFAULT_PIPELINE, target_pipeline
from tilec.diagnostics import TileError
from tilec.dialects import tile as T
from tilec.dialects import tma as TM
from tilec.dialects.warp_specialize import WarpSpecializeOp
from tilec.interp import InterpreterError
from tilec.interp.runner import random_arguments
from tilec.passmanager import PassContext, parse_pipeline

# Partial query tiles (272 = 4 x 64 + 16) and key tiles (400 = 3 x 128 + 16).
ATTENTION = {"B": 1, "H": 2, "M": 272, "N": 400, "D": 128}
CAUSAL = {"B": 1, "H": 1, "S": 208, "T": 208, "D": 128}


def _specialized(kernel: str, extents: dict, options: str = "", example: str = "attention.tile"):
    """`kernel` before `pipeline` and after sm_90a's pipeline, tiled for a producer warpgroup
    (tiling's option producer = 1) with `options` for `pipeline`: (before, after, context)."""
    text = ",".join(f"{d}={n}" for d, n in extents.items())
    exact = ',exact="D"' if "D" in extents else ""
    tiling = f'tiling{{extents="{text}"{exact},producer=1}},'
    pipeline = target_pipeline(DEFAULT_PIPELINE.replace("tiling,", tiling), "sm_90a")
    pipeline = pipeline.replace("pipeline{", "pipeline{" + options, 1)
    passes = parse_pipeline('assume{all="aligned,unit,divisible"},' + pipeline)
    module = tilec.compile(f"{EXAMPLES}/{example}", kernels=[kernel]).module
    context = PassContext()
    at = [p.name for p in passes].index("pipeline")
    for p in passes[:at]:
        p.run(module, context)
    before = module.clone()
    for p in passes[at:]:
        p.run(module, context)
    return before, module, context


def _free(extents: dict) -> dict:
    """The extents the kernel still takes at run time (D is compiled in: tiling's `exact`)."""
    return {d: n for d, n in extents.items() if d != "D"}


def _region(module, kernel: str) -> WarpSpecializeOp:
    (op,) = [o for o in module.lookup(kernel).walk() if isinstance(o, WarpSpecializeOp)]
    return op


@pytest.mark.parametrize(
    "kernel, extents", [("attention", ATTENTION), ("attention_causal", CAUSAL)]
)
def test_q_arrives_by_the_producers_copy_and_the_kernel_computes_what_it_did(kernel, extents):
    before, module, context = _specialized(kernel, extents)
    region = _region(module, kernel)
    first = list(region.producer.block.ops)[:2]
    assert [type(o) for o in first] == [TM.MbarrierExpectOp, TM.TmaCopyOp]
    copy = first[1]
    assert copy.view.name_hint == "q" and copy.barriers is first[0].barriers
    consumer = [o for o in region.consumer.block.ops if o.name != "arith.constant"]
    assert isinstance(consumer[0], TM.MbarrierWaitOp) and consumer[0].barriers is copy.barriers
    assert not any(isinstance(o, T.LoadOp) and o.view.name_hint == "q" for o in region.walk())
    assert any("copied by the producer's TMA unit" in r.message for r in context.remarks)
    func = module.lookup(kernel)
    inputs = random_arguments(func, _free(extents), seed=5)
    got, sizes = run_kernel(module, kernel, inputs, None)
    expected, _ = run_kernel(before, kernel, inputs, sizes)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_consumers_that_read_q_without_waiting_are_caught():
    """Without the consumers' wait on q's mbarrier, their first wgmma may read the buffer
    before the copy lands."""
    _, module, _ = _specialized("attention", ATTENTION)
    region = _region(module, "attention")
    copy = next(o for o in region.producer.block.ops if isinstance(o, TM.TmaCopyOp))
    wait = next(
        o
        for o in region.consumer.block.ops
        if isinstance(o, TM.MbarrierWaitOp) and o.barriers is copy.barriers
    )
    wait.erase()
    func = module.lookup("attention")
    with pytest.raises(InterpreterError, match="while an asynchronous copy into it"):
        run_kernel(module, "attention", random_arguments(func, _free(ATTENTION), seed=5), None)


def test_option_zero_keeps_the_consumers_staging():
    _, module, context = _specialized("attention", ATTENTION, "staged_tma=0 ")
    region = _region(module, "attention")
    assert any(isinstance(o, T.LoadOp) and o.view.name_hint == "q" for o in region.consumer.walk())
    assert not any(isinstance(o, TM.TmaCopyOp) and o.view.name_hint == "q" for o in region.walk())
    assert not any("copied by the producer" in r.message for r in context.remarks)


def test_option_one_says_why_not():
    """A GEMM's consumers stage nothing before the loop."""
    with pytest.raises(TileError, match="staged_tma = 1, but the consumers stage no tile"):
        _specialized(
            "gemm_nn",
            {"M": 208, "N": 320, "K": 400},
            "warp_specialize=1 staged_tma=1 ",
            example="gemm_layouts.tile",
        )


def test_persistent_blocks_keep_the_consumers_staging():
    """Measured slower with the producer copying each tile's q (the module docstring): walking
    the tiles, the consumers stage q, and a pin says why it cannot be had."""
    _, module, context = _specialized("attention", ATTENTION, "persistent=1 ")
    assert "tilec.persistent" in module.lookup("attention").attributes
    assert any(isinstance(o, T.LoadOp) and o.view.name_hint == "q" for o in module.walk())
    assert any("stage a tile themselves: persistent blocks" in r.message for r in context.remarks)
    with pytest.raises(TileError, match="staged_tma = 1, but persistent blocks keep"):
        _specialized("attention", ATTENTION, "persistent=1 staged_tma=1 ")


def test_the_tuner_reads_the_decision_back():
    """`pipeline.staged_tma` is one of the decisions the tuner reads off a compiled kernel (and
    so searches, 0 or 1, where a tile is staged before the loops)."""
    from tilec.tune.space import read_back

    _, module, _ = _specialized("attention", ATTENTION)
    assert read_back(module.lookup("attention"))["pipeline.staged_tma"] == 1
    _, module, _ = _specialized("attention", ATTENTION, "staged_tma=0 ")
    assert read_back(module.lookup("attention"))["pipeline.staged_tma"] == 0
