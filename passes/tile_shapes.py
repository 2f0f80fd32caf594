"""The tile shapes of kernels without dots: contiguous runs first, then rows by bytes in flight.

A memory-bound kernel is fast when (1) every access is a long run of consecutive bytes, (2) each
SM keeps enough bytes in flight to cover the memory's latency, and (3) the grid has as many
blocks as that allows. `shape_streamed_tiles` chooses the free tile sizes of such a kernel in
that order, for `tiling`:

1. **The contiguous axis.** Every tile a `tile.load` or `tile.store` moves is laid out along the
   tensor's last dimension (the frontend's row-major convention; `vectorize` checks the stride).
   When all of them end in the same tile symbol, that symbol is the kernel's contiguous axis: a
   free one takes the whole budget of elements (`max_tile_elements`, capped by the dimension's
   known extent), so that a warp reads whole rows of 16-byte vectors and the block's bytes are
   one long run per row — SwiGLU over 8192 x 8192 bf16 measured 0.119-0.125 ms as 1 x 4096 tiles
   on the H200 against 0.137 ms as 64 x 64 (`tilec.benchmarks.shape_probe`, docs/benchmarks.md).
   Where a loop walks another axis (column sums walk the rows) the run is one warp's 16-byte
   accesses, and where the extents are known and the grid would have fewer than
   `FILL_BLOCKS` blocks an SM, it halves down to one `LINE_BYTES` line a row while that
   multiplies the blocks -- and down to one `SECTOR_BYTES` sector where the loop cannot be
   split across blocks either (`split_plan` refuses it: a cumulative sum down the columns
   stores every tile it walks), since then the grid is all the parallelism the kernel has
   (column cumsum of 8192 x 1000 f32: 32 blocks of 32 columns for 132 SMs; 125 of 8).
   Column sums of 65536 x 128 f32 as 128 x 32 tiles (4 blocks, each
   split at launch) took 0.0150 ms on the H200 against 0.0199 as 32 x 128 (1 block) -- the
   split's combine reads a block's partials one round after another, and more blocks along
   the grid share them out (the regret run of b1ca8d8; the launch's own split model,
   `tilec.runtime.split`, ranks them the same way at every size tried).
2. **The other axes** start at 1 (one row per block: the most blocks) and are doubled — the
   axes of sequential loops first, since they cost the grid nothing, then the grid's — only
   while the occupancy model of `assign-layouts` (`passes/occupancy.py`, `_Occupancy`: the
   blocks an SM holds times the bytes of the largest moved tile, for 4, 8 and 16 warps), on the
   warps it would choose, keeps less than `BYTES_IN_FLIGHT` in flight and the tile holds fewer
   than `max_tile_elements`.
   Rows of 4096 bf16 stay one per block (8 KiB: 64 KiB in flight on 4 warps); rows of 1024 f16
   take 4 (2 KiB a row); cross-entropy over a 32000 vocabulary streams 1 x 4096 tiles, not 64 x
   64 (4x faster: 64 rows per block left 64 blocks for 4096 rows). The warps themselves are
   then chosen by `assign-layouts` from the same model, on the shapes chosen here.

3. **Rows of a scan stay inside warps.** Where a loop walks the contiguous axis and scans
   along it (`cumsum` over long rows, carrying the running total), each iteration's scan
   combines across every thread the row spans: over warps, through shared memory and a
   block barrier, during which the block has no load in flight. So the grid axis starts at
   `ROWS_PER_WARP_SCAN` rows (one a warp at the fewest warps `assign-layouts` picks, which then
   keeps rows inside warps) and the contiguous axis takes the rest of the budget, while the
   grid keeps `FILL_BLOCKS` blocks per SM. Cumulative sums over 4096 x 16384 f32 on the H200
   (the regret run of b1ca8d8): 1 x 4096 tiles, a row across 16 warps, 0.229 ms; 4 x 1024 on
   4 warps 0.142 ms, where 4 x 1024 on 16 warps (a row across 4) took 0.157 and 8 x 512 on
   8 warps 0.153.

4. **Runs that fill the row.** The lanes of a row's last tile past its extent do no work,
   yet take threads and instructions: 5000 columns in tiles of 4096 leave 39% of them idle
   (a second tile of 904). The jit's size class (N <= 8192) cannot tell, so it records the
   longest run that fills the exact extent (`tilec.jit_sizes.fill_run`: 1024 for 5000, within 5%
   of the best fill; down to one 128-byte line a row: 128 for 1152 bf16 columns, a warp then
   spanning two rows) and passes it as option `fills`; the contiguous run stays within it, and
   step 2 grows the rows to keep the bytes in flight. bias + GELU over 4096 x 5000 f16 took
   1.47x torch.compile's time in 1 x 4096 tiles (H100, 2026-12-06).

5. **Grow the axis whose extent leaves the fewest lanes idle.** The jit tells `tiling` a size
   class per dimension, which stands for any extent above half of it, and the lowest class
   (64) for any extent at all: a DiT's modulation over [B, S, D] with B = 2 grew B and S in
   turn (4 x 4 rows, then 8 x 4), half and then three quarters of its lanes past B. Where
   the extents are known, step 2 doubles first the axis whose doubled tile may leave the
   smallest fraction of its lanes past the extent (`_idle_when_doubled`), then the smallest.

A kernel whose moved tiles end in different symbols (a transpose: rows in, columns out) keeps
`specialize`'s heuristic: square-ish tiles give both accesses runs of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects import scf
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.dialects.scan import ScanOp
from tilec.ir.core import Operation
from tilec.ir.types import TileType
from tilec.lowering.layouts import WARP_SIZE, element_bytes
from tilec.passes.occupancy import (
    ACCESS_BYTES,
    AUTO_WARPS,
    BYTES_IN_FLIGHT,
    _grid_in_flight,
    _Occupancy,
)
from tilec.passes.specialize import (
    SIZE_CLASS_LIMITS,
    TilePlan,
    TileSize,
    attribute_pairs,
    bind_tile_sizes,
)

# Blocks per SM below which a grid axis's tile stops growing, where the extents are known: an
# SM with one block idles while it waits on a reduction or a barrier. Top-k routing over 4096
# tokens on the H200 (the regret run of f74c4b9): 8 rows a block (512 blocks, 3.9 an SM)
# 5.5 us, 16 (1.9) 5.6, 32 6.2, 64 6.8 — where bytes in flight alone chose 64.
FILL_BLOCKS = 2

# The bytes of a cache line: the memory moves whole lines, so a tile row of one line wastes
# nothing of what it fetches.
LINE_BYTES = 128
# The least the memory moves: an L2 sector. A tile row of one sector fetches nothing it does
# not use, though each warp instruction then reaches fewer bytes than a line's.
SECTOR_BYTES = 32

# The rows a block of a scanning loop starts with: one a warp at assign-layouts' fewest warps.
ROWS_PER_WARP_SCAN = AUTO_WARPS[0]

__all__ = ["contiguous_symbol", "shape_streamed_tiles"]


def _moved_shapes(kernel: FuncOp) -> list[tuple]:
    """The shapes (as written, with symbols) of the tiles of the highest rank that the
    kernel's loads and stores move: the streamed data, not the per-row vectors beside it (a
    cross-entropy's targets and losses, a norm's weights, top-k's k results a row)."""
    shapes = [t.shape for op in kernel.walk() for t in _moved_type(op)]
    rank = max((len(s) for s in shapes), default=0)
    shapes = [s for s in shapes if s and len(s) == rank]
    # Rows of a static width beside tiled ones (top-k's k weights and indices a row) are
    # per-row results too, not streamed data.
    tiled = [s for s in shapes if isinstance(s[-1], str)]
    return tiled or shapes


