"""smem-placement and pipeline: every example computes the same after them, the interpreter's
race check passes at 2, 3 and 4 stages, and the decisions (swizzle, offsets, stages, barriers)
are the ones the passes document."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import tilec
from tests.validation import kernel_dimensions, run_kernel
from tilec.diagnostics import TileError
from tilec.dialects import scf, shared
from tilec.dialects import tile as T
from tilec.interp.runner import random_arguments
from tilec.ir.parser import parse_module
from tilec.ir.types import FloatType, TileType
from tilec.ir.verifier import verify
from tilec.lowering.layouts import mma_accumulator_layout
from tilec.passes.smem_placement import plan_shared_memory, swizzle_for
from tilec.passmanager import PassContext, parse_pipeline, registered_passes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.tile")))
SIZE_SETS = [(1, 3, 2), (37, 19, 53), (70, 33, 150)]
HEAD_DIM = 64  # attention's whole dimension D, kept small enough for tensor-core tiles


def _mma_accumulators(module) -> None:
    """What `tiling` does for dots, for tests that run without it: an f16/bf16 dot into f32
    whose tile is a whole number of warp tiles gets the `#mma` layout on its result and, when
    it is carried around a loop from a `tile.full`, on the whole chain."""
    for func in module.body.block.ops:
        warps = (
            func.attributes["tilec.num_warps"].value if "tilec.num_warps" in func.attributes else 4
        )
        w_m = 2 if warps >= 4 else 1
        w_n = warps // w_m
        layout = mma_accumulator_layout((w_m, w_n))
        for dot in [op for op in func.walk() if isinstance(op, T.DotOp)]:
            (m, k), (_, n) = dot.a.type.shape, dot.b.type.shape
            if dot.a.type.element not in (FloatType("f16"), FloatType("bf16")):
                continue
            if m % (16 * w_m) or n % (8 * w_n) or k % 16:
                continue
            chain = [dot.result]
            loop = dot.parent_op
            acc = dot.acc
            if isinstance(loop, scf.ForOp) and acc in loop.iter_args:
                i = list(loop.iter_args).index(acc)
                if loop.yield_op.operands[i] is dot.result:
                    chain += [acc, loop.results[i]]
                    init = loop.inits[i]
                    if isinstance(init.owner, T.FullOp) and len(init.uses) == 1:
                        chain.append(init)
            for v in chain:
                t = v.type
                v.type = TileType(t.shape, t.element, layout)


def _prepare(path: str, name: str):
    """The example after the passes before smem-placement (tiling when registered)."""
    module = tilec.compile(path, kernels=[name]).module
    func = module.lookup(name)
    dims = kernel_dimensions(func)
    if "tiling" in registered_passes():
        front = "canonicalize,cse,tiling" + (f'{{extents="D={HEAD_DIM}"}}' if "D" in dims else "")
    else:
        front = "canonicalize,cse,specialize" + (
            f'{{extents="D={HEAD_DIM}"}}' if "D" in dims else ""
        )
    context = PassContext()
    for p in parse_pipeline(front):
        p.run(module, context)
    if "tiling" not in registered_passes():
        if "tilec.num_warps" not in func.attributes:
            from tilec.ir.attributes import IntegerAttr

            func.attributes["tilec.num_warps"] = IntegerAttr(4)
        _mma_accumulators(module)
    for p in parse_pipeline("assign-layouts"):
        p.run(module, context)
    verify(module)
    return module, func, dims


def _inputs(func, dims, sizes):
    pins = func.attributes.get("tilec.pinned_tiles")
    pinned = dict(pins.value) if pins is not None else {}
    extents = {}
    for i, d in enumerate(dims):
        extent = 2 if pinned.get("B" + d) == 1 else sizes[i % len(sizes)]
        extents[d] = min(extent, HEAD_DIM) if d == "D" else extent
    return random_arguments(func, extents, seed=len(dims))


def _cases():
    for path in EXAMPLES:
        for name in tilec.compile(path).kernels:
            yield pytest.param(path, name, id=f"{os.path.basename(path)}:{name}")


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize(("path", "name"), list(_cases()))
def test_examples_same_results_and_race_free(path, name, stages):
    module, func, dims = _prepare(path, name)
    func.attributes.pop("tilec.num_stages", None)  # a pin would win over the stages tested
    context = PassContext()
    all_inputs = [_inputs(func, dims, sizes) for sizes in SIZE_SETS]
    expected = [run_kernel(module, name, inputs)[0] for inputs in all_inputs]
    passes = f"smem-placement,pipeline{{num_stages={stages}}},canonicalize,cse,dce"
    for p in parse_pipeline(passes):
        context.current_pass = p.name
        p.run(module, context)
        verify(module)
        for inputs, before in zip(all_inputs, expected):
            # A race is an interpreter error: reaching the comparison means there was none.
            after = run_kernel(module, name, inputs)[0]
            for got, want in zip(after, before):
                np.testing.assert_array_equal(got, want, err_msg=f"after {p.name}")
    copies = [op for op in func.walk() if isinstance(op, shared.AsyncCopyOp)]
    dots = [op for op in func.walk() if isinstance(op, T.DotOp)]
    if "matmul" in name:
        # Both operands of the matmul are streamed: S-1 prologue copies and one in the loop.
        assert len(copies) == 2 * stages, name
        assert all(op.operands[0].type.layout.mnemonic == "dot_operand" for op in dots)
        assert func.attributes["tilec.shared_bytes"].value >= stages * 2 * 32 * 64 * 2


# ---------------------------------------------------------------------------------------------
# Decisions

MATMUL = """
#mma = #mma<version = 2, warps_per_cta = [2, 2], instr_shape = [16, 8, 16]>
func @matmul(%a: !tile.tensor<MxKxf16>, %b: !tile.tensor<KxNxf16>, %c: !tile.tensor<MxNxf32>) attributes {tilec.grid = [["M", "BM"], ["N", "BN"]], tilec.num_warps = 4} {
  %c0 = arith.constant 0 : index
  %BM = arith.constant 128 : index
  %BK = arith.constant 64 : index
  %K = tile.dim %a, 1
  %pm = tile.program_id 0
  %pn = tile.program_id 1
  %tm = arith.muli %pm, %BM : index
  %tn = arith.muli %pn, %BM : index
  %zero = tile.full 0.0 : tile<128x128xf32, #mma>
  %acc = scf.for %tk = %c0 to %K step %BK iter_args(%acc_in = %zero) {
    %x = tile.load %a[%tm, %tk] : !tile.tensor<MxKxf16> -> tile<128x64xf16>
    %y = tile.load %b[%tk, %tn] : !tile.tensor<KxNxf16> -> tile<64x128xf16>
    %next = tile.dot %x, %y, %acc_in : tile<128x64xf16>, tile<64x128xf16>, tile<128x128xf32, #mma> -> tile<128x128xf32, #mma>
    scf.yield %next : tile<128x128xf32, #mma>
  }
  tile.store %c[%tm, %tn], %acc : !tile.tensor<MxNxf32>, tile<128x128xf32, #mma>
  return
}
"""


def _opt(text: str, pipeline: str):
    module = parse_module(text)
    context = PassContext()
    for p in parse_pipeline(pipeline):
        context.current_pass = p.name
        p.run(module, context)
        verify(module)
    return module, context


@pytest.mark.parametrize(
    ("columns", "per_phase", "max_phase"),
    [(8, 8, 1), (16, 4, 2), (32, 2, 4), (64, 1, 8), (128, 1, 8)],
)
def test_swizzle_per_row_width(columns, per_phase, max_phase):
    layout, why = swizzle_for(TileType((64, columns), FloatType("f16")))
    assert (layout.vec, layout.per_phase, layout.max_phase) == (8, per_phase, max_phase)
    assert f"rows of {columns * 2} bytes" in why


def test_swizzle_narrow_rows_and_wide_elements():
    layout, why = swizzle_for(TileType((64, 4), FloatType("f16")))
    assert (layout.vec, layout.max_phase) == (1, 1) and "no swizzle" in why
    layout, why = swizzle_for(TileType((64, 32), FloatType("f32")))
    assert (layout.vec, layout.per_phase, layout.max_phase) == (4, 1, 8)
    assert "not 16-bit" in why


def test_default_stages_are_the_most_that_fit():
    # One stage of both operands: 2 * 128 * 64 * 2 = 32 KiB. The accumulator's conversion
    # after the loop reuses the buffers' bytes (they are dead by then), so a limit just below
    # four stages' buffers leaves three, as long as three hold the conversion's scratch.
    module, _ = _opt(MATMUL, "assign-layouts,smem-placement")
    func = module.lookup("matmul")
    assert plan_shared_memory(func).scratch_end <= 3 * 32768
    limit = 4 * 32768 - 16
    module, context = _opt(
        MATMUL, f"assign-layouts,smem-placement,pipeline{{shared_limit={limit}}}"
    )
    func = module.lookup("matmul")
    assert func.attributes["tilec.shared_bytes"].value == 3 * 32768
    waits = [op.pending for op in func.walk() if isinstance(op, shared.AsyncWaitOp)]
    assert waits == [1, 0]
    assert any("3 stages: the most that fit" in r.message for r in context.remarks)


def test_pinned_stages_that_overflow_name_the_option_and_the_limit():
    text = MATMUL.replace("tilec.num_warps = 4}", "tilec.num_warps = 4, tilec.num_stages = 4}")
    with pytest.raises(TileError) as info:
        _opt(text, "assign-layouts,smem-placement,pipeline{shared_limit=100000}")
    message = info.value.render()
    assert "more than the limit of 100000 (option shared_limit of pipeline)" in message
    assert "%x_smem: !smem<4x128x64xf16" in message and "65536 bytes" in message
    assert "pinned by the kernel" in message


def test_placement_over_the_limit_lists_every_buffer():
    with pytest.raises(TileError) as info:
        _opt(MATMUL, "assign-layouts,smem-placement{shared_limit=20000}")
    message = info.value.render()
    assert "%x_smem" in message and "%y_smem" in message and "16384 bytes" in message
    assert "option tiles of tiling" in message


def test_one_stage_leaves_the_loop_alone():
    module, _ = _opt(MATMUL, "assign-layouts,smem-placement,pipeline{num_stages=1}")
    func = module.lookup("matmul")
    assert not [op for op in func.walk() if isinstance(op, shared.AsyncCopyOp)]
    assert len([op for op in func.walk() if isinstance(op, shared.BarrierOp)]) == 2


def test_passes_are_idempotent():
    module, _ = _opt(MATMUL, "assign-layouts,smem-placement,pipeline{num_stages=3}")
    once = str(module)
    _opt_again = parse_pipeline("smem-placement,pipeline{num_stages=3}")
    context = PassContext()
    for p in _opt_again:
        p.run(module, context)
    assert str(module) == once


LOAD_SHARED = """
func @f() {{
  %c0 = arith.constant 0 : index
  %buf = tile.alloc_shared : !smem<1x1x64x32xf16>
  %v = tile.load_shared %buf[%c0] {attrs} : !smem<1x1x64x32xf16> -> tile<{shape}xf16>
  return
}}
"""


@pytest.mark.parametrize(
    ("attrs", "shape"), [("", "1x64x32"), ("", "64x32"), ("{transposed}", "32x64")]
)
def test_load_shared_reads_squeezed_and_transposed(attrs, shape):
    text = LOAD_SHARED.format(attrs=attrs, shape=shape)
    module = parse_module(text)
    verify(module)
    printed = str(module)
    assert f"-> tile<{shape}xf16>" in printed and ("{transposed}" in printed) == bool(attrs)
    verify(parse_module(printed))  # the text form round-trips


@pytest.mark.parametrize(
    ("attrs", "shape", "message"),
    [
        ("{transposed}", "64x32", "read transposed"),
        ("", "32x64", "does not match"),
        ("", "64x16", "does not match"),
    ],
)
def test_load_shared_of_the_wrong_shape_is_an_error(attrs, shape, message):
    module = parse_module(LOAD_SHARED.format(attrs=attrs, shape=shape))
    with pytest.raises(TileError, match=message):
        verify(module)


def test_interpreter_reads_a_slot_transposed():
    """What `tile.load_shared {transposed}` gives in the interpreter is the slot's transpose."""
    from tilec.interp.pipeline import SharedBuffer, _load_shared, _Slot

    module = parse_module(LOAD_SHARED.format(attrs="{transposed}", shape="32x64"))
    op = next(o for o in module.walk() if isinstance(o, shared.LoadSharedOp))
    data = np.arange(64 * 32, dtype=np.float16).reshape(1, 1, 64, 32)
    slot = _Slot()
    slot.written = True

    class _State:
        async_state = None

    got = _load_shared(_State(), op, [SharedBuffer(data, [slot]), 0])
    np.testing.assert_array_equal(got, data[0, 0].T)


