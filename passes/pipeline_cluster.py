"""Thread-block clusters for warp-specialized GEMMs (`pipeline`'s option `cluster`): two blocks
that compute neighbouring output tiles share the operand tile both of them read, each copying
half of it by TMA multicast into both blocks' shared memory.

Why: a block of a 128x256 GEMM tile asks the TMA unit for a 64x256 tile of `b` and a 128x64
tile of `a` every step. Two blocks a row of tiles apart read the same tile of `b`; in a
cluster each asks for half of it and the unit writes both halves into both blocks, so the
SMs ask for `b` half as often and L2 serves it once for two blocks. That is what cuBLAS's
2x1-cluster kernels do, and it is what rows that straddle 128-byte lines need most: each such
row costs the unit two line requests (`pipeline_tma.straddling_rows`; docs/benchmarks.md,
"Warp specialization, and the rows that straddle lines": 4000x3000x1000 at 1.37-1.45x cuBLAS).

What changes in a kernel `pipeline_warp_specialize` made (`tilec.dialects.tma` shows the ops):

* the kernel gets `tilec.cluster` -- 2 blocks along the grid axis that tiles the rows of the
  operand not shared (`a`'s M), 1 along the others; the launch rounds that axis up to even;
* the shared operand's copies (the one with the most bytes a step whose slot splits into two
  parts of whole boxes; never a folded copy) get `multicast = 2`; each block's full mbarrier
  still expects the whole step's bytes, half of the shared tile landing from the other block;
* the consumers release a stage on the empty mbarrier of *both* blocks (`tile.mbarrier_arrive
  {cluster = 2}`, the init counting twice the arrivals): a producer refills a slot only when
  the consumers of both blocks are done with it, since its multicast writes both;
* the barrier that publishes the mbarrier inits becomes a `tile.cluster_barrier` (no block may
  reach another's barriers before their init), and another one after the specialized regions
  comes before the invalidations (no block leaves, or invalidates its barriers, while the other
  may still arrive on them);
* the consumers' epilogue runs only where the block's rows lie inside the tensor: the block
  that pads an odd number of row tiles to whole clusters copies and releases like the others,
  but stores nothing.

Whether (option `cluster`): 2 asks for clusters (an error says why not), 1 none, -1 -- the
default -- pairs where `cluster_motive` finds the operand they would share asking the TMA unit
for two lines a box row (rows known 16-byte aligned only), and says so in a remark; a kernel
that then cannot run in clusters gets a remark saying why, not an error.

When (`_plan`, which says why not): the kernel is warp-specialized and not split, its grid
names one axis whose dimension the shared operand does not have (the cluster's axis), the
shared tiles' offsets come through no load, and a grouped block order (`tilec.group_m`) groups
an even number of tiles along that axis, axis 0 -- so that the two blocks of a cluster,
consecutive along x, always compute tiles of the same columns and read the same tile of the
shared operand. With persistent blocks the cluster must span axis 0, along which the blocks
walk the tiles (`announce_cluster` has the walk count them in pairs). The interpreter runs the
blocks of a cluster together and checks the protocol (`tilec.interp.cluster`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from tilec.diagnostics import TileError
from tilec.dialects import arith, scf, shared
from tilec.dialects import tile as T
from tilec.dialects import tma as TM
from tilec.dialects.builtin import CLUSTER_ATTRIBUTE, PERSISTENT_ATTRIBUTE, WALK_ATTRIBUTE, FuncOp
from tilec.dialects.warp_specialize import WarpSpecializeOp
from tilec.ir.attributes import ArrayAttr, IntegerAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Block, Operation, Pure, Region, Value
from tilec.ir.types import TensorType, TileType
from tilec.lowering.layouts import element_bytes
from tilec.lowering.shared_memory import slot_bytes
from tilec.lowering.tma import box_plan, folded_plan
from tilec.passes.pipeline_persistent import WITH_CLUSTERS
from tilec.passes.pipeline_tma import TMA_ARCHES, straddling_rows
from tilec.passmanager import PassContext

__all__ = [
    "AUTOMATIC",
    "CLUSTER_BLOCKS",
    "announce_cluster",
    "cluster_axis",
    "cluster_kernel",
    "cluster_motive",
    "resolve_cluster_defaults",
]

CLUSTER_BLOCKS = 2  # blocks a cluster: the pair cuBLAS's GEMMs use
AUTOMATIC = -1  # option cluster: where `cluster_motive` finds the TMA unit's requests the bound


@dataclass
class _Plan:
    """How a specialized kernel runs in clusters."""

    op: WarpSpecializeOp
    axis: int  # the grid axis the cluster spans
    dim: str  # the dimension that axis tiles
    shared: list[TM.TmaCopyOp]  # the copies of the operand both blocks read
    rows: tuple[Value, Value]  # (a copy's offset along `dim`, the view it reads)
    row_axis: int  # the view's dimension that is `dim`


def resolve_cluster_defaults(
    kernel: FuncOp, streams: list[Any], options: Any, ctx: PassContext
) -> Any:
    """pipeline's `options` with the defaults of options cluster and persistent resolved.
    Cluster's -1: 2 where `cluster_motive` finds the operand a cluster would share asking the
    TMA unit for twice the lines (and warp specialization and the TMA unit are not turned
    off), else 1. Then persistent's `WITH_CLUSTERS`: -1 (where the kernel allows) for a
    clustered kernel whose clusters span grid axis 0, the axis persistent blocks walk first
    (so that a cluster's blocks walk neighbouring tiles), or for a kernel `tiling` planned a
    walk for (`WALK_ATTRIBUTE`: its SM model, `wgmma_model.walk_clocks`) unless it is
    clustered along another axis (the clusters' gain was measured the larger), else 0
    (pipeline_persistent.py says why). `streams` are `pipeline._Stream`s."""
    if options.cluster == AUTOMATIC:
        why = ""
        if options.arch in TMA_ARCHES and options.tma != 0 and options.warp_specialize != 0:
            why = cluster_motive(kernel, streams)
        if why:
            ctx.remark(
                kernel,
                f"clusters of {CLUSTER_BLOCKS} blocks wanted: {why}; sharing that operand's "
                "tile halves the requests",
            )
        options = replace(options, cluster=CLUSTER_BLOCKS if why else 1)
    if options.persistent == WITH_CLUSTERS:
        clustered = options.cluster > 1 and cluster_axis(kernel, streams) == 0
        # A cluster along another axis than the walk's first would be given up for the walk
        # (pipeline_cluster says so): the cluster's gain was measured larger (0.68-0.86).
        walked = WALK_ATTRIBUTE in kernel.attributes and options.cluster <= 1
        if clustered:
            ctx.remark(
                kernel,
                "persistent blocks wanted: the kernel is clustered, and a walking block pays "
                "a cluster's barriers and launch once, not once a tile",
            )
        elif walked:
            ctx.remark(
                kernel,
                "persistent blocks wanted: tiling's SM model found the tiles faster walked by "
                "one block an SM with a producer warpgroup (wgmma_model.walk_clocks)",
            )
        options = replace(options, persistent=-1 if clustered or walked else 0)
    return options


def cluster_motive(kernel: FuncOp, streams: list[Any]) -> str:
    """Why clusters pay in `kernel` (option cluster's -1), "" where nothing says they do.

    The model: a cluster halves what the SMs ask the TMA unit for, for the operand it shares,
    and costs the pair running in step (a block refills a stage only when both released
    it). Asking less pays where the unit's requests are the bound, which they are where that
    operand's rows straddle 128-byte lines (`straddling_rows`: two line requests a box row).
    Measured on the H100 (2026-12-06, against the heuristic's unclustered kernel): with `b`'s
    rows straddling, 4000x3000x1000 0.85x; with aligned rows 4096^3 1.05x, 1024^3 1.20x, bmm
    8x1024^3 1.05x -- there the unit keeps up alone and only the step-keeping is left.

    The operand is the one the cluster would share (`_plan` after warp specialization): of
    the loops' streams, the one with the most bytes a step (of equals, the one whose rows
    straddle) that a cluster can share at all (`_cluster_axis`). `streams` are
    `pipeline._Stream`s (a `load` of a kernel argument's view)."""
    shared = _shared_stream(kernel, streams)
    return shared[1] if shared is not None else ""


def cluster_axis(kernel: FuncOp, streams: list[Any]) -> int | None:
    """The grid axis a cluster of `kernel` would span (that of the operand `cluster_motive`
    finds it would share), or None where no operand can be shared."""
    shared = _shared_stream(kernel, streams)
    return shared[0] if shared is not None else None


def _shared_stream(kernel: FuncOp, streams: list[Any]) -> tuple[int, str] | None:
    """Of `streams`, the one a cluster would share (`cluster_motive` says which): its grid
    axis and why its rows straddle lines ("" where they do not); None where none can be."""
    if "tilec.split" in kernel.attributes:
        return None  # `_plan` refuses split kernels
    best: tuple[tuple[int, bool], int, str] | None = None
    for stream in streams:
        view = stream.load.view
        if not isinstance(view.type, TensorType) or folded_plan(stream.alloc.result.type):
            continue  # `_plan` shares no copy that takes whole tiles of interleaved rows
        axis = _cluster_axis(kernel, view)
        if isinstance(axis, str):
            continue
        tile = stream.load.result.type
        assert isinstance(tile, TileType)
        note = straddling_rows(kernel, view)
        key = (math.prod(tile.shape) * element_bytes(tile.element), bool(note))
        if best is None or key > best[0]:
            best = (key, axis, note)
    return best[1:] if best is not None else None


def cluster_kernel(
    kernel: FuncOp, specialized: bool, option: int, ctx: PassContext, required: bool = True
) -> bool:
    """pipeline's option `cluster` (blocks a cluster: 1 none, 2 pairs) on `kernel`, which
    `pipeline_warp_specialize` specialized (`specialized`); whether it now runs in clusters.
    Where the clusters are not `required` (option -1 resolved by `cluster_motive`), a kernel
    that cannot run in them gets a remark saying why, not an error."""
    if option not in (1, CLUSTER_BLOCKS):
        raise TileError(
            f"pipeline: option cluster must be -1 (automatic), 1 (no clusters) or "
            f"{CLUSTER_BLOCKS}, got {option}"
        )
    if option == 1:
        return False
    plan = _plan(kernel, specialized)
    if isinstance(plan, str) and not required:
        ctx.remark(kernel, f"no clusters, though its shared operand's rows straddle lines: {plan}")
        return False
    if isinstance(plan, str):
        refused = [
            r.message
            for r in ctx.remarks
            if r.op is kernel and r.message.startswith("not warp-specialized: ")
        ]
        if not specialized and refused:  # why warp specialization was refused, too
            plan += f" ({refused[-1]})"
        raise TileError(f"pipeline: option cluster = {option}, but {plan}", kernel.loc)
    _apply(kernel, plan)
    copy = plan.shared[0]
    view = copy.view
    name = view.name_hint or "the operand"
    ctx.remark(
        kernel,
        f"clusters of {CLUSTER_BLOCKS} blocks along {plan.dim} (grid axis {plan.axis}): both "
        f"read the same {'x'.join(map(str, copy.buffer.type.shape[1:]))} tile of {name} each "
        f"step, so each copies half of it and the TMA unit multicasts it to both "
        f"({slot_bytes(copy.buffer.type) // CLUSTER_BLOCKS} of the step's bytes asked for once "
        "for two blocks); a stage is refilled once the consumers of both blocks released it",
    )
    return True


def announce_cluster(kernel: FuncOp, option: int) -> None:
    """Before warp specialization builds a persistent tile walk: mark the kernel with the
    clusters option `cluster` asks for (along grid axis 0, where a shared operand's
    dimensions leave it), so that the walk counts whole clusters of tiles
    (`pipeline_persistent.tile_walk`); `cluster_kernel` checks the rest afterwards."""
    if option != CLUSTER_BLOCKS or CLUSTER_ATTRIBUTE in kernel.attributes:
        return
    grid = [str(pair.elements[0].value) for pair in kernel.attributes["tilec.grid"].elements]
    views = {id(c.view): c.view for c in kernel.walk() if isinstance(c, TM.TmaCopyOp)}
    for view in views.values():
        if [i for i, d in enumerate(grid) if d not in _dims(view)] == [0]:
            kernel.attributes[CLUSTER_ATTRIBUTE] = ArrayAttr(
                tuple(IntegerAttr(CLUSTER_BLOCKS if i == 0 else 1) for i in range(len(grid)))
            )
            return


def _plan(kernel: FuncOp, specialized: bool) -> _Plan | str:
    if not specialized:
        return (
            "the kernel is not warp-specialized: the blocks of a cluster release the stages "
            "they share through the producers' empty mbarriers"
        )
    if "tilec.split" in kernel.attributes:
        return "a split kernel's blocks share out one tile's K loop, not an operand"
    ops = [op for op in kernel.body.block.ops if isinstance(op, WarpSpecializeOp)]
    if len(ops) != 1:
        return "the kernel has no single specialized region at its top level"
    op = ops[0]
    copies = [c for c in op.producer.walk() if isinstance(c, TM.TmaCopyOp)]
    grid = [str(pair.elements[0].value) for pair in kernel.attributes["tilec.grid"].elements]
    why = "no operand's copies can be shared"
    best: tuple[tuple[int, bool], list[TM.TmaCopyOp], int, str, list] | None = None
    for view in {id(c.view): c.view for c in copies}.values():
        mine = [c for c in copies if c.view is view]
        axis = _cluster_axis(kernel, view)
        if isinstance(axis, str):
            why = axis
            continue
        if any(c.is_folded for c in mine):
            why = "the copies that could be shared take whole tiles of interleaved rows"
            continue
        read = next((r for c in mine for r in _reads_behind(c.offsets)), None)
        if read is not None:
            why = (
                f"the offsets of {view.name_hint or 'the operand'}'s tiles come through a "
                f"load ('{read.name}'): two blocks may not read the same tile"
            )
            continue
        boxes = [_shared_box(c) for c in mine]
        unsplit = next((b for b in boxes if isinstance(b, str)), None)
        if unsplit is not None:
            why = f"a tile of {view.name_hint or 'the operand'} does not split in two: {unsplit}"
            continue
        # the most bytes a step; of equals, the one whose rows straddle lines (cluster_motive)
        key = (sum(slot_bytes(c.buffer.type) for c in mine), bool(straddling_rows(kernel, view)))
        if best is None or key > best[0]:
            best = (key, mine, axis, grid[axis], boxes)
    if best is None:
        return why
    _, mine, axis, dim, boxes = best
    if PERSISTENT_ATTRIBUTE in kernel.attributes and axis != 0:
        return (
            f"persistent blocks walk the tiles along grid axis 0 first, and the cluster would "
            f"span axis {axis} ({dim})"
        )
    if PERSISTENT_ATTRIBUTE in kernel.attributes and CLUSTER_ATTRIBUTE not in kernel.attributes:
        return "the persistent tile walk was not planned for clusters (announce_cluster)"
    epilogue = _epilogue(op)
    rows = next(
        (
            (s.offsets[_dims(s.view).index(dim)], s.view, _dims(s.view).index(dim))
            for o in epilogue
            for s in o.walk()
            if isinstance(s, T.StoreOp) and dim in _dims(s.view)
        ),
        None,
    )
    if rows is None:
        return f"no store of the consumers' epilogue says which rows of {dim} a block computes"
    parts = _split_epilogue(op)
    if isinstance(parts, str):
        return f"its epilogue cannot be skipped by the block past the tiles: {parts}"
    for c, box in zip(mine, boxes):  # only now: a kernel refused keeps its boxes
        c.attributes["box"] = ArrayAttr(tuple(IntegerAttr(n) for n in box))
    return _Plan(op, axis, dim, mine, (rows[0], rows[1]), rows[2])


def _epilogue(op: WarpSpecializeOp) -> list:
    """The consumers' ops after their main loop -- in a persistent kernel, inside the loop
    that walks the tiles (a loop whose body has loops of its own)."""
    block = op.consumer.block
    while True:
        ops = list(block.ops)
        loops = [i for i, o in enumerate(ops) if isinstance(o, scf.ForOp)]
        if not loops:
            return []
        last = ops[loops[-1]]
        if any(isinstance(o, scf.ForOp) for o in last.body.block.ops):
            block = last.body.block  # the tile walk: the main loop and epilogue are inside
            continue
        return [o for o in ops[loops[-1] + 1 :] if not isinstance(o, scf.YieldOp)]


def _shared_box(copy: TM.TmaCopyOp) -> tuple[int, ...] | str:
    """The box with which `copy`'s slot splits into two parts of whole boxes: its own, or one
    of fewer rows (`box_plan`'s `box_rows`: a K-major tile is one box of all its rows); or why
    there is none."""
    slot = tuple(copy.buffer.type.shape[1:])
    box = copy.box_shape
    why = TM.multicast_part(slot, box, CLUSTER_BLOCKS)
    rows = box[-2] // 2
    while isinstance(why, str) and rows >= 8:
        plan = box_plan(copy.buffer.type, rows)
        if isinstance(plan, str):
            break
        box = plan[0]
        why = TM.multicast_part(slot, box, CLUSTER_BLOCKS)
        rows //= 2
    return why if isinstance(why, str) else box


def _reads_behind(values: list[Value]) -> list[Operation]:
    """The ops with memory reads that `values` are computed from (a gather's index), walking
    back through ops and out of enclosing regions' arguments no further than their ops."""
    found, seen, work = [], set(), list(values)
    while work:
        v = work.pop()
        op = getattr(v, "op", None)
        if op is None or id(op) in seen:
            continue
        seen.add(id(op))
        if not op.has_trait(Pure) and not isinstance(
            op, (T.ProgramIdOp, T.NumProgramsOp, T.DimOp, arith.ConstantOp)
        ):
            found.append(op)
            continue
        work.extend(op.operands)
    return found


def _cluster_axis(kernel: FuncOp, view: Value) -> int | str:
    """The grid axis a cluster sharing `view`'s tiles would span -- the one axis whose
    dimension the view lacks -- or why no cluster can share them: the grid names another
    number of such axes, or a grouped block order would pair blocks that read different
    tiles (a group must be an even number of tiles along axis 0)."""
    grid = [str(pair.elements[0].value) for pair in kernel.attributes["tilec.grid"].elements]
    axes = [i for i, d in enumerate(grid) if d not in _dims(view)]
    name = view.name_hint or "the operand"
    if len(axes) != 1:
        return f"the grid's axes {grid} do not name exactly one dimension that {name} does not have"
    group = kernel.attributes.get("tilec.group_m")
    if group is not None and (axes[0] != 0 or int(group.value) % 2):
        return (
            f"the grouped block order (groups of {int(group.value)} along grid axis 0) would "
            f"pair blocks that read different tiles of {name} (tiling's option group_m: 1 or "
            "an even number)"
        )
    return axes[0]


def _dims(view: Value) -> list[str]:
    t = view.type
    assert isinstance(t, TensorType)
    return [str(d) for d in t.shape]


def _apply(kernel: FuncOp, plan: _Plan) -> None:
    op = plan.op
    grid_rank = len(kernel.attributes["tilec.grid"].elements)
    kernel.attributes[CLUSTER_ATTRIBUTE] = ArrayAttr(
        tuple(IntegerAttr(CLUSTER_BLOCKS if i == plan.axis else 1) for i in range(grid_rank))
    )
    for copy in plan.shared:
        copy.attributes["multicast"] = IntegerAttr(CLUSTER_BLOCKS)
    # The consumers release each stage in both blocks; the inits count both blocks' arrivals.
    releases = [a for a in op.consumer.walk() if isinstance(a, TM.MbarrierArriveOp)]
    empty = {id(a.barriers): a.barriers for a in releases}
    for a in releases:
        a.attributes["cluster"] = IntegerAttr(CLUSTER_BLOCKS)
    block = kernel.body.block
    for init in [o for o in block.ops if isinstance(o, TM.MbarrierInitOp)]:
        if id(init.barriers) in empty:
            init.attributes["arrivals"] = IntegerAttr(int(init.arrivals) * CLUSTER_BLOCKS)
    # The inits are published to the cluster, not only the block.
    before = block.ops[: block.ops.index(op)]
    published = [
        o
        for i, o in enumerate(before)
        if isinstance(o, shared.BarrierOp) and i and isinstance(before[i - 1], TM.MbarrierInitOp)
    ]
    for barrier in published:
        Builder.before_op(barrier).create(TM.ClusterBarrierOp)
        barrier.erase()
    # No block invalidates its barriers (or leaves) while the other may still reach them.
    end = Builder.after_op(op)
    end.create(TM.ClusterBarrierOp)
    for inval in [o for o in op.consumer.block.ops if isinstance(o, TM.MbarrierInvalOp)]:
        inval.detach()
        end.insert(inval)
    _guard_epilogue(op, plan)


def _guard_epilogue(op: WarpSpecializeOp, plan: _Plan) -> None:
    """Run the consumers' epilogue only where the block's rows start inside the tensor (the
    block padding the grid to whole clusters has none): its tiles and effects go under an
    `scf.if`, the scalar arithmetic they do not feed (a persistent walk's next step) stays
    before it (`_split_epilogue`)."""
    parts = _split_epilogue(op)
    assert not isinstance(parts, str), parts  # `_plan` refused it
    scalars, guarded = parts
    if not guarded:
        return
    offset, view = plan.rows
    extent = Builder.before_op(op).create(T.DimOp, view=view, axis=plan.row_axis).result
    for o in scalars:  # pure: computed before the guard, in order
        o.move_before(guarded[0])
    b = Builder.before_op(guarded[0])
    inside = b.create(arith.CmpIOp, predicate="slt", lhs=offset, rhs=extent).result
    guard = b.create(scf.IfOp, condition=inside, result_types=[], then=Region([Block()]))
    for o in guarded:
        o.detach()
        guard.then.block.append(o)
    Builder.at_end(guard.then.block, loc=op.loc).create(scf.YieldOp, values=[])


def _split_epilogue(op: WarpSpecializeOp) -> tuple[list, list] | str:
    """The consumers' epilogue (`_epilogue`, less the invalidations) as (pure scalar ops
    nothing guarded feeds, the rest: tiles, effects and what depends on them); or why the
    rest cannot go under a guard (a value of it is used after the epilogue)."""
    epilogue = [o for o in _epilogue(op) if not isinstance(o, TM.MbarrierInvalOp)]
    guarded_values: set[int] = set()
    scalars, guarded = [], []
    for o in epilogue:
        tiles = any(isinstance(r.type, TileType) for r in o.results)
        fed = any(id(v) in guarded_values for v in o.operands) or any(
            id(v) in guarded_values for inner in o.walk() for v in inner.operands
        )
        if o.has_trait(Pure) and not tiles and not fed and not o.regions:
            scalars.append(o)
            continue
        guarded.append(o)
        guarded_values.update(id(r) for inner in o.walk() for r in inner.results)
    inside = {id(inner) for o in guarded for inner in o.walk()}
    for o in guarded:
        for r in o.results:
            if any(id(u) not in inside for u in r.uses):
                return f"a value of the epilogue ({o.name}) is used after it"
    return scalars, guarded
