"""Warp specialization on the CPU (passes/pipeline_warp_specialize.py, tile.warp_specialize):
the producer and consumer regions compute, in the interpreter's coroutines, bit for bit what
the loop before pipelining did, with and without persistent blocks; the interpreter catches a
broken stage protocol (a producer that does not wait for the release, a consumer that never
releases, a wait on the wrong phase); the register budget `setmaxnreg` may ask for; the PTX."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.test_tma_copies import TMA_KERNELS, _before_pipeline, _sm90a_ptx
from tests.validation import run_kernel
from tilec.dialects import tma as TM
from tilec.dialects.warp_specialize import WarpSpecializeOp, enclosing_region
from tilec.interp import InterpreterError
from tilec.interp.runner import random_arguments
from tilec.ir.printer import print_op
from tilec.passes.pipeline_warp_specialize import _consumer_registers

KERNELS = [
    # attention: two TMA loops, one protocol of stages through both; a.T @ b with its A read
    # M-major by descriptor (read into registers instead, it refuses a producer: test below)
    *TMA_KERNELS,
    ("attention.tile", "attention_causal", {"B": 1, "H": 2, "S": 144, "T": 144, "D": 128}),
    ("attention.tile", "attention_gqa", {"B": 1, "H": 4, "G": 2, "M": 80, "N": 208, "D": 64}),
]
VARIANTS = {
    "warp_specialize": "warp_specialize=1 ",
    "persistent": "warp_specialize=1 persistent=1 ",
}
# With persistent blocks attention's loops (the main loop, its masked tail, the causal
# diagonal) are walked a tile at a time by both regions.
CASES = [(*kernel, variant) for kernel in KERNELS for variant in VARIANTS]


def _specialized(example: str, kernel: str, extents: dict, options: str):
    """`kernel` before `pipeline` and after the rest of sm_90a's pipeline with `options`."""
    passes, module, context = _before_pipeline(example, kernel, extents, options)
    at = [p.name for p in passes].index("pipeline")
    before = module.clone()
    for p in passes[at:]:
        p.run(module, context)
    return before, module, context


@pytest.mark.parametrize(
    "example, kernel, extents, variant", CASES, ids=[f"{k}:{e}-{v}" for _, k, e, v in CASES]
)
def test_the_regions_compute_what_the_loop_before_pipelining_did(example, kernel, extents, variant):
    """At extents with partial tiles everywhere, bit for bit; the race check follows every
    mbarrier phase of both regions (with persistent blocks, three blocks walk the tiles)."""
    before, module, _ = _specialized(example, kernel, extents, VARIANTS[variant])
    func = module.lookup(kernel)
    regions = [op for op in func.walk() if isinstance(op, WarpSpecializeOp)]
    assert len(regions) == 1
    assert ("tilec.persistent" in func.attributes) == (variant == "persistent")
    inputs = random_arguments(func, extents, seed=13)
    got, sizes = run_kernel(module, kernel, inputs, None)
    expected, _ = run_kernel(before, kernel, inputs, sizes)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def _gemm():
    return _specialized(
        "gemm_layouts.tile", "gemm_nn", {"M": 208, "N": 320, "K": 400}, VARIANTS["warp_specialize"]
    )


def _producer_wait(func):
    return next(
        op
        for op in func.walk()
        if isinstance(op, TM.MbarrierWaitOp) and enclosing_region(op)[1]  # type: ignore[index]
    )


def _run(module):
    func = module.lookup("gemm_nn")
    extents = {"M": 208, "N": 320, "K": 400}
    run_kernel(module, "gemm_nn", random_arguments(func, extents, seed=3), None)


def test_a_producer_that_does_not_wait_for_the_release_is_caught():
    """Without its wait on the empty mbarrier the producer runs a round ahead: it arms a
    stage's full mbarrier again before the consumers waited on its phase (on the GPU: the
    copies overwrite a stage being read)."""
    _, module, _ = _gemm()
    _producer_wait(module.lookup("gemm_nn")).erase()
    with pytest.raises(InterpreterError, match=r"arrives on mbarrier \d+, whose phase 0 has had"):
        _run(module)


