"""The occupancy model behind automatic warps: for a kernel without tensor-core dots, how many
blocks an SM holds at 4, 8 and 16 warps -- and 1 and 2 where they remove a cost 4 warps pay and
the grid fills the SMs (`FEW_WARPS`) -- (by threads, by registers estimated from the tiles live
across each op, by the block limit), and the bytes of its largest streamed tile those blocks
keep in flight (`_Occupancy`); `estimate_registers` is the register model. `assign-layouts`
chooses the warps from it, and `tile_shapes` grows tiles while it keeps under `BYTES_IN_FLIGHT`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import ceil, log2, prod

from tilec.diagnostics import format_bytes
from tilec.dialects import gather as G
from tilec.dialects import scf
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.core import Block, Operation, Pure, Value
from tilec.ir.types import TileType
from tilec.lowering.layouts import WARP_SIZE, default_layout, element_bytes
from tilec.passes.defer_reduction import deferrable
from tilec.passes.scan_layouts import SCAN_OPS

__all__ = ["AUTO_WARPS", "BYTES_IN_FLIGHT", "Streamed", "estimate_registers", "streamed_load_bytes"]

WARP_COUNTS = (1, 2, 4, 8, 16, 32)
ACCESS_BYTES = 16  # the widest global access per thread (ld.global.v4.b32)

# An SM's limits (sm_80 .. sm_90): what the automatic warps and `min_blocks_per_sm` are
# checked against.
MAX_THREADS_PER_SM = 2048
MAX_BLOCKS_PER_SM = 32
REGISTERS_PER_SM = 65536
MAX_REGISTERS_PER_THREAD = 255
REGISTER_GRANULE = 8  # ptxas gives a thread a multiple of 8 registers
SM_SHARED_SM90 = 233472  # bytes of shared memory per SM on sm_90 (228 KiB)
DRIVER_RESERVED_SHARED = 1024  # bytes the driver reserves in every block's share (sm_80+)

# Automatic warps (`_Occupancy`): of AUTO_WARPS, the one whose blocks keep the bytes of their
# streamed loads in flight on an SM (blocks per SM, from threads and estimated registers,
# times a block's `streamed_load_bytes`: every tile it loads that no other block reads, as
# swiglu's a and b; the largest moved tile where there is none) nearest BYTES_IN_FLIGHT, on a
# log scale; ties to fewer warps (cheaper barriers and cross-warp reductions). Fitted on the H200 (rowwise_probe,
# docs/benchmarks.md, with ptxas's registers): softmax f32 rows of 4096 fastest on 16 warps
# (4 blocks x 16 KiB = 64 KiB; 8 warps keep 128 KiB, 4 warps 160), of 16384 on 16 (128 KiB
# against 192 on 8), of 1024 on 4 (16 blocks x 4 KiB); layernorm f16 rows of 8192 on 4 (5 x
# 16 KiB = 80 KiB, its 96 registers limit it; 8 warps keep 64 KiB, 16 warps 48). Roughly the
# DRAM's bandwidth x latency per SM (about 32 GB/s x 2 us). Choices that would give a thread
# more than MAX_ELEMENTS_PER_THREAD elements of the tile, or runs shorter than 16 bytes, are
# not candidates. A loop that reduces across the block's warps every iteration (a running
# maximum, a scan) takes the fewest warps that keep BYTES_IN_FLIGHT: its load waits while the
# warps reduce, longer the more warps there are (H100, 2026-12-06: logsumexp 8192 x 8192 on
# 16 warps, 64 KiB, 1.35x the time of 4 or 8; cross-entropy 4096 x 32000 on 16 1.96x its 4).
AUTO_WARPS = (4, 8, 16)
# Fewer warps than AUTO_WARPS[0] leave an SM fewer warps to hide latency with (32 blocks an SM at
# most: one-warp blocks fill half its warp slots), and are candidates only where they remove a
# cost AUTO_WARPS[0] pays: a tile too small to give 4 warps' threads 16-byte runs (an embedding
# bag's 128-float rows: 512 B, one 4-byte element a thread on 4 warps), or a loop whose
# reductions cross the warps every iteration on 4 warps and stay inside one warp on fewer (paged
# decode's per-page sums over the page's 16 rows, which also reduces each row inside its warp).
# Measured on the H200 at 1bdb91b (docs/benchmarks/regret-full-memory-1bdb91b-h200.json): the
# bag 0.907 and the decode 0.650 of 4 warps' time on one warp; where neither cost is paid, fewer
# warps lost (cross-entropy's rows of 4096 on 2 warps 1.066, dropout on 1 warp 1.57). And only
# where the grid lets them keep more bytes in flight per SM than 4 warps (`_admitted`): a grid
# of 256 blocks puts two on each SM whatever their warps (scans over 256 rows on one warp:
# 1.14-1.16x); one of 4096 bags puts 31, where 16 of 4 warps fit (one warp 0.819 of 4 warps'
# time, H100 4a04e97 -- refused while the rule asked for all 32 one-warp blocks an SM holds).
# Where the grid gives the same blocks to any warps, fewer warps that widen a thread's runs
# still pay (600 to 1500 bags: one warp 0.75-0.78, H100 208240e); ones that only save a
# barrier do not (the scans).
FEW_WARPS = (1, 2)
BYTES_IN_FLIGHT = 72 * 1024
MAX_ELEMENTS_PER_THREAD = 64
# Registers beyond the tiles' elements: addresses, loop counters, reduction partials, the
# exchange's indices. With it the estimate is within 16 registers of ptxas's count for the
# examples' row kernels at 4, 8 and 16 warps (tests/unit/test_occupancy.py).
BASE_REGISTERS = 16


def _moved_tiles(kernel: FuncOp) -> list[TileType]:
    """The static tile types that the kernel's loads and stores move."""
    return [
        t
        for op in kernel.walk()
        if isinstance(op, (T.LoadOp, T.StoreOp, G.GatherOp, G.ScatterOp))
        for t in [op.result.type if isinstance(op, (T.LoadOp, G.GatherOp)) else op.value.type]
        if isinstance(t, TileType) and t.is_static
    ]


