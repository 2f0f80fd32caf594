"""The SM model's grid-level decisions of the wgmma tiling (`tiling`'s `_KernelTiling` inherits
them): the split of the K loop (`wgmma_split`, and at the least extents of the size classes,
`split_at_least_extents`), the walk over the output tiles by one block an SM with a producer
warpgroup (`walk_times`, `walk_plan`), and the remark that says what the model found
(`wgmma_model_remark`). The model itself is `passes/wgmma_model.py`.
"""

from __future__ import annotations

from typing import Any

from tilec.dialects.builtin import PRODUCER_ATTRIBUTE, WALK_ATTRIBUTE
from tilec.ir.attributes import IntegerAttr, UnitAttr
from tilec.passes.pipeline import MAX_DEFAULT_STAGES
from tilec.passes.specialize import SIZE_CLASS_LIMITS
from tilec.passes.tiling_search import TileConfig, TiledDot
from tilec.passes.wgmma_model import (
    TENSOR_MACS_PER_CLOCK,
    best_split,
    dram_fraction,
    grid_clocks,
    step_clocks,
    walk_clocks,
)

__all__ = ["WALK_GAIN", "WgmmaGrid"]

# The tiles are walked (`WgmmaGrid.walk_plan`) where the SM model gives the walk at most this
# share of the grid's time: persistent blocks alone were measured at 0.97-1.05 of a grid the
# model gave as equal (pipeline_persistent.py), and walks with a producer within 4% of it
# (H100, 2026-12-06), so a smaller gain is within its error.
WALK_GAIN = 0.95
# 8-bit operands are not walked by default: the model gave fp8 3000x5120x1536 and 4096^3 0.85
# and 0.93 of the grid's time, int8 3000x5000x1536 and 4096^3 alike, and walked they ran 1.18,
# 1.10, 1.25 and 1.11 times the grid's (H100, 2026-12-06, `pending-2026-12-06-next.json`),
# where 16-bit walks measured within 4% of the model. The walk costs 8-bit GEMMs something
# the model lacks -- their k-steps take half a 16-bit one's clocks, so a cost per step or per
# tile weighs double -- not yet found; option producer = 1 still walks them.
WALK_ELEMENT_BYTES = 2