def test_a_release_before_the_dot_is_waited_for_is_a_race():
    """The consumers release step i - 1's stage after issuing step i's dot (whose issue waits
    for step i - 1's). Releasing step i's own stage instead lets the producer refill it while
    the dot in flight may still read it."""
    _, module, _ = _gemm()
    func = module.lookup("gemm_nn")
    arrive = next(op for op in func.walk() if isinstance(op, TM.MbarrierArriveOp))
    wait = next(
        op
        for op in func.walk()
        if isinstance(op, TM.MbarrierWaitOp) and not enclosing_region(op)[1]  # type: ignore[index]
    )
    from tilec.ir.builder import Builder

    Builder.before_op(arrive).create(  # this step's slot, from step 0 on
        TM.MbarrierArriveOp, barriers=arrive.barriers, slot=wait.slot
    )
    arrive.erase()
    with pytest.raises(
        InterpreterError, match=r"writes slot 0, which was read .* no release since"
    ):
        _run(module)


def test_a_consumer_that_never_releases_its_stages_deadlocks():
    _, module, _ = _gemm()
    func = module.lookup("gemm_nn")
    next(op for op in func.walk() if isinstance(op, TM.MbarrierArriveOp)).erase()
    with pytest.raises(InterpreterError, match="would wait forever on mbarrier"):
        _run(module)


def test_a_producer_waiting_on_the_phase_itself_deadlocks():
    """The producer must wait for the phase *before* the one it fills (1 - phase: on a fresh
    stage, the wait returns at once); waiting on the phase itself waits for a release that
    can only follow its own copies."""
    _, module, _ = _gemm()
    wait = _producer_wait(module.lookup("gemm_nn"))
    released = wait.phase.op  # 1 - phase
    wait.set_operand(2, released.rhs)
    with pytest.raises(InterpreterError, match="would wait forever"):
        _run(module)


def test_the_specialized_ir_prints_and_parses_back():
    from tilec.ir.parser import parse_module

    _, module, _ = _gemm()
    text = print_op(module)
    assert "tile.warp_specialize {" in text and "} consumer {" in text
    assert print_op(parse_module(text)) == text


def test_the_consumers_take_what_the_producer_gives_back():
    """With setmaxnreg in the kernel every thread starts at the most registers the launch
    bounds allow; the consumers may take only what the producer's warpgroup frees."""
    assert _consumer_registers(8, 1) == 232  # 384 threads start at 168: CUTLASS's split
    assert _consumer_registers(4, 2) == 216  # 2 x 256 threads start at 128
    assert _consumer_registers(4, 1) == 256
    assert _consumer_registers(8, 2) == 96  # too few for a 128x128 tile's accumulators


def test_a_kernel_whose_consumers_would_lack_registers_is_refused_with_the_reason():
    _, module, context = _specialized(
        "gemm_layouts.tile", "gemm_tt", {"M": 257, "N": 129, "K": 136}, "warp_specialize=-1 "
    )
    func = module.lookup("gemm_tt")
    said = [r.message for r in context.remarks if "warp-specialized" in r.message]
    specialized = any(isinstance(op, WarpSpecializeOp) for op in func.walk())
    blocks = func.attributes.get("tilec.min_blocks_per_sm")
    if blocks is not None and blocks.value == 2 and func.attributes["tilec.num_warps"].value == 8:
        assert not specialized and "fewer than" in said[0]
    else:
        assert specialized or said


def test_the_ptx_branches_into_a_producer_and_consumers():
    program = _sm90a_ptx(
        "gemm_layouts.tile", "gemm_nn", "M=4000,N=3000,K=1000", pipeline="warp_specialize=1"
    )
    ptx = program.ptx
    assert ".reqntid 384" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    assert "mbarrier.init.shared::cta.b64 [%r" in ptx and "], 8;" in ptx  # one arrival a warp
    assert "bar.sync 1, 256;" in ptx
    loop = ptx[ptx.index("setmaxnreg.inc") :]
    assert "bar.sync \t0;" not in loop and "barrier.sync 0" not in loop
    assert "wgmma.wait_group.sync.aligned 1;" in loop
    from tilec.lowering.ptxas import assemble, find_ptxas

    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    report = assemble(ptx, "sm_90a")["gemm_nn"]
    assert report.spill_stores == 0 and report.spill_loads == 0
    assert report.barriers == 2  # the block's and the consumers' named barrier