def contiguous_symbol(kernel: FuncOp) -> str | int | None:
    """The tile axis every streamed tile ends in (a symbol, or a static size), or None when
    they end in different ones or nothing is moved."""
    ends = {shape[-1] for shape in _moved_shapes(kernel)}
    return ends.pop() if len(ends) == 1 else None


def _sequential_symbols(kernel: FuncOp) -> set[str]:
    """Tile symbols of dimensions that a sequential loop (an `scf.for` stepping by a tile
    size) walks."""
    found: set[str] = set()
    for op in kernel.walk():
        if isinstance(op, scf.ForOp):
            step = op.step.owner
            if isinstance(step, T.SymbolOp):
                found.add(step.symbol)
    return found


def _scans_in_walk(kernel: FuncOp, contiguous: str | int | None) -> bool:
    """Whether a loop stepping by the contiguous symbol scans its tiles along that axis."""
    if not isinstance(contiguous, str):
        return False
    for op in kernel.walk():
        if not isinstance(op, scf.ForOp):
            continue
        step = op.step.owner
        if not (isinstance(step, T.SymbolOp) and step.symbol == contiguous):
            continue
        for inner in op.walk():
            if isinstance(inner, ScanOp) and isinstance(inner.input.type, TileType):
                shape = inner.input.type.shape
                if shape[int(inner.axis)] == contiguous:
                    return True
    return False