class WgmmaGrid:
    """Grid-level decisions of a wgmma tiling, for `_KernelTiling` (which provides `opts`,
    `extents`, `kernel`, `ctx`, `splits_k`, `blocks`, `size` and `wgmma_blocks_per_sm`)."""

    opts: Any
    extents: dict[str, int]
    kernel: Any
    ctx: Any
    splits_k: bool

    def wgmma_split(
        self,
        c: TileConfig,
        dot: TiledDot,
        bm: int,
        bn: int,
        bk: int,
        k_steps: int | None,
        blocks: int | None,
        per_sm: int,
    ) -> tuple[int, float]:
        """(S, clocks): the modelled grid time of a wgmma tiling, with its K loop split S
        ways where `split-reduction` can and that is faster (`wgmma_model.best_split`)."""
        args = (self.opts.sm_count, MAX_DEFAULT_STAGES, dot.element_bytes)
        if not self.splits_k or k_steps is None or blocks is None:
            return 1, grid_clocks(bm, bn, bk, k_steps, blocks, per_sm, *args)
        # The DRAM floor of A's and B's (M + N) x K elements, where the extents are known.
        extent = [
            self.extents.get(x[1:]) if isinstance(x, str) else None for x in (dot.m, dot.n, dot.k)
        ]
        operand_bytes = 0
        if None not in extent:
            m, n, k = extent
            operand_bytes = (m + n) * k * dot.element_bytes
        return best_split(bm, bn, bk, k_steps, blocks, per_sm, *args, operand_bytes=operand_bytes)

    def wgmma_model_remark(self, dot: TiledDot, config: TileConfig) -> str:
        """What the SM model says of the chosen wgmma tile, for the tiling remark."""
        bm, bn = self.size(dot.m, config), self.size(dot.n, config)
        tensor = bm * bn * 16 * dot.element_bytes / (2 * TENSOR_MACS_PER_CLOCK)
        step = step_clocks(bm, bn, dot.element_bytes)
        text = (
            f"per k-step of 16 the SM model gives {tensor:.0f} clocks of tensor-core work and "
            f"{step:.0f} with shared memory's traffic ({tensor / step:.2f} of the tensor cores)"
        )
        blocks = self.blocks(config)
        if blocks is None:
            return text
        bk = self.size(dot.k, config)
        depth = self.extents.get(dot.k[1:]) if isinstance(dot.k, str) else None
        k_steps = -(-depth // bk) if depth is not None else None
        per_sm = self.wgmma_blocks_per_sm(config, dot)
        splits, _ = self.wgmma_split(config, dot, bm, bn, bk, k_steps, blocks, per_sm)
        at_least = splits == 1
        if at_least:
            splits = self.split_at_least_extents(config, dot, per_sm)
        if splits > 1:
            # What split-reduction reads: the K loop is worth splitting at these extents.
            self.kernel.attributes["tilec.split_k"] = IntegerAttr(splits)
            text += (
                f", the least time over the grid's waves with its K loop shared out among "
                f"{splits} blocks a tile{' at the least extents of their classes' if at_least else ''} "
                "(tilec.split_k: split-reduction splits it; S is chosen again at launch, by "
                "the same model)"
            )
            return text
        return text + ", the least time over the grid's waves"

    def walk_plan(self, dot: TiledDot, config: TileConfig) -> str:
        """Whether one block an SM with a producer warpgroup walks the output tiles (the
        kernel gets `WALK_ATTRIBUTE` and `PRODUCER_ATTRIBUTE`; pipeline's persistent and
        warp_specialize follow): where tiles of one block an SM (`wgmma_blocks_per_sm`), not
        split, are modelled at most `WALK_GAIN` of their time as a grid (`walk_clocks`
        against `grid_clocks`). Option producer: 0 never, 1 wherever such tiles are; the
        remark gives both times."""
        if self.opts.producer == 0 or "tilec.split_k" in self.kernel.attributes:
            return ""
        found = self.walk_times(dot, config)
        if found is None:
            return ""
        grid, walked = found
        blocks = self.blocks(config)
        times = f"{walked:.0f} clocks an SM walked, {grid:.0f} as a grid of {blocks} blocks"
        if not self.walks(dot, grid, walked):
            if walked > WALK_GAIN * grid:
                return f"the tiles are not walked: {times} (wgmma_model.walk_clocks)"
            return (
                f"the tiles are not walked: {times} by the model, but 8-bit GEMMs walked "
                "measured 1.10-1.25x the grid's time (tiling_grid.WALK_ELEMENT_BYTES; option "
                "producer = 1 walks them)"
            )
        self.kernel.attributes[WALK_ATTRIBUTE] = UnitAttr()
        self.kernel.attributes[PRODUCER_ATTRIBUTE] = UnitAttr()
        return (
            f"the tiles are walked by one block an SM with a producer warpgroup: {times} "
            "(wgmma_model.walk_clocks: the first copies and last stores once an SM, not once a "
            "tile; pipeline's persistent and warp_specialize follow; option producer = 0 not)"
        )

    def walks(self, dot: TiledDot, grid: float, walked: float) -> bool:
        """Whether tiles the model gives `grid` clocks as a grid and `walked` walked are
        walked: option producer = 1 always, 0 never; by default where the walk takes at most
        `WALK_GAIN` of the grid's time and the operands are not 8-bit (`WALK_ELEMENT_BYTES`).
        The tiling ranks tiles by what this says (`Tiling.wgmma_preference`)."""
        if self.opts.producer in (0, 1):
            return self.opts.producer == 1
        return walked <= WALK_GAIN * grid and dot.element_bytes >= WALK_ELEMENT_BYTES

    def walk_times(self, dot: TiledDot, config: TileConfig) -> tuple[float, float] | None:
        """(grid, walked): the SM model's clocks for `config`'s unsplit tiles as a grid and
        walked by one block an SM with a producer (`grid_clocks`, `walk_clocks`); None where
        the extents are unknown or the tiles run more than one block an SM."""
        blocks = self.blocks(config)
        bm, bn, bk = (self.size(x, config) for x in (dot.m, dot.n, dot.k))
        dims = (dot.m, dot.n, dot.k)
        extent = [self.extents.get(x[1:]) if isinstance(x, str) else None for x in dims]
        if blocks is None or None in extent or self.wgmma_blocks_per_sm(config, dot) != 1:
            return None
        m, n, k = extent
        k_steps = -(-k // bk)
        batch = blocks // (-(-m // bm) * -(-n // bn))  # a batched product's grid: batch x tiles
        operand_bytes = batch * (m + n) * k * dot.element_bytes
        f = dram_fraction(bm, bn, bk, k_steps, blocks, dot.element_bytes, operand_bytes)
        args = (bm, bn, bk, k_steps, blocks)
        eb, sms = dot.element_bytes, self.opts.sm_count
        grid = grid_clocks(*args, 1, sms, MAX_DEFAULT_STAGES, eb, dram_fraction=f)
        return grid, walk_clocks(*args, sms, MAX_DEFAULT_STAGES, eb, dram_fraction=f)

    def split_at_least_extents(self, config: TileConfig, dot: TiledDot, per_sm: int) -> int:
        """S at the least extents the option `extents` stands for: the jit tells tiling a
        size class, the power of two over its extents (`tilec.jit_sizes.size_class`), so 16384
        stands for 8193 to 16384 -- and `x @ w.T` with w of 11008 rows has 172 tiles of 64
        where 16384 would have 256, which leave 92 of 264 block slots idle unsplit. Dimensions
        named in the option `exact` are what they say; the smallest class stands for every
        extent up to it (one tile of 64 or less: the grid is the same). A kernel split
        here but not needed at a launch's extents runs S = 1 (the launch's model)."""
        exact = {d.strip() for d in self.opts.exact.split(",")}
        low = SIZE_CLASS_LIMITS[0]
        least = {d: n if d in exact or n <= low else n // 2 + 1 for d, n in self.extents.items()}
        if least == self.extents:
            return 1
        saved, self.extents = self.extents, least
        try:
            blocks = self.blocks(config)
            bk = self.size(dot.k, config)
            depth = self.extents.get(dot.k[1:]) if isinstance(dot.k, str) else None
            k_steps = -(-depth // bk) if depth is not None else None
            bm, bn = self.size(dot.m, config), self.size(dot.n, config)
            splits, _ = self.wgmma_split(config, dot, bm, bn, bk, k_steps, blocks, per_sm)
        finally:
            self.extents = saved
        return splits
