"""The `tiling` pass: tile sizes, warps, tensor-core accumulator layouts and the block order.

It binds every tile-size symbol as `specialize` does (and with its mechanism: static shapes,
`tilec.tile_sizes`, `tilec.max_extent`), but chooses the sizes of dots itself: a kernel whose
`tile.dot`s take f16/bf16 operands into an f32 accumulator is tiled for `mma.sync.m16n8k16`
(warp tiles, instruction tiles, the shared memory of the operand pipeline, accumulator
registers), and those accumulators get their `#mma` layout. It writes `tilec.num_warps` on every
kernel and regroups the blocks of a 2-D dot grid so that blocks that run together share operand
tiles in L2. `docs/passes.md` is the contract.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from tilec.diagnostics import TileError, format_bytes
from tilec.dialects import arith, scf
from tilec.dialects import math as mathd
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.dialects.tile import MmaLayout
from tilec.ir.attributes import ArrayAttr, IntegerAttr
from tilec.ir.core import BlockArgument, Operation, OpResult, Value
from tilec.ir.types import TileType, bf16, f16, f32
from tilec.lowering.abi import argument_name
from tilec.lowering.layouts import (
    MMA_INSTR_SHAPE,
    WARP_SIZE,
    element_bytes,
    mma_accumulator_layout,
    wgmma_accumulator_layout,
)
from tilec.passes.pipeline import MAX_DEFAULT_STAGES, SM_SHARED_SM90, stages_in_flight
from tilec.passes.specialize import (
    TilePlan,
    attribute_pairs,
    bind_tile_sizes,
    check_size_options,
    kernels_of,
    plan_tile_sizes,
    symbols_of,
)
from tilec.passes.tile_shapes import shape_streamed_tiles
from tilec.passes.tiling_rewrites import fix_extents, grouped_program_ids, set_accumulator_layout
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["Tiling"]


WARP_COUNTS = (1, 2, 4, 8, 16, 32)
# Warp counts the search tries when none is pinned, most preferred first: 4 warps (a 2x2 grid of
# 64x64 warp tiles on a 128x128 block) is the GEMM sweet spot of mma.sync on sm_80/sm_90.
SEARCH_WARPS = (4, 8, 2, 1)
MAX_ACCUMULATOR_REGISTERS = 128  # f32 accumulator values per thread: the rest of 255 is operands
# The 32-bit words a thread of an mma.sync tiling holds at its busiest (`_Search.live_words`:
# accumulators, fragments held across the loop, one k-step of operand fragments) may come to
# 255 registers less what ptxas needs besides them: addresses of the pipeline's copies and
# the swizzled reads, loop state, a softmax's temporaries -- 60 to 80 registers on the H200
# examples (attention d128 at BN=64: 176 words, 254 registers; at BN=128: 224 words, 255
# registers and 172 bytes spilled; d64 at BN=128: 176 words, 255 registers, no spills).
LIVE_WORD_BUDGET = 192
# The same bound for dots on wgmma with A in registers (`wgmma_chain`), measured on the same
# kernels: ptxas holds more besides the words there (attention d128 at BN=64: 144 words, 255
# registers, no spills; at BN=128: 192 words, 496 bytes spilled, where mma.sync's 224 spilled
# 172), so the words get 255 less what the larger overhead takes.
WGMMA_LIVE_WORD_BUDGET = 160
# Accumulator registers per thread when operands are copied element by element (unknown
# strides): a 128x128 tile (128 per thread on 4 warps) spills with them; 64x64 (32) does not.
SCATTERED_ACCUMULATORS = 32
TILED_SIZES = (128, 64)  # M and N sizes the search tries (smaller only for small extents)
CONTRACTED_SIZES = (64, 32, 16)
DEFAULT_GROUP_M = 8  # blocks per group along grid axis 0 (Triton's GROUP_M), mma.sync tilings
PREFERRED_K_ROW_BYTES = 64  # BK = 32 for 16-bit operands: one 64-byte row per k-step
INSTR_M, INSTR_N, INSTR_K = MMA_INSTR_SHAPE


@register_pass
class Tiling(Pass):
    """Chooses tile sizes, num_warps, `#mma` accumulator layouts and the block order.

    Sizes: pins win (`@kernel(tile=...)`, then the option `tiles`); whole dimensions take their
    extent as in `specialize`. A kernel with a `tile.dot` of f16/bf16 operands and an f32
    accumulator (and `mma=true`) is tiled for `mma.sync.m16n8k16`: every dot's M, N and K tile
    must be a multiple of 16·W_m, 8·W_n and 16 for W_m x W_n warps. Among the sizes (M, N: 128
    or 64, less only for smaller known extents; K: 64, 32, 16) and warps (4, 8, 2, 1, or the
    pin) that qualify and keep the operand buffers (2 copies of each operand loaded in the
    loop, or the pinned stages; the remark budgets pipeline's own choice: of the stage counts up
    to `stages` that fit, the one with the most copies in flight per SM) under `shared_limit`,
    the accumulators at most 128 f32 registers per thread and the words a thread holds at most
    `LIVE_WORD_BUDGET` (`live_words`), it
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
    Unpinned (`group_m=0`), the wgmma tiling keeps the launch order (two blocks per SM walking
    down axis 0 measured faster on the H200 than any group from 2 to 32) and the mma.sync
    tiling groups `DEFAULT_GROUP_M` blocks.
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
        num_warps: int = option(0, "warps per block unless the kernel pins them (0: chosen)")
        mma: bool = option(True, "tile f16/bf16 dots for mma.sync m16n8k16 (false: FMA path)")
        wgmma: bool = option(
            True,
            "on sm_90a (option arch), a single matmul dot with free tile sizes takes wgmma "
            "m64n128k16 on 8 warps (false: mma.sync)",
        )
        arch: str = option(
            "", "the target architecture (the compiler sets it when lowering; '': unknown)"
        )
        group_m: int = option(
            0,
            "blocks grouped along grid axis 0 for L2 reuse (1: off; 0: choose: launch order "
            "for the wgmma tiling, 8 otherwise)",
        )
        stages: int = option(
            MAX_DEFAULT_STAGES,
            "most copy-pipeline stages budgeted unless the kernel pins them (pipeline's "
            "default: the count with the most copies in flight per SM, up to 4)",
        )
        shared_limit: int = option(232448, "shared memory bytes per block (227 KiB on sm_90)")
        sm_count: int = option(132, "SMs to fill when extents are known (132 on H200)")
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