# ---------------------------------------------------------------------------------------------
# wgmma groups left in flight across iterations (`pipeline{dots_in_flight=1}`)


def _matmul_in_flight(in_flight: int, stages: int = 4):
    from tilec.compiler import DEFAULT_PIPELINE, target_pipeline

    pipeline = 'assume{all="aligned,unit"},' + DEFAULT_PIPELINE.replace(
        "pipeline,", f"pipeline{{dots_in_flight={in_flight}}},"
    )
    program = tilec.compile(
        os.path.join(ROOT, "examples", "matmul.tile"),
        kernels=["matmul"],
        options={"tile": {"N": 256}, "warps": 8, "stages": stages},
        pipeline=target_pipeline(pipeline, "sm_90a"),
    )
    return program.module, program.module.lookup("matmul")


def _loop(func):
    return next(op for op in func.walk() if isinstance(op, scf.ForOp))


@pytest.mark.parametrize("stages", [3, 4])
def test_dots_in_flight_copy_two_steps_less_ahead_and_are_race_free(stages):
    module, func = _matmul_in_flight(1, stages)
    loop = _loop(func)
    assert loop.attributes["tilec.dots_in_flight"].value == 1
    # S - 2 prologue steps of 2 operands, and the loop's 2 copies.
    copies = [op for op in func.walk() if isinstance(op, shared.AsyncCopyOp)]
    assert len(copies) == 2 * (stages - 1)
    waits = [op for op in loop.body.block.ops if isinstance(op, shared.AsyncWaitOp)]
    assert [w.pending for w in waits] == [stages - 3]
    rng = np.random.default_rng(0)
    for m, n, k in [(130, 300, 200), (64, 17, 513)]:
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        c = np.zeros((m, n), np.float16)
        (_, _, got), _ = run_kernel(module, "matmul", [a, b, c])
        want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
        np.testing.assert_allclose(
            got.astype(np.float32), want.astype(np.float32), rtol=2e-2, atol=2e-2
        )