def _in_flight(kernel: FuncOp, plan: TilePlan, grid: _Grid | None = None) -> tuple[int, str]:
    """The bytes in flight per SM of the warps the occupancy model chooses for `plan`'s
    sizes (what `assign-layouts` will then choose for them): its blocks an SM times a
    block's bytes -- or, on a `grid` whose blocks are known and fewer than the SMs hold, the
    blocks the grid gives each SM (`occupancy._grid_in_flight`; a column cumsum of 8192 x
    1000 has 125 blocks of 8 columns for 132 SMs: one block's tile is all an SM moves)."""
    trial = kernel.clone()
    assert isinstance(trial, Operation)
    bind_tile_sizes(trial, plan)  # type: ignore[arg-type]
    occupancy = _Occupancy.of(trial)  # type: ignore[arg-type]
    if occupancy is None or not occupancy.candidates:
        return 0, ""
    chosen = next(c for c in occupancy.candidates if c.warps == occupancy.choice)
    blocks = grid.blocks(plan) if grid is not None else None
    if grid is None or blocks is None or blocks >= chosen.blocks * grid.sm_count:
        return chosen.in_flight, ""
    held = int(_grid_in_flight(chosen, (blocks, grid.sm_count)))
    return held, f": the grid's {blocks} blocks for {grid.sm_count} SMs"