# ---------------------------------------------------------------------------------------------
# What the search knows about a kernel's dots


@dataclass(frozen=True)
class _Dot:
    op: T.DotOp
    m: str | int  # accumulator rows: a symbol or a static size
    n: str | int
    k: str | int
    element_bytes: int
    streamed: tuple[bool, bool]  # whether each operand is loaded anew every loop iteration
    # A is computed from another dot's accumulator (attention's P): on warps [W, 1] it stays
    # in registers (assign-layouts' `register_a_operand`), with no shared buffer.
    register_a: bool = False


@dataclass(frozen=True)
class _Config:
    """One candidate tiling: sizes of the free dot symbols, and the warps."""

    sizes: dict[str, int]
    warps: tuple[int, int]  # (W_m, W_n)

    @property
    def num_warps(self) -> int:
        return self.warps[0] * self.warps[1]


def _operand_load(v: Value) -> T.LoadOp | None:
    """The `tile.load` a dot operand is (a cast, transpose, reshape or select of), if any."""
    while isinstance(v, OpResult):
        op = v.op
        if isinstance(op, T.LoadOp):
            return op
        if not isinstance(op, (T.CastOp, T.TransposeOp, T.ReshapeOp, T.SelectOp)):
            return None
        v = op.operands[1] if isinstance(op, T.SelectOp) else op.operands[0]
    return None


def _k_major(b: Value) -> bool:
    """Whether a dot's right operand is loaded transposed (`k[tn, :].T`: stored [N, K])."""
    transposed = False
    while isinstance(b, OpResult) and not isinstance(b.op, T.LoadOp):
        if isinstance(b.op, T.TransposeOp):
            transposed = not transposed
        b = b.op.operands[1] if isinstance(b.op, T.SelectOp) else b.op.operands[0]
    return transposed


def _from_accumulator(v: Value) -> bool:
    """Whether `v` is computed, through elementwise ops, from a `tile.dot`'s result."""
    seen: set[int] = set()
    stack = [v]
    while stack:
        v = stack.pop()
        if id(v) in seen or not isinstance(v, OpResult):
            continue
        seen.add(id(v))
        op = v.op
        if isinstance(op, T.DotOp):
            return True
        if isinstance(op, (T.CastOp, T.SelectOp, T.ConvertLayoutOp, T.BroadcastOp)) or (
            type(op).__module__ in (arith.__name__, mathd.__name__)
        ):
            stack.extend(x for x in op.operands if isinstance(x.type, TileType))
    return False


