"""How many blocks an SM holds for a pipelined kernel, and the stage count that keeps the most
copies in flight per SM: the occupancy model `pipeline` chooses stages by and tiling budgets
for (`stages_in_flight`), and the blocks a warp-specialized kernel keeps (`_planned_blocks`).
"""

from __future__ import annotations

from typing import Any

from tilec.dialects.builtin import FuncOp
from tilec.passes.occupancy import (
    DRIVER_RESERVED_SHARED,
    MAX_THREADS_PER_SM,
    REGISTERS_PER_SM,
    SM_SHARED_SM90,
)
from tilec.passes.smem_placement import plan_shared_memory

__all__ = ["_planned_blocks", "blocks_per_sm", "stages_in_flight"]


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
