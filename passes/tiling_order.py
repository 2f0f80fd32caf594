"""The block order of the `tiling` pass (passes/tiling.py): which grid axis consecutive
blocks walk, and the grouping of a GEMM's 2-D grid (Triton's GROUP_M), each remarked.
`_KernelTiling` mixes `BlockOrder` in.
"""

from __future__ import annotations

from tilec.dialects import scf
from tilec.dialects import tile as T
from tilec.ir.attributes import ArrayAttr, IntegerAttr, UnitAttr
from tilec.ir.types import TileType
from tilec.lowering.layouts import element_bytes
from tilec.passes.specialize import attribute_pairs
from tilec.passes.tiling_operands import operand_load, program_axes
from tilec.passes.tiling_rewrites import grouped_program_ids
from tilec.passes.tiling_search import DEFAULT_GROUP_M

__all__ = ["INNER_FIRST_ATTRIBUTE", "BlockOrder"]

# A kernel whose grid `inner_axis_first` reordered (what the tuner reads back as the decision
# `tiling.inner_first`, tilec/tune/space.py).
INNER_FIRST_ATTRIBUTE = "tilec.inner_first"


class BlockOrder:
    """The block order (mixed into `_KernelTiling`)."""

    def group(self, has_dot: bool) -> None:
        kernel, g = self.kernel, self.opts.group_m
        grid = attribute_pairs(kernel, "tilec.grid")
        unordered = has_dot and len(grid) >= 2 and "tilec.group_m" not in kernel.attributes
        if unordered and self.shared_axis_first(grid):
            return
        if not has_dot and len(grid) >= 2 and self.opts.inner_first:
            self.inner_axis_first(grid)
            return
        if "tilec.group_m" in kernel.attributes or not has_dot or len(grid) != 2:
            return
        axes = [str(dim) for dim, _ in grid]
        g = g or DEFAULT_GROUP_M
        if g == 1:
            self.ctx.remark(kernel, "block order: launch order (option group_m=1)")
            return
        ids = {0: [], 1: []}
        for op in kernel.walk():
            if isinstance(op, T.ProgramIdOp) and op.axis in ids:
                ids[op.axis].append(op)
        if not ids[0] and not ids[1]:
            return
        rows = self.blocks_along(0)
        if rows is not None and rows <= g:
            self.ctx.remark(
                kernel,
                f"block order: launch order ({rows} blocks along {axes[0]}, no more than "
                f"group_m={g})",
            )
            return
        pid_m, pid_n = grouped_program_ids(kernel, g)
        for op in ids[0]:
            op.replace_with([pid_m])
        for op in ids[1]:
            op.replace_with([pid_n])
        kernel.attributes["tilec.group_m"] = IntegerAttr(g)
        self.ctx.remark(
            kernel,
            f"block order: groups of {g} blocks along {axes[0]} (option group_m): consecutive "
            f"blocks share the {axes[1]} tile of one operand and {g} tiles of the other in L2",
        )

    def inner_axis_first(self, grid: list[tuple[str, object]]) -> None:
        """Puts first (CUDA's x) the grid axis whose tiles lie closest together in memory: the
        one indexing the innermost dimension of the tensors the blocks move (row-major: a step
        along a dimension moves past every element of the dimensions inside it). Weighed by
        the bytes of each access a block makes; left as declared when accesses disagree (a
        transpose reads along one axis and writes along the other, equally). Blocks launched
        together then stream one region of memory: `head_gate`'s `x[ts, h, :]` in launch
        order S, H puts 256 KiB between neighbouring blocks' tiles and spreads each wave over
        every head of the tensor; in order H, S neighbours are 256 bytes apart."""
        votes: dict[int, int] = {}
        for op in self.kernel.walk():
            if not isinstance(op, (T.LoadOp, T.StoreOp)):
                continue
            tile = op.result.type if isinstance(op, T.LoadOp) else op.value.type
            if not isinstance(tile, TileType) or not tile.is_static:
                continue
            # How far apart two blocks' tiles of this access are when they differ only along
            # a grid axis, as a rank: -1 for an axis the access does not depend on (the same
            # tile), else the number of view dimensions inside the innermost one it moves.
            step = dict.fromkeys(range(len(grid)), -1)
            for dim, v in enumerate(op.offsets):
                for axis in program_axes(v):
                    if axis in step:
                        inside = len(op.offsets) - 1 - dim
                        step[axis] = inside if step[axis] < 0 else min(step[axis], inside)
            if all(r < 0 for r in step.values()):
                continue
            nearest = min(step.values())
            axes = [a for a, r in step.items() if r == nearest]
            if len(axes) == 1:
                nbytes = tile.num_elements * element_bytes(tile.element)
                votes[axes[0]] = votes.get(axes[0], 0) + nbytes
        if not votes:
            return
        ranked = sorted(votes.items(), key=lambda kv: -kv[1])
        first, weight = ranked[0]
        if first == 0 or (len(ranked) > 1 and ranked[1][1] == weight):
            return
        name = str(grid[first][0])
        self.put_first(
            first,
            f"{name} walks the innermost dimension the blocks read and write, so the blocks "
            "launched together move neighbouring memory (option inner_first)",
        )
        self.kernel.attributes[INNER_FIRST_ATTRIBUTE] = UnitAttr()

    def put_first(self, first: int, why: str) -> None:
        """Make grid axis `first` axis 0 (the others keep their order): the program ids, grid
        sizes and `tilec.grid`; remarked with `why`."""
        grid = attribute_pairs(self.kernel, "tilec.grid")
        order = [first] + [a for a in range(len(grid)) if a != first]
        new_axis = {old: new for new, old in enumerate(order)}
        for op in self.kernel.walk():
            if isinstance(op, (T.ProgramIdOp, T.NumProgramsOp)) and op.axis in new_axis:
                op.attributes["axis"] = IntegerAttr(new_axis[op.axis])
        pairs = self.kernel.attributes["tilec.grid"].elements
        self.kernel.attributes["tilec.grid"] = ArrayAttr(tuple(pairs[a] for a in order))
        names = [str(dim) for dim, _ in grid]
        self.ctx.remark(
            self.kernel,
            f"block order: {names[first]} first (grid axis 0, x), then "
            f"{', '.join(names[a] for a in order[1:])}: {why}",
        )

    def shared_axis_first(self, grid: list[tuple[str, object]]) -> bool:
        """Puts first (CUDA's x, the axis consecutive blocks walk) the grid axis that no
        streamed dot operand depends on, when there is one and it is not first already:
        blocks launched together then differ only along it and read the same streamed tiles,
        which stay in L2. Attention's `k[b, h, tn, :]` and `v[b, h, tn, :]` do not depend on
        the query tile: in launch order B, H, M the 264 blocks an H200 runs at once read 64
        heads' keys and values (128 MiB at S=4096, d=128: more than the 50 MiB of L2, which
        hit 47% of reads, measured); with M first they read 4 heads'. A GEMM's operands each
        depend on one of its two axes, so its blocks are grouped instead (`group_m`)."""
        streamed = [
            load
            for op in self.kernel.walk()
            if isinstance(op, T.DotOp)
            for load in (operand_load(op.a), operand_load(op.b))
            if load is not None
            and isinstance(op.parent_op, scf.ForOp)
            and op.parent_op.is_ancestor_of(load)
        ]
        if not streamed:
            return False
        used: set[int] = set()
        for load in streamed:
            for v in load.operands[1:]:
                used |= program_axes(v)
        free = [axis for axis in range(len(grid)) if axis not in used]
        if not free or free[0] == 0 or used == set():
            return False
        first = free[0]
        self.put_first(
            first,
            f"no streamed dot operand depends on {grid[first][0]}, so the blocks launched "
            "together read the same streamed tiles from L2",
        )
        return True

    def blocks_along(self, axis: int) -> int | None:
        dim, symbol = attribute_pairs(self.kernel, "tilec.grid")[axis]
        if str(dim) not in self.extents:
            return None
        tile = self.size(str(symbol)) if isinstance(symbol, str) else int(symbol)  # type: ignore[call-overload]
        return -(-self.extents[str(dim)] // tile)
