"""The interpreter's semantics of TMA copies and mbarriers (`tilec.interp.tma`): a hand-written
TMA-pipelined matmul computes what numpy does at shapes that leave partial tiles (zero-filled
by the copies), and each break of the mbarrier protocol, made by a small edit of that kernel,
is reported at the op that breaks it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.validation import run_kernel
from tilec.diagnostics import TileError
from tilec.interp import InterpreterError
from tilec.ir import parse_module, verify
from tilec.ir.attributes import IntegerAttr

# 3 stages of 32x16 (A) and 16x32 (B) f16 tiles: 1024 + 1024 bytes a step on the stage's
# mbarrier. The prologue fills steps 0 and 1; iteration i waits on step i (stage i % 3,
# parity (i / 3) % 2), reads it, and fetches step i + 2 into the stage read in iteration
# i - 1 (the barrier after the wait separates the two), unless that step is past K.
KERNEL = """\
func @matmul_tma(%A: !tile.tensor<MxKxf16>, %B: !tile.tensor<KxNxf16>, %C: !tile.tensor<MxNxf32>) attributes {tilec.grid = [["M", 32], ["N", 32]]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %K = tile.dim %A, 1
  %pid_m = tile.program_id 0
  %pid_n = tile.program_id 1
  %row = arith.muli %pid_m, %c32 : index
  %col = arith.muli %pid_n, %c32 : index
  %a_buf = tile.alloc_shared : !smem<3x32x16xf16>
  %b_buf = tile.alloc_shared : !smem<3x16x32xf16>
  %bars = tile.alloc_shared : !smem<3x1xi64>
  tile.mbarrier_init %bars {arrivals = 1} : !smem<3x1xi64>
  // the init's barrier
  tile.barrier
  // prologue: steps 0 and 1
  %p1 = arith.cmpi slt, %c16, %K : index
  tile.mbarrier_expect %bars[%c0] {bytes = 2048} : !smem<3x1xi64>
  tile.tma_copy %A[%row, %c0], %a_buf[%c0], %bars[%c0] {box = [32, 16]} : !tile.tensor<MxKxf16>, !smem<3x32x16xf16>, !smem<3x1xi64>
  tile.tma_copy %B[%c0, %col], %b_buf[%c0], %bars[%c0] {box = [16, 32]} : !tile.tensor<KxNxf16>, !smem<3x16x32xf16>, !smem<3x1xi64>
  tile.mbarrier_expect %bars[%c1], pred %p1 {bytes = 2048} : !smem<3x1xi64>
  tile.tma_copy %A[%row, %c16], %a_buf[%c1], %bars[%c1], pred %p1 {box = [32, 16]} : !tile.tensor<MxKxf16>, !smem<3x32x16xf16>, !smem<3x1xi64>
  tile.tma_copy %B[%c16, %col], %b_buf[%c1], %bars[%c1], pred %p1 {box = [16, 32]} : !tile.tensor<KxNxf16>, !smem<3x16x32xf16>, !smem<3x1xi64>
  %zero = tile.full 0.0 : tile<32x32xf32>
  %acc_out = scf.for %k = %c0 to %K step %c16 iter_args(%acc = %zero) {
    %i = arith.divsi %k, %c16 : index
    %slot = arith.remsi %i, %c3 : index
    %round = arith.divsi %i, %c3 : index
    %phase = arith.remsi %round, %c2 : index
    tile.mbarrier_wait %bars[%slot], %phase : !smem<3x1xi64>
    // the loop's barrier
    tile.barrier
    %a = tile.load_shared %a_buf[%slot] : !smem<3x32x16xf16> -> tile<32x16xf16>
    %b = tile.load_shared %b_buf[%slot] : !smem<3x16x32xf16> -> tile<16x32xf16>
    %next = tile.dot %a, %b, %acc : tile<32x16xf16>, tile<16x32xf16>, tile<32x32xf32> -> tile<32x32xf32>
    %k_ahead = arith.addi %k, %c32 : index
    %ahead = arith.addi %i, %c2 : index
    %slot_ahead = arith.remsi %ahead, %c3 : index
    %p = arith.cmpi slt, %k_ahead, %K : index
    tile.mbarrier_expect %bars[%slot_ahead], pred %p {bytes = 2048} : !smem<3x1xi64>
    tile.tma_copy %A[%row, %k_ahead], %a_buf[%slot_ahead], %bars[%slot_ahead], pred %p {box = [32, 16]} : !tile.tensor<MxKxf16>, !smem<3x32x16xf16>, !smem<3x1xi64>
    tile.tma_copy %B[%k_ahead, %col], %b_buf[%slot_ahead], %bars[%slot_ahead], pred %p {box = [16, 32]} : !tile.tensor<KxNxf16>, !smem<3x16x32xf16>, !smem<3x1xi64>
    scf.yield %next : tile<32x32xf32>
  }
  // after the loop
  tile.barrier
  tile.mbarrier_inval %bars : !smem<3x1xi64>
  tile.store %C[%row, %col], %acc_out : !tile.tensor<MxNxf32>, tile<32x32xf32>
  return
}
"""

LOOP_EXPECT = (
    "    tile.mbarrier_expect %bars[%slot_ahead], pred %p {bytes = 2048} : !smem<3x1xi64>\n"
)
PROLOGUE_EXPECT = "  tile.mbarrier_expect %bars[%c0] {bytes = 2048} : !smem<3x1xi64>\n"
INIT = "  tile.mbarrier_init %bars {arrivals = 1} : !smem<3x1xi64>\n"


def _edit(text: str, old: str, new: str, count: int = 1) -> str:
    assert text.count(old) == count, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def _inputs(m: int, n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    return a, b, np.zeros((m, n), np.float32)


def _run(text: str, m: int = 50, n: int = 40, k: int = 70, **launch):
    module = parse_module(text, "matmul_tma.tir")
    verify(module)
    a, b, c = _inputs(m, n, k)
    (_, _, got), _ = run_kernel(module, "matmul_tma", [a, b, c], **launch)
    return a, b, got


def _line_of(text: str, fragment: str) -> int:
    lines = [i for i, line in enumerate(text.splitlines(), 1) if fragment in line]
    assert len(lines) == 1, f"{fragment!r} is on lines {lines}"
    return lines[0]


def _fails(text: str, op: str, at: str, match: str, hint: str | None = None, **sizes):
    """Running `text` fails at op `op`, on the line holding `at`, with `match` in its
    message (and `hint` in its hint)."""
    with pytest.raises(InterpreterError) as info:
        _run(text, **sizes)
    err = info.value
    assert err.message.startswith(f"'{op}' "), err.message
    assert match in err.message, err.message
    assert err.loc.line == _line_of(text, at), (err.loc, err.message)
    if hint is not None:
        assert err.hint is not None and hint in err.hint, err.hint
    return err


# ---------------------------------------------------------------------------------------------
# The kernel as written


@pytest.mark.parametrize(
    ("m", "n", "k"), [(50, 40, 70), (1, 1, 1), (32, 32, 16), (64, 33, 48), (70, 90, 161)]
)
def test_tma_matmul_matches_numpy(m, n, k):
    a, b, got = _run(KERNEL, m, n, k)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_kernel_round_trips_through_its_text_form():
    module = parse_module(KERNEL)
    verify(module)
    again = parse_module(str(module))
    verify(again)
    assert str(again) == str(module)


# ---------------------------------------------------------------------------------------------
# Protocol violations, each an edit of the kernel


def test_a_wait_on_the_wrong_phase_returns_early_and_the_read_sees_a_copy_in_flight():
    text = _edit(
        KERNEL,
        "    %phase = arith.remsi %round, %c2 : index\n",
        "    %flip = arith.addi %round, %c1 : index\n    %phase = arith.remsi %flip, %c2 : index\n",
    )
    err = _fails(
        text,
        "tile.load_shared",
        "%a = tile.load_shared",
        "reads slot 0 while an asynchronous copy into it ('tile.tma_copy' at matmul_tma.tir:",
        hint="tile.mbarrier_wait",
    )
    assert "tile.async_wait" not in err.hint


def test_a_missing_expect_brings_more_bytes_than_the_phase_expects():
    text = _edit(KERNEL, LOOP_EXPECT, "")
    _fails(
        text,
        "tile.mbarrier_wait",
        "tile.mbarrier_wait",
        "whose copies bring 2048 bytes, more bytes than the phase expects (0, from 0 of its 1 "
        "arrival(s)): a missing tile.mbarrier_expect",
    )


def test_an_expect_of_too_many_bytes_would_hang():
    text = _edit(KERNEL, LOOP_EXPECT, LOOP_EXPECT.replace("2048", "3072"))
    _fails(
        text,
        "tile.mbarrier_wait",
        "tile.mbarrier_wait",
        "would wait forever on mbarrier 2, phase 0 (parity 0): it expects 3072 bytes, but its "
        "copies bring only 2048",
    )


def test_an_expect_of_too_few_bytes_is_more_bytes_than_expected():
    text = _edit(KERNEL, PROLOGUE_EXPECT, PROLOGUE_EXPECT.replace("2048", "1024"))
    _fails(
        text,
        "tile.mbarrier_wait",
        "tile.mbarrier_wait",
        "whose copies bring 2048 bytes, more bytes than the phase expects (1024",
    )


def test_two_expects_in_one_phase():
    # A second expect on step 0's barrier, of other bytes so that its line is told apart.
    text = _edit(
        KERNEL,
        PROLOGUE_EXPECT,
        PROLOGUE_EXPECT + "  tile.mbarrier_expect %bars[%c0] {bytes = 16} : !smem<3x1xi64>\n",
    )
    _fails(
        text,
        "tile.mbarrier_expect",
        "{bytes = 16}",
        "arrives on mbarrier 0, whose phase 0 has had all of its 1 arrival(s) already",
    )


def test_a_slot_refilled_without_a_barrier_after_its_read():
    text = _edit(KERNEL, "    // the loop's barrier\n    tile.barrier\n", "")
    _fails(
        text,
        "tile.tma_copy",
        "tile.tma_copy %A[%row, %k_ahead]",
        "writes slot 0, which was read ('tile.load_shared' at matmul_tma.tir:",
        hint="put a tile.barrier between the last read of the slot and this write",
    )


def test_a_copy_into_a_slot_whose_copy_is_in_flight():
    copy = (
        "  tile.tma_copy %A[%row, %c0], %a_buf[%c0], %bars[%c0] {box = [32, 16]} : "
        "!tile.tensor<MxKxf16>, !smem<3x32x16xf16>, !smem<3x1xi64>\n"
    )
    text = _edit(KERNEL, copy, copy + copy.replace("{box = [32, 16]}", "{box = [16, 16]}"))
    err = _fails(
        text,
        "tile.tma_copy",
        "{box = [16, 16]}",
        "writes slot 0 while an asynchronous copy into it ('tile.tma_copy' at matmul_tma.tir:",
        hint="tile.mbarrier_wait",
    )
    assert "tile.async_wait" not in err.hint


def test_a_use_before_the_barrier_that_publishes_the_init():
    text = _edit(KERNEL, "  // the init's barrier\n  tile.barrier\n", "")
    _fails(
        text,
        "tile.mbarrier_expect",
        "tile.mbarrier_expect %bars[%c0]",
        "uses mbarrier 0 before a tile.barrier has made its initialization ('tile.mbarrier_init'",
    )


def test_a_use_before_any_init():
    text = _edit(KERNEL, INIT, "")
    _fails(
        text,
        "tile.mbarrier_expect",
        "tile.mbarrier_expect %bars[%c0]",
        "uses mbarrier 0, which is not initialized",
    )


def test_inval_with_copies_in_flight():
    # Without their predicate, the last two iterations fetch steps past K that nothing waits for.
    text = _edit(KERNEL, "[%slot_ahead], pred %p ", "[%slot_ahead] ", count=3)
    _fails(
        text,
        "tile.mbarrier_inval",
        "tile.mbarrier_inval",
        "invalidates mbarrier 0 while a copy that lands on it ('tile.tma_copy' at matmul_tma.tir:",
    )


def test_inval_with_an_arrival_pending():
    # Steps past K are armed but not fetched.
    text = _edit(KERNEL, LOOP_EXPECT, LOOP_EXPECT.replace(", pred %p", ""))
    _fails(
        text,
        "tile.mbarrier_inval",
        "tile.mbarrier_inval",
        "invalidates mbarrier 0, whose phase 2 has had an arrival ('tile.mbarrier_expect' at "
        "matmul_tma.tir:43:",
    )


def test_init_twice():
    text = _edit(KERNEL, INIT, INIT + INIT.replace("arrivals = 1", "arrivals = 2"))
    _fails(
        text,
        "tile.mbarrier_init",
        "{arrivals = 2}",
        "initializes mbarriers that are initialized already ('tile.mbarrier_init' at "
        "matmul_tma.tir:16:",
    )


def test_init_again_after_inval_is_fine():
    # A second run of the whole pipeline in the same block, as a persistent kernel would.
    body_start = KERNEL.index(INIT)
    body_end = KERNEL.index("  tile.store %C")
    again = KERNEL[body_start:body_end].replace("%", "%again_").replace("%again_bars", "%bars")
    for name in (
        "A",
        "B",
        "c0",
        "c1",
        "c2",
        "c3",
        "c16",
        "c32",
        "K",
        "row",
        "col",
        "a_buf",
        "b_buf",
    ):
        again = again.replace(f"%again_{name}", f"%{name}")
    again = _edit(again, "iter_args(%again_acc = %again_zero)", "iter_args(%again_acc = %acc_out)")
    text = KERNEL[:body_end] + again + KERNEL[body_end:].replace("%acc_out", "%again_acc_out")
    a, b, got = _run(text)
    want = 2 * (a.astype(np.float32) @ b.astype(np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_wait_on_a_parity_other_than_0_or_1():
    text = _edit(
        KERNEL,
        "    %phase = arith.remsi %round, %c2 : index\n",
        "    %phase = arith.addi %round, %c2 : index\n",
    )
    _fails(
        text,
        "tile.mbarrier_wait",
        "tile.mbarrier_wait",
        "waits on phase parity 2 of mbarrier 0: a parity is 0 or 1",
    )


def test_a_wait_on_a_phase_with_too_few_arrivals_would_wait_forever():
    text = _edit(KERNEL, "{arrivals = 1}", "{arrivals = 2}")
    _fails(
        text,
        "tile.mbarrier_wait",
        "tile.mbarrier_wait",
        "would wait forever on mbarrier 0, phase 0 (parity 0): it had 1 of its 2 arrival(s)",
    )


def test_inval_while_a_thread_may_still_wait():
    # The wait moved after the loop's barrier: nothing separates the last wait from the inval.
    text = _edit(
        KERNEL,
        "    tile.mbarrier_wait %bars[%slot], %phase : !smem<3x1xi64>\n"
        "    // the loop's barrier\n    tile.barrier\n",
        "    tile.barrier\n    tile.mbarrier_wait %bars[%slot], %phase : !smem<3x1xi64>\n",
    )
    text = _edit(text, "  // after the loop\n  tile.barrier\n", "")
    _fails(
        text,
        "tile.mbarrier_inval",
        "tile.mbarrier_inval",
        "invalidates mbarriers that a thread may still be waiting on ('tile.mbarrier_wait'",
    )


# ---------------------------------------------------------------------------------------------
# The box: the verifier's check, and the interpreter's for slots of symbolic size


def test_a_box_that_does_not_tile_the_slot_is_a_verifier_error():
    text = _edit(KERNEL, "{box = [16, 32]}", "{box = [16, 24]}", count=3)
    with pytest.raises(TileError, match=r"box \[16, 24\] does not tile a slot of \[16, 32\]"):
        verify(parse_module(text))


SYMBOLIC_BOX = """\
func @copy(%A: !tile.tensor<Mx16xf16>, %C: !tile.tensor<Mx16xf16>) attributes {tilec.grid = [["M", "BM"]]} {
  %c0 = arith.constant 0 : index
  %BM = tile.symbol "BM"
  %pid = tile.program_id 0
  %row = arith.muli %pid, %BM : index
  %buf = tile.alloc_shared : !smem<1xBMx16xf16>
  %bars = tile.alloc_shared : !smem<1x1xi64>
  tile.mbarrier_init %bars {arrivals = 1} : !smem<1x1xi64>
  tile.barrier
  tile.mbarrier_expect %bars[%c0] {bytes = 1024} : !smem<1x1xi64>
  tile.tma_copy %A[%row, %c0], %buf[%c0], %bars[%c0] {box = [24, 16]} : !tile.tensor<Mx16xf16>, !smem<1xBMx16xf16>, !smem<1x1xi64>
  tile.mbarrier_wait %bars[%c0], %c0 : !smem<1x1xi64>
  %t = tile.load_shared %buf[%c0] : !smem<1xBMx16xf16> -> tile<BMx16xf16>
  tile.store %C[%row, %c0], %t : !tile.tensor<Mx16xf16>, tile<BMx16xf16>
  tile.barrier
  tile.mbarrier_inval %bars : !smem<1x1xi64>
  return
}
"""


def test_a_box_that_does_not_tile_a_symbolic_slot_is_an_interpreter_error():
    from tilec.interp import prepare_launch

    module = parse_module(SYMBOLIC_BOX, "copy.tir")
    verify(module)  # the slot's size is not known before the launch
    a = np.arange(40 * 16, dtype=np.float16).reshape(40, 16)
    c = np.zeros_like(a)
    with pytest.raises(InterpreterError) as info:
        prepare_launch(module, "copy", [a, c], tile_sizes={"BM": 32}).run()
    assert info.value.message.startswith("'tile.tma_copy' has the box [24, 16], which does not")
    assert "a slot of [32, 16]" in info.value.message
    # With a box that tiles the slot: the copy, zero-filled past M.
    fixed = _edit(SYMBOLIC_BOX, "{box = [24, 16]}", "{box = [16, 16]}")
    launch = prepare_launch(parse_module(fixed), "copy", [a, c], tile_sizes={"BM": 32})
    launch.run()
    np.testing.assert_array_equal(launch.arguments[1].array, a)


# ---------------------------------------------------------------------------------------------
# Dots left in flight (`tilec.dots_in_flight`) with TMA copies

# Copies one step ahead, as a loop that leaves one dot in flight needs at 3 stages.
ONE_AHEAD = (
    KERNEL.replace(
        "  tile.mbarrier_expect %bars[%c1], pred %p1 {bytes = 2048} : !smem<3x1xi64>\n", ""
    )
    .replace(
        "  tile.tma_copy %A[%row, %c16], %a_buf[%c1], %bars[%c1], pred %p1 {box = [32, 16]} : "
        "!tile.tensor<MxKxf16>, !smem<3x32x16xf16>, !smem<3x1xi64>\n",
        "",
    )
    .replace(
        "  tile.tma_copy %B[%c16, %col], %b_buf[%c1], %bars[%c1], pred %p1 {box = [16, 32]} : "
        "!tile.tensor<KxNxf16>, !smem<3x16x32xf16>, !smem<3x1xi64>\n",
        "",
    )
    .replace("%k_ahead = arith.addi %k, %c32", "%k_ahead = arith.addi %k, %c16")
    .replace("%ahead = arith.addi %i, %c2", "%ahead = arith.addi %i, %c1")
)


def _in_flight(text: str):
    from tilec.dialects import scf

    module = parse_module(text, "matmul_tma.tir")
    verify(module)
    loop = next(op for op in module.walk() if isinstance(op, scf.ForOp))
    loop.attributes["tilec.dots_in_flight"] = IntegerAttr(1)
    return module


def test_dots_in_flight_with_copies_one_step_ahead():
    assert ONE_AHEAD.count("tile.tma_copy") == 4
    a, b, c = _inputs(50, 40, 70)
    (_, _, got), _ = run_kernel(_in_flight(ONE_AHEAD), "matmul_tma", [a, b, c])
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_dots_in_flight_with_copies_two_steps_ahead_is_a_race():
    # Iteration 1 refills the slot of step 0, whose dot completes only at dot 1's issue:
    # after the iteration's barrier, so some thread may still be reading it.
    a, b, c = _inputs(50, 40, 70)
    with pytest.raises(InterpreterError) as info:
        run_kernel(_in_flight(KERNEL), "matmul_tma", [a, b, c])
    assert info.value.message.startswith(
        "'tile.tma_copy' writes slot 0, which was read ('tile.load_shared' at matmul_tma.tir:"
    )


# After the loop: a store into the slot the loop's last dot read (step 4: slot 1).
STORE_AFTER = (
    "  %z = tile.full 0.0 : tile<32x16xf16>\n"
    "  tile.store_shared %a_buf[%c1], %z : !smem<3x32x16xf16>, tile<32x16xf16>\n"
)


def test_the_barrier_after_the_loop_waits_for_its_dots_in_flight():
    text = _edit(
        ONE_AHEAD,
        "  tile.mbarrier_inval %bars : !smem<3x1xi64>\n",
        "  tile.mbarrier_inval %bars : !smem<3x1xi64>\n" + STORE_AFTER,
    )
    a, b, c = _inputs(50, 40, 70)
    run_kernel(_in_flight(text), "matmul_tma", [a, b, c])  # the dots are done, the slot free


def test_the_inval_after_the_loop_waits_for_its_dots_in_flight():
    # No barrier between the loop and the inval: the dots are done at the inval, but their
    # reads are still a read with no barrier since.
    text = _edit(ONE_AHEAD, "  // after the loop\n  tile.barrier\n", "")
    text = _edit(
        text,
        "  tile.mbarrier_inval %bars : !smem<3x1xi64>\n",
        "  tile.mbarrier_inval %bars : !smem<3x1xi64>\n" + STORE_AFTER,
    )
    a, b, c = _inputs(50, 40, 70)
    with pytest.raises(InterpreterError) as info:
        run_kernel(_in_flight(text), "matmul_tma", [a, b, c])
    assert info.value.message.startswith("'tile.store_shared' writes slot 1, which was read")
