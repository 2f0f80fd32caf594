"""The `walk-tiles` pass: a block that reads the same tile for every output tile -- a norm's
weight `w[:]`, its bias -- walks several output tiles and reads it once.

A row kernel launched one block a row reloads what every row shares: layer norm's `w[:]` and
`b[:]` are two of its three loads. Where the row moves in 16-byte accesses that is L2 traffic
(a weight row as large as the row itself, read again by each of thousands of blocks); where
it does not -- rows of an odd width, 2-byte accesses, a load instruction an element -- it is
instructions: layer norm 6000 x 3001 f16 runs 96 loads a thread for 32 columns of one row,
64 of them of `w` and `b` (the SASS, docs/benchmarks.md, fourth session), and rows of odd
widths are bound by instructions, not bytes.

The rewrite: blocks become persistent (as `pipeline`'s option `persistent` makes them,
passes/pipeline_persistent.py, whose tile walk it shares): the launch has as many blocks as
the GPU holds at once (`tilec.persistent`; the interpreter launches a few), each walks the
output tiles `t = first, first + blocks, ...`, and the loads whose offsets are the same for
every tile -- no program id reaches them -- with the index arithmetic they need, go before
the walk. Everything else runs per tile in the walk's body, in order, with the tile's
coordinates where the program ids were; the element-wise ops on the hoisted values (a cast to
f32) stay per tile, so a block holds the loaded tile (16-bit, not its f32 copy) across the walk.

Applies to a kernel with a grid of tiles (`tilec.grid`), not split, not already persistent,
whose top-level block holds no loops, branches or dots (a row kernel whose row is one tile),
with at least one such tile-invariant load -- or none, where the kernel reduces its tiles
(softmax: a block holds a whole row and few share an SM, so a walk is what lets the register
prefetch load the next row while this one is reduced, as Triton's softmax tutorial pipelines
its row loop) --, and those loads' tiles at most `max_elements`
(8192) elements a block: they stay in registers across the walk, and ptxas keeps a 16-bit
element in a 32-bit register (layer norm 8192 x 8192's two 8192-wide rows took it from 105
registers to 254). Exact (the same operations per tile; the
interpreter runs the kernel before and after).

Off by default (option `enable`). Measured (docs/benchmarks.md, 2026-12-06): alone, 1.06x and
1.11x the time on layer norm 6000 x 3001 and RMSNorm 4096 x 5001 (H100) -- the rows are bound
by the bytes an SM keeps in flight, not by instructions, and the walk holds fewer blocks with
the same gaps; with the walk's next row loaded before this one is reduced (`pipeline`'s
register prefetch runs ahead over the walk, which this pass marks `tilec.tile_walk`; pinned by
`stages=2`), 0.93x and 0.92x (H200). The decision is recorded on every kernel that could walk
(`tilec.walk_tiles`), so the tuner searches it with `stages`.
Remarks: per kernel rewritten, the loads hoisted and their bytes; per kernel left alone with a
tile-invariant load, why.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects import scf
from tilec.dialects import tile as T
from tilec.dialects.builtin import PERSISTENT_ATTRIBUTE, FuncOp
from tilec.ir.attributes import BoolAttr, UnitAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Operation, OpResult, Pure, Value
from tilec.ir.types import TileType
from tilec.lowering.layouts import element_bytes
from tilec.passes.pipeline_persistent import _extent_source, tile_walk, walk_loop
from tilec.passes.specialize import attribute_pairs
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["WALK_TILES_ATTRIBUTE", "WalkTiles"]

# On a kernel that could walk its tiles: whether it does (the pass's decision, read back by the
# tuner).
WALK_TILES_ATTRIBUTE = "tilec.walk_tiles"


@register_pass
class WalkTiles(Pass):
    """Persistent blocks for a row kernel with tile-invariant loads, those loads hoisted out
    of the walk (the module docstring)."""

    name = "walk-tiles"
    summary = "Blocks walk the output tiles and load what every tile reads once"

    @dataclass
    class Options:
        enable: bool = option(
            False,
            "make row kernels with tile-invariant loads persistent, the loads hoisted (off by "
            "default until measured)",
        )
        max_elements: int = option(
            8192,
            "the most elements the hoisted tiles may hold in a block (they stay in registers "
            "across the walk: 64 a thread at 4 warps)",
        )

    def run(self, module: Operation, ctx: PassContext) -> None:
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            hoisted = _invariant_loads(kernel)
            if not hoisted and not _reduces_rows(kernel):
                continue
            why = _blocker(kernel)
            held = sum(op.result.type.num_elements for op in hoisted)
            if not why and held > self.options.max_elements:
                why = (
                    f"the tiles every row reads hold {held} elements, over the "
                    f"{self.options.max_elements} a block may keep in registers across the walk"
                )
            if why:
                if self.options.enable:
                    ctx.remark(kernel, f"blocks not made to walk tiles: {why}")
                continue
            # The decision, either way, for the tuner (`tilec.tune.space`: a kernel that
            # could walk is searched both ways).
            kernel.attributes[WALK_TILES_ATTRIBUTE] = BoolAttr(self.options.enable)
            if self.options.enable:
                _rewrite(kernel, hoisted, ctx)
            elif hoisted:
                names = ", ".join(f"%{op.view.name_hint or '?'}" for op in hoisted)
                ctx.remark(
                    kernel,
                    f"blocks could walk the output tiles and load {names} once; not done "
                    "(walk-tiles.enable is off by default)",
                )
            else:
                ctx.remark(
                    kernel,
                    "blocks could walk the output tiles, each loading its next tile before "
                    "it reduces this one (with pipeline's register prefetch, stages=2); not "
                    "done (walk-tiles.enable is off by default)",
                )


def _blocker(kernel: FuncOp) -> str:
    if not attribute_pairs(kernel, "tilec.grid"):
        return "the kernel has no grid"
    if PERSISTENT_ATTRIBUTE in kernel.attributes:
        return "its blocks are persistent already"
    if "tilec.split" in kernel.attributes:
        return "the kernel is split (its grid has a split axis)"
    for dim, _ in attribute_pairs(kernel, "tilec.grid"):
        if _extent_source(kernel, str(dim)) is None:
            return f"no tensor argument has the grid dimension {dim}"
    for op in kernel.body.block.ops:
        if isinstance(op, (scf.ForOp, scf.IfOp)):
            return "its body has loops or branches (a row that is one tile is walked)"
        if isinstance(op, T.DotOp):
            return "it computes dots (tiling's GEMM schedule owns those)"
        if isinstance(op, T.NumProgramsOp):
            return "it reads the grid's size (tile.num_programs)"
    return ""


def _reduces_rows(kernel: FuncOp) -> bool:
    """Whether the kernel reduces its tiles (a row kernel: softmax's max and sum): its blocks
    hold a whole row each and are few an SM, so what one keeps in flight is the row it loads
    -- a walk lets it load the next one while it reduces this one (register prefetch)."""
    return any(isinstance(op, T.ReduceOp) for op in kernel.body.block.ops)


def _varying(kernel: FuncOp) -> set[Value]:
    """The values a program id reaches."""
    varying: set[Value] = set()
    for op in kernel.body.block.ops:
        if isinstance(op, T.ProgramIdOp) or any(v in varying for v in op.operands):
            varying.update(op.results)
    return varying


def _invariant_loads(kernel: FuncOp) -> list[T.LoadOp]:
    """The top-level tile loads no program id reaches, with a mask of their own or none."""
    varying = _varying(kernel)
    return [
        op
        for op in kernel.body.block.ops
        if isinstance(op, T.LoadOp)
        and isinstance(op.result.type, TileType)
        and not any(v in varying for v in op.operands)
    ]


def _needed(loads: list[T.LoadOp]) -> set[int]:
    """The loads and the pure ops of the kernel's top level their operands come from."""
    keep: set[int] = set()
    work: list[Operation] = list(loads)
    while work:
        op = work.pop()
        if id(op) in keep:
            continue
        keep.add(id(op))
        for v in op.operands:
            if isinstance(v, OpResult) and v.op.parent is op.parent and v.op.has_trait(Pure):
                work.append(v.op)
    return keep


def _rewrite(kernel: FuncOp, loads: list[T.LoadOp], ctx: PassContext) -> None:
    block = kernel.body.block
    hoist = _needed(loads)
    loc = kernel.loc
    original = set(map(id, block.ops))
    walk = tile_walk(kernel, loc)  # program ids -> the first tile's coordinates
    ops = list(block.ops)
    last = ops[-1]  # the return
    # Per tile: every op of the kernel's own (not the walk's prologue, which `tile_walk` put
    # at the start) that is not hoisted, nor the return.
    per_tile = [op for op in ops[:-1] if id(op) in original and id(op) not in hoist]
    b = Builder.before_op(last)
    loop, t, _base = walk_loop(b, walk, loc)
    loop.attributes[scf.TILE_WALK_ATTRIBUTE] = UnitAttr()  # register_prefetch may run ahead
    inner = Builder.at_end(loop.body.block, loc)
    mapping: dict[Value, Value] = dict(zip(walk.first_coords, walk.coordinates(inner, t)))
    for op in per_tile:
        inner.insert(op.clone(mapping))
    inner.create(scf.YieldOp, values=[_base])
    for op in reversed(per_tile):
        op.erase()
    # What the first tile's coordinates needed, now unused, goes with dce; the walk reads
    # `first` as its start.
    nbytes = sum(_tile_bytes(op.result.type) for op in loads)
    names = ", ".join(f"%{op.view.name_hint or '?'}" for op in loads)
    ctx.remark(
        kernel,
        f"blocks walk the output tiles (as many as the GPU holds at once); {names} "
        f"({nbytes} bytes a block) loaded once before the walk instead of once a tile"
        if loads
        else "blocks walk the output tiles (as many as the GPU holds at once); nothing every "
        "tile reads: the walk is for the next tile's loads, which pipeline's register "
        "prefetch (stages=2) issues before this tile is reduced",
    )


def _tile_bytes(t: TileType) -> int:
    return t.num_elements * element_bytes(t.element)