def test_a_copy_into_the_slot_a_dot_in_flight_reads_is_a_race():
    # Copies S - 1 steps ahead fill the slot the previous iteration's wgmmas read: fine when
    # each iteration waits for its own, a race once the loop leaves them in flight.
    module, func = _matmul_in_flight(0)
    loop = _loop(func)
    assert "tilec.dots_in_flight" not in loop.attributes
    a = np.ones((128, 256), np.float16)
    b = np.ones((256, 256), np.float16)
    c = np.zeros((128, 256), np.float16)
    run_kernel(module, "matmul", [a, b, c])  # race-free as it is
    from tilec.ir.attributes import IntegerAttr

    loop.attributes["tilec.dots_in_flight"] = IntegerAttr(1)
    with pytest.raises(Exception, match="may still be reading"):
        run_kernel(module, "matmul", [a, b, c])


def test_dots_in_flight_need_three_stages_and_a_wgmma_chain():
    _module, func = _matmul_in_flight(1, stages=2)
    assert "tilec.dots_in_flight" not in _loop(func).attributes


def test_a_register_a_is_never_left_in_flight_and_the_interpreter_says_why():
    # `a.T @ b` (a stored [K, M]) with option m_major_a off: wgmma's A is read into registers
    # by ldmatrix.trans each step, so the next step would overwrite registers a group left in flight still reads.
    # pipeline leaves none in flight even when asked; forcing the attribute back on is a race
    # the interpreter reports at the dot.
    from tilec.compiler import DEFAULT_PIPELINE, target_pipeline
    from tilec.ir.attributes import IntegerAttr

    pipeline = 'assume{all="aligned,unit"},' + DEFAULT_PIPELINE.replace(
        "pipeline,", "pipeline{dots_in_flight=1},"
    ).replace("tiling,", "tiling{m_major_a=false},")
    program = tilec.compile(
        os.path.join(ROOT, "examples", "gemm_layouts.tile"),
        kernels=["gemm_tn"],
        options={"tile": {"N": 256}, "warps": 8, "stages": 4},
        pipeline=target_pipeline(pipeline, "sm_90a"),
    )
    module, func = program.module, program.module.lookup("gemm_tn")
    loop = _loop(func)
    assert "tilec.dots_in_flight" not in loop.attributes
    rng = np.random.default_rng(1)
    a = rng.standard_normal((192, 128)).astype(np.float16)  # [K, M]
    b = rng.standard_normal((192, 256)).astype(np.float16)
    c = np.zeros((128, 256), np.float16)
    (_, _, got), _ = run_kernel(module, "gemm_tn", [a, b, c])
    want = a.T.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-2, atol=2e-2)
    loop.attributes["tilec.dots_in_flight"] = IntegerAttr(1)
    with pytest.raises(Exception, match="reads its A from registers computed each iteration"):
        run_kernel(module, "gemm_tn", [a, b, c])
