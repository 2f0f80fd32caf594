"""How many blocks an SM holds for a pipelined kernel, and the stage count that keeps the most
copies in flight per SM: the occupancy model `pipeline` chooses stages by (`choose_stages`)
and tiling budgets for (`stages_in_flight`), and the blocks a warp-specialized kernel keeps
(`_planned_blocks`).
"""

from __future__ import annotations

from typing import Any

from tilec.diagnostics import TileError
from tilec.dialects.builtin import FuncOp
from tilec.ir.core import Operation
from tilec.passes.occupancy import (
    DRIVER_RESERVED_SHARED,
    MAX_THREADS_PER_SM,
    REGISTERS_PER_SM,
    SM_SHARED_SM90,
)
from tilec.passes.smem_placement import plan_shared_memory

__all__ = [
    "MAX_DEFAULT_STAGES",
    "_planned_blocks",
    "blocks_per_sm",
    "choose_stages",
    "stages_in_flight",
]

MAX_DEFAULT_STAGES = 4


def _planned_blocks(kernel: FuncOp, options: Any) -> int:
    """The blocks an SM holds that the stages were chosen for (`_stages_for_occupancy`): by
    the kernel's shared memory as pipelined, tiling's register estimate and its threads; what
    a warp-specialized kernel's launch bounds then keep (its producer's threads on top)."""
    pinned = kernel.attributes.get("tilec.min_blocks_per_sm")
    if pinned is not None:
        return int(pinned.value)
    estimate = kernel.attributes.get("tilec.estimated_registers")
    if estimate is None:
        return 1
    threads = int(kernel.attributes["tilec.num_warps"].value) * 32
    total = plan_shared_memory(kernel).total
    return blocks_per_sm(total, int(estimate.value), threads, options.sm_shared)


def blocks_per_sm(total: int, registers: int, threads: int, sm_shared: int = SM_SHARED_SM90) -> int:
    """Blocks of `threads` threads, `registers` registers each and `total` bytes of shared
    memory (plus the 1 KiB the driver reserves) that one SM holds."""
    by_shared = sm_shared // (total + DRIVER_RESERVED_SHARED)
    by_registers = REGISTERS_PER_SM // (registers * threads)
    return max(1, min(by_shared, by_registers, MAX_THREADS_PER_SM // threads))


def stages_in_flight(totals: dict[int, int], registers: int, threads: int, sm_shared: int) -> int:
    """Of the stage counts in `totals` (stages -> a block's shared bytes), the one that keeps
    the most copies in flight per SM: (stages - 1) steps ahead times `blocks_per_sm`; ties to
    fewer stages. What pipeline takes and tiling budgets for (`_stages_for_occupancy`)."""
    return max(
        totals,
        key=lambda s: (blocks_per_sm(totals[s], registers, threads, sm_shared) * (s - 1), -s),
    )


def choose_stages(
    kernel: FuncOp, allocs: list[Operation], options: Any, reserve: int = 0
) -> tuple[int, str]:
    """`pipeline`'s stages for `kernel`, whose streamed buffers `allocs` grow a slot a stage
    (`options`: pipeline's), keeping `reserve` bytes out of them (a persistent epilogue's
    scratch), and why: the kernel's pin, the option `num_stages`, the stages that keep the most
    copies in flight per SM where tiling estimated the registers (`_stages_for_occupancy`),
    else the most that fit."""
    pin = kernel.attributes.get("tilec.num_stages")
    if pin is not None:
        if pin.value < 1:
            raise TileError(
                f"kernel '{kernel.sym_name}' pins {pin.value} stages; at least 1 is needed",
                kernel.loc,
            )
        return pin.value, "pinned by the kernel"
    if options.num_stages > 0:
        return options.num_stages, "option num_stages"
    limit = options.shared_limit - reserve
    blocks = kernel.attributes.get("tilec.min_blocks_per_sm")
    if blocks is not None and blocks.value > 1:  # the occupancy a pass asked for
        limit = min(limit, options.sm_shared // blocks.value - DRIVER_RESERVED_SHARED)
    estimate = kernel.attributes.get("tilec.estimated_registers")
    if estimate is not None and (blocks is None or blocks.value <= 1):
        return _stages_for_occupancy(kernel, allocs, options, estimate.value, reserve)
    needed = {}
    for stages in range(MAX_DEFAULT_STAGES, 1, -1):
        plan = plan_shared_memory(kernel, {id(a): stages for a in allocs})
        needed[stages] = plan.total
        if plan.total <= limit:
            more = (
                f"; {stages + 1} would need {needed[stages + 1]}"
                if stages + 1 in needed
                else f" (at most {MAX_DEFAULT_STAGES} by default)"
            )
            share = (
                f" (the SM's {options.sm_shared} over {blocks.value} blocks, less "
                f"{DRIVER_RESERVED_SHARED} reserved each: tilec.min_blocks_per_sm)"
                if blocks is not None and blocks.value > 1 and limit < options.shared_limit
                else ""
            )
            kept = f", {reserve} kept for the epilogue's scratch (persistent)" if reserve else ""
            return stages, (f"the most that fit: {plan.total} of {limit} bytes{kept}{share}{more}")
    return 1, f"even 2 stages need {needed[2]} bytes, more than the limit of {limit}"


def _stages_for_occupancy(
    kernel: FuncOp,
    allocs: list[Operation],
    options: Any,
    registers: int,
    reserve: int = 0,
) -> tuple[int, str]:
    """The stages that keep the most copies in flight per SM: (stages - 1) steps ahead in each
    block, times the blocks an SM holds by shared memory (each block's buffers plus the 1 KiB
    the driver reserves), by registers (`tilec.estimated_registers`, tiling's model) and by
    threads. More stages than that leave fewer blocks: attention's 32 KiB steps at d128 fit
    four stages in one block or three in each of two (measured: 138 against 207 TFLOP/s on
    the H200), and a 128x128 matmul's 16 KiB steps four in each of two."""
    threads = kernel.attributes["tilec.num_warps"].value * 32
    totals = {}
    for stages in range(2, MAX_DEFAULT_STAGES + 1):
        total = plan_shared_memory(kernel, {id(a): stages for a in allocs}).total
        if total > options.shared_limit - reserve:
            break
        totals[stages] = total
    if not totals:
        needed = plan_shared_memory(kernel, {id(a): 2 for a in allocs}).total
        return (
            1,
            f"even 2 stages need {needed} bytes, more than the limit of "
            f"{options.shared_limit - reserve}",
        )
    stages = stages_in_flight(totals, registers, threads, options.sm_shared)

    def blocks(s: int) -> int:
        return blocks_per_sm(totals[s], registers, threads, options.sm_shared)

    others = ", ".join(f"{s}: {blocks(s)} x {s - 1}" for s in sorted(totals) if s != stages)
    count = blocks(stages)
    return stages, (
        f"the most steps in flight per SM: {count} block{'s' if count > 1 else ''} "
        f"({totals[stages]} bytes of shared memory each, ~{registers} registers a thread "
        f"estimated) x {stages - 1} step{'s' if stages > 2 else ''} ahead"
        + (f"; {others}" if others else "")
    )