def _grid_axes(value: Value, memo: dict[Value, frozenset[int]]) -> frozenset[int]:
    """The grid axes whose `tile.program_id` `value` depends on (through a loop's induction
    variable or carried value, on the loop's bounds and initial values)."""
    found = memo.get(value)
    if found is not None:
        return found
    memo[value] = frozenset()  # a cycle through a loop contributes nothing more
    owner = value.owner
    if isinstance(owner, T.ProgramIdOp):
        found = frozenset([int(owner.axis)])
    elif isinstance(owner, Operation):
        found = frozenset().union(*(_grid_axes(v, memo) for v in owner.operands))
    else:  # a block argument: its op's operands (a loop's bounds, step and initial values)
        parent = owner.parent_op
        operands = parent.operands if parent is not None else []
        found = frozenset().union(*(_grid_axes(v, memo) for v in operands))
    memo[value] = found
    return found


class Streamed:
    """Which loads of a kernel are streamed: at offsets (view, indices, mask) that depend on
    every grid axis the kernel has, so that no other block reads what they read (from DRAM,
    not from L2 after another block's read). A kernel without grid axes streams nothing."""

    def __init__(self, kernel: FuncOp):
        self.axes = frozenset(int(op.axis) for op in kernel.walk() if isinstance(op, T.ProgramIdOp))
        self._memo: dict[Value, frozenset[int]] = {}

    def __call__(self, load: Operation) -> bool:
        if not self.axes:
            return False
        reached = frozenset().union(*(_grid_axes(v, self._memo) for v in load.operands))
        return self.axes <= reached