def _streamed(v: Value, dot: Operation) -> bool:
    """Whether `v` is (a cast, transpose or reshape of) a `tile.load` in the dot's loop body:
    such an operand needs one shared buffer per pipeline stage, any other one buffer."""
    loop = dot.parent_op
    load = _operand_load(v)
    return isinstance(loop, scf.ForOp) and load is not None and loop.is_ancestor_of(load)


def _scattered_operands(kernel: FuncOp) -> list[str]:
    """The last strides of dot operands' tensors not known to be 1 (`tilec.unit`, from the
    `assume` pass): such operands are copied one element at a time, each with its own 64-bit
    address, which leaves registers for a smaller accumulator only."""
    unit = {str(x) for x in (kernel.attributes.get("tilec.unit") or ArrayAttr(())).value}
    found: list[str] = []
    for op in kernel.walk():
        if not (isinstance(op, T.DotOp) and _is_mma_dot(op)):
            continue
        for v in (op.a, op.b):
            load = _operand_load(v)
            if load is None:
                continue
            view = load.view
            if not (isinstance(view, BlockArgument) and view.owner is kernel.body.block):
                continue
            stride = f"{argument_name(kernel, view.index)}.stride.{view.type.rank - 1}"
            if stride not in unit and stride not in found:
                found.append(stride)
    return found


def _is_mma_dot(op: T.DotOp) -> bool:
    a, b, c = op.a.type, op.b.type, op.acc.type
    return a.element == b.element and a.element in (f16, bf16) and c.element == f32


