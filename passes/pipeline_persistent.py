"""Persistent blocks for a kernel whose loop `pipeline` fills by the TMA unit (its option
`persistent`): a grid of as many blocks as the GPU holds at once walks the output tiles, and
each block issues the next tile's first copies before this tile's epilogue.

Launched one block per output tile, a GEMM pays a fixed cost per tile on top of its main loop:
the block starts, initializes its barriers, issues its first copies and waits their whole
latency before the first wgmma, and after the loop its epilogue (conversion, layout exchange,
stores) keeps the tensor cores idle too. On the H200 that cost was about 7 us a wave of
128x256 tiles (2026-12-03: 4000x3000xK timed at K = 500 to 4000, tilec's time grew 41 us per
1000 of K from 23 us at K = 0, cuBLAS's 33 us from 12 us). With persistent blocks a block
starts once; while it runs one tile's epilogue, the TMA unit already fills the stages with the
next tile's first steps, so that tile's first wgmma finds its operands landed.

The rewrite, of what `pipeline` left (`PipelinedLoop`):

    %tiles = n0 * n1 (* n2)           n_a = ceil(extent / tile) of each axis of tilec.grid
    %p = tile.program_id 0
    (prologue of tile %p: its coordinates, the copies of steps 0 .. L-1, from step 0)
    scf.for %t = %p to %tiles step %P iter_args(%base = 0) {     // %P = tile.num_programs 0
      (coordinates of %t; the main loop, its step index counted from %base)
      %next = %t + %P
      (prologue of %next: its copies predicated on %next < %tiles, steps %base + trips ..)
      (epilogue of %t)
      scf.yield %base + trips
    } {tilec.loop = "range"}
    tile.barrier; tile.mbarrier_inval

Tile t's coordinates are its index in launch order (axis 0 fastest, as the hardware launches
blocks), so at any moment the tiles in flight are neighbours, as launched blocks were; the
kernel's own block order (tiling's grouped order) then maps them as it mapped block ids, its
`tile.num_programs` being the tile counts (the kernel's grid is the tiles, not the launch). The
step index runs on across tiles, so each slot's mbarrier completes one phase per use and the
phase parity `(step / S) % 2` stays right; the next tile's first copies fill the slots of
steps already waited for by every thread (the argument of `pipeline`'s in-loop copies, one
tile later). Its epilogue's scratch must not share bytes with the stages then, so the stages
are chosen with the epilogue's scratch reserved (`epilogue_scratch_bytes`). The launch grid is
`min(tiles, SMs x blocks per SM)` along x (the runtime's `tilec.runtime.launcher`; the
interpreter launches `tilec.interp.launch.PERSISTENT_BLOCKS`, so that blocks walk several tiles there too); the
kernel says so with `tilec.persistent`.

**Measured, and why it is on only for clusters** (H200, 2026-12-03; docs/benchmarks.md, "Block
indices in 32 bits"): first 1.17-1.45x the time of a block a tile. Three causes were found and
fixed: the epilogue's 66 KiB scratch cost a stage (now the exchange goes in row pieces,
`chunks`), the lowering did not recognize the main loop inside the walk as the pipeline's, and
-- the one that cost the time -- the walk divided tile indices in 64 bits, a subroutine call
in SASS, for which nvJitLink serialized every wgmma (`tiling_rewrites.block_divmod`). Since:
0.97-1.05x a block a tile on seven GEMMs (`tilec.benchmarks.persistent_probe`, now
`gemm_flight_probe --configs schedule`), no gain. With one block an SM and no producer warp the
next tile's copies overlap only the epilogue's stores; for the epilogue to overlap the next
tile's wgmmas, warp specialization is the next step.

**Clustered kernels are the exception** (`WITH_CLUSTERS`, the default of option `persistent`).
A block of a cluster (`pipeline_cluster.py`) pays more a tile than a lone one: two cluster-wide
barriers (`barrier.cluster.arrive`/`wait`: after its mbarriers are initialized, so that the
other block's multicasts find them, and before it exits, so that no multicast lands in a block
gone), and a launch that waits for two SMs of one GPC free together. Walking tiles, a block pays
them once. Timed on the H100 (2026-12-06, `gemm_flight_probe --configs schedule`, the clustered
heuristic against it with `persistent = 1`): 4000x3000x1000 0.893 of the time, and on shapes the
rule was not written for, `a @ b.T` 4096x3000x1000 0.898, 3000x5000x2000 0.967; unclustered
GEMMs stay as they were (2000x1000x3000 1.0). So -- option `persistent`: 2 (the default)
where `pipeline` clusters the kernel, as -1, else 0; -1 wherever the kernel allows; 0 never; 1
required. The tuner searches it (`pipeline.persistent`).

**Several loops** (attention's main loop and the masked tail `mask-bounds` splits off, the
causal diagonal) are walked only by a warp-specialized kernel: its producer and its consumers
each run every loop of a tile, the step index counted on from loop to loop and from tile to
tile (passes/pipeline_warp_specialize.py). Attention's per-block cost beyond its key steps was
4.3-5.1 us at d128 on the H200 (docs/benchmarks.md, "Attention's fixed cost a block"); the
walk's epilogue scratch costs d128 a stage (3 -> 2), which `persistent = 1` accepts where two
remain. Off by default until timed (docs/benchmarks/pending-2026-12-07-attention.json).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tilec.diagnostics import TileError
from tilec.dialects import arith, scf, shared
from tilec.dialects import tile as T
from tilec.dialects import tma as TM
from tilec.dialects.builtin import CLUSTER_ATTRIBUTE, PERSISTENT_ATTRIBUTE, FuncOp
from tilec.ir.attributes import IntegerAttr, StringAttr, UnitAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Block, BlockArgument, Operation, OpResult, Region, Value
from tilec.ir.folding import constant_value
from tilec.ir.types import TensorType, index
from tilec.lowering.exchange import chunkable, op_scratch_bytes, remap_chunks
from tilec.lowering.wgmma import is_wgmma_dot
from tilec.passes.specialize import attribute_pairs
from tilec.passes.tiling_rewrites import block_divmod
from tilec.passmanager import PassContext

WITH_CLUSTERS = (
    2  # option persistent: where the kernel is clustered (the walk pays their cost once)
)

__all__ = [
    "WITH_CLUSTERS",
    "PipelinedLoop",
    "TileWalk",
    "epilogue_scratch_bytes",
    "make_persistent",
    "persist",
    "persistent_blocker",
    "persistent_loop",
    "rebase_steps",
    "reserve_epilogue",
    "tile_walk",
    "trip_count",
    "walk_loop",
]


@dataclass
class PipelinedLoop:
    """What `pipeline` made of one loop whose copies the TMA unit makes."""

    loop: scf.ForOp
    stages: int
    step_index: Value  # the loop's step i, from 0 at its lower bound
    prologue: list[Operation] = field(default_factory=list)  # the copies of steps 0 .. L-1
    after: list[Operation] = field(default_factory=list)  # the barrier, mbarrier_inval


def _top_level_loops(kernel: FuncOp) -> list[scf.ForOp]:
    return [op for op in kernel.body.block.ops if isinstance(op, scf.ForOp)]


def persistent_blocker(kernel: FuncOp, loops: list[scf.ForOp]) -> str:
    """Why the kernel of `loops` (GEMM-like loops the TMA unit will fill, in order; several
    only where warp specialization walks them: attention's main loop and its masked tail)
    cannot be made persistent ("" when it can)."""
    for loop in loops:
        if loop.parent is not kernel.body.block:
            return "its pipelined loop is nested in other control flow"
    if len(_top_level_loops(kernel)) != len(loops) or any(
        isinstance(op, (scf.ForOp, scf.IfOp))
        for loop in loops
        for op in loop.body.walk()
        if op is not loop
    ):
        return "the kernel has other loops or branches (its main loops are walked per tile)"
    if not all(any(is_wgmma_dot(op) for op in loop.body.block.ops) for loop in loops):
        return "its loop feeds no wgmma dot"
    grid = attribute_pairs(kernel, "tilec.grid")
    if not grid:
        return "the kernel has no grid"
    if "tilec.split" in kernel.attributes:
        return "the kernel is split (its grid has a split axis)"
    for dim, _ in grid:
        if _extent_source(kernel, str(dim)) is None:
            return f"no tensor argument has the grid dimension {dim}"
    return ""


def persistent_loop(
    kernel: FuncOp,
    loops: list[scf.ForOp],
    copies: str,
    option: int,
    ctx: PassContext,
    specialized: bool = False,
) -> scf.ForOp | None:
    """The first loop persistent blocks will walk (option `persistent`: -1 where allowed, 1
    required), of the kernel's streamed `loops`, whose copies the TMA unit makes unless
    `copies` says why not; None, with a remark (or an error when required), when there is
    none. Several loops are walked only by warp-specialized kernels (`specialized`: the
    producer and the consumers each walk every loop of a tile, their steps counted on)."""
    loop = loops[0]
    why = (
        "more than one loop streams tiles into shared memory, and the kernel is not "
        "warp-specialized"
        if len(loops) != 1 and not specialized
        else ""
    )
    why = why or persistent_blocker(kernel, loops) or copies
    if not why:
        return loop
    if option == 1:
        raise TileError(f"pipeline: option persistent = 1, but {why}", loop.loc)
    if any(is_wgmma_dot(op) for op in loop.body.block.ops):
        ctx.remark(kernel, f"not persistent: {why}")
    return None


def reserve_epilogue(
    kernel: FuncOp,
    loop: scf.ForOp,
    stages_for: Callable[[int], int],
    option: int,
    ctx: PassContext,
) -> int | None:
    """With persistent blocks the epilogue's scratch may not share the stages' bytes: the
    fewest pieces of its layout exchanges (`chunks`: 1, 2, 4, ...) that keep the stages the
    kernel has without it (`stages_for(bytes kept)`); the bytes kept, or None (a remark) when
    no split does. Required (`option` 1), the walk takes the stage where at least 2 remain
    (attention at d128: 3 stages without the walk, 2 with it, as FlashAttention-3 runs)."""
    wanted = stages_for(0)
    ops = list(loop.parent.ops)
    # The exchanges through scratch (a conversion within each thread's registers has none).
    remaps = [
        o
        for after in ops[ops.index(loop) + 1 :]
        for o in after.walk()
        if isinstance(o, T.ConvertLayoutOp) and op_scratch_bytes(o) > 0
    ]
    pieces = 1
    while True:
        for o in remaps if pieces > 1 else ():
            o.attributes["chunks"] = IntegerAttr(pieces)
        reserve = epilogue_scratch_bytes(loop)
        if stages_for(reserve) == wanted:
            return reserve
        # Only a layout exchange splits; with none (or none that splits further) more
        # pieces cannot shrink the scratch.
        if not remaps or not all(chunkable(o, pieces * 2) for o in remaps):
            break
        pieces *= 2
    for o in remaps:
        o.attributes.pop("chunks", None)
    split = f", even split in {pieces} pieces," if pieces > 1 else ""
    why = (
        f"its epilogue's scratch ({reserve} bytes{split}) would cost a pipeline stage "
        f"({wanted} without it)"
    )
    if option == 1 and stages_for(reserve) >= 2:
        ctx.remark(kernel, f"persistent (option persistent = 1): {why}, which it takes")
        return reserve
    if option == 1:
        raise TileError(f"pipeline: option persistent = 1, but {why}", loop.loc)
    ctx.remark(kernel, f"not persistent: {why}")
    return None


def persist(
    kernel: FuncOp,
    loop: scf.ForOp,
    pipelined: PipelinedLoop | None,
    reserve: int,
    option: int,
    ctx: PassContext,
) -> None:
    """Make `kernel` persistent around its pipelined `loop` (`pipelined`: what `pipeline`
    made of it, None when its copies did not go to the TMA unit after all), with a remark."""
    if pipelined is None:
        if option == 1:
            raise TileError(
                "pipeline: option persistent = 1, but the main loop's copies are not made by "
                "the TMA unit",
                loop.loc,
            )
        return
    make_persistent(kernel, pipelined)
    pieces = max((remap_chunks(op) for op in kernel.walk()), default=1)
    ctx.remark(
        kernel,
        "persistent blocks: as many blocks as the GPU holds walk the output tiles (launch "
        "order); each issues the next tile's first copies before this tile's epilogue, whose "
        f"scratch ({reserve} bytes"
        + (f", the tile exchanged in {pieces} pieces" if pieces > 1 else "")
        + ") stays out of the stages",
    )


def epilogue_scratch_bytes(loop: scf.ForOp) -> int:
    """Shared-memory scratch the ops after `loop` use (layout exchanges of the epilogue): with
    persistent blocks it may not share bytes with the stages, which the next tile's copies
    fill meanwhile."""
    ops = list(loop.parent.ops)
    after = ops[ops.index(loop) + 1 :]
    return max((op_scratch_bytes(o) for a in after for o in a.walk()), default=0)


def _extent_source(kernel: FuncOp, dim: str) -> tuple[BlockArgument, int] | None:
    """A tensor argument and axis whose extent is `dim`."""
    for arg in kernel.arguments:
        if isinstance(arg.type, TensorType):
            for axis, d in enumerate(arg.type.shape):
                if str(d) == dim:
                    return arg, axis
    return None


@dataclass
class TileWalk:
    """What a kernel walking its output tiles has, made by `tile_walk` at its start: the tile
    counts of its grid's axes, their product, the block's first tile (its program id along
    x), and that tile's coordinates, which the kernel's program ids now are."""

    counts: list[Value]
    total: Value
    first: Value
    first_coords: list[Value]

    def coordinates(self, b: Builder, t: Value) -> list[Value]:
        """Tile `t`'s block coordinates, one per grid axis (axis 0 fastest)."""
        coords, rest = [], t
        for axis, count in enumerate(self.counts):
            if axis == len(self.counts) - 1:
                coords.append(rest)
            else:
                coords.append(block_divmod(b, rest, count, quotient=False))
                rest = block_divmod(b, rest, count)
        return coords

    def per_tile(self, ops: list[Operation]) -> list[Operation]:
        """The ops of `ops` (in order) whose values depend on the tile's coordinates."""
        tile_values = _dependents(ops, set(self.first_coords))
        return [op for op in ops if id(op) in tile_values]


def _const(b: Builder, value: int) -> Value:
    return b.create(arith.ConstantOp, value=IntegerAttr(value), result_types=[index]).result


def tile_walk(kernel: FuncOp, loc) -> TileWalk:
    """Prepare `kernel` (`persistent_blocker` allows it) to walk its output tiles: at its
    start the tile counts and the first tile's coordinates, which replace its program ids;
    its `tile.num_programs` become the tile counts (the grouped block order maps tiles as it
    mapped blocks). The walks themselves are the caller's (`make_persistent`,
    passes/pipeline_warp_specialize.py)."""
    block = kernel.body.block
    grid = attribute_pairs(kernel, "tilec.grid")
    tiles = dict(attribute_pairs(kernel, "tilec.tile_sizes"))
    attr = kernel.attributes.get(CLUSTER_ATTRIBUTE)
    cluster = [int(e.value) for e in attr.elements] if attr is not None else []
    entry = Builder.at_start(block, loc)
    counts = []
    for dim, symbol in grid:
        view, axis = _extent_source(kernel, str(dim))  # type: ignore[misc]
        extent = entry.create(T.DimOp, view=view, axis=IntegerAttr(axis)).result
        size = tiles[str(symbol)] if not isinstance(symbol, int) else symbol
        padded = entry.create(arith.AddIOp, lhs=extent, rhs=_const(entry, int(size) - 1)).result
        count = entry.create(arith.DivSIOp, lhs=padded, rhs=_const(entry, int(size))).result
        c = cluster[len(counts)] if len(counts) < len(cluster) else 1
        if c > 1:  # whole clusters (passes/pipeline_cluster.py): pairs of tiles along it
            more = entry.create(arith.AddIOp, lhs=count, rhs=_const(entry, c - 1)).result
            whole = entry.create(arith.DivSIOp, lhs=more, rhs=_const(entry, c)).result
            count = entry.create(arith.MulIOp, lhs=whole, rhs=_const(entry, c)).result
        counts.append(count)
    total = counts[0]
    for c in counts[1:]:
        total = entry.create(arith.MulIOp, lhs=total, rhs=c).result
    total.name_hint = "tiles"
    first = entry.create(T.ProgramIdOp, axis=IntegerAttr(0)).result
    first.name_hint = "first_tile"
    for op in [op for op in kernel.walk() if isinstance(op, T.NumProgramsOp)]:
        axis = op.attributes["axis"].value
        op.result.replace_all_uses_with(counts[axis] if axis < len(counts) else _const(entry, 1))
        op.erase()
    walk = TileWalk(counts, total, first, [])
    walk.first_coords = walk.coordinates(entry, first)
    for op in [op for op in kernel.walk() if isinstance(op, T.ProgramIdOp)]:
        if op.result is not first:
            op.result.replace_all_uses_with(walk.first_coords[op.attributes["axis"].value])
            op.erase()
    kernel.attributes[PERSISTENT_ATTRIBUTE] = UnitAttr()
    return walk


def walk_loop(b: Builder, walk: TileWalk, loc) -> tuple[scf.ForOp, Value, Value]:
    """`scf.for %t = first to tiles step (blocks) iter_args(%step_base = 0)`, a range loop,
    before `b`'s point: the loop, its tile and its step base."""
    step = b.create(T.NumProgramsOp, axis=IntegerAttr(0)).result
    body = Block([index, index])
    loop = b.create(
        scf.ForOp,
        lower=walk.first,
        upper=walk.total,
        step=step,
        inits=[_const(b, 0)],
        body=Region([body]),
        loc=loc,
    )
    loop.attributes["tilec.loop"] = StringAttr("range")
    t, base = body.args
    t.name_hint, base.name_hint = "tile", "step_base"
    return loop, t, base


def make_persistent(kernel: FuncOp, pipelined: PipelinedLoop) -> None:
    """Rewrite `kernel` (its one pipelined loop `pipelined`) for persistent blocks (the
    module docstring)."""
    loop = pipelined.loop
    block = kernel.body.block
    tw = tile_walk(kernel, loop.loc)
    first_coords = tw.first_coords

    def remap(coords: list[Value]) -> dict[Value, Value]:
        return dict(zip(first_coords, coords))

    ops = list(block.ops)
    at = ops.index(loop)
    before_loop, after_loop = ops[:at], ops[at + 1 : -1]  # the last is the return
    prologue = set(map(id, pipelined.prologue))
    after_ops = set(map(id, pipelined.after))
    # The tile's own values: what depends on its coordinates, before the loop (not the copies).
    tile_values = _dependents(before_loop, set(first_coords))
    per_tile = [op for op in before_loop if id(op) in tile_values and id(op) not in prologue]

    b = Builder.before_op(loop)
    walk, t, base = walk_loop(b, tw, loop.loc)
    total, step = tw.total, walk.step
    inner = Builder.at_end(walk.body.block, loop.loc)

    # This tile: its values, its main loop counting steps from `base`.
    mapping = remap(tw.coordinates(inner, t))
    for op in per_tile:
        inner.insert(op.clone(mapping))
    main = inner.insert(loop.clone(mapping))
    index_here = mapping[pipelined.step_index]
    rebase_steps(index_here, base)
    trips = trip_count(inner, main)
    next_base = inner.create(arith.AddIOp, lhs=base, rhs=trips).result
    next_base.name_hint = "next_step_base"

    # The next tile's first copies, before this tile's epilogue.
    following = inner.create(arith.AddIOp, lhs=t, rhs=step).result
    following.name_hint = "next_tile"
    has_next = inner.create(
        arith.CmpIOp, predicate=StringAttr("slt"), lhs=following, rhs=total
    ).result
    ahead = remap(tw.coordinates(inner, following))
    stages = _const(inner, pipelined.stages)
    for op in before_loop:
        if id(op) in prologue or (id(op) in tile_values and id(op) not in prologue):
            if id(op) in prologue and _is_slot_constant(op, pipelined):
                j = constant_value(op.result).value
                shifted = inner.create(arith.AddIOp, lhs=next_base, rhs=_const(inner, j)).result
                ahead[op.result] = inner.create(arith.RemSIOp, lhs=shifted, rhs=stages).result
                continue
            if isinstance(op, (TM.MbarrierExpectOp, TM.TmaCopyOp)):
                pred = ahead.get(op.pred, op.pred)
                ahead[op.pred] = inner.create(arith.AndIOp, lhs=pred, rhs=has_next).result
                inner.insert(op.clone(ahead))
                ahead[op.pred] = pred
                continue
            inner.insert(op.clone(ahead))

    # This tile's epilogue.
    for op in after_loop:
        if id(op) not in after_ops:
            inner.insert(op.clone(mapping))
    # A tile whose loop runs no step has no barrier between two epilogues' scratch.
    inner.create(shared.BarrierOp)
    inner.create(scf.YieldOp, values=[next_base])

    end = Builder.after_op(walk)
    for op in pipelined.after:
        end.insert(op.clone({}))
    for op in reversed(after_loop):
        op.erase()
    loop.erase()


def _dependents(ops: list[Operation], roots: set[Value]) -> set[int]:
    """The ops of `ops` (in order) that use a root or such an op's result."""
    tainted = set(roots)
    out: set[int] = set()
    for op in ops:
        if any(v in tainted for v in op.operands) or any(
            v in tainted for inner in op.walk() for v in inner.operands
        ):
            out.add(id(op))
            tainted.update(op.results)
    return out


def _is_slot_constant(op: Operation, pipelined: PipelinedLoop) -> bool:
    """A constant the prologue's copies use as their slot (step j of the prologue), and
    nothing else does."""
    if not isinstance(op, arith.ConstantOp):
        return False
    prologue = set(map(id, pipelined.prologue))

    def as_slot(u: Operation) -> bool:
        if isinstance(u, TM.MbarrierExpectOp):
            return op.result is u.slot and op.result is not u.pred
        if isinstance(u, TM.TmaCopyOp):
            slots = (u.slot, u.barrier_slot)
            return op.result in slots and all(v is not op.result for v in u.offsets)
        return False

    uses = op.result.uses
    return bool(uses) and all(id(u) in prologue and as_slot(u) for u in uses)


def rebase_steps(step_index: Value, base: Value) -> None:
    """Count the loop's steps from `base`: every use of `step_index` takes `base + i`."""
    assert isinstance(step_index, OpResult)
    b = Builder.after_op(step_index.op)
    shifted = b.create(arith.AddIOp, lhs=step_index, rhs=base).result
    shifted.name_hint = "step"
    for use in list(step_index.uses):
        if use is not shifted.op:
            for i, v in enumerate(use.operands):
                if v is step_index:
                    use.set_operand(i, shifted)


def trip_count(b: Builder, loop: scf.ForOp) -> Value:
    """ceil((upper - lower) / step), at least 0."""
    span = b.create(arith.SubIOp, lhs=loop.upper, rhs=loop.lower).result
    padded = b.create(
        arith.AddIOp,
        lhs=span,
        rhs=b.create(arith.SubIOp, lhs=loop.step, rhs=_const(b, 1)).result,
    ).result
    trips = b.create(arith.DivSIOp, lhs=padded, rhs=loop.step).result
    return b.create(arith.MaxSIOp, lhs=trips, rhs=_const(b, 0)).result
