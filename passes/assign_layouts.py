"""The `assign-layouts` pass: a layout for every tile value, and the layout conversions the
lowering needs.

After it, every tile type carries a layout, the kernel has `tilec.num_warps`, and every op's
operands are in the layouts its lowering expects (`tilec.lowering.llvm` states the contract).
Row-wise kernels (softmax, layernorm) are what the choices serve: 16-byte runs per thread
along rows, reductions whose results stay replicated in the threads of their row
(`#slice` layouts), and broadcasts back that are register copies.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from math import prod

from tilec.diagnostics import TileError
from tilec.dialects import arith, math, random, scf
from tilec.dialects import gather as G
from tilec.dialects import tile as T
from tilec.dialects.atomic import ATOMIC_OPS, AtomicScatterOp
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import Attribute, BlockedLayout, IntegerAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Block, Operation, Value
from tilec.ir.types import TileType
from tilec.lowering.gather import index_layout
from tilec.lowering.layouts import (
    WARP_SIZE,
    blocked_equivalent,
    broadcast_source_layout,
    default_layout,
    element_bytes,
    expand_layout,
    insert_unit_dim,
    layout_error,
    permute_layout,
    remove_unit_dims,
    same_placement,
    slice_layout,
)
from tilec.passes.occupancy import (
    ACCESS_BYTES,
    MAX_THREADS_PER_SM,
    REGISTERS_PER_SM,
    WARP_COUNTS,
    _access_vectors,
    _automatic_warps,
    _count,
    estimate_registers,
    run_key,
)
from tilec.passes.scan_layouts import SCAN_OPS, lay_out_scan_op
from tilec.passes.specialize import grid_blocks, parse_assignments
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["AssignLayouts", "estimate_registers"]


@register_pass
class AssignLayouts(Pass):
    """Gives every tile a layout; converts operands that an op needs elsewhere.

    Warps: the kernel's pin (`tilec.num_warps`), else the option `num_warps`, else (option 0)
    an occupancy model (`passes/occupancy.py`, `_Occupancy`): for 4, 8 and 16 warps (1 and 2
    where they remove a cost 4 pay -- runs under 16 bytes, a loop's reductions across warps --
    and the grid at option `extents` fills the SMs with their blocks), the blocks an SM holds (by
    threads, by registers estimated from the tiles live across each op, 32 at most) times the
    bytes of the largest tile a `tile.load` or `tile.store` moves; the count whose bytes in
    flight come nearest 72 KiB wins (fitted on the H200, see `BYTES_IN_FLIGHT`), unless one
    keeps each row of a row reduction inside a warp with at least that much in flight.
    Counts that would give a thread over 64 elements of that tile, or runs under 16 bytes, are
    not weighed. Kernels with tensor-core dots get their warps from `tiling`. Written on the
    kernel; the remark gives every candidate's bytes in flight.

    Default layout of a shape: `default_layout` (row-major, lanes along the last dimension,
    warps along the first: see `tilec.lowering.layouts`) with 16 bytes of consecutive elements
    per thread along the last dimension, counted in the narrowest element that a `tile.load`
    or `tile.store` of that shape moves (f32: 4, f16: 8; 4 for shapes that never touch
    memory; fewer when the tile has fewer elements than that many per thread), so that every
    tile of one shape has one default whatever its element type or its unit dimensions
    (`occupancy.run_key`: a [BS, 1, 1, 64] load reshaped to [BS, 64] keeps its layout).

    Results: `tile.reduce` gives `#slice<dim = axis, parent = its operand's layout>` (each
    result stays in every thread of its row); `tile.expand_dims`, `tile.transpose` and
    unit-dimension `tile.reshape` keep every element in its thread (a slice expanded along its
    dimension is its parent again; a unit-dimension reshape of an `#mma` accumulator -- a
    GEMM's tile stored into a 3-D view -- converts its operand first, to the result's layout
    less the unit dimensions, so that the move is a `tile.convert_layout` whose scratch rows
    are padded against bank conflicts and which an epilogue may exchange in row pieces);
    elementwise ops take their operands' layout when they
    agree. Ops free to choose (loads, `tile.full`, `tile.splat`, `tile.iota`, broadcasts,
    elementwise ops whose operands disagree) take the layout their users want, found by a walk
    backwards from the broadcasts and stores (an operand of `expand_dims` feeding a broadcast
    wants the slice of the broadcast's layout: the mask of a row of columns is computed where
    it is used; a store's mask wants the layout the store will move its value in, so that a
    mask of the rows an epilogue updates is computed there rather than converted), else the
    default.
    Conversions (`tile.convert_layout`) go where an op needs them: operands of elementwise
    ops (`arith`, `math`, `tile.select`, `tile.cast`) and a dot's accumulator take the
    result's layout; a `tile.broadcast` operand takes the result's layout (wrapped on its
    size-1 dimensions, so the broadcast is a register copy); stored values take the default
    layout unless a warp already writes whole 128-byte lines of a row in theirs, or they are
    slices (a reduction's few results: stored by their unique owners where they are), masks
    their access's layout; `scf.if` results keep the default layout.
    Anchors (`anchored_layouts`): values computed from tiling's `#mma` accumulators by
    elementwise ops, reductions (the slice) and `expand_dims`, and loop-carried values whose
    yielded value is one of those, take the accumulator's `#blocked` twin (the same
    registers), and the walk backwards predicts that for them: attention's scores, softmax and
    carried row max and sum stay where the dot left them, and the splats, masks and
    broadcasts that meet them come to them. Other loop-carried values keep the default
    layout. A dot's A operand computed in the twin of an `#mma` on warps `[W, 1]` becomes its
    `#dot_operand` by a conversion the lowering does in registers (`register_a_operand`). Values that already have a layout keep it, so
    running the pass twice changes nothing. Assumes static tile shapes (run `specialize`).
    Remarks: per kernel, the warps (and for automatic ones, the model's figures) and the
    conversions inserted; each conversion says why.
    Option `min_blocks_per_sm` pins an occupancy: `tilec.min_blocks_per_sm` on the kernel,
    which the lowering passes to ptxas (`.minnctapersm`) so that it budgets registers for
    that many blocks per SM (an error when they would need more than 2048 threads).
    Scans along the last axis whose operand holds short runs (an access no 16 bytes align)
    take their operand in 16-byte runs where the shuffles saved outweigh the exchanges
    (`passes/scan_layouts.py`); option `scan_runs=false` keeps the operand's layout.
    """

    name = "assign-layouts"
    summary = "Give every tile value a blocked layout; insert layout conversions"

    @dataclass
    class Options:
        num_warps: int = option(
            0,
            "warps per block when the kernel does not pin them (0: from the occupancy model: "
            "bytes of the largest streamed tile in flight per SM)",
        )
        extents: str = option(
            "",
            "known extents (or size classes) of dimensions, e.g. M=4096, as tiling's option: "
            "fewer than 4 warps are weighed only where the grid they give fills the SMs",
        )
        sm_count: int = option(132, "SMs of the GPU (132 on the H100 and H200)")
        min_blocks_per_sm: int = option(
            0,
            "blocks that must fit on one SM together: ptxas then keeps each thread to "
            "65536 / (blocks x threads) registers (0: ptxas decides)",
        )
        scan_runs: bool = option(
            True,
            "convert a scan's operand to 16-byte runs a thread where its lane steps' shuffles "
            "cost more than the exchanges (passes/scan_layouts.py); false keeps the operand's",
        )

    def run(self, module: Operation, ctx: PassContext) -> None:
        if self.options.num_warps not in (0, *WARP_COUNTS):
            raise TileError(
                f"assign-layouts: option num_warps must be 0 (automatic) or one of "
                f"{WARP_COUNTS}, got {self.options.num_warps}"
            )
        blocks = self.options.min_blocks_per_sm
        if blocks < 0:
            raise TileError(
                f"assign-layouts: option min_blocks_per_sm must be 0 (automatic) or more, "
                f"got {blocks}"
            )
        extents = parse_assignments(self.options.extents, "extents", self.name)
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            grid = grid_blocks(kernel, extents) if extents else None
            slots = (grid[0], self.options.sm_count) if grid is not None else None
            layouts = _KernelLayouts(kernel, self.options.num_warps, ctx, slots)
            layouts.scan_runs = self.options.scan_runs
            layouts.run()
            if blocks:
                _pin_occupancy(kernel, blocks, ctx)


def _pin_occupancy(kernel: FuncOp, blocks: int, ctx: PassContext) -> None:
    """Record `tilec.min_blocks_per_sm` (the lowering's `.minnctapersm`), after checking that
    that many blocks of this kernel's threads fit on an SM at all."""
    threads = kernel.attributes["tilec.num_warps"].value * 32
    if blocks * threads > MAX_THREADS_PER_SM:
        raise TileError(
            f"assign-layouts: option min_blocks_per_sm={blocks}: {blocks} blocks of {threads} "
            f"threads exceed the {MAX_THREADS_PER_SM} threads an SM holds",
            kernel.loc,
            hint=f"at most {MAX_THREADS_PER_SM // threads} for kernel '{kernel.sym_name}'",
        )
    kernel.attributes["tilec.min_blocks_per_sm"] = IntegerAttr(blocks)
    registers = min(255, REGISTERS_PER_SM // (blocks * threads))
    ctx.remark(
        kernel,
        f"{blocks} blocks per SM (option min_blocks_per_sm): ptxas keeps each thread to "
        f"{registers} registers",
    )


class _KernelLayouts:
    def __init__(
        self,
        kernel: FuncOp,
        default_warps: int,
        ctx: PassContext,
        grid: tuple[int, int] | None = None,
    ):
        self.kernel = kernel
        pinned = kernel.attributes.get("tilec.num_warps")
        if pinned is not None:
            self.num_warps, self.source = pinned.value, "pinned by the kernel"
        elif default_warps:
            self.num_warps, self.source = default_warps, "option num_warps"
        else:
            self.num_warps, self.source = _automatic_warps(kernel, grid)
        self.ctx = ctx
        self.conversions: Counter[str] = Counter()
        self.values = 0
        self.vectors = _access_vectors(kernel)
        self.wanted: dict[Value, Attribute] = {}
        self.anchored = anchored_layouts(kernel, self.num_warps)
        self.scan_runs = True  # option scan_runs

    def run(self) -> None:
        if self.num_warps not in WARP_COUNTS:
            raise TileError(
                f"kernel '{self.kernel.sym_name}' pins {self.num_warps} warps; "
                f"assign-layouts needs one of {WARP_COUNTS}",
                self.kernel.loc,
            )
        block = self.kernel.body.block
        for arg in block.args:
            self.laid_out(arg, None)
        self.want_block(block)
        self.block(block)
        self.kernel.attributes["tilec.num_warps"] = IntegerAttr(self.num_warps)
        made = ", ".join(f"{n} {why}" for why, n in sorted(self.conversions.items()))
        total = sum(self.conversions.values())
        self.ctx.remark(
            self.kernel,
            f"{_count(self.num_warps, 'warp')} ({self.source}); {_count(self.values, 'tile value')} laid "
            "out; "
            + (
                f"{_count(total, 'layout conversion')}: {made}"
                if total
                else "no layout conversions"
            ),
        )

    # -- helpers ------------------------------------------------------------------------------

    def default(self, t: TileType, widest: bool = False) -> BlockedLayout:
        """The default layout of `t`'s shape: runs of the widest access its loads and stores
        can make (`widest`: of 16 bytes, as an aligned row's, whatever they can make)."""
        for d in t.shape:
            if not isinstance(d, int):
                raise TileError(
                    f"assign-layouts needs static tile shapes, got {t}",
                    self.kernel.loc,
                    hint="run 'specialize' first",
                )
        vector = (
            max(1, ACCESS_BYTES // element_bytes(t.element))
            if widest
            else self.vectors.get(run_key(t.shape), ACCESS_BYTES // 4)
        )
        # A tile too small to give every thread a whole run gets shorter runs, not idle
        # threads holding copies.
        while vector > 1 and prod(t.shape) < vector * WARP_SIZE * self.num_warps:
            vector //= 2
        return default_layout(t.shape, self.num_warps, vector)  # type: ignore[arg-type]

    def coalesced(self, layout: Attribute, t: TileType) -> bool:
        """`_coalesced` for a store of `t` in `layout`, with the access its shape allows."""
        access = self.vectors.get(run_key(t.shape), ACCESS_BYTES // element_bytes(t.element))
        return _coalesced(layout, t, access)

    def chosen(self, v: Value) -> Attribute:
        """The layout of a value whose op may produce any: what its users want (as `#blocked`
        where that places the elements alike), else the default."""
        t = v.type
        wanted = self.wanted.get(v)
        if wanted is None:
            return self.default(t)
        return blocked_equivalent(wanted, t.shape) or wanted

    def kept(self, v: Value, layout: Attribute) -> Attribute:
        """`layout` (an op's element-preserving result layout), or what the users of `v` want
        when it places every element alike (the same registers: no conversion later)."""
        wanted = self.wanted.get(v)
        if wanted is not None and same_placement(wanted, layout, v.type.shape):
            return wanted
        return layout

    def laid_out(self, v: Value, wanted: Attribute | None) -> None:
        """Give `v` the layout `wanted` (None: its default) unless it already has one."""
        t = v.type
        if not isinstance(t, TileType):
            return
        self.values += 1
        if t.layout is not None:
            problem = layout_error(t.layout, t.shape, self.num_warps)
            if problem is not None:
                raise TileError(f"layout of {t}: {problem}", self.kernel.loc)
            return
        layout = wanted if wanted is not None else self.default(t)
        v.type = TileType(t.shape, t.element, layout)

    def convert(self, op: Operation, index: int, layout: Attribute, why: str) -> None:
        """Make operand `index` of `op` arrive in `layout`, converting it just before `op`."""
        v = op.operands[index]
        t = v.type
        if not isinstance(t, TileType) or t.layout == layout:
            return
        conversion = Builder.before_op(op).create(
            T.ConvertLayoutOp, input=v, result_types=[TileType(t.shape, t.element, layout)]
        )
        op.set_operand(index, conversion.result)
        self.conversions[why] += 1
        self.ctx.remark(conversion, f"converted: {why}")

    # -- walking --------------------------------------------------------------------------------

    def block(self, block: Block) -> None:
        for op in list(block.ops):
            self.op(op)

    def op(self, op: Operation) -> None:
        if isinstance(op, scf.ForOp):
            self.loop(op)
            return
        if isinstance(op, scf.IfOp):
            self.branch(op)
            return
        if isinstance(op, scf.YieldOp):
            return  # its parent converts what it yields
        if isinstance(op, (T.StoreOp, G.ScatterOp)):
            value = op.value.type
            layout = value.layout
            if not (_is_slice(layout) or self.coalesced(layout, value)):
                layout = self.default(value)
            scatter = isinstance(op, G.ScatterOp)
            self.convert(op, 1 + len(op.offsets) + scatter, layout, "stored value (coalesced)")
            if scatter:
                self.lay_out_indices(op, layout)
            if op.mask is not None:
                self.convert(op, len(op.operands) - 1, layout, "store mask")
            return
        if isinstance(op, ATOMIC_OPS):
            # As a store's value (coalesced or a slice); the old values come back in the same
            # layout, and the compare and the mask travel with the value.
            value = op.value.type
            layout = value.layout
            if not (_is_slice(layout) or self.coalesced(layout, value)):
                layout = self.default(value)
            scattered = isinstance(op, AtomicScatterOp)
            indices = 1 + len(op.offsets) if scattered else None
            for index, v in enumerate(op.operands):
                if isinstance(v.type, TileType) and index != indices:
                    self.convert(op, index, layout, f"{op.name} operand (coalesced)")
            if scattered:
                self.lay_out_indices(op, layout)
            self.laid_out(op.result, layout)
            return
        if isinstance(op, G.BincountOp):
            # The lanes travel together, in the indices' layout; the bins take the default.
            layout = op.indices.type.layout
            for index in range(1, len(op.operands)):
                self.convert(op, index, layout, "tile.bincount operand (the indices' layout)")
            self.laid_out(op.result, self.chosen(op.result))
            return
        if not op.results:
            return
        result = op.results[0]
        source = op.operands[0].type if op.operands else None
        source_layout = source.layout if isinstance(source, TileType) else None
        if isinstance(op, SCAN_OPS):
            lay_out_scan_op(self, op)  # passes/scan_layouts.py
            return
        if isinstance(op, T.ExpandDimsOp):
            self.laid_out(result, self.kept(result, expand_layout(source_layout, op.axis)))
        elif isinstance(op, T.TransposeOp) and isinstance(source_layout, BlockedLayout):
            self.laid_out(result, permute_layout(source_layout, op.perm))
        elif isinstance(op, T.ReshapeOp) and isinstance(source_layout, BlockedLayout):
            self.laid_out(result, _reshaped_layout(source, result.type))
        elif isinstance(op, T.ReshapeOp) and self.unit_reshape_source(op):
            pass  # the operand converted to the result's layout less its unit dimensions
        elif isinstance(op, T.ReduceOp) and isinstance(result.type, TileType):
            self.laid_out(result, _reduced_layout(source_layout, op.axis))
        elif _is_elementwise(op) and isinstance(result.type, TileType):
            agreed = {v.type.layout for v in op.operands if isinstance(v.type, TileType)}
            layout = agreed.pop() if len(agreed) == 1 else self.anchored.get(result)
            self.laid_out(result, layout if layout is not None else self.chosen(result))
        elif isinstance(op, T.ConvertLayoutOp) and isinstance(result.type, TileType):
            # tiling's conversions to no layout yet, where an accumulator chain meets other ops
            self.laid_out(result, self.anchored.get(result) or self.chosen(result))
        elif isinstance(result.type, TileType) and isinstance(op, _FREE_OPS):
            self.laid_out(result, self.chosen(result))
        else:
            for r in op.results:
                self.laid_out(r, None)
        if not isinstance(result.type, TileType):
            return
        layout = result.type.layout
        if _is_elementwise(op):
            for i, v in enumerate(op.operands):
                if isinstance(v.type, TileType):
                    self.convert(op, i, layout, f"{op.name} operand")
        elif isinstance(op, T.BroadcastOp):
            self.convert(op, 0, broadcast_source_layout(layout), "tile.broadcast operand")
        elif isinstance(op, T.DotOp):
            self.convert(op, 2, layout, "tile.dot accumulator")
            a = register_a_operand(op)
            if a is not None:
                self.convert(
                    op,
                    0,
                    a,
                    "A operand kept in registers (the accumulator fragments it was computed in "
                    "are this dot's A fragments)",
                )
        elif isinstance(op, (T.LoadOp, G.GatherOp)) and op.mask is not None:
            self.convert(op, len(op.operands) - 1, layout, "load mask")
        if isinstance(op, G.GatherOp):
            self.lay_out_indices(op, layout)

    def unit_reshape_source(self, op: T.ReshapeOp) -> bool:
        """A reshape that only inserts or removes size-1 dimensions, of an operand in a layout
        of its own (an accumulator's `#mma`, as a GEMM's result stored into a 3-D view
        `c[z, tm, tn]`): give the result its layout, and convert the operand to that layout
        less the unit dimensions, so that the reshape is a register copy and the move between
        threads is a `tile.convert_layout` -- whose scratch rows are padded against bank
        conflicts and which an epilogue may exchange in pieces (`chunks`: what persistent
        blocks need to keep the stages, passes/pipeline_persistent.py). Whether it applied."""
        source, result = op.operands[0].type, op.results[0]
        if not isinstance(source, TileType) or source.layout is None or not source.is_static:
            return False
        target = self.chosen(result)
        if not isinstance(target, BlockedLayout):
            return False
        wanted = TileType(result.type.shape, result.type.element, target)
        inverse = _reshaped_layout(wanted, source)
        if inverse is None:
            return False
        self.convert(
            op, 0, inverse, "tile.reshape operand (the result's layout, unit dimensions dropped)"
        )
        self.laid_out(result, target)
        return True

    def lay_out_indices(self, op: Operation, layout: Attribute) -> None:
        """A gather's, scatter's or atomic scatter's index tile goes where the thread that moves a row holds
        its index (`tilec.lowering.gather.index_layout`): its row pointers are computed once."""
        indices = op.indices.type
        wanted = index_layout(layout, op.axis, indices, op.view.type.rank)
        converted = indices.layout != wanted
        self.convert(op, 1 + len(op.offsets), wanted, f"{op.name} indices")
        per_row = "the index of each of its rows" if indices.rank == 1 else "each element's index"
        self.ctx.remark(
            op,
            f"indices {'converted to' if converted else 'in'} {wanted}: each thread holds "
            f"{per_row}",
        )

    # -- what users want (a walk backwards) -----------------------------------------------------

    def want_block(self, block: Block) -> None:
        for op in reversed(block.ops):
            for region in op.regions:
                for inner in region.blocks:
                    self.want_block(inner)
            self.want_op(op)

    def predicted(self, v: Value) -> Attribute | None:
        """The layout `v` will likely have: its own, what its users want, or the default."""
        t = v.type
        if not isinstance(t, TileType) or not t.is_static:
            return None
        return t.layout or self.anchored.get(v) or self.wanted.get(v) or self.default(t)

    def want(self, v: Value, layout: Attribute | None) -> None:
        """Record that a user of `v` wants it in `layout`; the earliest user wins (the walk
        goes backwards)."""
        t = v.type
        if layout is None or not isinstance(t, TileType) or t.layout is not None:
            return
        if layout_error(layout, t.shape, self.num_warps) is None:
            self.wanted[v] = layout

    def want_op(self, op: Operation) -> None:
        if isinstance(op, T.StoreOp):
            value = self.predicted(op.value)
            self.want(op.value, value)
            if op.mask is not None:  # where the store will move the value (`lay_out`)
                t = op.value.type
                coalesced = value is not None and (_is_slice(value) or self.coalesced(value, t))
                self.want(op.mask, value if coalesced else self.default(t))
        elif isinstance(op, T.BroadcastOp):
            result = self.predicted(op.result)
            if result is not None:
                self.want(op.input, broadcast_source_layout(result))
        elif isinstance(op, T.ExpandDimsOp):
            result = self.predicted(op.result)
            if result is not None:
                self.want(op.input, slice_layout(result, op.axis))
        elif _is_elementwise(op) and op.results:
            result = self.predicted(op.results[0])
            for v in op.operands:
                self.want(v, result)
        elif isinstance(op, T.DotOp):
            self.want(op.operands[2], self.predicted(op.result))
        elif isinstance(op, (T.LoadOp, G.GatherOp)) and op.mask is not None:
            self.want(op.mask, self.predicted(op.result))
        elif isinstance(op, G.BincountOp):
            for v in op.operands[1:]:
                self.want(v, self.predicted(op.indices))
        elif isinstance(op, scf.ForOp):
            for init, arg in zip(op.inits, op.iter_args):
                self.want(init, self.predicted(arg))
            for yielded, arg in zip(op.yield_op.operands, op.iter_args):
                self.want(yielded, self.predicted(arg))
        if isinstance(op, (G.GatherOp, G.ScatterOp, AtomicScatterOp)):
            accessed = op.result if isinstance(op, G.GatherOp) else op.value
            if not isinstance(op, G.GatherOp):
                self.want(op.value, self.predicted(op.value))
            layout = self.predicted(accessed)
            if layout is not None:
                indices = op.indices.type
                rank = op.view.type.rank
                self.want(op.indices, index_layout(layout, op.axis, indices, rank))

    # -- control flow ---------------------------------------------------------------------------

    def loop(self, op: scf.ForOp) -> None:
        body = op.body.block
        for i, (init, arg, out) in enumerate(zip(op.inits, op.iter_args, op.results)):
            if not isinstance(init.type, TileType):
                continue
            self.laid_out(arg, self.anchored.get(arg))
            out.type = arg.type
            self.convert(op, 3 + i, arg.type.layout, "loop-carried value")
        self.block(body)
        self.yielded(body, [a.type for a in op.iter_args], "loop-carried value")

    def branch(self, op: scf.IfOp) -> None:
        for r in op.results:
            self.laid_out(r, None)
        for region in op.regions:
            for block in region.blocks:
                self.block(block)
                self.yielded(block, [r.type for r in op.results], "scf.if result")

    def yielded(self, block: Block, types: list, why: str) -> None:
        term = block.terminator
        if term is None:
            return
        for i, t in enumerate(types):
            if isinstance(t, TileType):
                self.convert(term, i, t.layout, why)


def register_a_operand(dot: T.DotOp) -> T.DotOperandLayout | None:
    """The `#dot_operand` layout `dot`'s left operand can take without leaving registers, or
    None. An `mma.sync` accumulator tiled over warps `[W, 1]` holds, in each thread, exactly the
    elements of its rows that the A fragments of a dot on the same warps need, in pairs of
    adjacent columns: two n8 accumulator tiles are one k16 A fragment (FlashAttention-2's
    P @ V). So an f16/bf16 operand computed in that layout (the `#blocked` twin of the
    accumulator, as `anchored_layouts` leaves a softmax of scores) is repacked, not staged
    through shared memory. A `wgmma` accumulator (version 3, 16 rows a warp) has the same
    twin, and wgmma's register-A form takes the same fragments (`tilec.lowering.wgmma`)."""
    mma = dot.result.type.layout
    a = dot.a.type
    if not isinstance(mma, T.MmaLayout) or mma.version not in (2, 3):
        return None
    if mma.warps_per_cta[1] != 1:
        return None
    if mma.version == 3 and a.shape[0] != 16 * mma.warps_per_cta[0]:
        return None
    if str(a.element) not in ("f16", "bf16") or a.shape[1] % 16:
        return None
    if a.layout not in (mma, blocked_equivalent(mma, a.shape)):
        return None
    return T.DotOperandLayout(0, tuple(mma.warps_per_cta), 2)


def anchored_layouts(kernel: FuncOp, num_warps: int) -> dict[Value, Attribute]:
    """The layouts that values computed from a laid-out value (tiling's `#mma` accumulators)
    take by keeping every element in its thread: elementwise ops whose laid-out operands agree,
    reductions (the slice), `expand_dims`, tiling's conversions to no layout yet, and loop-
    carried values whose yielded value has one (to a fixed point). What the backward walk
    predicts for them, so that the ops free to choose (splats, masks, broadcasts of row
    statistics) come to the accumulator rather than the accumulator going to them: attention's
    scores, their softmax and the carried row max and sum stay in the registers the dot left
    them in."""
    anchored: dict[Value, Attribute] = {}

    def layout_of(v: Value) -> Attribute | None:
        t = v.type
        return (t.layout or anchored.get(v)) if isinstance(t, TileType) else None

    def settle(v: Value, layout: Attribute | None) -> bool:
        t = v.type
        if layout is None or not isinstance(t, TileType) or t.layout is not None:
            return False
        if isinstance(layout, T.MmaLayout):  # its #blocked twin: the same registers
            layout = blocked_equivalent(layout, t.shape) or layout
        if anchored.get(v) == layout or layout_error(layout, t.shape, num_warps) is not None:
            return False
        anchored[v] = layout
        return True

    def walk(block: Block) -> None:
        for op in block.ops:
            if isinstance(op, scf.ForOp):
                for _ in range(4):  # carried values settle in a pass or two
                    walk(op.body.block)
                    changed = False
                    for i, arg in enumerate(op.iter_args):
                        layout = layout_of(op.yield_op.operands[i])
                        changed |= settle(arg, layout)
                        settle(op.results[i], layout)
                    if not changed:
                        break
                continue
            for region in op.regions:
                for inner in region.blocks:
                    walk(inner)
            if not op.results or not isinstance(op.results[0].type, TileType):
                continue
            result = op.results[0]
            source = layout_of(op.operands[0]) if op.operands else None
            if isinstance(op, T.ConvertLayoutOp):
                settle(result, source)
            elif isinstance(op, T.ReduceOp) and source is not None:
                settle(result, _reduced_layout(source, op.axis))
            elif isinstance(op, T.ExpandDimsOp) and source is not None:
                settle(result, expand_layout(source, op.axis))
            elif _is_elementwise(op):
                layouts = {layout_of(v) for v in op.operands if isinstance(v.type, TileType)}
                layouts.discard(None)
                if len(layouts) == 1:
                    settle(result, layouts.pop())

    if any(
        isinstance(v.type, TileType) and v.type.layout for op in kernel.walk() for v in op.results
    ):
        walk(kernel.body.block)
    return anchored


_FREE_OPS = (T.LoadOp, G.GatherOp, T.FullOp, T.SplatOp, T.IotaOp, T.BroadcastOp, arith.ConstantOp)


def _is_slice(layout: Attribute | None) -> bool:
    return isinstance(layout, T.SliceLayout)


def _coalesced(layout: Attribute, t: TileType, access: int) -> bool:
    """Whether a warp's accesses in `layout` already cover whole 128-byte lines of a row (or
    the whole row): lanes along the last dimension first, consecutive runs per thread, each
    run one access (`access`: the elements one access of that shape moves). A run longer
    than one access takes several, each instruction striding across the lanes' runs: a
    scan's 16-byte runs (`passes/scan_layouts.py`) stored to rows no 16 bytes align would
    write 2 bytes of each 16 per instruction."""
    if not isinstance(layout, BlockedLayout) or layout.order[0] != t.rank - 1:
        return False
    if layout.size_per_thread[-1] > access and t.shape[-1] > access:
        return False
    span = layout.size_per_thread[-1] * layout.threads_per_warp[-1]
    return min(span, t.shape[-1]) * element_bytes(t.element) >= 128 or span >= t.shape[-1]


def _reduced_layout(layout: Attribute | None, axis: int) -> Attribute | None:
    """A reduction's result stays in the threads of its row: the slice of its operand's
    layout (None for a slice of a slice: the default, through shared memory)."""
    if layout is None or _is_slice(layout):
        return None
    return slice_layout(layout, axis)


def _is_elementwise(op: Operation) -> bool:
    module = type(op).__module__
    return (
        module in (arith.__name__, math.__name__)
        or isinstance(op, (T.SelectOp, T.CastOp, random.PhiloxOp))
    ) and not isinstance(op, arith.ConstantOp)


def _reshaped_layout(source: TileType, result: TileType) -> BlockedLayout | None:
    """The operand's layout with size-1 dimensions removed and inserted, when the reshape only
    does that and every thread keeps its elements; None otherwise (the result gets its default
    layout and the lowering moves the elements through shared memory)."""
    src_kept = [d for d, n in enumerate(source.shape) if n != 1]
    dst_kept = [d for d, n in enumerate(result.shape) if n != 1]
    if [source.shape[d] for d in src_kept] != [result.shape[d] for d in dst_kept] or not src_kept:
        return None
    layout = remove_unit_dims(source.layout, source.shape, src_kept)
    if layout is None:
        return None
    for axis in range(result.rank):
        if axis not in dst_kept:
            layout = insert_unit_dim(layout, axis)
    return layout