class _KernelTiling:
    def __init__(self, kernel: FuncOp, tiles, extents, opts: Tiling.Options, ctx: PassContext):
        self.kernel = kernel
        self.extents = extents
        self.opts = opts
        self.ctx = ctx
        self.plan: TilePlan = plan_tile_sizes(kernel, tiles, extents, opts.max_extent)
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
        self.scattered = _scattered_operands(kernel)
        self.tiles = _tile_shapes(kernel)

    # -- sizes ----------------------------------------------------------------------------------

    def size(self, d: str | int, config: _Config | None = None) -> int:
        if isinstance(d, int):
            return d
        if config is not None and d in config.sizes:
            return config.sizes[d]
        return self.plan.symbols[d].size

    def describe(self, d: str | int, role: str, config: _Config) -> str:
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
        mma_dots: list[_Dot] = []
        for op in dot_ops:
            if not _is_mma_dot(op):
                self.ctx.remark(
                    op,
                    f"FMA path: mma.sync m16n8k16 takes f16/bf16 operands and an f32 "
                    f"accumulator, this dot has {op.a.type.element} x {op.b.type.element} "
                    f"-> {op.acc.type.element}",
                )
            elif not self.opts.mma:
                self.ctx.remark(op, "FMA path: option mma=false")
            else:
                mma_dots.append(
                    _Dot(
                        op,
                        op.acc.type.shape[0],
                        op.acc.type.shape[1],
                        op.a.type.shape[1],
                        element_bytes(op.a.type.element),
                        (_streamed(op.a, op), _streamed(op.b, op)),
                        _operand_load(op.a) is None and _from_accumulator(op.a),
                    )
                )
        wgmma = self.opts.wgmma and self.opts.arch == "sm_90a" and self.wgmma_fits(mma_dots)
        if wgmma:
            config = _Config({mma_dots[0].m: 128, mma_dots[0].n: 128, mma_dots[0].k: 64}, (8, 1))
        else:
            config = self.choose_mma(mma_dots) if mma_dots else None
        if config is not None:
            for name, size in config.sizes.items():
                s = self.plan.symbols[name]
                s.size, s.free = size, False
                s.reason = s.reason.split(":")[0] + (
                    ": wgmma tiling" if wgmma else ": mma.sync tiling"
                )
            num_warps = config.num_warps
        if dot_ops or not shape_streamed_tiles(kernel, self.plan, self.opts.max_tile_elements):
            self.plan.fit_to_elements(self.opts.min_tile_elements, self.opts.max_tile_elements)
        if symbols_of(kernel):
            bind_tile_sizes(kernel, self.plan)
            self.ctx.remark(kernel, self.plan.remark())
        _check_tile_elements(kernel)
        if config is None:
            num_warps = self.plain_warps()
        if num_warps is not None:
            kernel.attributes["tilec.num_warps"] = IntegerAttr(num_warps)
        if config is not None and wgmma:
            set_accumulator_layout(mma_dots[0].op, wgmma_accumulator_layout(8, 128))
            # Two blocks per SM: ptxas keeps to 128 registers a thread (left alone it took
            # 148 on the H200, and one block fit) and pipeline sizes the stages for half an
            # SM's shared memory (3 of 32 KiB; 4 leave one block: measured slower).
            kernel.attributes.setdefault("tilec.min_blocks_per_sm", IntegerAttr(2))
            self.ctx.remark(
                kernel,
                "BM=128, BN=128, BK=64, 8 warps: wgmma m64n128k16 (sm_90a, option wgmma), two "
                "warpgroups of 64x128, both operands staged in shared memory (smem-placement "
                "says how each is read); two blocks per SM "
                "(tilec.min_blocks_per_sm = 2: at most 128 registers a thread, stages for half "
                "an SM's shared memory)",
            )
        elif config is not None and self.wgmma_chain(mma_dots, config):
            for dot in mma_dots:
                n = self.size(dot.n, config)
                set_accumulator_layout(dot.op, wgmma_accumulator_layout(config.num_warps, n))
            self.ctx.remark(kernel, self.mma_remark(mma_dots, config))
        elif config is not None:
            layout = mma_accumulator_layout(config.warps)
            for dot in mma_dots:
                set_accumulator_layout(dot.op, layout)

            self.ctx.remark(kernel, self.mma_remark(mma_dots, config))
        self.group(bool(dot_ops), wgmma=config is not None and wgmma)
        if config is not None and not wgmma:
            # For pipeline's stages: how many blocks an SM's registers hold.
            estimate = self.estimated_registers(mma_dots, config)
            kernel.attributes["tilec.estimated_registers"] = IntegerAttr(estimate)

    def wgmma_fits(self, dots: list[_Dot]) -> bool:
        """Whether the kernel takes the wgmma tiling: one f16/bf16 dot whose M, N and K tile
        sizes are free to be 128, 128 and 64, both operands loaded from memory (wgmma reads
        them from shared memory; a computed operand such as attention's P stays on mma.sync)
        with unit last strides (copied a 16-byte chunk at a time: element by element, copies
        would starve the tensor cores), and no other warp count pinned."""
        if len(dots) != 1 or (self.warps_pin is not None and self.warps_pin != 8):
            return False
        if self.scattered:
            return False
        dot = dots[0]
        for name, size in ((dot.m, 128), (dot.n, 128), (dot.k, 64)):
            if not isinstance(name, str):
                return False
            symbol = self.plan.symbols[name]
            if not symbol.free or (symbol.cap is not None and symbol.cap < size):
                return False
        if len({dot.m, dot.n, dot.k}) != 3:
            return False
        config = _Config({dot.m: 128, dot.n: 128, dot.k: 64}, (8, 1))
        if self.tile_problems(config):
            return False
        return _operand_load(dot.op.a) is not None and _operand_load(dot.op.b) is not None

    def plain_warps(self) -> int | None:
        """A kernel without tensor-core dots: its pin, else None (assign-layouts chooses, from
        the tiles it lays out: an occupancy model, 4 to 16 warps)."""
        if self.warps_pin is not None:
            self.ctx.remark(self.kernel, f"{self.warps_pin} warps ({self.warps_source})")
            return self.warps_pin
        return None

    # -- the mma search -------------------------------------------------------------------------

    def candidates(self, dots: list[_Dot], free: set[str], warps: tuple[int, ...]):
        """Every config over the free symbols' candidate sizes and the warp splits."""
        tiled = {d for dot in dots for d in (dot.m, dot.n) if isinstance(d, str)}
        names = sorted(free)
        choices = []
        for name in names:
            s = self.plan.symbols[name]
            cap = s.cap
            if name in tiled:
                sizes = [x for x in TILED_SIZES if cap is None or x <= cap] or [max(16, cap)]
            else:
                sizes = [x for x in CONTRACTED_SIZES if cap is None or x <= max(cap, 16)]
            choices.append(sizes)
        for values in itertools.product(*choices):
            for w in warps:
                for wm in (x for x in WARP_COUNTS if x <= w):
                    yield _Config(dict(zip(names, values)), (wm, w // wm))

    def problems(self, dots: list[_Dot], c: _Config, tiles: bool = True) -> list[str]:
        """Why `c` cannot tile `dots` for mma.sync (empty: it can); `tiles=False` leaves out
        the kernel's largest tile (`tile_problems`)."""
        found: list[str] = []
        wm, wn = c.warps
        for dot in dots:
            m, n, k = (self.size(d, c) for d in (dot.m, dot.n, dot.k))
            if m % (INSTR_M * wm):
                found.append(
                    f"{self.describe(dot.m, 'M', c)} is not a multiple of {INSTR_M * wm} "
                    f"({INSTR_M} rows per mma x {wm} warp{'s' if wm > 1 else ''} along M)"
                )
            if n % (INSTR_N * wn):
                found.append(
                    f"{self.describe(dot.n, 'N', c)} is not a multiple of {INSTR_N * wn} "
                    f"({INSTR_N} columns per mma x {wn} warp{'s' if wn > 1 else ''} along N)"
                )
            if k % INSTR_K:
                found.append(
                    f"{self.describe(dot.k, 'K', c)} is not a multiple of {INSTR_K} "
                    "(the k of mma.sync m16n8k16)"
                )
        shared = self.shared_bytes(dots, c)
        if shared > self.opts.shared_limit:
            found.append(
                f"the operand buffers take {format_bytes(shared)} of shared memory "
                f"({self.shared_text(dots, c)}), over the limit of "
                f"{format_bytes(self.opts.shared_limit)} (option shared_limit)"
            )
        elif tiles:
            found.extend(self.tile_problems(c))
        return list(dict.fromkeys(found))

    def largest_tile(self, c: _Config) -> tuple[int, str]:
        """(bytes, description) of the kernel's largest tile under `c`'s sizes."""
        best = (0, "")
        for shape, element in self.tiles:
            elements = 1
            for d in shape:
                elements *= self.size(d, c) if isinstance(d, str) else int(d)
            size = elements * element_bytes(element)
            if size > best[0]:
                text = "x".join(str(self.size(d, c) if isinstance(d, str) else d) for d in shape)
                best = (size, f"{text}x{element}")
        return best

    def tile_problems(self, c: _Config) -> list[str]:
        """A tile larger than a block's shared memory: converting its layout (the lowering
        exchanges a tile through shared memory) could never fit, whatever else is live. A
        tile over a dot's M, N and K (the GPU fuzzer's [BM, BN, BK] of i64: 512 KiB at
        64x64x16) rules the config out; accumulators (64 KiB at 128x128) are far below it.
        smem-placement still checks the whole plan."""
        size, text = self.largest_tile(c)
        if size <= self.opts.shared_limit:
            return []
        return [
            f"a tile of {text} ({format_bytes(size)}) is larger than a block's shared memory "
            f"({format_bytes(self.opts.shared_limit)}, option shared_limit), which converting "
            "its layout needs"
        ]

    def stages_for(self, dots: list[_Dot], c: _Config) -> int:
        """The stages `c` is budgeted for: the pin, else pipeline's own rule
        (`stages_in_flight`: of the counts up to the option `stages` whose operand buffers fit
        `shared_limit`, the one with the most copies in flight per SM, by this config's
        register estimate; at least 2)."""
        if self.stages_pinned:
            return self.stages
        totals = {
            s: self._buffer_bytes(dots, c, s)
            for s in range(2, self.stages + 1)
            if self._buffer_bytes(dots, c, s) <= self.opts.shared_limit
        }
        if not totals:
            return min(2, self.stages)
        registers = self.estimated_registers(dots, c)
        return stages_in_flight(totals, registers, WARP_SIZE * c.num_warps, SM_SHARED_SM90)

    def _buffer_bytes(self, dots: list[_Dot], c: _Config, stages: int) -> int:
        return sum(s * b for s, b in self._buffers(dots, c, stages))

    def _buffers(self, dots: list[_Dot], c: _Config, stages: int) -> list[tuple[int, int]]:
        buffers = []
        for dot in dots:
            m, n, k = (self.size(d, c) for d in (dot.m, dot.n, dot.k))
            for index, (elements, streamed) in enumerate(zip((m * k, k * n), dot.streamed)):
                if index == 0 and dot.register_a and c.warps[1] == 1:
                    continue  # A stays in the registers it was computed in
                buffers.append((stages if streamed else 1, elements * dot.element_bytes))
        return buffers

    def operand_buffers(self, dots: list[_Dot], c: _Config) -> list[tuple[int, int]]:
        """(stages, bytes of one buffer) for each dot operand staged through shared memory."""
        return self._buffers(dots, c, self.stages_for(dots, c))

    def shared_bytes(self, dots: list[_Dot], c: _Config) -> int:
        return sum(s * b for s, b in self.operand_buffers(dots, c))

    def shared_text(self, dots: list[_Dot], c: _Config) -> str:
        groups: dict[tuple[int, int], int] = {}
        for key in self.operand_buffers(dots, c):
            groups[key] = groups.get(key, 0) + 1
        parts = []
        for (stages, size), count in groups.items():
            what = f"{count} operand{'s' if count > 1 else ''}"
            parts.append(
                f"{what} x {stages} stages x {format_bytes(size)}"
                if stages > 1
                else f"{what} x {format_bytes(size)}"
            )
        return " + ".join(parts)

    def registers(self, dots: list[_Dot], c: _Config) -> int:
        """f32 accumulator values per thread: every dot result is live in the loop body."""
        threads = WARP_SIZE * c.num_warps
        return sum(self.size(d.m, c) * self.size(d.n, c) // threads for d in dots)

    def live_words(self, dots: list[_Dot], c: _Config) -> int:
        """32-bit words a thread holds at its busiest, the model of ptxas's registers that
        `LIVE_WORD_BUDGET` bounds: every dot's f32 accumulator (all live in the loop body), the
        16-bit A fragments held across the loop (an operand loaded before the loop is read
        into registers once; one computed from an accumulator stays in them), and the
        fragments of one k-step of the streamed operands of the dot that needs the most."""
        threads = WARP_SIZE * c.num_warps
        wm, wn = c.warps
        held, step = 0, 0
        wgmma = self.wgmma_chain(dots, c)
        for d in dots:
            m, n, k = (self.size(x, c) for x in (d.m, d.n, d.k))
            if (d.register_a and wn == 1) or not d.streamed[0]:
                held += m * k // threads // 2
                a_step = 0
            else:
                a_step = (m // wm) * INSTR_K // WARP_SIZE // 2
            b_step = 0 if wgmma else INSTR_K * (n // wn) // WARP_SIZE // 2  # wgmma reads B
            step = max(step, a_step + b_step)
        return self.registers(dots, c) + held + step

    def estimated_registers(self, dots: list[_Dot], c: _Config) -> int:
        """Registers a thread of `c` is estimated to take: its words and ptxas's overhead."""
        return min(255, self.live_words(dots, c) + 255 - self.word_budget(dots, c))

    def word_budget(self, dots: list[_Dot], c: _Config) -> int:
        """The most words `live_words` may come to for `c`: what leaves ptxas room besides."""
        return WGMMA_LIVE_WORD_BUDGET if self.wgmma_chain(dots, c) else LIVE_WORD_BUDGET

    def wgmma_chain(self, dots: list[_Dot], c: _Config) -> bool:
        """Whether `c` runs `dots` on `wgmma` with A in registers (sm_90a, option wgmma): warps
        `[4 g, 1]` with 16 accumulator rows a warp (one m64 per warpgroup: the `mma.sync`
        accumulator's `#blocked` twin is then the wgmma accumulator's, and mma.sync's A
        fragments are wgmma's register-A form), every dot's A held in registers anyway --
        computed from another dot's accumulator (attention's P) or loaded before the loop
        (attention's q) --, its B loaded with a unit last stride (copied by 16-byte chunks,
        read from shared memory by a descriptor), N a multiple of 64 up to 256, and a K-major
        B (stored [N, K]) a K tile of whole 128-byte rows. Single matmuls whose A streams take
        the 128x128x64 tiling (`wgmma_fits`) instead."""
        if not (self.opts.wgmma and self.opts.arch == "sm_90a") or self.scattered:
            return False
        wm, wn = c.warps
        if wn != 1 or wm % 4:
            return False
        for d in dots:
            m, n, k = (self.size(x, c) for x in (d.m, d.n, d.k))
            if d.element_bytes != 2 or m != INSTR_M * wm or n % 64 or n > 256 or k % INSTR_K:
                return False
            if not (d.register_a or (not d.streamed[0] and _operand_load(d.op.a) is not None)):
                return False
            if _operand_load(d.op.b) is None:
                return False
            if _k_major(d.op.b) and (k * d.element_bytes) % 128:
                return False
        return True

    def blocks(self, c: _Config) -> int | None:
        """Blocks in the grid, when the option `extents` gives every grid dimension."""
        total = 1
        for dim, symbol in attribute_pairs(self.kernel, "tilec.grid"):
            if str(dim) not in self.extents:
                return None
            tile = self.size(str(symbol), c) if isinstance(symbol, str) else int(symbol)  # type: ignore[call-overload]
            total *= -(-self.extents[str(dim)] // tile)
        return total

    def preference(self, dots: list[_Dot], c: _Config) -> tuple:
        """Sort key of qualifying configs, best first (see the class docstring)."""
        blocks = self.blocks(c)
        fill = min(blocks, self.opts.sm_count) if blocks is not None else 0
        warps_rank = SEARCH_WARPS.index(c.num_warps) if c.num_warps in SEARCH_WARPS else 0
        area = sum(self.size(d.m, c) * self.size(d.n, c) for d in dots)
        split_along_rows = 0 if (not self.reduces or c.warps[1] == 1) else 1
        fragments = 0.0  # shared-memory operand reads per product: least for square tiles
        for d in dots:
            m = max(1, self.size(d.m, c) // c.warps[0])
            n = max(1, self.size(d.n, c) // c.warps[1])
            fragments += (m + n) / (m * n)
        k_row = sum(
            abs(self.size(d.k, c) * d.element_bytes - PREFERRED_K_ROW_BYTES)
            for d in dots
            if isinstance(d.k, str) and d.k in c.sizes
        )
        taller = -sum(self.size(d.m, c) for d in dots)
        # Operands copied element by element: a big accumulator would spill.
        crowded = bool(self.scattered) and self.registers(dots, c) > SCATTERED_ACCUMULATORS
        return (
            crowded,
            -fill,
            not self.wgmma_chain(dots, c),
            warps_rank,
            -area,
            split_along_rows,
            fragments,
            k_row,
            taller,
            sorted(c.sizes.items()),
            c.warps,
        )

    def choose_mma(self, dots: list[_Dot]) -> _Config | None:
        """The best qualifying config, None when the dots stay on the FMA path (remarked), or a
        `TileError` when pins rule out every config that the free choice would have."""
        free = {
            d
            for dot in dots
            for d in (dot.m, dot.n, dot.k)
            if isinstance(d, str) and self.plan.symbols[d].free
        }
        warps = (self.warps_pin,) if self.warps_pin is not None else SEARCH_WARPS
        existing = {
            op.result.type.layout.warps_per_cta
            for op in (d.op for d in dots)
            if isinstance(op.result.type.layout, MmaLayout)
        }
        configs = list(self.candidates(dots, free, warps))
        if existing:  # laid out by an earlier run: keep its warps
            configs = [c for c in configs if c.warps in existing]
        legal = [c for c in configs if not self.problems(dots, c)]
        if legal:
            good = [
                c
                for c in legal
                if self.registers(dots, c) <= MAX_ACCUMULATOR_REGISTERS
                and self.live_words(dots, c) <= self.word_budget(dots, c)
            ] or sorted(legal, key=lambda c: self.live_words(dots, c))[:1]
            return min(good, key=lambda c: self.preference(dots, c))
        # Nothing qualifies: explain with the candidate closest to working.
        closest = min(
            configs,
            key=lambda c: (
                len(self.problems(dots, c)),
                self.shared_bytes(dots, c),
                self.preference(dots, c),
            ),
        )
        why = self.problems(dots, closest)
        pinned_dims = {
            d
            for dot in dots
            for d in (dot.m, dot.n, dot.k)
            if isinstance(d, str) and self.plan.symbols[d].pinned_by
        }
        # Pins that tile the dots but make some tile of the kernel too large for any block
        # are not an mma error: the dots take the FMA path (where free sizes shrink).
        only_tiles = any(not self.problems(dots, c, tiles=False) for c in configs)
        if (pinned_dims or self.warps_pin is not None) and not only_tiles:
            unpinned = list(self.candidates(dots, free | pinned_dims, SEARCH_WARPS))
            if any(not self.problems(dots, c) for c in unpinned):
                self.pin_error(dots, free, why)
        unknown = [
            f"{d}={self.size(d)}"
            for d in dict.fromkeys(x for dot in dots for x in (dot.m, dot.n, dot.k))
            if isinstance(d, str) and "unknown extent" in self.plan.symbols[d].reason
        ]
        self.ctx.remark(
            self.kernel,
            f"FMA path for {len(dots)} tile.dot{'s' if len(dots) > 1 else ''}: no mma.sync "
            "tiling fits: "
            + "; ".join(why)
            + (
                f" ({', '.join(unknown)} assumed for a whole dimension of unknown extent: "
                'give it with option extents, e.g. extents="D=64")'
                if unknown
                else ""
            ),
        )
        return None

    def pin_error(self, dots: list[_Dot], free: set[str], why: list[str]) -> None:
        name = self.kernel.sym_name
        hint = (
            "mma.sync m16n8k16 needs M, N and K tiles that are multiples of 16·W_m, 8·W_n and "
            "16 for W_m x W_n warps; change the pin, or take the FMA path with "
            "--pass-option tiling.mma=false (in @tilec.jit: "
            'pass_options={"tiling": {"mma": False}})'
        )
        if self.warps_pin is not None:
            fitting = [
                w
                for w in WARP_COUNTS
                if any(not self.problems(dots, c) for c in self.candidates(dots, free, (w,)))
            ]
            if fitting and self.warps_pin not in fitting:
                acc = f"{self.size(dots[0].m)}x{self.size(dots[0].n)}"
                raise TileError(
                    f"kernel '{name}': {self.warps_option} do not tile the {acc} accumulator "
                    f"into mma.sync warp tiles (multiples of {INSTR_M}x{INSTR_N}): "
                    f"{_either(fitting)} warps would",
                    self.kernel.loc,
                    hint=hint,
                )
        raise TileError(
            f"kernel '{name}': the pinned sizes cannot use mma.sync m16n8k16: " + "; ".join(why),
            self.kernel.loc,
            hint=hint,
        )

    def mma_remark(self, dots: list[_Dot], c: _Config) -> str:
        wm, wn = c.warps
        sizes = ", ".join(
            f"{d}={self.size(d)}"
            for d in dict.fromkeys(x for dot in dots for x in (dot.m, dot.n, dot.k))
            if isinstance(d, str)
        )
        tiles = []
        wgmma = self.wgmma_chain(dots, c)
        for dot in dots:
            m, n = self.size(dot.m) // wm, self.size(dot.n) // wn
            if wgmma:
                tiles.append(
                    f"{wm // 4} warpgroup{'s' if wm > 4 else ''} of 64x{n}: wgmma m64n{n}k16 "
                    "with A in registers"
                )
                continue
            tiles.append(
                f"{wm}x{wn} warp tiles of {m}x{n}; {m // INSTR_M}x{n // INSTR_N} m16n8k16 "
                "instructions per warp per k-step"
            )
        if len(set(tiles)) == 1:
            tiles = tiles[:1]
        source = f", {self.warps_source}" if self.warps_source else ""
        text = (
            f"{sizes}, {c.num_warps} warps{source} ({'; '.join(tiles)}): "
            f"{self.shared_text(dots, c)} = {format_bytes(self.shared_bytes(dots, c))} shared "
            f"({self.stages_for(dots, c)} stages, {self.stages_source}), "
            f"{self.registers(dots, c)} accumulator registers/thread"
        )
        blocks = self.blocks(c)
        if blocks is not None:
            text += f"; grid of {blocks} blocks for {self.opts.sm_count} SMs (option sm_count)"
        if self.scattered:
            text += (
                f"; at most {SCATTERED_ACCUMULATORS} accumulator registers/thread preferred: "
                f"operands are copied element by element ({', '.join(self.scattered)} not "
                "known to be 1: state it with --assume or the assume pass; @tilec.jit does)"
            )
        text += (
            f"; {self.live_words(dots, c)} words a thread holds at its busiest (at most "
            f"{self.word_budget(dots, c)}: accumulators, held and one k-step's fragments)"
        )
        return text

    # -- block order ----------------------------------------------------------------------------

    def group(self, has_dot: bool, wgmma: bool) -> None:
        kernel, g = self.kernel, self.opts.group_m
        grid = attribute_pairs(kernel, "tilec.grid")
        if "tilec.group_m" in kernel.attributes or not has_dot or len(grid) != 2:
            return
        axes = [str(dim) for dim, _ in grid]
        if g == 0 and wgmma:
            # Measured on the H200 (docs/benchmarks.md, "Block order of the wgmma kernel"):
            # launch order beat every group of 2 to 32 at 2048^3 to 8192^3, f16 and bf16.
            self.ctx.remark(
                kernel,
                f"block order: launch order, consecutive blocks down {axes[0]} (the wgmma "
                "tiling: measured faster than groups on the H200; option group_m pins one)",
            )
            return
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

    def blocks_along(self, axis: int) -> int | None:
        dim, symbol = attribute_pairs(self.kernel, "tilec.grid")[axis]
        if str(dim) not in self.extents:
            return None
        tile = self.size(str(symbol)) if isinstance(symbol, str) else int(symbol)  # type: ignore[call-overload]
        return -(-self.extents[str(dim)] // tile)


# No block holds a tile of more elements than this (4 MiB of f32: an SM has 256 KiB of
# registers and 227 KiB of shared memory); pins beyond it are errors, not a compile that tries.
MAX_BLOCK_TILE_ELEMENTS = 1 << 20


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


def _plan_elements(plan: TilePlan, shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= plan.symbols[d].size if isinstance(d, str) else (d if isinstance(d, int) else 1)
    return n


def _either(values: list[int]) -> str:
    text = [str(v) for v in values]
    return text[0] if len(text) == 1 else ", ".join(text[:-1]) + " or " + text[-1]