def streamed_load_bytes(kernel: FuncOp) -> int:
    """The bytes of one block's static tiles loaded together from memory no other block
    reads: loads (and gathers) whose operands depend on every grid axis the kernel has, summed
    per block of ops (a loop's body), the largest such sum. A tile read at
    offsets that leave out a grid axis (a gate `g[ts, :]` beside `x[ts, h, :]`: every block
    along h reads it) is read again by those blocks from L2, and keeps nothing in flight to
    DRAM after the first. 0 when the kernel has no such load, or no grid axis."""
    streamed = Streamed(kernel)
    per_block: dict[int, int] = {}
    for op in kernel.walk():
        if not isinstance(op, (T.LoadOp, G.GatherOp)):
            continue
        t = op.result.type
        if not (isinstance(t, TileType) and t.is_static and t.rank):
            continue
        if streamed(op):
            # Loads of one block of ops are in flight together; those of two loops (a loop
            # and its masked remainder) one after the other.
            key = id(op.parent)
            per_block[key] = per_block.get(key, 0) + prod(t.shape) * element_bytes(t.element)
    return max(per_block.values(), default=0)


def run_key(shape: tuple) -> tuple:
    """The key of a tile shape in `_access_vectors`: its dimensions other than 1. Shapes
    that differ only in unit dimensions (rotary's [BS, 1, 1, 64] load of x, reshaped to the
    [BS, 64] of its cos and sin tables) are one shape to the default layout, so that the
    reshape keeps every element in its thread and the elementwise ops that follow need no
    conversion."""
    return tuple(d for d in shape if d != 1)