def _cuobjdump() -> str | None:
    """Triton's copy of cuobjdump, when Triton is installed."""
    import shutil
    from pathlib import Path

    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton
    except ImportError:
        return None
    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return str(path) if path.exists() else None


@pytest.mark.parametrize(
    "example, kernel, sizes, pipeline, copies",
    [
        # 16 boxes of a's 8-row groups and 4 of b, once in the producer's loop
        ("bmm.tile", "bmm", "Z=8,M=1024,N=1024,K=1024", "warp_specialize=1", 20),
        # 21 a step: in the loop, and in the prologue's two steps (unrolled); the plain
        # kernel, not the walk with a producer tiling plans at these extents
        (
            "gemm_layouts.tile",
            "gemm_nn",
            "M=4000,N=3000,K=1000",
            "warp_specialize=0 persistent=0",
            63,
        ),
    ],
)
def test_copies_are_issued_from_uniform_registers(example, kernel, sizes, pipeline, copies):
    """With the issuing thread picked by `tid == 0`, ptxas wrapped each
    `cp.async.bulk.tensor` in a loop over the warp's lanes (ELECT, BRA.U.ANY): each of bmm's
    20 copies a step in the producer (the warp-specialized bmm ran 1.27x the plain kernel's
    time on the H200), and the plain kernels' prologue copies (21 of 63 sites at K = 1000).
    `elect.sync` in a warp tested on its index from `shfl.sync` lets ptxas issue them
    straight."""
    import subprocess
    import tempfile

    from tilec.lowering.ptxas import assemble_cubin, find_ptxas

    tool = _cuobjdump()
    if find_ptxas() is None or tool is None:
        pytest.skip("needs ptxas and cuobjdump")
    extra = {"pipeline": pipeline} if pipeline else {}
    program = _sm90a_ptx(example, kernel, sizes, **extra)
    assert "elect.sync" in program.ptx
    cubin, _ = assemble_cubin(program.ptx, "sm_90a")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True).stdout
    assert sass.count("UTMALDG") == copies
    assert "BRA.U.ANY" not in sass


def _attention():
    extents = {"B": 1, "H": 1, "M": 64, "N": 720, "D": 64}  # 6 steps over 3 stages
    _, module, context = _specialized("attention.tile", "attention", extents, "warp_specialize=1 ")
    return module, context, extents


def test_attention_loops_share_one_protocol_of_stages():
    """The main loop and its tail fill the same buffers and arrive on the same mbarriers; the
    producer walks both loops' steps, the tail's counted on from the main loop's (`step_base`);
    the consumers release the previous step's stage at the top of a step."""
    module, context, _ = _attention()
    func = module.lookup("attention")
    (op,) = [o for o in func.walk() if isinstance(o, WarpSpecializeOp)]
    from tilec.dialects import scf

    producer_loops = [o for o in op.producer.block.ops if isinstance(o, scf.ForOp)]
    consumer_loops = [o for o in op.consumer.block.ops if isinstance(o, scf.ForOp)]
    assert len(producer_loops) == len(consumer_loops) == 2
    copies = [o for o in op.walk() if isinstance(o, TM.TmaCopyOp)]
    assert {c.buffer for c in copies} == {c.buffer for c in copies[:2]}  # k's and v's only
    assert len({w.barriers for w in op.walk() if isinstance(w, TM.MbarrierWaitOp)}) == 2
    for loop in consumer_loops:
        body = list(loop.body.block.ops)
        wait = next(o for o in body if isinstance(o, TM.MbarrierWaitOp))
        arrive = next(o for o in body if isinstance(o, TM.MbarrierArriveOp))
        dots = [i for i, o in enumerate(body) if o.name == "tile.dot"]
        assert body.index(wait) < body.index(arrive) < dots[0]
    assert "step_base" in print_op(module)
    assert any("of 2 loops" in r.message for r in context.remarks)


def test_an_attention_step_releasing_its_own_stage_is_a_race():
    """Releasing the stage being read (instead of the previous step's) lets the producer refill
    it under the consumers' dots; the consumers' own barriers order nothing for the producer,
    so the race check still sees it."""
    module, _, extents = _attention()
    func = module.lookup("attention")
    from tilec.ir.builder import Builder

    for arrive in [o for o in func.walk() if isinstance(o, TM.MbarrierArriveOp)]:
        wait = next(
            o
            for o in arrive.parent.ops
            if isinstance(o, TM.MbarrierWaitOp) and o.barriers is not arrive.barriers
        )
        Builder.before_op(arrive).create(
            TM.MbarrierArriveOp, barriers=arrive.barriers, slot=wait.slot
        )
        arrive.erase()
    with pytest.raises(InterpreterError, match=r"writes slot \d, which was read"):
        run_kernel(module, "attention", random_arguments(func, extents, seed=4), None)


