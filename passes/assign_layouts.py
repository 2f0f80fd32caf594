"""The `assign-layouts` pass: a `#blocked` layout for every tile value, and the layout
conversions the lowering needs.

After it, every tile type carries a layout, the kernel has `tilec.num_warps`, and every op's
operands are in the layouts its lowering expects (`tilec.lowering.llvm` states the contract).
The layouts are the minimal ones Stage D needs; Stage E's tiling pass replaces the choice of
layouts, not the mechanism.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tilec.diagnostics import TileError
from tilec.dialects import arith, math, scf
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import BlockedLayout, IntegerAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Block, Operation, Value
from tilec.ir.types import TileType
from tilec.lowering.layouts import (
    broadcast_source_layout,
    default_layout,
    insert_unit_dim,
    layout_error,
    permute_layout,
    remove_unit_dims,
)
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["AssignLayouts"]

WARP_COUNTS = (1, 2, 4, 8, 16, 32)


@register_pass
class AssignLayouts(Pass):
    """Gives every tile a `#blocked` layout; converts operands that an op needs elsewhere.

    The number of warps is the kernel's pin (`tilec.num_warps`), else the option `num_warps`;
    it is written on the kernel. A tile gets `default_layout` of its shape (row-major, lanes
    along the last dimension, warps along the first: see `tilec.lowering.layouts`), except
    where an op can keep every element in the thread that holds it: `tile.expand_dims`,
    `tile.transpose` and unit-dimension `tile.reshape` give their result the operand's layout
    with dimensions inserted, permuted or removed. Explicit `tile.convert_layout` ops go where
    an op needs them: operands of elementwise ops (`arith`, `math`, `tile.select`,
    `tile.cast`) and a dot's accumulator take the result's layout; a `tile.broadcast` operand
    takes the result's layout (wrapped on its size-1 dimensions, so the broadcast is a register
    copy); stored values and load/store masks take the default layout (coalesced accesses);
    loop-carried values and `scf.if` results keep the default layout around the loop. Values
    that already have a layout keep it, so running the pass twice changes nothing. Assumes
    static tile shapes (run `specialize` first).
    Remarks: per kernel, the warps and the conversions inserted; each conversion says why.
    """

    name = "assign-layouts"
    summary = "Give every tile value a blocked layout; insert layout conversions"

    @dataclass
    class Options:
        num_warps: int = option(4, "warps per block when the kernel does not pin them")

    def run(self, module: Operation, ctx: PassContext) -> None:
        if self.options.num_warps not in WARP_COUNTS:
            raise TileError(
                f"assign-layouts: option num_warps must be one of {WARP_COUNTS}, "
                f"got {self.options.num_warps}"
            )
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            _KernelLayouts(kernel, self.options.num_warps, ctx).run()


class _KernelLayouts:
    def __init__(self, kernel: FuncOp, default_warps: int, ctx: PassContext):
        self.kernel = kernel
        pinned = kernel.attributes.get("tilec.num_warps")
        self.num_warps = pinned.value if pinned is not None else default_warps
        self.source = "pinned by the kernel" if pinned is not None else "option num_warps"
        self.ctx = ctx
        self.conversions: Counter[str] = Counter()
        self.values = 0

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
        self.block(block)
        self.kernel.attributes["tilec.num_warps"] = IntegerAttr(self.num_warps)
        made = ", ".join(f"{n} {why}" for why, n in sorted(self.conversions.items()))
        total = sum(self.conversions.values())
        self.ctx.remark(
            self.kernel,
            f"{self.num_warps} warps ({self.source}); {_count(self.values, 'tile value')} laid "
            "out; "
            + (
                f"{_count(total, 'layout conversion')}: {made}"
                if total
                else "no layout conversions"
            ),
        )

    # -- helpers ------------------------------------------------------------------------------

    def default(self, t: TileType) -> BlockedLayout:
        for d in t.shape:
            if not isinstance(d, int):
                raise TileError(
                    f"assign-layouts needs static tile shapes, got {t}",
                    self.kernel.loc,
                    hint="run 'specialize' first",
                )
        return default_layout(t.shape, self.num_warps)  # type: ignore[arg-type]

    def laid_out(self, v: Value, wanted: BlockedLayout | None) -> None:
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

    def convert(self, op: Operation, index: int, layout: BlockedLayout, why: str) -> None:
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
        if isinstance(op, T.StoreOp):
            layout = self.default(op.value.type)
            self.convert(op, 1 + len(op.offsets), layout, "stored value (coalesced)")
            if op.mask is not None:
                self.convert(op, len(op.operands) - 1, layout, "store mask")
            return
        if not op.results:
            return
        result = op.results[0]
        if isinstance(op, T.ExpandDimsOp):
            self.laid_out(result, insert_unit_dim(op.input.type.layout, op.axis))
        elif isinstance(op, T.TransposeOp):
            self.laid_out(result, permute_layout(op.input.type.layout, op.perm))
        elif isinstance(op, T.ReshapeOp):
            self.laid_out(result, _reshaped_layout(op.input.type, result.type))
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
        elif isinstance(op, T.LoadOp) and op.mask is not None:
            self.convert(op, len(op.operands) - 1, layout, "load mask")

    def loop(self, op: scf.ForOp) -> None:
        body = op.body.block
        for i, (init, arg, out) in enumerate(zip(op.inits, op.iter_args, op.results)):
            if not isinstance(init.type, TileType):
                continue
            self.laid_out(arg, None)
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


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _is_elementwise(op: Operation) -> bool:
    module = type(op).__module__
    return (
        module in (arith.__name__, math.__name__) or isinstance(op, (T.SelectOp, T.CastOp))
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