def _access_vectors(kernel: FuncOp) -> dict[tuple, int]:
    """Per tile shape (`run_key`), the run each thread holds in the default layout: the widest
    access a load or store of that shape can make (`vectorize.widths_before_layouts`: 16 bytes
    when its view's facts allow, else as many elements as they prove; 3077-element f16 rows
    allow one). Runs longer than the access would spread a warp's accesses over more
    sectors."""
    from tilec.passes.vectorize import widths_before_layouts

    vectors: dict[tuple, int] = {}
    for op, width in widths_before_layouts(kernel).items():
        t = op.result.type if isinstance(op, (T.LoadOp, G.GatherOp)) else op.value.type
        if isinstance(t, TileType) and t.is_static:
            key = run_key(t.shape)
            vectors[key] = max(vectors.get(key, 1), width)
    # The shapes of a dot's operands and accumulator keep 16-byte runs (of the narrowest
    # element a tile of that shape has) whatever their global accesses can do: their layouts
    # serve the exchange through shared memory (16-byte st.shared into swizzled buffers, the
    # epilogue's conversion from #mma) and the FMA loop (a thread's run of columns is what
    # each k step reads of b: 4 rows x 8 columns, 12 shared loads a k step; one column of 16
    # rows, 18). With shorter runs matmul's pinned 128x128 kernel spilled (ptxas: 24 bytes).
    dot_shapes = {
        run_key(t.shape)
        for op in kernel.walk()
        if isinstance(op, T.DotOp)
        for t in (op.a.type, op.b.type, op.result.type)
        if isinstance(t, TileType) and t.is_static
    }
    for op in kernel.walk():
        for t in (r.type for r in op.results):
            key = run_key(t.shape) if isinstance(t, TileType) and t.is_static else None
            if key in dot_shapes:
                run = max(1, ACCESS_BYTES // element_bytes(t.element))
                vectors[key] = max(vectors.get(key, 1), run)
    return vectors


def _automatic_warps(kernel: FuncOp, grid: tuple[int, int] | None = None) -> tuple[int, str]:
    """The model's warps for `kernel` and why; `grid`: (the blocks its grid has at the
    launch's extents -- the jit's size classes, as split-reduction and pipeline count them --,
    the GPU's SMs), where known."""
    occupancy = _Occupancy.of(kernel, grid=grid)
    if occupancy is None:
        return AUTO_WARPS[0], "no tile is loaded or stored"
    return occupancy.choice, occupancy.reason()


@dataclass(frozen=True)
class _Candidate:
    warps: int
    registers: int  # estimated per thread
    blocks: int  # per SM
    limit: str  # what limits `blocks`
    in_flight: int  # bytes of the streamed tile per SM
    rows_in_warps: bool  # the kernel's row reductions stay inside warps
    loop_barriers: bool = False  # a loop reduces across the block's warps every iteration
    short_runs: bool = False  # runs under the widest access the tile's loads can make
    run: int = 1  # elements of a thread's access: the widest, or what the tile leaves a thread

    def distance(self) -> float:
        return abs(log2(self.in_flight / BYTES_IN_FLIGHT))

    def whole_rows(self) -> bool:
        """Rows inside warps, no barrier in a loop, enough in flight: the exception that wins
        outright."""
        return self.rows_in_warps and not self.loop_barriers and self.in_flight >= BYTES_IN_FLIGHT


@dataclass(frozen=True)
class _Occupancy:
    """The automatic warps of a kernel without tensor-core dots, from an occupancy model.

    A candidate's blocks per SM (threads, estimated registers, the block limit) times the
    bytes of the largest tile a load or store moves are its bytes in flight; the candidate
    nearest `BYTES_IN_FLIGHT` wins, ties to fewer warps. Except: where a kernel reduces along
    rows and some candidate keeps each row inside one warp (the reductions then need no
    shared memory and no barriers) with at least `BYTES_IN_FLIGHT` in flight, that one wins
    (softmax on 4 rows of 1024: 4 warps, one row each, measured level with 16 warps); and
    where a loop that streams tiles reduces across the warps every iteration
    (`_reduces_every_iteration`), the fewest warps with at least `BYTES_IN_FLIGHT` win: the
    block's load is not in flight while its warps reduce, and that takes longer on more."""

    tile: TileType  # the largest tile a load or store moves
    candidates: tuple[_Candidate, ...]
    excluded: tuple[str, ...]  # warps left out, and why
    choice: int
    streamed: int = 0  # a block's streamed loads' bytes, where they are not `tile`'s

    @staticmethod
    def of(
        kernel: FuncOp,
        registers: Callable[[int], int] | None = None,
        grid: tuple[int, int] | None = None,
    ) -> _Occupancy | None:
        """The model's choice for `kernel`; `registers(warps)` replaces the estimate (tests
        put ptxas's counts there); `grid`: (its blocks at the launch's extents, the GPU's
        SMs), without which `FEW_WARPS` are not weighed."""
        moved = [t for t in _moved_tiles(kernel) if t.rank]
        if not moved:
            return None
        tile = max(moved, key=lambda t: (prod(t.shape) * element_bytes(t.element), t.rank))
        elements = prod(tile.shape)
        # What a block keeps in flight to DRAM: its streamed loads together (swiglu's a and b),
        # else the largest tile it moves.
        streamed = streamed_load_bytes(kernel) or elements * element_bytes(tile.element)
        widest = max(1, ACCESS_BYTES // element_bytes(tile.element))
        vector = _access_vectors(kernel).get(run_key(tile.shape), widest)
        reduces_rows = any(
            isinstance(op, (T.ReduceOp, *SCAN_OPS)) and op.axis == op.input.type.rank - 1
            for op in kernel.walk()
        )
        # A reduction or scan inside a loop reduces every iteration (defer-reduction took
        # those it could out of the loop): across the block's warps unless rows stay in warps.
        in_loop = [op for op in kernel.walk() if _reduces_every_iteration(op)]
        vectors = _access_vectors(kernel)
        candidates, excluded = [], []
        for warps in (*FEW_WARPS, *AUTO_WARPS) if grid is not None else AUTO_WARPS:
            threads = warps * WARP_SIZE
            if elements > threads * MAX_ELEMENTS_PER_THREAD:
                if warps not in FEW_WARPS:
                    excluded.append(f"{warps}: over {MAX_ELEMENTS_PER_THREAD} elements a thread")
                continue
            used = registers(warps) if registers else estimate_registers(kernel, warps)
            limits = {
                "threads": MAX_THREADS_PER_SM // threads,
                "registers": REGISTERS_PER_SM // (used * threads),
                "the block limit": MAX_BLOCKS_PER_SM,
            }
            limit = min(limits, key=lambda k: limits[k])
            blocks = max(1, limits[limit])
            in_flight = blocks * streamed
            layout = default_layout(tile.shape, warps, vector)  # type: ignore[arg-type]
            rows_in_warps = reduces_rows and layout.warps_per_cta[-1] == 1
            barriers = any(_across_warps(op, warps, vectors) for op in in_loop)
            short = elements < threads * vector
            run = max(1, min(vector, elements // threads))
            candidates.append(
                _Candidate(
                    warps, used, blocks, limit, in_flight, rows_in_warps, barriers, short, run
                )
            )
        candidates, excluded = _admitted(
            candidates, excluded, vector * element_bytes(tile.element), grid
        )
        if not candidates:  # a tile too large for any: the most warps (fewest elements each)
            return _Occupancy(tile, (), tuple(excluded), AUTO_WARPS[-1])
        whole = [c for c in candidates if c.whole_rows()]
        enough = [c for c in candidates if c.loop_barriers and c.in_flight >= BYTES_IN_FLIGHT]
        if whole or not enough:
            best = min(whole or candidates, key=lambda c: (c.distance(), c.warps))
        else:
            best = min(enough, key=lambda c: c.warps)
        other = streamed if streamed != elements * element_bytes(tile.element) else 0
        return _Occupancy(tile, tuple(candidates), tuple(excluded), best.warps, other)

    def reason(self) -> str:
        t = self.tile
        size = prod(t.shape) * element_bytes(t.element)
        tile = f"tiles of {'x'.join(map(str, t.shape))} x {t.element} = {format_bytes(size)}"
        if self.streamed:
            tile += f" moved, {format_bytes(self.streamed)} of streamed loads a block"
        if not self.candidates:
            return f"{tile}: over {MAX_ELEMENTS_PER_THREAD} elements a thread on fewer warps"
        (best,) = [c for c in self.candidates if c.warps == self.choice]
        if best.whole_rows():
            why = (
                "rows stay inside warps (no shared memory for the reductions"
                + (
                    ", none across warps in the loop"
                    if any(c.loop_barriers for c in self.candidates)
                    else ""
                )
                + f") and at least {format_bytes(BYTES_IN_FLIGHT)} in flight"
            )
        elif best.loop_barriers and best.in_flight >= BYTES_IN_FLIGHT:
            why = (
                f"the fewest warps with at least {format_bytes(BYTES_IN_FLIGHT)} in flight: a "
                "loop reduces across the warps every iteration, and its load waits while they "
                "do -- longer the more warps"
            )
        else:
            why = f"nearest {format_bytes(BYTES_IN_FLIGHT)}"
        others = ", ".join(
            f"{_count(c.warps, 'warp')}: {format_bytes(c.in_flight)}"
            + (" and a loop's reductions across them" if c.loop_barriers else "")
            for c in self.candidates
            if c is not best
        )
        return (
            f"{tile}{'' if self.streamed else ' moved'}: {_count(best.blocks, 'block')} per SM (by {best.limit}; "
            f"~{best.registers} registers estimated) keep {format_bytes(best.in_flight)} in flight, "
            f"{why}"
            + (f"; {others}" if others else "")
            + (f"; not {'; '.join(self.excluded)}" if self.excluded else "")
        )


def _admitted(
    candidates: list[_Candidate],
    excluded: list[str],
    run_bytes: int,
    grid: tuple[int, int] | None,
) -> tuple[list[_Candidate], list[str]]:
    """The candidates the choice weighs: `FEW_WARPS` only where they remove a cost the fewest
    `AUTO_WARPS` pay (runs under `run_bytes`, which fewer warps widen; a barrier in a loop
    every iteration) and `grid`
    (its blocks, the SMs) lets them keep the SM's loads in flight (`_grid_in_flight`): more
    bytes than the fewest `AUTO_WARPS` keep on that grid (more of their blocks fit an SM at
    once), or `BYTES_IN_FLIGHT`, or -- where they remove short runs -- as many. Where the grid
    gives every SM only the blocks it would give 4 warps, fewer warps leave each block's work
    to fewer threads: each thread's elements grow fourfold. Side by side in one wider access
    that costs nothing (an embedding bag's 128-float rows at 600 to 1500 bags, 5 to 11 blocks
    an SM on any warps: one warp 0.75-0.78 of 4 warps' time, H100 208240e); in a chain the
    thread runs in order it does (scans over 256 and 1000 rows on one warp: 1.08-1.16x). Then
    runs under `run_bytes` only on the fewest warps left (each access would be narrower)."""
    usual = next((c for c in candidates if c.warps == AUTO_WARPS[0]), None)

    def pays_less(c: _Candidate) -> bool:
        # (4 warps are left out only with too many elements a thread: so are 1 and 2 then.)
        if usual is None or grid is None:
            return False
        removes_runs = usual.short_runs and c.run > usual.run  # wider accesses a thread
        removes_barriers = usual.loop_barriers and not c.loop_barriers
        if not (removes_runs or removes_barriers):
            return False
        held, usual_held = _grid_in_flight(c, grid), _grid_in_flight(usual, grid)
        if held >= BYTES_IN_FLIGHT or held > usual_held:
            return True
        # As many blocks an SM as 4 warps get (the grid holds fewer than either fits): the same
        # bytes in flight. A wider run a thread is one access for four, elements it handles
        # side by side; fewer warps that only save a barrier give each thread a longer chain
        # it runs in order (a scan's).
        return removes_runs and held == usual_held

    kept = [c for c in candidates if c.warps not in FEW_WARPS or pays_less(c)]
    out = []
    for c in kept:
        if c.short_runs and c is not kept[0]:
            excluded.append(f"{c.warps}: runs under {run_bytes} bytes")
        else:
            out.append(c)
    return out, excluded


def _grid_in_flight(c: _Candidate, grid: tuple[int, int]) -> float:
    """The bytes `c`'s blocks keep in flight per SM on `grid` (its blocks, the SMs): as many of
    them as fit an SM (`c.blocks`), or as the grid has for each SM where it has fewer."""
    return min(c.blocks, grid[0] / grid[1]) * (c.in_flight / c.blocks)


def _across_warps(op: Operation, warps: int, vectors: dict[tuple, int]) -> bool:
    """Whether reduction or scan `op` combines across warps on `warps` warps: its input's
    default layout spreads the reduced axis over several warps, each holding distinct
    elements of it (warps that only replicate the axis reduce it inside each)."""
    t = op.input.type
    if not (isinstance(t, TileType) and t.is_static and t.rank):
        return True
    axis = int(op.axis)
    widest = max(1, ACCESS_BYTES // element_bytes(t.element))
    layout = default_layout(t.shape, warps, vectors.get(run_key(t.shape), widest))
    inside = layout.size_per_thread[axis] * layout.threads_per_warp[axis]
    return layout.warps_per_cta[axis] > 1 and t.shape[axis] > inside


def _reduces_every_iteration(op: Operation) -> bool:
    """Whether reduction or scan `op` runs every iteration of a loop that streams tiles and
    stays there: a scan, or a reduction `defer-reduction` does not move past the loop
    (`deferrable`: row sums' `acc += sum(x, axis=1)` moves, logsumexp's running maximum,
    which rescales the sum, stays)."""
    if not isinstance(op, (T.ReduceOp, *SCAN_OPS)) or not _in_loading_loop(op):
        return False
    return not deferrable(op)


def _in_loading_loop(op: Operation) -> bool:
    """Whether `op` is nested in a loop (`scf.for`) that loads from global memory: a loop
    that streams tiles, not split-reduction's combine over its workspace."""
    parent = op.parent_op
    while parent is not None and not isinstance(parent, FuncOp):
        if isinstance(parent, scf.ForOp) and any(isinstance(o, T.LoadOp) for o in parent.walk()):
            return True
        parent = parent.parent_op
    return False


_ALIAS_OPS = (T.BroadcastOp, T.ExpandDimsOp, T.ReshapeOp)
_SOURCE_OPS = (T.FullOp, T.SplatOp, T.IotaOp)


def estimate_registers(kernel: FuncOp, warps: int) -> int:
    """Registers a thread of `kernel` on `warps` warps needs, before ptxas: the most 32-bit
    words of tiles live across one op (defined before it, used after it), plus
    `BASE_REGISTERS`, in ptxas's granule. A tile of n elements holds ceil(n / threads) of them
    in a thread, whatever its layout (f16 two to a word, i1 four). What ptxas does, modelled:
    - tiles made from constants, iotas, splats and extents alone cost nothing (rematerialized,
      or folded once the launch's extents are known: the padding masks);
    - broadcasts, `expand_dims` and reshapes share their operand's registers;
    - a load issues as early as its operands allow (ptxas hoists the loads of a layernorm's
      weights above its reductions), so it is live from there;
    - a use inside a loop of a value defined outside it keeps the value to the loop's end, and
      loop-carried values live through their loop (its results only after it: inside, the
      carried value is the block argument).
    Elementwise chains between reductions do not count (each element is computed and used at
    once); what a reduction or a loop keeps waiting is what needs the registers."""
    threads = warps * WARP_SIZE
    ops = list(kernel.walk())
    position = {op: i for i, op in enumerate(ops)}
    last = {op: position[op] + sum(1 for _ in op.walk()) - 1 for op in ops if op.regions}
    free: set[Value] = set()
    root: dict[Value, Value] = {}
    spans: dict[Value, list[int]] = {}  # value -> [live from, last used]

    def defined(v: Value) -> int:  # a block argument: where its op starts (0: the kernel's)
        return position[v.owner] if isinstance(v.owner, Operation) else enclosing(v.owner)

    def enclosing(op: Operation | Block) -> int:
        return position.get(op.parent_op, 0)  # type: ignore[arg-type]

    points: list[int] = []  # where to count: the ops that compute, load or store tiles
    for op in ops:
        here = position[op]
        tiles = [v for v in op.operands if isinstance(v.type, TileType)]
        if isinstance(op, _SOURCE_OPS) or (
            op.has_trait(Pure) and not op.regions and all(v in free for v in tiles)
        ):
            free.update(op.results)
            continue
        if isinstance(op, _ALIAS_OPS):
            (source,) = op.operands
            root[op.result] = root.get(source, source)
            continue
        if tiles or any(isinstance(v.type, TileType) for v in op.results) or op.regions:
            points.append(here)
        start = here
        if isinstance(op, T.LoadOp):
            start = max([defined(v) for v in op.operands] + [enclosing(op)])
        elif op.regions:  # a loop's or branch's results exist once its body has run
            start = last[op]
        for v in op.results:
            if isinstance(v.type, TileType) and v.type.is_static:
                spans[v] = [start, here]
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    if isinstance(arg.type, TileType) and arg.type.is_static:
                        spans[arg] = [here, last[op]]
        for v in op.operands:
            span = spans.get(root.get(v, v))
            if span is None:
                continue
            used = here
            parent = op.parent_op
            while parent is not None and parent is not kernel:
                if parent.regions and not position[parent] <= span[0] <= last[parent]:
                    used = max(used, last[parent])
                parent = parent.parent_op
            span[1] = max(span[1], used)
    across = [0.0] * len(ops)
    for v, (start, stop) in spans.items():
        t = v.type
        words = max(1, -(-prod(t.shape) // threads)) * element_bytes(t.element) / 4
        for i in range(start + 1, stop):
            across[i] += words
    peak = max((across[i] for i in points), default=0.0) + BASE_REGISTERS
    granules = -(-ceil(peak) // REGISTER_GRANULE)
    return min(MAX_REGISTERS_PER_THREAD, granules * REGISTER_GRANULE)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