def test_pingpong_is_searched_for_attention_and_reads_back(tmp_path, monkeypatch):
    """The tuner searches pingpong where a loop has several wgmma dots (attention, not a
    GEMM); a candidate of two consumer warpgroups with it builds and reads back as such."""
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    from pathlib import Path

    from tilec.ir.parser import parse_module
    from tilec.jit import load_kernel
    from tilec.tune.api import problem_for
    from tilec.tune.space import applicable
    from tilec.tune.worker import build_candidate

    examples = Path(__file__).resolve().parents[2] / "examples"
    dims = {"B": 4, "H": 16, "M": 4096, "N": 4096, "D": 128}
    problem = problem_for(
        load_kernel(examples / "attention.tile", "attention"), dims, arch="sm_90a"
    )
    heuristic = build_candidate(problem, {})
    kernel = parse_module(heuristic.ir, "x").functions[0]
    assert "pipeline.pingpong" in {d.name for d in applicable(kernel, dims, "sm_90a")}
    config = {"tile.M": 128, "warps": 8, "pipeline.warp_specialize": 1, "pipeline.pingpong": 1}
    built = build_candidate(problem, config)
    assert built.status == "built", built.reason
    assert built.decisions["pipeline.pingpong"] == 1
    gemm = problem_for(
        load_kernel(examples / "gemm_layouts.tile", "gemm_nn"),
        {"M": 2048, "N": 2048, "K": 1024},
        arch="sm_90a",
    )
    plain = parse_module(build_candidate(gemm, {}).ir, "x").functions[0]
    assert "pipeline.pingpong" not in {d.name for d in applicable(plain, {}, "sm_90a")}


def test_a_specialized_kernel_keeps_the_most_blocks_its_consumers_fit(tmp_path, monkeypatch):
    """Attention at d64 on 64x128 tiles, 2 stages: the stages were chosen for 3 blocks an SM,
    whose consumers (a producer warpgroup in each block) would get 120 registers for ~208
    needed; the specialized kernel asks for 2 (216 each) rather than being refused."""
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    from pathlib import Path

    from tilec.jit import load_kernel
    from tilec.tune.api import problem_for
    from tilec.tune.worker import build_candidate

    examples = Path(__file__).resolve().parents[2] / "examples"
    dims = {"B": 4, "H": 16, "M": 4096, "N": 4096, "D": 64}
    problem = problem_for(
        load_kernel(examples / "attention.tile", "attention"), dims, arch="sm_90a"
    )
    config = {"tile.M": 64, "tile.N": 128, "warps": 4, "stages": 2}
    plain = build_candidate(problem, config)
    assert plain.status == "built", plain.reason
    built = build_candidate(problem, {**config, "pipeline.warp_specialize": 1})
    assert built.status == "built", built.reason
    assert built.decisions["pipeline.warp_specialize"] == 1
    assert built.decisions["assign-layouts.min_blocks_per_sm"] == 2
    assert "setmaxnreg.inc.sync.aligned.u32 216;" in built.ptx
    assert _consumer_registers(4, 3) < 208 <= _consumer_registers(4, 2)


def test_a_register_a_loop_refuses_a_producer_with_its_reason():
    """`a.T @ b` with tiling's m_major_a off (A stored [K, M], by TMA, read into registers each
    step): no wgmma group may be left in flight over the fragments, and the consumers would
    need one -- warp_specialize = 1 is a located error that says so."""
    from tilec.diagnostics import TileError

    with pytest.raises(TileError, match=r"warp_specialize = 1, but .*dots_in_flight = 0"):
        passes, module, context = _before_pipeline(
            "gemm_layouts.tile",
            "gemm_tn",
            {"M": 208, "N": 144, "K": 80},
            VARIANTS["warp_specialize"],
            ", m_major_a=false",
        )
        for p in passes[[p.name for p in passes].index("pipeline") :]:
            p.run(module, context)