@dataclass(frozen=True)
class _Grid:
    """The kernel's grid, where the extents are known: its blocks for a plan's sizes."""

    axes: tuple[tuple[str, str | int], ...]  # (dimension, tile symbol or size) per axis
    extents: dict[str, int]
    sm_count: int

    def blocks(self, plan: TilePlan) -> int | None:
        total = 1
        for dim, symbol in self.axes:
            if dim not in self.extents:
                return None
            size = plan.symbols[symbol].size if isinstance(symbol, str) else int(symbol)
            total *= -(-self.extents[dim] // max(size, 1))
        return total


def _elements(plan: TilePlan, shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= plan.symbols[d].size if isinstance(d, str) else (d if isinstance(d, int) else 1)
    return n


def shape_streamed_tiles(
    kernel: FuncOp,
    plan: TilePlan,
    maximum: int,
    extents: dict[str, int] | None = None,
    sm_count: int = 132,
    fills: dict[str, int] | None = None,
) -> bool:
    """Choose the free sizes of `plan` for `kernel` (no dots) as the module docstring says;
    False (the plan untouched) when the moved tiles have no common contiguous axis.
    `extents` (where known) give the grid its blocks, `sm_count` the SMs they fill, `fills`
    per dimension the longest run whose tiles leave few lanes idle past its extent (4.)."""
    contiguous = contiguous_symbol(kernel)
    if contiguous is None:
        return False
    grid = _Grid(
        tuple(
            (str(d), s if isinstance(s, int) else str(s))
            for d, s in attribute_pairs(kernel, "tilec.grid")
        ),
        dict(extents or {}),
        sm_count,
    )
    shapes = _moved_shapes(kernel)
    largest = max(shapes, key=lambda s: _elements(plan, s))
    others = [
        plan.symbols[d]
        for d in dict.fromkeys(d for s in shapes for d in s)
        if isinstance(d, str) and d != contiguous and d in plan.symbols and plan.symbols[d].free
    ]
    for s in others:
        s.size, s.adjusted = 1, ""
    run = plan.symbols.get(contiguous) if isinstance(contiguous, str) else None
    if run is not None and run.free:
        # Per element of the run, the most elements any tile along it holds: usually the
        # largest moved tile's rows, but a computed tile with axes of its own ([D, BN] beside
        # moved [BM, BN] tiles) must fit the budget too.
        rest = max(
            _elements(plan, shape) // max(run.size, 1)
            for shape in [largest, *_tile_shapes_along(kernel, contiguous)]
        )
        size = _power_of_two_at_most(max(1, maximum // max(rest, 1)))
        sequential = _sequential_symbols(kernel)
        warp_run = WARP_SIZE * ACCESS_BYTES // _narrowest_moved(kernel)
        across = bool(sequential) and contiguous not in sequential and size > warp_run
        if across:
            size = warp_run
        if run.cap is not None:
            size = min(size, run.cap)
        fill = (fills or {}).get(run.dim or "")
        # A run that fills the row may be shorter than a warp's 16-byte accesses (a warp
        # then spans rows), never than one line a row.
        line = max(1, LINE_BYTES // _narrowest_moved(kernel))
        fitted = size if across or fill is None else min(size, max(fill, line))
        run.size = max(fitted, 2)
        run.adjusted = (
            f"the contiguous axis: {run.size}, one warp's 16-byte accesses a row: a loop walks "
            "another axis, and a longer run would only divide the grid"
            if across
            else f"the contiguous axis: {run.size} so that one tile row is one long run"
        )
        if fitted < size:
            run.adjusted += (
                f" (tiles of {size} along {run.dim} would leave lanes past its extent idle: "
                f"runs of {fill} fill it, option fills)"
            )
        if across:
            _narrow_for_grid(kernel, plan, grid, run, _narrowest_moved(kernel))
    sequential = _sequential_symbols(kernel)
    order = sorted(others, key=lambda s: (s.name not in sequential, s.name))
    for s in order:
        s.adjusted = "1 row: the most blocks"
    if run is not None and run.free and _scans_in_walk(kernel, contiguous):
        _scan_rows(plan, grid, run, [s for s in order if s.name not in sequential], maximum)
    # A loop split across blocks multiplies the grid at launch to fill the SMs; one that is
    # not leaves each SM the blocks the grid has.
    held = None if _splittable(kernel) else grid
    in_flight, why = _in_flight(kernel, plan, held)
    while order:
        if in_flight >= BYTES_IN_FLIGHT or _elements(plan, largest) >= maximum:
            break
        # A size past `maximum` could never fit a tile; without this bound a symbol that the
        # largest moved tile lacks grew without end (a fuzzed kernel reached 2**14000).
        growable = [s for s in order if (s.cap is None or s.size < s.cap) and s.size * 2 <= maximum]
        if not growable:
            break
        # Sequential axes first; then the axis whose doubled tile may leave the fewest lanes
        # past its extent (5.); then the smallest.
        s = min(
            growable,
            key=lambda s: (
                s.name not in sequential,
                _idle_when_doubled(s, grid.extents),
                s.size,
                order.index(s),
            ),
        )
        s.size *= 2
        blocks = grid.blocks(plan)
        if s.name not in sequential and blocks is not None and blocks < FILL_BLOCKS * sm_count:
            # Fewer blocks than that leave an SM without a second block to run while one waits
            # on a reduction or a barrier.
            s.size //= 2
            s.adjusted = (
                f"{s.size}: {2 * blocks} blocks; larger tiles would leave fewer than "
                f"{FILL_BLOCKS} blocks per SM ({sm_count} SMs)"
            )
            order.remove(s)
            continue
        s.adjusted = (
            f"grown to {s.size}: with fewer, an SM keeps under "
            f"{BYTES_IN_FLIGHT // 1024} KiB in flight ({in_flight // 1024} KiB{why})"
        )
        in_flight, why = _in_flight(kernel, plan, held)
    return True


def _idle_when_doubled(s: TileSize, extents: dict[str, int]) -> float:
    """The largest fraction of a tile's lanes along `s`'s dimension that its extent may leave
    idle once `s` doubles (module doc, 5.): the extent told is a size class, which stands for
    any extent above half of it -- or, the lowest class, for any extent at all (a batch of 2
    in a class of 64). 0 where the extent is not known."""
    extent = extents.get(s.dim or "")
    if extent is None:
        return 0.0
    lowest = 1 if extent <= SIZE_CLASS_LIMITS[0] else extent // 2 + 1
    tile = 2 * s.size
    padded = -(-lowest // tile) * tile
    return (padded - lowest) / padded


def _narrow_for_grid(
    kernel: FuncOp, plan: TilePlan, grid: _Grid, run: TileSize, narrowest: int
) -> None:
    """Where a loop walks another axis and the grid, known, has fewer than `FILL_BLOCKS`
    blocks an SM, halve the contiguous run -- down to one line of elements a row, which
    still moves whole lines, or one sector where the loop cannot be split either -- while that
    multiplies the blocks (module doc, 1.)."""
    blocks = grid.blocks(plan)
    line = LINE_BYTES // narrowest
    if blocks is None or blocks >= FILL_BLOCKS * grid.sm_count or run.size <= line:
        return
    floor, unit = line, "whole lines"
    if not _splittable(kernel):
        floor, unit = max(1, SECTOR_BYTES // narrowest), "whole sectors: the loop is not split"
    before = blocks
    while run.size > floor and blocks < FILL_BLOCKS * grid.sm_count:
        run.size //= 2
        blocks = grid.blocks(plan) or blocks
    run.adjusted = (
        f"the contiguous axis: {run.size} ({run.size * narrowest} bytes a row, {unit}): "
        f"a loop walks another axis, and at the known extents wider tiles leave the grid "
        f"{before} block(s), under {FILL_BLOCKS} an SM ({grid.sm_count} SMs); now {blocks}"
    )


def _splittable(kernel: FuncOp) -> bool:
    """Whether `split-reduction` could split the kernel's loop across blocks (`split_plan`,
    asked before tiling), which multiplies a small grid at launch."""
    from tilec.passes.split_plan import NotSplit, split_plan

    try:
        split_plan(kernel, tiled=False)
    except NotSplit:
        return False
    return True


def _scan_rows(
    plan: TilePlan, grid: _Grid, run: TileSize, rows_axes: list[TileSize], maximum: int
) -> None:
    """Rows of a scanning loop inside warps (module doc, 3.): the first grid axis starts at
    `ROWS_PER_WARP_SCAN` rows -- halved while the grid would give an SM fewer than
    `FILL_BLOCKS` blocks -- and the contiguous run shrinks to keep the tile in the budget."""
    if not rows_axes:
        return
    rows = rows_axes[0]
    rows.size = ROWS_PER_WARP_SCAN if rows.cap is None else min(ROWS_PER_WARP_SCAN, rows.cap)
    while rows.size > 1:
        blocks = grid.blocks(plan)
        if blocks is None or blocks >= FILL_BLOCKS * grid.sm_count:
            break
        rows.size //= 2
    if rows.size == 1:
        return
    rows.adjusted = (
        f"{rows.size} rows: a loop scans along {run.name}, and rows that stay inside warps "
        "scan without a block barrier an iteration"
    )
    if run.size * rows.size > maximum:
        while run.size * rows.size > maximum and run.size > 2:
            run.size //= 2
        run.adjusted = f"the contiguous axis: {run.size}, the budget shared by {rows.size} rows"


def _narrowest_moved(kernel: FuncOp) -> int:
    """The bytes of the narrowest element among the tiles the kernel's loads and stores move
    at the highest rank (4 when there are none)."""
    shapes = set(_moved_shapes(kernel))
    sizes = [
        element_bytes(t.element)
        for op in kernel.walk()
        for t in _moved_type(op)
        if t.shape in shapes
    ]
    return min(sizes, default=4)


def _moved_type(op: Operation) -> list[TileType]:
    if isinstance(op, T.LoadOp):
        return [op.result.type]
    if isinstance(op, T.StoreOp) and isinstance(op.value.type, TileType):
        return [op.value.type]
    return []


def _tile_shapes_along(kernel: FuncOp, symbol: str) -> list[tuple]:
    """The shapes of the kernel's tile values that have an axis of `symbol`."""
    shapes = set()
    for op in kernel.walk():
        for v in op.results:
            if isinstance(v.type, TileType) and symbol in v.type.shape:
                shapes.add(tuple(v.type.shape))
    return list(shapes)


def _power_of_two_at_most(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p
