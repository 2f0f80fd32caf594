"""The mma search of the `tiling` pass (passes/tiling.py): the dots it tiles (`TiledDot`; what
it asks of their operands is passes/tiling_operands.py), the configurations it tries, the models that rule them out (shared memory, registers,
the words a thread holds) and the preference among those left, with the remarks that explain
the choice. `_KernelTiling` mixes `MmaSearch` in; docs/passes.md is the contract.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from tilec.diagnostics import TileError, format_bytes
from tilec.dialects import scf
from tilec.dialects import tile as T
from tilec.dialects.tile import MmaLayout
from tilec.ir.types import TileType
from tilec.lowering.layouts import MMA_I8_INSTR_SHAPE, MMA_INSTR_SHAPE, WARP_SIZE, element_bytes
from tilec.passes.occupancy import SM_SHARED_SM90
from tilec.passes.pipeline_occupancy import stages_in_flight
from tilec.passes.pipeline_tma import tensor_map_blocker
from tilec.passes.specialize import attribute_pairs
from tilec.passes.tiling_operands import (
    either_of,
    int8_b_reads,
    loop_invariant_operand,
    operand_load,
    shared_operand_loads,
)
from tilec.passes.wgmma_model import chain_bound, index_mask_work, mask_walk, producer_ratio

__all__ = [
    "DEFAULT_GROUP_M",
    "WARP_COUNTS",
    "MmaSearch",
    "TileConfig",
    "TiledDot",
]


WARP_COUNTS = (1, 2, 4, 8, 16, 32)
# Warp counts the search tries when none is pinned, most preferred first: 4 warps (a 2x2 grid of
# 64x64 warp tiles on a 128x128 block) is the GEMM sweet spot of mma.sync on sm_80/sm_90.
SEARCH_WARPS = (4, 8, 2, 1)
# The same for a chain tiled for a producer warpgroup (`MmaSearch.producer_plan`): two
# consumer warpgroups of one block first.
PRODUCER_SEARCH_WARPS = (8, 4, 2, 1)
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
# Where a wgmma dot reads an A loaded before its loop (`Tiling.Options.staged_a`; auto: from
# shared memory in a chain tiled for a producer warpgroup, else in registers).
STAGED_A = ("auto", "registers", "shared")
TILED_SIZES = (128, 64)  # M and N sizes the search tries (smaller only for small extents)
# M and N sizes tried when no config of TILED_SIZES holds its words within the budget (attention's
# backward at d128 holds k.T's and v.T's fragments for all of K: 64x64 tiles spill on any warps).
SMALL_TILED_SIZES = (128, 64, 32, 16)
CONTRACTED_SIZES = (64, 32, 16)
DEFAULT_GROUP_M = 8  # blocks per group along grid axis 0 (Triton's GROUP_M), mma.sync tilings
PREFERRED_K_ROW_BYTES = 64  # BK = 32 for 16-bit operands: one 64-byte row per k-step
BYTE_COPY_K_ROW_BYTES = 32  # int8 operands copied in short runs (`int8_byte_copies`)
INSTR_M, INSTR_N, INSTR_K = MMA_INSTR_SHAPE


# ---------------------------------------------------------------------------------------------
# What the search knows about a kernel's dots


@dataclass(frozen=True)
class TiledDot:
    op: T.DotOp
    m: str | int  # accumulator rows: a symbol or a static size
    n: str | int
    k: str | int
    element_bytes: int
    streamed: tuple[bool, bool]  # whether each operand is loaded anew every loop iteration
    # A is computed from another dot's accumulator (attention's P): on warps [W, 1] it stays
    # in registers (assign-layouts' `register_a_operand`), with no shared buffer.
    register_a: bool = False

    @property
    def int8(self) -> bool:
        """i8 operands into i32: `mma.sync.m16n8k32.s32.s8.s8.s32` rather than m16n8k16."""
        return self.element_bytes == 1

    @property
    def instr_k(self) -> int:
        """The k of one instruction: 32 bytes of each operand row for either kind."""
        return MMA_I8_INSTR_SHAPE[2] if self.int8 else INSTR_K

    @property
    def warp_columns(self) -> int:
        """Accumulator columns a warp holds side by side: m16n8k32's n8 tiles go in pairs
        (`tilec.lowering.layouts.as_blocked`), so an int8 warp tile is 16 columns wide."""
        return 2 * INSTR_N if self.int8 else INSTR_N

    @property
    def instr_name(self) -> str:
        return "m16n8k32" if self.int8 else "m16n8k16"


@dataclass(frozen=True)
class TileConfig:
    """One candidate tiling: sizes of the free dot symbols, and the warps."""

    sizes: dict[str, int]
    warps: tuple[int, int]  # (W_m, W_n)

    @property
    def num_warps(self) -> int:
        return self.warps[0] * self.warps[1]


class MmaSearch:
    """The tiling of a kernel's tensor-core dots (mixed into `_KernelTiling`, which holds the
    kernel, its tile plan, options and pins)."""

    def candidates(
        self,
        dots: list[TiledDot],
        free: set[str],
        warps: tuple[int, ...],
        tiled_sizes: tuple[int, ...] = TILED_SIZES,
    ):
        """Every config over the free symbols' candidate sizes and the warp splits."""
        tiled = {d for dot in dots for d in (dot.m, dot.n) if isinstance(d, str)}
        names = sorted(free)
        choices = []
        for name in names:
            s = self.plan.symbols[name]
            cap = s.cap
            if name in tiled:
                sizes = [x for x in tiled_sizes if cap is None or x <= cap] or [max(16, cap)]
            else:
                # at least one instruction's k (32 for int8), even past a smaller extent
                floor = max((d.instr_k for d in dots if d.k == name), default=INSTR_K)
                sizes = [x for x in CONTRACTED_SIZES if cap is None or x <= max(cap, floor)]
            choices.append(sizes)
        for values in itertools.product(*choices):
            for w in warps:
                for wm in (x for x in WARP_COUNTS if x <= w):
                    yield TileConfig(dict(zip(names, values)), (wm, w // wm))

    def problems(self, dots: list[TiledDot], c: TileConfig, tiles: bool = True) -> list[str]:
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
            columns = dot.warp_columns
            if n % (columns * wn):
                per = "columns per pair of m16n8k32" if dot.int8 else "columns per mma"
                found.append(
                    f"{self.describe(dot.n, 'N', c)} is not a multiple of {columns * wn} "
                    f"({columns} {per} x {wn} warp{'s' if wn > 1 else ''} along N)"
                )
            if k % dot.instr_k:
                found.append(
                    f"{self.describe(dot.k, 'K', c)} is not a multiple of {dot.instr_k} "
                    f"(the k of mma.sync {dot.instr_name})"
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

    def largest_tile(self, c: TileConfig) -> tuple[int, str]:
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

    def tile_problems(self, c: TileConfig) -> list[str]:
        """A tile larger than a block's shared memory: converting its layout (the lowering
        exchanges a tile through shared memory) could never fit, whatever else is live. A
        tile over a dot's M, N and K (the GPU fuzzer's [BM, BN, BK] of i64: 512 KiB at
        64x64x16) rules the config out; accumulators (64 KiB at 128x128) are far below it.
        smem-placement still checks the whole plan."""
        size, text = self.largest_tile(c)
        found = []
        if size > self.opts.shared_limit:
            found.append(
                f"a tile of {text} ({format_bytes(size)}) is larger than a block's shared "
                f"memory ({format_bytes(self.opts.shared_limit)}, option shared_limit), which "
                "converting its layout needs"
            )
        for a_shape, a_element, b_shape, b_element in getattr(self, "fma_dots", ()):
            a_bytes = self._elements(a_shape, c) * element_bytes(a_element)
            b_bytes = self._elements(b_shape, c) * element_bytes(b_element)
            staged = -(-a_bytes // 16) * 16 + b_bytes  # A, then B (`exchange.dot_b_offset`)
            if staged > self.opts.shared_limit:
                found.append(
                    f"a dot on the FMA path stages its {a_element} and {b_element} operands "
                    f"in shared memory: {format_bytes(staged)} under these sizes, over the "
                    f"limit of {format_bytes(self.opts.shared_limit)} (option shared_limit)"
                )
        return found

    def _elements(self, shape: tuple, c: TileConfig) -> int:
        n = 1
        for d in shape:
            n *= self.size(d, c) if isinstance(d, str) else int(d)
        return n

    def stages_for(self, dots: list[TiledDot], c: TileConfig) -> int:
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

    def _buffer_bytes(self, dots: list[TiledDot], c: TileConfig, stages: int) -> int:
        return sum(s * b for s, b in self._buffers(dots, c, stages))

    def _buffers(self, dots: list[TiledDot], c: TileConfig, stages: int) -> list[tuple[int, int]]:
        buffers = []
        for dot in dots:
            m, n, k = (self.size(d, c) for d in (dot.m, dot.n, dot.k))
            for index, (elements, streamed) in enumerate(zip((m * k, k * n), dot.streamed)):
                if index == 0 and dot.register_a and c.warps[1] == 1:
                    continue  # A stays in the registers it was computed in
                buffers.append((stages if streamed else 1, elements * dot.element_bytes))
        return buffers

    def operand_buffers(self, dots: list[TiledDot], c: TileConfig) -> list[tuple[int, int]]:
        """(stages, bytes of one buffer) for each dot operand staged through shared memory."""
        return self._buffers(dots, c, self.stages_for(dots, c))

    def shared_bytes(self, dots: list[TiledDot], c: TileConfig) -> int:
        return sum(s * b for s, b in self.operand_buffers(dots, c))

    def shared_text(self, dots: list[TiledDot], c: TileConfig) -> str:
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

    def registers(self, dots: list[TiledDot], c: TileConfig) -> int:
        """f32 accumulator values per thread: every dot result is live in the loop body."""
        threads = WARP_SIZE * c.num_warps
        return sum(self.size(d.m, c) * self.size(d.n, c) // threads for d in dots)

    def live_words(self, dots: list[TiledDot], c: TileConfig) -> int:
        """32-bit words a thread holds at its busiest, the model of ptxas's registers that
        `LIVE_WORD_BUDGET` bounds: the sum of `word_parts`."""
        return sum(self.word_parts(dots, c))

    def word_parts(self, dots: list[TiledDot], c: TileConfig) -> tuple[int, int, int, int, int]:
        """(accumulators, A fragments held, B fragments held, loaded tiles, one k-step): every
        dot's f32 accumulator (all live in the loop body); the 16-bit fragments held across
        the loop -- an A loaded before the loop is read into registers once, one computed from
        an accumulator stays in them, and on mma.sync a B loaded before the loop is read once
        too (`loop_invariant_operand`), all of K by every warp along M for its columns
        (attention's backward holds k.T and v.T so: 64 words each at 64x64 on warps [4, 1]) --;
        the loaded tiles of streamed operands that several dots read (`shared_operand_loads`:
        held in registers from the load to the last dot that reads them); and the fragments of
        one k-step of the streamed operands of the dot that needs the most."""
        wm, wn = c.warps
        held_a, held_b, step = 0, 0, 0
        wgmma = self.wgmma_chain(dots, c)
        for d in dots:
            m, n, k = (self.size(x, c) for x in (d.m, d.n, d.k))
            if (d.register_a and wn == 1) or (
                not d.streamed[0] and not (wgmma and self.staged_a_shared([d]))
            ):
                # a warp holds the A fragments of its own rows for all of K: the warps along
                # N each hold the same rows (attention at d256 on [2, 4]: 128 words, not 32)
                held_a += (m // wm) * k * d.element_bytes // WARP_SIZE // 4
                a_step = 0
            elif wgmma and not d.streamed[0]:
                a_step = 0  # read by descriptor from its buffer: no fragments
            else:
                a_step = (m // wm) * d.instr_k * d.element_bytes // WARP_SIZE // 4
            b_step = 0  # wgmma reads B from shared memory
            if not wgmma and loop_invariant_operand(d.op.b, d.op):
                held_b += k * (n // wn) * d.element_bytes // WARP_SIZE // 4
            elif not wgmma:
                b_step = d.instr_k * d.element_bytes * (n // wn) // WARP_SIZE // 4
            step = max(step, a_step + b_step)
        threads = WARP_SIZE * c.num_warps
        loaded = sum(
            -(-self._elements(shape, c) * size // (4 * threads))
            for shape, size in shared_operand_loads(dots)
        )
        return self.registers(dots, c), held_a, held_b, loaded, step

    def staged_a_shared(self, dots: list[TiledDot]) -> bool:
        """Whether a wgmma chain reads an A loaded before the loop by descriptor (option
        `staged_a` = shared, or `auto` in a chain tiled for a producer warpgroup) rather than
        holding its fragments: some dot has such an A."""
        staged = getattr(self.opts, "staged_a", "auto")
        wanted = staged == "shared" or (staged == "auto" and self.producer)
        return wanted and any(not d.register_a and not d.streamed[0] for d in dots)

    # Set by `choose_mma` (`producer_plan`): whether the dots are tiled for a producer
    # warpgroup, and the remark that says why or why not ("" where the question did not arise).
    producer = False
    producer_why = ""

    def producer_plan(self, dots: list[TiledDot]) -> tuple[bool, str]:
        """`(planned, why)`: whether to tile a chain of dots (one whose A is computed in the
        loop from another's accumulator: attention's p @ v after q @ k.T) for a producer
        warpgroup -- 128-row blocks of two consumer warpgroups, the A loaded before the loop
        read by descriptor (its registers freed for the larger tile), the pipeline's option
        `warp_specialize` following -- and why (empty when the question does not arise).
        Option `producer`: -1 where the wgmma model's `chain_bound` says the dots, not the
        softmax between them, bound the loop and a tensor map can describe every operand the
        loop streams; 0 never; 1 wherever the chain can be."""
        option = getattr(self.opts, "producer", -1)
        if option == 0 or not (self.opts.wgmma and self.opts.arch == "sm_90a"):
            return False, ""
        chained = [d for d in dots if d.register_a]
        if len(dots) != 2 or len(chained) != 1 or self.scattered:
            return False, ""  # not one dot feeding another (attention's backward has three)
        second = chained[0]
        score = (str(second.m), str(second.k))  # the first dot's accumulator: attention's s
        loop = second.op.parent_op
        while loop is not None and not isinstance(loop, scf.ForOp):
            loop = loop.parent_op
        if loop is None:
            return False, ""  # not in a loop: nothing streams
        streamed = [operand_load(d.op.b) for d in dots]
        if streamed[0] is not None and streamed[0] is streamed[1]:
            return False, ""  # one tile read by both dots: the loop stages it itself
        for load in streamed:
            if load is not None and not loop.is_ancestor_of(load):
                return False, ""  # loaded once before the loop: nothing for a producer
            why = (
                "an operand is not loaded"
                if load is None
                else tensor_map_blocker(self.kernel, load.view)
            )
            if why:
                return False, f"not tiled for a producer warpgroup: {why}"
        if option == 1:
            return True, "tiled for a producer warpgroup (option producer = 1)"
        macs = 0
        for d in dots:
            dims = [str(x) for x in (d.m, d.n, d.k)]
            for x in score:
                if x not in dims:
                    return False, ""
                dims.remove(x)
            macs += self.size(dims[0])
        exps, ops = 0, 0
        walks = set()
        for op in loop.body.walk():
            shapes = [v.type for v in (*op.operands, *op.results) if isinstance(v.type, TileType)]
            if not any(tuple(str(x) for x in t.shape) == score for t in shapes):
                continue
            if index_mask_work(op):
                walks.add(mask_walk(loop, op))
                continue  # mask-bounds runs the tiles the mask shows entirely without it
            if op.name in ("math.exp", "math.exp2"):
                exps += 1
            elif op.name.startswith(("arith.", "math.")) or isinstance(op, (T.ReduceOp, T.CastOp)):
                ops += 1
        bound, tensor, softmax = chain_bound(macs, exps, ops)
        numbers = (
            f"per score the dots take {tensor:.3f} clocks ({macs} products), the softmax "
            f"{softmax:.3f} ({exps} exponential{'s' if exps != 1 else ''}, {ops} other ops)"
        )
        if bound == "dots":
            return self._producer_pays(second, walks, tensor + softmax, numbers)
        return False, (
            f"not tiled for a producer warpgroup: {numbers}, so the softmax bounds the loop "
            "and larger blocks would save nothing"
        )

    def _producer_pays(
        self, second: TiledDot, walks: set[str | None], clocks: float, numbers: str
    ) -> tuple[bool, str]:
        """`producer_plan`'s answer where the dots bound the chain: whether the key tiles a
        block walks pay for a producer's block alone on its SM (`producer_ratio`)."""
        why = (
            f"{numbers}, so the dots bound the loop and 128-row blocks stream half the "
            "key/value bytes a product of 64-row ones"
        )
        keys = self.extents.get(second.k[1:]) if isinstance(second.k, str) else second.k
        if "band" in walks:
            return True, (
                f"tiled for a producer warpgroup: {why}; a mask of a window whose width is a "
                "runtime value leaves the key tiles a block walks unknown (taken as long; "
                "option producer = 0 for short windows)"
            )
        if keys is None:
            return True, f"tiled for a producer warpgroup: {why}; the key extent is unknown"
        walk = "triangle" if "triangle" in walks else None
        tiles = -(-int(keys) // 128)
        ratio = producer_ratio(tiles, walk, clocks * 128 * 128)
        walked = f"{tiles} key tiles of 128" + (", query block i walking i + 1" if walk else "")
        if ratio < 1:
            return False, (
                f"not tiled for a producer warpgroup: {why}, but over {walked} 64-row blocks "
                f"two to an SM take {ratio:.2f} of the time of 128-row blocks alone on theirs "
                "(their first copies and last stores unhidden)"
            )
        return True, (
            f"tiled for a producer warpgroup: {why}; over {walked} 64-row blocks would take "
            f"{ratio:.2f}x as long"
        )

    def estimated_registers(self, dots: list[TiledDot], c: TileConfig) -> int:
        """Registers a thread of `c` is estimated to take: its words and ptxas's overhead."""
        return min(255, self.live_words(dots, c) + 255 - self.word_budget(dots, c))

    def word_budget(self, dots: list[TiledDot], c: TileConfig) -> int:
        """The most words `live_words` may come to for `c`: what leaves ptxas room besides."""
        return WGMMA_LIVE_WORD_BUDGET if self.wgmma_chain(dots, c) else LIVE_WORD_BUDGET

    def wgmma_chain(self, dots: list[TiledDot], c: TileConfig) -> bool:
        """Whether `c` runs `dots` on `wgmma` with A in registers (sm_90a, option wgmma): warps
        `[4 g, 1]` with 16 accumulator rows a warp (one m64 per warpgroup: the `mma.sync`
        accumulator's `#blocked` twin is then the wgmma accumulator's, and mma.sync's A
        fragments are wgmma's register-A form), every dot's A held in registers anyway --
        computed from another dot's accumulator (attention's P) or loaded before the loop
        (attention's q) --, its B loaded with a unit last stride (copied by 16-byte chunks,
        read from shared memory by a descriptor), N a multiple of 64 up to 256, and K tiles of
        whole 128-byte rows (what the lowering's k-steps walk). Single matmuls whose A streams take
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
            if not (d.register_a or (not d.streamed[0] and operand_load(d.op.a) is not None)):
                return False
            if operand_load(d.op.b) is None:
                return False
            if (k * d.element_bytes) % 128:
                # The lowering's k-steps walk whole 128-byte rows, of a K-major B and of an A
                # read by ldmatrix alike: a dot over a whole dimension of 13 f16 (rows of 32
                # bytes) takes mma.sync (the fuzzer's seed 308 of 4 kernels, 2026-12-06).
                return False
        return True

    def blocks(self, c: TileConfig) -> int | None:
        """Blocks in the grid, when the option `extents` gives every grid dimension."""
        total = 1
        for dim, symbol in attribute_pairs(self.kernel, "tilec.grid"):
            if str(dim) not in self.extents:
                return None
            tile = self.size(str(symbol), c) if isinstance(symbol, str) else int(symbol)  # type: ignore[call-overload]
            total *= -(-self.extents[str(dim)] // tile)
        return total

    def preference(self, dots: list[TiledDot], c: TileConfig) -> tuple:
        """Sort key of qualifying configs, best first (see the class docstring)."""
        blocks = self.blocks(c)
        fill = min(blocks, self.opts.sm_count) if blocks is not None else 0
        order = PRODUCER_SEARCH_WARPS if self.producer else SEARCH_WARPS
        warps_rank = order.index(c.num_warps) if c.num_warps in order else 0
        area = sum(self.size(d.m, c) * self.size(d.n, c) for d in dots)
        split_along_rows = 0 if (not self.reduces or c.warps[1] == 1) else 1
        fragments = 0.0  # shared-memory operand reads per product: least for square tiles
        for d in dots:
            m = max(1, self.size(d.m, c) // c.warps[0])
            n = max(1, self.size(d.n, c) // c.warps[1])
            fragments += (m + n) / (m * n)
        k_row = sum(
            abs(
                self.size(d.k, c) * d.element_bytes
                - (BYTE_COPY_K_ROW_BYTES if d.int8 and self.byte_copies else PREFERRED_K_ROW_BYTES)
            )
            for d in dots
            if isinstance(d.k, str) and d.k in c.sizes
        )
        taller = -sum(self.size(d.m, c) for d in dots)
        # Operands copied element by element: a big accumulator would spill.
        crowded = (
            bool(self.scattered or self.byte_copies)
            and self.registers(dots, c) > SCATTERED_ACCUMULATORS
        )
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

    def choose_mma(self, dots: list[TiledDot]) -> TileConfig | None:
        """The best qualifying config, None when the dots stay on the FMA path (remarked), or a
        `TileError` when pins rule out every config that the free choice would have. A chain
        planned for a producer warpgroup (`producer_plan`) keeps the plan only where the best
        config under it has two consumer warpgroups or more (or option producer = 1)."""
        self.producer, self.producer_why = self.producer_plan(dots)
        chosen = self._choose_mma(dots)
        if (
            self.producer
            and getattr(self.opts, "producer", -1) == -1
            and chosen is not None
            and chosen.num_warps < 8
        ):
            blocks = self.blocks(chosen)
            self.producer = False
            self.producer_why = (
                "not tiled for a producer warpgroup: the dots bound the loop, but the tiling "
                "preferred among those with one has a single warpgroup a block"
                + (f" (its {blocks} blocks fill more of the SMs)" if blocks is not None else "")
            )
            chosen = self._choose_mma(dots)
        return chosen

    def _choose_mma(self, dots: list[TiledDot]) -> TileConfig | None:
        free = {
            d
            for dot in dots
            for d in (dot.m, dot.n, dot.k)
            if isinstance(d, str) and self.plan.symbols[d].free
        }
        order = PRODUCER_SEARCH_WARPS if self.producer else SEARCH_WARPS
        warps = (self.warps_pin,) if self.warps_pin is not None else order
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
            ]
            if not good:
                good = self.smaller_tiles(dots, free, warps, existing)
                if good:
                    fewest = min(legal, key=lambda c: self.live_words(dots, c))
                    self.ctx.remark(
                        self.kernel,
                        "smaller tiles: no tiling with M and N tiles of 64 or more keeps within "
                        f"the register budget (the fewest words: {self.live_words(dots, fewest)} "
                        f"a thread, budget {self.word_budget(dots, fewest)}), and ptxas would spill",
                    )
            if not good:
                # Say so: a kernel whose every tiling holds more than the budget will spill
                # (attention at head dimension 256 holds q's and acc's 64x256 a warpgroup).
                fewest = min(legal, key=lambda c: self.live_words(dots, c))
                self.ctx.remark(
                    self.kernel,
                    f"no tensor-core tiling keeps within the register budget: the one holding "
                    f"the fewest words ({self.live_words(dots, c=fewest)} a thread, budget "
                    f"{self.word_budget(dots, fewest)}) is taken, and ptxas may spill; smaller "
                    "pinned tiles or fewer values live across the loop would avoid it",
                )
                good = [fewest]
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

    def smaller_tiles(
        self, dots: list[TiledDot], free: set[str], warps: tuple[int, ...], existing: set
    ) -> list[TileConfig]:
        """The configs with M and N tiles down to 16 (`SMALL_TILED_SIZES`) that keep within the
        budgets, tried when no config of `TILED_SIZES` does: fewer words a thread, more blocks."""
        configs = list(self.candidates(dots, free, warps, SMALL_TILED_SIZES))
        if existing:
            configs = [c for c in configs if c.warps in existing]
        return [
            c
            for c in configs
            if not self.problems(dots, c)
            and self.registers(dots, c) <= MAX_ACCUMULATOR_REGISTERS
            and self.live_words(dots, c) <= self.word_budget(dots, c)
        ]

    def pin_error(self, dots: list[TiledDot], free: set[str], why: list[str]) -> None:
        name = self.kernel.sym_name
        int8 = any(d.int8 for d in dots)
        instr = "m16n8k32" if int8 else "m16n8k16"
        hint = (
            f"mma.sync {instr} needs M, N and K tiles that are multiples of 16·W_m, "
            + ("16·W_n and 32" if int8 else "8·W_n and 16")
            + " for W_m x W_n warps; change the pin, or take the FMA path with "
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
                    f"into mma.sync warp tiles (multiples of {INSTR_M}x"
                    f"{max(d.warp_columns for d in dots)}): "
                    f"{either_of(fitting)} warps would",
                    self.kernel.loc,
                    hint=hint,
                )
        raise TileError(
            f"kernel '{name}': the pinned sizes cannot use mma.sync {instr}: " + "; ".join(why),
            self.kernel.loc,
            hint=hint,
        )

    def mma_remark(self, dots: list[TiledDot], c: TileConfig) -> str:
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
                where = (
                    "A from shared memory (staged_a)"
                    if self.staged_a_shared([dot])
                    else "A in registers"
                )
                tiles.append(
                    f"{wm // 4} warpgroup{'s' if wm > 4 else ''} of 64x{n}: wgmma m64n{n}k16 "
                    f"with {where}"
                )
                continue
            if dot.int8:
                tiles.append(
                    f"{wm}x{wn} warp tiles of {m}x{n}; {m // INSTR_M}x{n // INSTR_N} "
                    "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 instructions per warp per "
                    f"k-step of 32: {int8_b_reads(dot.op)}"
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
        if self.byte_copies and not self.scattered:
            text += (
                f"; at most {SCATTERED_ACCUMULATORS} accumulator registers/thread and 32-byte K "
                f"rows preferred: int8 operands are copied in runs of fewer than 8 bytes "
                f"({', '.join(self.byte_copies)})"
            )
        if self.scattered:
            text += (
                f"; at most {SCATTERED_ACCUMULATORS} accumulator registers/thread preferred: "
                f"operands are copied element by element ({', '.join(self.scattered)} not "
                "known to be 1: state it with --assume or the assume pass; @tilec.jit does)"
            )
        _, _, held_b, loaded, _ = self.word_parts(dots, c)
        text += (
            f"; {self.live_words(dots, c)} words a thread holds at its busiest (at most "
            f"{self.word_budget(dots, c)}: accumulators, held and one k-step's fragments"
            + (
                f"; of them {held_b} of B fragments loaded before the loop and read once, "
                "held for all of K"
                if held_b
                else ""
            )
            + (
                f"; {loaded} of loaded tiles that several dots read, held until the last one"
                if loaded
                else ""
            )
            + ")"
        )
        return text

    # -- block order ----------------------------------------------------------------------------
