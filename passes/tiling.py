"""The `tiling` pass: tile sizes, warps, tensor-core accumulator layouts and the block order.

It binds every tile-size symbol as `specialize` does (and with its mechanism: static shapes,
`tilec.tile_sizes`, `tilec.max_extent`), but chooses the sizes of dots itself: a kernel whose
`tile.dot`s take f16/bf16 operands into an f32 accumulator is tiled for `mma.sync.m16n8k16`
(warp tiles, instruction tiles, the shared memory of the operand pipeline, accumulator
registers), one whose dots take i8 operands into i32 for `mma.sync.m16n8k32`, and those
accumulators get their `#mma` layout. It writes `tilec.num_warps` on every
kernel and regroups the blocks of a 2-D dot grid so that blocks that run together share operand
tiles in L2. `docs/passes.md` is the contract.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tilec.diagnostics import TileError
from tilec.dialects import tile as T
from tilec.dialects.builtin import (
    PRODUCER_ATTRIBUTE,
    STAGED_A_ATTRIBUTE,
    FuncOp,
)
from tilec.ir.attributes import IntegerAttr, StringAttr, UnitAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Operation
from tilec.ir.types import TileType, f16, i8
from tilec.lowering.layouts import (
    MMA_I8_INSTR_SHAPE,
    MMA_INSTR_SHAPE,
    WARP_SIZE,
    element_bytes,
    mma_accumulator_layout,
    wgmma_accumulator_layout,
)
from tilec.passes.occupancy import REGISTERS_PER_SM
from tilec.passes.pipeline import MAX_DEFAULT_STAGES
from tilec.passes.specialize import (
    TilePlan,
    bind_tile_sizes,
    check_size_options,
    kernels_of,
    parse_assignments,
    plan_tile_sizes,
    symbols_of,
)
from tilec.passes.split_reduction import splits_dot_loop
from tilec.passes.tile_shapes import shape_streamed_tiles
from tilec.passes.tiling_rewrites import fix_extents, set_accumulator_layout
from tilec.passes.wgmma_model import (
    epilogue_operands,
    epilogue_words,
)
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["Tiling"]

from tilec.passes.tiling_grid import WgmmaGrid
from tilec.passes.tiling_operands import (
    eight_bit_wgmma_problem,
    from_accumulator,
    int8_byte_copies,
    int8_mma_problem,
    is_f8_dot,
    is_mma_dot,
    m_major_a,
    operand_load,
    scattered_operands,
    streamed_operand,
)
from tilec.passes.tiling_order import BlockOrder
from tilec.passes.tiling_search import STAGED_A, WARP_COUNTS, MmaSearch, TileConfig, TiledDot


@register_pass
class Tiling(Pass):
    """Chooses tile sizes, num_warps, `#mma` accumulator layouts and the block order.

    Sizes: pins win (`@kernel(tile=...)`, then the option `tiles`); whole dimensions take their
    extent as in `specialize`. A kernel with a `tile.dot` of f16/bf16 operands and an f32
    accumulator (and `mma=true`) is tiled for `mma.sync.m16n8k16`: every dot's M, N and K tile
    must be a multiple of 16·W_m, 8·W_n and 16 for W_m x W_n warps. i8 operands into an i32
    accumulator take `mma.sync.m16n8k32.row.col.s32.s8.s8.s32` (sm_80 and later; on sm_90a
    when wgmma cannot: its 8-bit forms read both operands K-major only, see below) with
    multiples of 16·W_m, 16·W_n (its n8 tiles go in pairs) and 32, and
    `#mma<..., instr_shape = [16, 8, 32]>`; the sums wrap around in i32 as the interpreter's
    do. Its A must be stored [M, K] (`tiling_search.int8_mma_problem`: else the FMA path);
    operands copied in runs under 8 bytes prefer the scattered operands' small accumulators
    (`tiling_search.int8_byte_copies`). Among the sizes (M, N: 128
    or 64, less only for smaller known extents; K: 64, 32, 16) and warps (4, 8, 2, 1, or the
    pin) that qualify and keep the operand buffers (2 copies of each operand loaded in the
    loop, or the pinned stages; the remark budgets pipeline's own choice: of the stage counts up
    to `stages` that fit, the one with the most copies in flight per SM) under `shared_limit`,
    the accumulators at most 128 f32 registers per thread and the words a thread holds at most
    `LIVE_WORD_BUDGET` (`live_words`: with the B fragments held across the loop and the loaded
    tiles several dots read; when no config does, M and N tiles down to 16 are tried), it
    prefers: a grid of at least `sm_count` blocks when the option `extents` gives the grid's
    extents; then 4 warps; then the largest accumulator tiles; then warps along M only when the
    kernel reduces along rows (each row in one warp); then the squarest warp tiles (fewest
    operand fragments per mma); then 64-byte K rows. A matmul of unknown extents gets
    128x128x32 with 2x2 warps. The accumulator chain of every such dot (its result, the
    `tile.full` that starts it, the `scf.for` iter_arg and result that carry it) gets
    `#mma<version = 2, warps_per_cta = [W_m, W_n], instr_shape = [16, 8, 16]>`; other tiles are
    left to `assign-layouts`. A dot that cannot use mma (f32 operands, a K tile below 16, too
    much shared memory, or a tile of the kernel under its sizes larger than `shared_limit`:
    converting its layout would go through shared memory) keeps the FMA path and a remark
    says why; pins that cannot work (a tile
    that is not a whole number of warp tiles, warps that do not tile the block) are errors.
    Other kernels get their free sizes from `passes/tile_shapes.py`: the axis every streamed
    tile ends in (the contiguous one) takes the `max_tile_elements` budget (capped by a known
    extent), the others start at one row and grow while the occupancy model keeps under 72 KiB
    in flight per SM — sequential loops' axes first; kernels without one contiguous axis (a
    transpose) keep `specialize`'s heuristic, grown to `min_tile_elements`; their
    warps are left to `assign-layouts` unless pinned. Block order: a kernel with a dot over a 2-D grid has its program ids
    remapped so that consecutive blocks (axis 0 fastest) walk `group_m` tiles down axis 0
    before moving along axis 1 (Triton's GROUP_M): a bijection computed from `tile.program_id`
    and `tile.num_programs`, so partial groups at the edge work; `tilec.group_m` records it.
    Unpinned (`group_m=0`), both tensor-core tilings group `DEFAULT_GROUP_M` blocks: on the
    H200 groups of 8 took 0.94-1.00 of the launch order's time for seven wgmma GEMMs (an
    earlier measurement that favoured the launch order timed the grouped kernel with its
    wgmma serialized: see `tiling_rewrites.block_divmod`). A grid axis no streamed dot operand depends on goes
    first instead (`tiling_order.BlockOrder.shared_axis_first`: attention's query tiles).
    On sm_90a a single dot of loaded operands takes the wgmma tiling (`wgmma_tiling`):
    f16/bf16, and 8-bit operands (i8 into i32, f8e4m3 and f8e5m2 into f32) when both are
    K-major, on `wgmma.m64nNk32` with BK = 128. An f8 dot nothing takes natively has its
    operands widened to f16 (exact) and is tiled as an f16 dot (`widen_f8`).
    On sm_90a, a config whose dots all hold A in registers anyway (computed from an
    accumulator, or loaded before the loop) on warps `[4 g, 1]` with 16 rows a warp runs on
    wgmma with A from registers (`tiling_search.MmaSearch.wgmma_chain`), preferred over
    mma.sync and bounded by `WGMMA_LIVE_WORD_BUDGET`.
    Exact extents: dimensions named in the option `exact` have exactly their `extents` value
    at every launch (the jit says so when a whole dimension fills its tile); they become
    static in the kernel's tensor types, so `tile.dim` and the padding masks fold away and
    the launcher checks the extent like any fixed one.
    Assumes the frontend's conventions (symbol `B<D>` tiles dimension `D`, `tilec.grid`).
    Remarks: per kernel, the sizes and why, the warps and mma tiling with their shared memory
    and registers, dots left on the FMA path, the block order, and the extents made exact.
    """

    name = "tiling"
    summary = "Choose tile sizes, warps, mma accumulator layouts and an L2-friendly block order"

    @dataclass
    class Options:
        tiles: str = option("", 'tile sizes by symbol, e.g. "BM=64,BN=32" (kernel pins win)')
        extents: str = option("", 'known extents by dimension, e.g. "M=4096,N=4096"')
        exact: str = option(
            "",
            'dimensions whose extent is exactly the one in extents, e.g. "N" (fixed in the '
            "tensor types: a launch with another extent is refused)",
        )
        fills: str = option(
            "",
            "per dimension, the longest power-of-two run whose tiles leave few lanes past its "
            'extent idle, e.g. "N=1024" for 5000 columns (tiles of 4096 would leave 39%): the '
            "contiguous run of a memory-bound kernel stays within it (the jit sets it from the "
            "exact extent, `tilec.jit_sizes.fill_run`)",
        )
        num_warps: int = option(0, "warps per block unless the kernel pins them (0: chosen)")
        mma: bool = option(
            True, "tile f16/bf16 dots for mma.sync m16n8k16, i8 for m16n8k32 (false: FMA path)"
        )
        wgmma: bool = option(
            True,
            "on sm_90a (option arch), a single matmul dot with free tile sizes takes wgmma "
            "m64n128k16 on 8 warps, and dots whose A is in registers anyway (attention's) wgmma "
            "with A from registers (false: mma.sync)",
        )
        m_major_a: bool = option(
            True,
            "on wgmma, a single matmul's A stored [K, M] (a.T @ b) is read M-major by its "
            "descriptor, the accumulator keeping wgmma's own row order (natural_rows) -- "
            "false: read into registers by ldmatrix.trans every step, the accumulator in its "
            "#blocked twin's order",
        )
        staged_a: str = option(
            "auto",
            "where a wgmma dot reads an A loaded before its loop (attention's q): 'registers' "
            "(read into fragments once, held across the loop), 'shared' (read by "
            "descriptor from its buffer every step, freeing those registers), 'auto' (shared "
            "in a chain tiled for a producer warpgroup, else registers)",
        )
        producer: int = option(
            -1,
            "tile a chain of dots (attention's q @ k.T, softmax, p @ v) for a producer "
            "warpgroup: 128-row blocks of two consumer warpgroups, pipeline's "
            "warp_specialize and pingpong following (passes/wgmma_model.py, chain_bound): -1 "
            "where the dots, not the softmax, bound the loop, 0 never, 1 wherever it can; "
            "and a GEMM's walk over its tiles by one block an SM with a producer (pipeline's "
            "persistent and warp_specialize following; walk_clocks): -1 where the SM model "
            "gives it at most 0.95 of the grid's time, 0 never, 1 wherever its tiles run one "
            "block an SM",
        )
        arch: str = option(
            "", "the target architecture (the compiler sets it when lowering; '': unknown)"
        )
        group_m: int = option(
            0,
            "blocks grouped along grid axis 0 for L2 reuse (1: off, the launch order; 0: "
            "choose: 8)",
        )
        inner_first: bool = option(
            True,
            "kernels without dots: the grid axis that walks the innermost dimension of the "
            "tensors the blocks move first (CUDA's x), so the blocks launched together read "
            "and write neighbouring memory (passes/tiling_order.py)",
        )
        stages: int = option(
            MAX_DEFAULT_STAGES,
            "most copy-pipeline stages budgeted unless the kernel pins them (pipeline's "
            "default: the count with the most copies in flight per SM, up to 4)",
        )
        shared_limit: int = option(232448, "shared memory bytes per block (227 KiB on sm_90)")
        sm_count: int = option(132, "SMs to fill when extents are known (132 on H200)")
        split: bool = option(
            True,
            "rank wgmma tiles of a GEMM whose K loop split-reduction can split with the K "
            "loop shared out among S blocks (the S of least modelled time)",
        )
        max_extent: int = option(1024, "extent assumed for a whole dimension of unknown extent")
        min_tile_elements: int = option(1024, "non-dot tiles: grow free sizes to this many")
        max_tile_elements: int = option(4096, "non-dot tiles: shrink free sizes above this")

    def run(self, module: Operation, ctx: PassContext) -> None:
        opts = self.options
        tiles, extents = check_size_options(module, opts, self.name)
        if opts.num_warps != 0 and opts.num_warps not in WARP_COUNTS:
            raise TileError(
                f"tiling: option num_warps={opts.num_warps} is not one of {WARP_COUNTS} "
                "(0 lets the pass choose)"
            )
        if opts.staged_a not in STAGED_A:
            raise TileError(
                f"tiling: option staged_a must be one of {', '.join(STAGED_A)}, got "
                f"'{opts.staged_a}'"
            )
        if opts.producer not in (-1, 0, 1):
            raise TileError(f"tiling: option producer must be -1, 0 or 1, got {opts.producer}")
        if opts.group_m < 0:
            raise TileError(
                f"tiling: option 'group_m' must be at least 0 (0 lets the pass choose), got "
                f"{opts.group_m}"
            )
        for name in ("stages", "shared_limit", "sm_count"):
            if getattr(opts, name) < 1:
                raise TileError(
                    f"tiling: option '{name}' must be at least 1, got {getattr(opts, name)}"
                )
        exact = [d.strip() for d in opts.exact.split(",") if d.strip()]
        for d in exact:
            if d not in extents:
                raise TileError(
                    f"tiling: option exact names '{d}', which has no extent in option extents"
                )
        for kernel in kernels_of(module):
            _KernelTiling(kernel, tiles, extents, opts, ctx).run()
            fix_extents(kernel, {d: extents[d] for d in exact}, ctx)


class _KernelTiling(WgmmaGrid, MmaSearch, BlockOrder):
    def __init__(self, kernel: FuncOp, tiles, extents, opts: Tiling.Options, ctx: PassContext):
        self.kernel = kernel
        self.extents = extents
        self.opts = opts
        self.ctx = ctx
        self.plan: TilePlan = plan_tile_sizes(kernel, tiles, extents, opts.max_extent)
        # split-reduction may share a GEMM's K loop out among blocks (runs after tiling).
        self.splits_k = opts.split and splits_dot_loop(kernel)
        pinned = kernel.attributes.get("tilec.num_warps")
        if pinned is not None:
            self.warps_pin: int | None = pinned.value
            self.warps_source = "pinned by the kernel"
            self.warps_option = f"warps={pinned.value} (pinned by the kernel)"
        elif opts.num_warps:
            self.warps_pin = opts.num_warps
            self.warps_source = "option num_warps"
            self.warps_option = f"option num_warps={opts.num_warps}"
        else:
            self.warps_pin = None
            self.warps_source = ""
            self.warps_option = ""
        if self.warps_pin is not None and self.warps_pin not in WARP_COUNTS:
            raise TileError(
                f"kernel '{kernel.sym_name}': {self.warps_option} is not one of {WARP_COUNTS}",
                kernel.loc,
            )
        stages = kernel.attributes.get("tilec.num_stages")
        self.stages = stages.value if stages is not None else opts.stages
        self.stages_pinned = stages is not None
        self.stages_source = (
            "pinned by the kernel"
            if stages is not None
            else f"the most copies in flight per SM, up to {opts.stages}"
        )
        self.reduces = any(isinstance(op, T.ReduceOp) for op in kernel.walk())
        self.scattered = scattered_operands(kernel)
        self.byte_copies = int8_byte_copies(kernel)
        self.tiles = _tile_shapes(kernel)
        self.fma_dots = _fma_dot_operands(kernel)

    # -- sizes ----------------------------------------------------------------------------------

    def size(self, d: str | int, config: TileConfig | None = None) -> int:
        if isinstance(d, int):
            return d
        if config is not None and d in config.sizes:
            return config.sizes[d]
        return self.plan.symbols[d].size

    def describe(self, d: str | int, role: str, config: TileConfig) -> str:
        """`M tile BM=8 (pinned by the kernel)`: a size and where it comes from."""
        if isinstance(d, int):
            return f"{role} tile {d}"
        s = self.plan.symbols[d]
        if d in config.sizes:
            origin = "heuristic"
        elif s.pinned_by == "option tiles":
            origin = "option tiles"
        elif s.pinned_by:
            origin = "pinned by the kernel"
        else:
            origin = s.reason.split(":")[0]
        return f"{role} tile {d}={self.size(d, config)} ({origin})"

    # -- the kernel -----------------------------------------------------------------------------

    def run(self) -> None:
        kernel = self.kernel
        dot_ops = [op for op in kernel.walk() if isinstance(op, T.DotOp)]
        mma_dots: list[TiledDot] = []
        for op in dot_ops:
            if not is_mma_dot(op):
                self.ctx.remark(
                    op,
                    f"FMA path: mma.sync m16n8k16 takes f16/bf16 operands and an f32 "
                    f"accumulator, this dot has {op.a.type.element} x {op.b.type.element} "
                    f"-> {op.acc.type.element} (and m16n8k32 i8 operands and an i32 one)",
                )
            elif not self.opts.mma:
                if is_f8_dot(op):
                    widen_operands(op)  # the FMA path multiplies f16 values, not f8 bytes
                self.ctx.remark(op, "FMA path: option mma=false")
            elif op.a.type.element == i8 and int8_mma_problem(op) is not None:
                self.ctx.remark(op, int8_mma_problem(op))
            else:
                mma_dots.append(
                    TiledDot(
                        op,
                        op.acc.type.shape[0],
                        op.acc.type.shape[1],
                        op.a.type.shape[1],
                        element_bytes(op.a.type.element),
                        (streamed_operand(op.a, op), streamed_operand(op.b, op)),
                        operand_load(op.a) is None and from_accumulator(op.a),
                    )
                )
        wgmma_config = None
        if self.opts.wgmma and self.opts.arch == "sm_90a":
            wgmma_config = self.wgmma_tiling(mma_dots)
        if wgmma_config is None and any(is_f8_dot(d.op) for d in mma_dots):
            mma_dots = [self.widen_f8(d) if is_f8_dot(d.op) else d for d in mma_dots]
            if self.opts.wgmma and self.opts.arch == "sm_90a":  # as f16, wgmma may take it
                wgmma_config = self.wgmma_tiling(mma_dots)
        wgmma = wgmma_config is not None
        if wgmma_config is not None:
            config: TileConfig | None = wgmma_config
        else:
            config = self.choose_mma(mma_dots) if mma_dots else None
        if config is not None:
            on_wgmma = wgmma or self.wgmma_chain(mma_dots, config)
            for name, size in config.sizes.items():
                s = self.plan.symbols[name]
                s.size, s.free = size, False
                s.reason = s.reason.split(":")[0] + (
                    ": wgmma tiling" if on_wgmma else ": mma.sync tiling"
                )
            num_warps = config.num_warps
        if dot_ops or not shape_streamed_tiles(
            kernel,
            self.plan,
            self.opts.max_tile_elements,
            self.extents,
            self.opts.sm_count,
            parse_assignments(self.opts.fills, "fills", "tiling"),
        ):
            self.plan.fit_to_elements(self.opts.min_tile_elements, self.opts.max_tile_elements)
        held: list[tuple[bool, bool]] = []  # the epilogue's operands, read while symbolic
        if config is not None and wgmma:
            held = epilogue_operands(mma_dots[0].op, mma_dots[0].m, mma_dots[0].n)
        if symbols_of(kernel):
            bind_tile_sizes(kernel, self.plan)
            self.ctx.remark(kernel, self.plan.remark())
        _check_tile_elements(kernel)
        if config is None:
            num_warps = self.plain_warps()
        if num_warps is not None:
            kernel.attributes["tilec.num_warps"] = IntegerAttr(num_warps)
        if config is not None and wgmma:
            dot = mma_dots[0]
            bm, bn, bk = (self.size(x, config) for x in (dot.m, dot.n, dot.k))
            warps = config.num_warps
            transposed_a = m_major_a(dot.op)
            natural = transposed_a and self.opts.m_major_a
            if transposed_a and not natural:
                self.ctx.remark(
                    kernel,
                    "A stored [K, M] read into registers by ldmatrix.trans every step (option "
                    "m_major_a = false): the accumulator keeps its #blocked twin's row order",
                )
            set_accumulator_layout(
                dot.op, wgmma_accumulator_layout(warps, bn, 32 // dot.element_bytes, natural)
            )
            blocks = self.wgmma_blocks_per_sm(config, dot)
            kernel.attributes.setdefault("tilec.min_blocks_per_sm", IntegerAttr(blocks))
            pinned = [
                f"{x}={self.size(x, config)}"
                for x in (dot.m, dot.n, dot.k)
                if self.plan.symbols[x].pinned_by
            ]
            groups = warps // 4
            epilogue = epilogue_words(held, bn)
            self.ctx.remark(
                kernel,
                f"{_named(dot.m, 'BM')}={bm}, {_named(dot.n, 'BN')}={bn}, "
                f"{_named(dot.k, 'BK')}={bk}, {warps} warps"
                + (f" ({', '.join(pinned)} pinned)" if pinned else "")
                + f": wgmma m64n{bn}k{32 // dot.element_bytes} (sm_90a, option wgmma), "
                f"{groups} warpgroup"
                + ("s" if groups > 1 else "")
                + f" of 64x{bn}, both operands staged in shared memory (smem-placement says how "
                f"each is read)"
                + (
                    "; the accumulator keeps wgmma's own row order (natural_rows), as A is "
                    "stored [K, M] and read M-major by its descriptor: the copies write it as "
                    "its tensor holds it"
                    if natural
                    else ""
                )
                + f"; {blocks} block{'s' if blocks > 1 else ''} per SM "
                f"(tilec.min_blocks_per_sm = {blocks}: a thread holds {bm * bn // (32 * warps)} "
                f"accumulator words, {bk * dot.element_bytes // 8} of descriptors"
                + " and about 48 besides"
                + (
                    f"; the epilogue holds {epilogue} more of the tiles it combines with the "
                    "accumulator, which may spill once a tile, after the loop"
                    if epilogue
                    else ""
                )
                + f"); {self.wgmma_model_remark(dot, config)}",
            )
            walk = self.walk_plan(dot, config)
            if walk:
                self.ctx.remark(kernel, walk)
        elif config is not None and self.wgmma_chain(mma_dots, config):
            for dot in mma_dots:
                n = self.size(dot.n, config)
                set_accumulator_layout(dot.op, wgmma_accumulator_layout(config.num_warps, n))
            if self.producer:
                kernel.attributes[PRODUCER_ATTRIBUTE] = UnitAttr()
            if self.producer_why:
                self.ctx.remark(kernel, self.producer_why)
            if self.staged_a_shared(mma_dots):
                kernel.attributes[STAGED_A_ATTRIBUTE] = StringAttr("shared")
                source = (
                    "option staged_a = shared"
                    if self.opts.staged_a == "shared"
                    else "its registers go to the larger tile of a block with a producer "
                    "warpgroup; option staged_a"
                )
                self.ctx.remark(
                    kernel,
                    "staged A: the A loaded before the loop is read by descriptor from its "
                    f"buffer every step, not held in registers ({source})",
                )
            self.ctx.remark(kernel, self.mma_remark(mma_dots, config))
        elif config is not None:
            for dot in mma_dots:
                shape = MMA_I8_INSTR_SHAPE if dot.int8 else MMA_INSTR_SHAPE
                set_accumulator_layout(dot.op, mma_accumulator_layout(config.warps, shape))

            self.ctx.remark(kernel, self.mma_remark(mma_dots, config))
        self.group(bool(dot_ops))
        if config is not None and not wgmma:
            # For pipeline's stages: how many blocks an SM's registers hold.
            estimate = self.estimated_registers(mma_dots, config)
            kernel.attributes["tilec.estimated_registers"] = IntegerAttr(estimate)

    def wgmma_tiling(self, dots: list[TiledDot]) -> TileConfig | None:
        """The wgmma tiling of a single f16/bf16 dot whose operands are both loaded from
        memory (wgmma reads them from shared memory; a computed operand such as attention's P
        takes `wgmma_chain`) with unit last strides (copied a 16-byte chunk at a time), or
        None. Unpinned, BM and BN are each 64, 128 or 256 (BM = 16 x warps: one m64 row block
        a warpgroup) and BK is 64, the tile whose registers fit (`wgmma_registers`) that the
        SM model of `passes/wgmma_model.py` predicts fastest (`wgmma_preference`); a pinned
        size or warp count is kept where the lowering takes it -- BN a multiple of 64 up to
        256, K tiles of whole 128-byte rows -- so a pin (the user's or the tuner's) moves one
        decision of the wgmma tiling instead of sending the kernel to mma.sync."""
        if len(dots) != 1 or self.scattered:
            return None
        dot = dots[0]
        if dot.element_bytes not in (1, 2) or len({dot.m, dot.n, dot.k}) != 3:
            return None
        if operand_load(dot.op.a) is None or operand_load(dot.op.b) is None:
            return None
        if dot.element_bytes == 1:
            problem = eight_bit_wgmma_problem(dot.op)
            if problem is not None:
                self.ctx.remark(dot.op, f"not wgmma: {problem}")
                return None
        row = (WGMMA_ROW_BYTES // dot.element_bytes,)  # BK: one 128-byte row of each operand
        choices: list[dict[str, int]] = [{}]
        for name, values in ((dot.m, WGMMA_SIZES), (dot.n, WGMMA_SIZES), (dot.k, row)):
            if not isinstance(name, str):
                return None
            symbol = self.plan.symbols[name]
            if symbol.free:
                values = tuple(v for v in values if symbol.cap is None or v <= symbol.cap)
                if name == dot.m and self.warps_pin is not None:
                    values = (16 * self.warps_pin,)
            elif symbol.pinned_by:
                values = (self.size(name),)
            else:
                return None
            choices = [{**c, name: v} for c in choices for v in values]
        configs = []
        for sizes in choices:
            m, n, k = sizes[dot.m], sizes[dot.n], sizes[dot.k]
            warps = m // 16
            if m % 64 or not 64 <= m <= 256 or (self.warps_pin not in (None, warps)):
                continue
            if n % 64 or n > 256 or (k * dot.element_bytes) % 128:
                continue
            config = TileConfig(sizes, (warps, 1))
            if self.wgmma_registers(config, dot) is None:
                continue
            if not self.tile_problems(config):
                configs.append(config)
        if not configs:
            return None
        return min(configs, key=lambda c: self.wgmma_preference(c, dot))

    def widen_f8(self, dot: TiledDot) -> TiledDot:
        """An f8 dot that wgmma does not take natively becomes an f16 dot: each operand is
        converted to f16 -- exactly, f16 holds every f8e4m3 and f8e5m2 value -- where the dot
        reads it, and the dot then tiles as any f16 dot (the copies still move f8 bytes)."""
        op = dot.op
        kind = op.a.type.element
        why = (
            "wgmma is not used here"
            if self.opts.arch != "sm_90a" or not self.opts.wgmma
            else eight_bit_wgmma_problem(op) or "the wgmma tiling does not take this kernel"
        )
        widen_operands(op)
        self.ctx.remark(
            op,
            f"{kind} operands widened to f16 (exact) for the tensor cores: only wgmma "
            f"multiplies f8 natively (sm_90a, both operands K-major), and {why}",
        )
        return dataclasses.replace(dot, element_bytes=2)

    def wgmma_preference(self, c: TileConfig, dot: TiledDot) -> tuple:
        """Sort key of wgmma tilings, best first: the least time the SM model predicts for the
        grid (`wgmma_model.grid_clocks`: per k-step, the tensor cores' or shared memory's
        time, whichever is longer, no less than a copy's latency over the steps ahead, times
        the waves and the blocks an SM shares, with the epilogue and the fixed latencies a
        block alone on its SM exposes), then the largest tile."""
        bm, bn = self.size(dot.m, c), self.size(dot.n, c)
        blocks = self.blocks(c)
        per_sm = self.wgmma_blocks_per_sm(c, dot)
        bk = self.size(dot.k, c)
        depth = self.extents.get(dot.k[1:]) if isinstance(dot.k, str) else None  # BK tiles K
        k_steps = -(-depth // bk) if depth is not None else None
        splits, clocks = self.wgmma_split(c, dot, bm, bn, bk, k_steps, blocks, per_sm)
        times = self.walk_times(dot, c) if splits == 1 else None
        if times is not None and self.walks(dot, *times):
            clocks = times[1]  # the walk `walk_plan` will plan for this tile
        return (clocks, -(bm * bn), sorted(c.sizes.items()))

    def wgmma_registers(self, config: TileConfig, dot: TiledDot) -> int | None:
        """Registers a thread of the wgmma tiling's main loop is modelled to need: its share
        of the f32 accumulator (BM x BN / threads words), the two 64-bit operand descriptors
        of each k-step of 16 (4 words each) and about 48 besides (addresses, loop counters),
        rounded up to 8. None when that is past 255 or a block of such threads is past an
        SM's registers (256x256 on 16 warps). The epilogue is not counted: what it holds
        besides the accumulator (`wgmma_model.epilogue_words`) spills once a tile, after the
        loop -- on the H200, 128x256 with a bias + GELU epilogue spilled 88 bytes and ran at
        0.80 of cuBLAS's plain product; 128x128 ran at 0.66 on two blocks an SM (44 bytes
        spilled) and at 0.59 on one without spills (docs/benchmarks.md)."""
        threads = WARP_SIZE * config.num_warps
        accumulator = self.size(dot.m, config) * self.size(dot.n, config) // threads
        k_steps = self.size(dot.k, config) * dot.element_bytes // 32  # k16 (16-bit) or k32
        words = accumulator + 4 * k_steps + 48
        per_thread = -(-words // 8) * 8
        if per_thread > 255 or threads * per_thread > REGISTERS_PER_SM:
            return None
        return per_thread

    def wgmma_blocks_per_sm(self, config: TileConfig, dot: TiledDot) -> int:
        """Blocks an SM holds by the registers of the wgmma tiling's main loop
        (`wgmma_registers`), at most two (pipeline then sizes the stages for half an SM's
        shared memory). On the H200 at 128x128x64 a thread needs 128 (ptxas took 124, two
        blocks); at BK=128, 144 -- one block: held to 128 it spilled 852 bytes; at
        128x256x64, 192 (ptxas took 207)."""
        threads = WARP_SIZE * config.num_warps
        per_thread = self.wgmma_registers(config, dot) or 255
        return max(1, min(2, REGISTERS_PER_SM // (threads * per_thread)))

    def plain_warps(self) -> int | None:
        """A kernel without tensor-core dots: its pin, else None (assign-layouts chooses, from
        the tiles it lays out: an occupancy model, 4 to 16 warps)."""
        if self.warps_pin is not None:
            self.ctx.remark(self.kernel, f"{self.warps_pin} warps ({self.warps_source})")
            return self.warps_pin
        return None

    # -- the mma search -------------------------------------------------------------------------


# No block holds a tile of more elements than this (4 MiB of f32: an SM has 256 KiB of
# registers and 227 KiB of shared memory); pins beyond it are errors, not a compile that tries.
MAX_BLOCK_TILE_ELEMENTS = 1 << 20
# The BM and BN the wgmma tiling chooses among (BM: one to four warpgroups of 64 rows).
WGMMA_SIZES = (256, 128, 64)
WGMMA_ROW_BYTES = 128  # a K tile of wgmma's operands: one 128-byte swizzle row (64 or 128 k)


def _named(symbol: object, default: str) -> str:
    """How a remark names a dot dimension: its tile symbol (a swapped dot's M is BN)."""
    return symbol if isinstance(symbol, str) else default


def widen_operands(op: T.DotOp) -> None:
    """Convert both operands of `op` to f16 where it reads them (exact for f8 operands)."""
    for index in (0, 1):
        v = op.operands[index]
        t = v.type
        cast = Builder.before_op(op).create(
            T.CastOp, input=v, result_types=[TileType(t.shape, f16, t.layout)]
        )
        op.set_operand(index, cast.result)


def _check_tile_elements(kernel: FuncOp) -> None:
    """A located error for the first value whose static tile is larger than any block holds."""
    for op in kernel.walk():
        for v in op.results:
            t = v.type
            if isinstance(t, TileType) and t.is_static:
                elements = 1
                for d in t.shape:
                    elements *= int(d)
                if elements > MAX_BLOCK_TILE_ELEMENTS:
                    shape = "x".join(str(d) for d in t.shape)
                    raise TileError(
                        f"kernel '{kernel.sym_name}': a tile of {shape} ({elements} elements) is "
                        f"larger than a block can hold (at most {MAX_BLOCK_TILE_ELEMENTS})",
                        op.loc,
                        hint="pin smaller tile sizes",
                    )


def _tile_shapes(kernel: FuncOp) -> list[tuple[tuple, object]]:
    """The distinct (shape, element type) of the kernel's tile values, sizes still symbols."""
    found: dict[tuple, object] = {}
    for op in kernel.walk():
        for v in op.results:
            if isinstance(v.type, TileType):
                found[(tuple(v.type.shape), str(v.type.element))] = v.type.element
    return [(shape, element) for (shape, _), element in found.items()]


def _fma_dot_operands(kernel: FuncOp) -> list[tuple[tuple, object, tuple, object]]:
    """The (A shape, A element, B shape, B element) of the kernel's dots that no tensor-core
    path takes (f64, f32 and mixed operands): the lowering stages both operands in its scratch
    (`exchange.op_scratch_bytes`), so under a config's sizes they must fit a block's shared
    memory together (`tile_problems`)."""
    found = {}
    for op in kernel.walk():
        if isinstance(op, T.DotOp) and not is_mma_dot(op):
            a, b = op.a.type, op.b.type
            found[(tuple(a.shape), str(a.element), tuple(b.shape), str(b.element))] = (
                tuple(a.shape),
                a.element,
                tuple(b.shape),
                b.element,
            )
    return list(found.values())


def _plan_elements(plan: TilePlan, shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= plan.symbols[d].size if isinstance(d, str) else (d if isinstance(d, int) else 1)
    return n
