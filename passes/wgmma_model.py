"""How long an SM takes over a wgmma tile: the model `tiling` ranks its wgmma tilings by.

A block of the wgmma tiling computes a BM x BN tile of the output in k-steps of 16, each of
its BM / 64 warpgroups issuing `wgmma.m64nBNk16` from shared memory. Per k-step the SM
spends the longer of two times:

* the tensor cores': BM x BN x 16 products at `TENSOR_MACS_PER_CLOCK` (dense f16/bf16 on
  sm_90: the H200's 989 TFLOP/s over 132 SMs at 1.83 GHz is 2048 a clock);
* shared memory's, at `SHARED_BYTES_PER_CLOCK` (32 banks of 4 bytes): the copies write A's
  BM x 16 and B's 16 x BN slices once, and every warpgroup reads its own 64 rows of A and
  all of B's slice -- B is read BM / 64 times.

So a 128x128 tile is held to 0.8 of the tensor cores by shared memory (160 clocks of traffic
for 128 of products), 128x256 reaches them (256 of each), and 256x128 (four warpgroups reading
B) is at 0.89. Measured on the H200 at 4096^3 and 8192^3 with copies two steps ahead and one
wgmma group in flight (docs/benchmarks.md, "wgmma groups in flight"): 0.70, 0.87 and 0.79 of
cuBLAS, in the model's order.

The registers of the main loop bound the tile (`tiling.wgmma_registers`). An epilogue that
combines the accumulator with loaded tiles (a bias row, a tile of the output as `moe_gemm`'s
`where` reads it) holds each thread's share of them next to it (`epilogue_operands`,
`epilogue_words`); past 255 registers ptxas spills them, once a tile, after the loop --
measured cheaper than a smaller tile, so tiling only says so in its remark.

Over a grid whose extents are known, `grid_clocks` is the time of the busiest SM: the waves,
each holding as many blocks as reach one SM, which share its tensor cores and shared memory,
each k-step no faster than a copy's latency over the steps copies run ahead, plus each
block's epilogue, and, for a block alone on its SM, the latency of its first copies and last
stores, which another block would hide. So a 1024^3 product takes 64x64 tiles two to an SM
(256 blocks) over 64x128 (128 blocks, each alone), and 64 products of 256x256x64 (one k-step:
the fixed costs are most of the work) 128x128 tiles two to an SM over 128x256.

A **chain** -- a dot whose A is computed in the loop from another dot's accumulator, with
elementwise work between (attention: s = q @ k.T, its softmax, p @ v) -- is bound either by
its dots or by that work (`chain_bound`). Per score (an element of the first dot's
accumulator), the tensor cores spend the chain's products per score over
`TENSOR_MACS_PER_CLOCK` (attention: 2 x d, so 0.125 clocks at d128 and 0.0625 at d64), and
the softmax spends its exponentials at the SM's 16 a clock (the special-function units:
3.9 TFLOP/s on the H100/H200, FlashAttention-3's figure) plus its other elementwise and
reduction ops at 128 a clock (four schedulers issuing one warp instruction each): attention's
one `exp` and five others come to 0.102. The ops of a mask of offsets (causal, a sliding
window, a tile's padding: `index_mask_work`) are left out: `mask-bounds` runs the tiles such
a mask shows entirely -- the loop's steady state -- without them (counted, a window's four
came to 0.125 and tied with the dots at d128). Where the dots bound the loop (d128: 0.125 against
0.102), what an SM streams per product decides the speed: a block of BM query rows reads every
key and value tile once for its BM rows, so 128-row blocks stream half the bytes per product
of 64-row ones -- and two warpgroups of one block overlap one's softmax with the other's dots
only with a producer warpgroup issuing the copies (no block-wide barrier each step). Where the
softmax bounds it (d64: 0.0625 against 0.102) the larger block saves nothing and fills the
SMs in coarser waves. Measured on the H200 (docs/benchmarks.md, 2026-12-05): at d128, 128x128
blocks with a producer 1.12-1.14x faster than 64x64 ones two to an SM (4096 keys, causal and
not), at 1537 keys 2% slower; at d64 2-4% slower (4096 and 1024 keys).

**How many key tiles a block walks** decides whether the producer's gain is worth its block
(`producer_ratio`). A 128-row block with a producer holds its SM alone, so what it waits for
unhidden -- its first copies (q, the first key tile) and its last stores -- is
`BLOCK_LATENCY_CLOCKS` a block, as a GEMM tile alone on its SM; 64-row blocks two to an SM
hide it behind each other. Per key tile the producer's block spends its dots and its softmax
(`chain_bound`'s two times, in series: 3.7k clocks a 128x128 tile at d128, 3.9k measured), and
the 64-row blocks `PRODUCER_STEADY_GAIN` times as long for the same scores (the steady state of
4096 keys, where the fixed cost is 2.6% of a block). So with n key tiles a block, the 64-row
plan takes G n against the producer's n + F (F = the latency over a tile's clocks, 0.86 at
d128): at 4 key tiles they tie, at 8 the producer is ahead 5%, at 32 13%. A causal mask
(`mask_walk`: a comparison that hides a suffix of the key tiles moving with the query block;
or a prefix, the walk from the other end) makes query block i walk i + 1 tiles, so over the
grid the sums of both plans' walks count; a 128-row block's diagonal tile also computes
twice the hidden scores a 64-row block's does.
Measured on the H100 (docs/benchmarks.md, 2026-12-05, third session; time of 64-row blocks
over the producer's): full attention at 512, 1024, 2048 keys 1.00, 1.05-1.07, 1.10 (model:
0.96, 1.05, 1.10); causal 0.85, 0.95-0.97, 1.03 (model: 0.78, 0.92, 1.02), causal 4096 keys
on the H200 1.088 (1.09). A window of a runtime width (`mask_walk`'s "band") walks a number of
tiles the compiler cannot know: the model keeps the producer there, and says so (at 1024 of
4096 keys it loses 8%: tiling's option producer = 0, or the tuner, chooses otherwise).
"""

from __future__ import annotations

import math

from tilec.dialects import scf
from tilec.dialects import tile as T
from tilec.ir.core import Operation, OpResult, Value
from tilec.ir.types import TileType
from tilec.passes.occupancy import DRIVER_RESERVED_SHARED, SM_SHARED_SM90

__all__ = [
    "BLOCK_LATENCY_CLOCKS",
    "COPY_LATENCY_CLOCKS",
    "EXP_PER_CLOCK",
    "ISSUE_PER_CLOCK",
    "PRODUCER_STEADY_GAIN",
    "SHARED_BYTES_PER_CLOCK",
    "TENSOR_MACS_PER_CLOCK",
    "WORKSPACE_BYTES_PER_CLOCK",
    "best_split",
    "chain_bound",
    "dram_fraction",
    "epilogue_operands",
    "epilogue_words",
    "grid_clocks",
    "index_mask_work",
    "lead_covers_latency",
    "mask_walk",
    "producer_ratio",
    "split_clocks",
    "stages_that_fit",
    "step_clocks",
    "walk_clocks",
]

TENSOR_MACS_PER_CLOCK = 2048  # dense f16/bf16 products an sm_90 SM's tensor cores do a clock
# A copy's latency from DRAM under load, in SM clocks (about 0.9 us at 1.83 GHz): copies one
# step of 128x256x64 ahead (1024 clocks) left the tensor cores waiting on the H200, two (2048)
# did not, nor did two of 128x128x64 on two blocks an SM (1280 each); on one block (1280
# clocks) they did -- 0.61 of cuBLAS against 0.73 (docs/benchmarks.md).
COPY_LATENCY_CLOCKS = 1600
# How much longer 64-row blocks without a producer take than 128-row blocks with one over the
# same scores of a chain bound by its dots, once the producer's fixed cost is paid: attention
# d128 over 4096 keys, 1.13x on the H200 (docs/benchmarks.md, 2026-12-05), with F = 0.86 of
# 32 tiles taken out.
PRODUCER_STEADY_GAIN = 1.16
# What a block alone on its SM waits for unhidden: its first copies, and its last stores.
BLOCK_LATENCY_CLOCKS = 2 * COPY_LATENCY_CLOCKS
SHARED_BYTES_PER_CLOCK = 128  # bytes an SM's shared memory moves a clock (32 banks x 4 bytes)
# An SM's share of the L2 cache's bandwidth, bytes a clock: where split GEMMs' f32 partials
# go and come back from (about 7.7 TB/s over 132 SMs at 1.83 GHz).
WORKSPACE_BYTES_PER_CLOCK = 32
MAX_SPLITS = 16  # the most ways `best_split` shares out one tile's k-steps
# DRAM's bytes a clock for the whole GPU (the H200's copy bandwidth, 4.2 TB/s, at 1.83 GHz:
# its sustained clock under tensor-core load, this share of the top 1.98 GHz). Compiling knows
# the architecture only and takes the H200's; a launch takes its GPU's (`tilec.runtime.
# device.dram_bytes_per_clock`: an H100 moves 3.0 TB/s).
DRAM_BYTES_PER_CLOCK = 4.2e12 / 1.83e9
MODEL_CLOCK_OF_PEAK = 1.83 / 1.98
WARPGROUP_ROWS = 64  # rows of A one warpgroup's wgmma covers
EXP_PER_CLOCK = 16  # exponentials an SM's special-function units compute a clock (sm_90)
ISSUE_PER_CLOCK = 128  # lane-operations an SM's four schedulers issue a clock (a warp each)
K_STEP = 16


def step_clocks(bm: int, bn: int, element_bytes: int = 2) -> float:
    """Clocks an SM spends on one k-step of 16 of a BM x BN tile (see the module docstring).
    8-bit operands (i8, f8) go through the tensor cores at twice the rate of 16-bit ones (the
    H200's 1979 dense TFLOP/s of fp8 against 989 of f16) and move half the bytes."""
    tensor = bm * bn * K_STEP * element_bytes / (2 * TENSOR_MACS_PER_CLOCK)
    groups = max(1, bm // WARPGROUP_ROWS)
    reads = groups * (WARPGROUP_ROWS + bn) * K_STEP * element_bytes
    writes = (bm + bn) * K_STEP * element_bytes
    return max(tensor, (reads + writes) / SHARED_BYTES_PER_CLOCK)


def chain_bound(
    macs_per_score: float, exps_per_score: int, ops_per_score: int
) -> tuple[str, float, float]:
    """`(bound, tensor, softmax)`: the clocks an SM spends per score of a chain on its dots
    (`tensor`) and on the elementwise work between them (`softmax`), and which bounds the
    loop (`"dots"` or `"softmax"`; see the module docstring). The softmax is counted as issued
    in series: its exponentials at `EXP_PER_CLOCK`, every other op at `ISSUE_PER_CLOCK`."""
    tensor = macs_per_score / TENSOR_MACS_PER_CLOCK
    softmax = exps_per_score / EXP_PER_CLOCK + ops_per_score / ISSUE_PER_CLOCK
    return ("dots" if tensor > softmax else "softmax"), tensor, softmax


# What an index mask is built of: comparisons and conjunctions of offsets (iotas, splats of
# scalars, index arithmetic), broadcast to the tile's shape.
_INDEX_OPS = (
    "arith.cmpi",
    "arith.andi",
    "arith.ori",
    "arith.addi",
    "arith.subi",
    "arith.muli",
    "arith.divsi",
    "arith.remsi",
    "arith.minsi",
    "arith.maxsi",
    "arith.index_cast",
    "arith.constant",
    "tile.program_id",
    "tile.num_programs",
    "tile.symbol",
    "tile.dim",
    "tile.iota",
    "tile.splat",
    "tile.broadcast",
    "tile.expand_dims",
    "tile.reshape",
)


def _index_only(v: Value, seen: dict[int, bool]) -> bool:
    """Whether `v` is computed from indices alone (no loaded or floating-point data)."""
    key = id(v)
    if key in seen:
        return seen[key]
    seen[key] = True  # a cycle through a loop adds nothing
    owner = v.owner if isinstance(v, OpResult) else None
    if owner is None:  # a block argument: a loop's induction variable or a kernel's scalar
        result = not isinstance(v.type, TileType)
    elif owner.name not in _INDEX_OPS:
        result = False
    else:
        result = all(_index_only(x, seen) for x in owner.operands)
    seen[key] = result
    return result


def index_mask_work(op: Operation) -> bool:
    """Whether `op` is part of a mask of offsets (a causal or sliding-window mask, a tile's
    padding): a `tile.select` whose condition is built from indices alone, or an op of such a
    condition. `mask-bounds` runs the tiles such a mask shows entirely -- the loop's steady
    state -- without it, so `chain_bound`'s count of a loop's work leaves it out."""
    seen: dict[int, bool] = {}
    if isinstance(op, T.SelectOp):
        return _index_only(op.operands[0], seen)
    if op.name in _INDEX_OPS and op.results:
        return all(_index_only(r, seen) for r in op.results)
    return False


def _slope(v: Value, iv: Value, seen: dict[int, int | None]) -> int | None:
    """How `v` moves with the loop's induction variable `iv`: +1 (as `offsets(t)`), -1 (as
    `U - t`), 0 (not at all), None (some other way: a product, a quotient)."""
    key = id(v)
    if key in seen:
        return seen[key]
    seen[key] = 0
    owner = v.owner if isinstance(v, OpResult) else None
    if v is iv:
        result: int | None = 1
    elif owner is None or owner.name in ("tile.iota", "arith.constant", "tile.program_id"):
        result = 0
    elif owner.name in ("arith.addi", "arith.subi"):
        a, b = (_slope(x, iv, seen) for x in owner.operands[:2])
        if a is None or b is None:
            result = None
        else:
            total = a + b if owner.name == "arith.addi" else a - b
            result = total if abs(total) <= 1 and not (a and b and total == 0) else None
    elif owner.name in _INDEX_OPS and len(owner.operands) == 1:  # casts, broadcasts, splats
        result = _slope(owner.operands[0], iv, seen)
    elif not owner.operands:
        result = 0
    else:
        result = None if any(_slope(x, iv, seen) != 0 for x in owner.operands) else 0
    seen[key] = result
    return result


def _on_grid(v: Value, seen: set[int]) -> bool:
    """Whether `v` depends on a block's program id (the query block, in attention)."""
    if id(v) in seen:
        return False
    seen.add(id(v))
    owner = v.owner if isinstance(v, OpResult) else None
    if owner is None:
        return False
    return owner.name == "tile.program_id" or any(_on_grid(x, seen) for x in owner.operands)


def mask_walk(loop: scf.ForOp, select: Operation) -> str | None:
    """How an index mask `select` (`index_mask_work`) limits the tiles of `loop` a block walks:
    "triangle" where a comparison of the loop's offsets with the block's own hides a suffix
    of the tiles (causal: block i walks i + 1) or a prefix (block i walks the n - i from its
    own on: `mask-bounds` raises the lower bound), "band" where one hides a suffix and
    another a prefix (a sliding window: a walk as long as the window, a runtime value), None
    where no comparison depends on the block (a padding mask)."""
    if not isinstance(select, T.SelectOp):
        return None
    iv = loop.induction_var
    upper = lower = False
    cond = select.operands[0]
    atoms, pending = [], [cond]
    while pending:
        v = pending.pop()
        owner = v.owner if isinstance(v, OpResult) else None
        if owner is not None and owner.name == "arith.andi":
            pending.extend(owner.operands[:2])
        elif owner is not None and owner.name in ("tile.broadcast", "tile.expand_dims"):
            pending.append(owner.operands[0])
        else:
            atoms.append(v)
    for atom in atoms:
        cmp = atom.owner if isinstance(atom, OpResult) else None
        if cmp is None or cmp.name != "arith.cmpi":
            continue
        predicate = str(cmp.attributes["predicate"].value)
        lhs, rhs = cmp.operands[:2]
        a, b = _slope(lhs, iv, {}), _slope(rhs, iv, {})
        if a is None or b is None or a == b or not _on_grid(lhs if b else rhs, set()):
            continue
        rising = (a - b) > 0  # lhs - rhs grows with the loop
        below = predicate in ("sle", "slt", "ule", "ult")
        if predicate not in ("sle", "slt", "ule", "ult", "sge", "sgt", "uge", "ugt"):
            continue
        if rising == below:
            upper = True  # true early, false late: a suffix hidden
        else:
            lower = True
    if upper and lower:
        return "band"
    return "triangle" if upper or lower else None


def producer_ratio(key_tiles: int, walk: str | None, tile_clocks: float) -> float:
    """The time of a chain's 64-row blocks without a producer over that of 128-row blocks with
    one (the module docstring), `key_tiles` the 128-key tiles of the whole key dimension,
    `walk` the mask's (`mask_walk`: "triangle" or None), `tile_clocks` a 128x128 tile's dots
    and softmax (`chain_bound`'s times a score, summed, times 128 x 128). Above 1 the producer
    is faster."""
    fixed = BLOCK_LATENCY_CLOCKS / tile_clocks
    n = key_tiles
    if walk == "triangle":  # query block i walks i + 1 tiles; 64-row block j, j + 1 of 64
        producer = n * (n + 1) / 2 + n * fixed
        sixty_four = n * (2 * n + 1) / 4
    else:
        producer = n + fixed
        sixty_four = n
    return PRODUCER_STEADY_GAIN * sixty_four / producer


def stages_that_fit(
    bm: int, bn: int, bk: int, blocks_per_sm: int, most: int, element_bytes: int = 2
) -> int:
    """The stages `pipeline` gives such a tile by default: the most, up to `most` (its
    `MAX_DEFAULT_STAGES`), whose A and B slots fit the block's share of the SM's shared
    memory (less the 1 KiB the driver keeps)."""
    share = SM_SHARED_SM90 // blocks_per_sm - DRIVER_RESERVED_SHARED
    return max(1, min(most, share // ((bm + bn) * bk * element_bytes)))


def lead_covers_latency(
    bm: int, bn: int, bk: int, lead: int, resident: int, element_bytes: int = 2
) -> bool:
    """Whether copies issued `lead` steps ahead arrive before they are read: the steps between
    (each `resident` blocks' k-steps, which share the SM) take at least `COPY_LATENCY_CLOCKS`."""
    step = (bk // K_STEP) * step_clocks(bm, bn, element_bytes)
    return lead * resident * step >= COPY_LATENCY_CLOCKS


def grid_clocks(
    bm: int,
    bn: int,
    bk: int,
    k_steps: int | None,
    blocks: int | None,
    blocks_per_sm: int,
    sm_count: int,
    max_stages: int,
    element_bytes: int = 2,
    splits: int = 1,
    dram_fraction: float = 0.0,
    dram_rate: float = DRAM_BYTES_PER_CLOCK,
) -> float:
    """Clocks of the busiest SM over the whole grid of `blocks` tiles of `k_steps` steps of BK
    (None when the extents are unknown: then the clocks of one k-step per output element,
    which ranks tiles by how near they bring the SM to its tensor cores' rate).

    Per wave, the `resident` blocks an SM holds share its tensor cores and shared memory:
    each of their k-steps takes `step_clocks`, but no less than a copy's time over the steps
    the copies run ahead (the stages of `stages_that_fit`, up to `max_stages`, less one); each
    block's epilogue moves its output tile through shared memory (written, read back). A block
    alone on its SM also waits, unhidden, for its first copies and its last stores
    (`BLOCK_LATENCY_CLOCKS`); blocks sharing an SM hide that behind each other's work.

    A copy's time is its latency plus the time its bytes from DRAM take at the block's share
    of DRAM's bandwidth (`dram_rate` bytes a clock; `dram_fraction` of a step's operand
    bytes come from DRAM, the rest
    hit in L2: `best_split` derives it from the operands' size; the share is the rate over
    the blocks running at once, `_transfer`). Where the tiles reuse their operands (4096^3)
    the bytes add little to the latency; where a GEMM streams a weight it barely reuses
    (`x @ w.T` at decode sizes: 16 x 11008 x 4096 reads each weight once) they are most of
    it, and the copies in flight -- stages less one -- decide how near DRAM's rate the grid
    comes (Little's law: one step of 32 KiB ahead takes 1600 + 1800 clocks, 0.53 of the
    rate; three, 0.9). Measured on the H100 (2026-12-06) at 16 x 11008 x 4096: 64x256 tiles
    on two stages 1.11x the time of 64x64 on four; and splitting K spreads the same bytes
    over more blocks, each with a smaller share: S = 1, 3, 6 ran 0.93, 1.0, 1.22 (the model:
    0.97, 1.0, 1.16); at 1 x 4096 x 4096, S = 8 1.24x S = 4 (model 1.26).

    Split `splits` ways (`split-reduction`: each tile's k-steps shared out among `splits`
    blocks), the grid has `splits` times the blocks, each of a `splits`-th of the steps, which
    also write their f32 partial tile to the workspace and take a ticket; the last block of
    each tile then reads the `splits` partials back (`split_clocks`)."""
    if blocks is None or k_steps is None:
        return step_clocks(bm, bn, element_bytes) / (bm * bn)
    if splits > 1:
        whole = grid_clocks(
            bm,
            bn,
            bk,
            -(-k_steps // splits),
            blocks * splits,
            blocks_per_sm,
            sm_count,
            max_stages,
            element_bytes,
            dram_fraction=dram_fraction,
            dram_rate=dram_rate,
        )
        return whole + split_clocks(bm, bn, splits)
    step = (bk // K_STEP) * step_clocks(bm, bn, element_bytes)
    lead = max(1, stages_that_fit(bm, bn, bk, blocks_per_sm, max_stages, element_bytes) - 1)
    epilogue = 2 * bm * bn * element_bytes / SHARED_BYTES_PER_CLOCK
    waves = math.ceil(blocks / (sm_count * blocks_per_sm))
    resident = min(blocks_per_sm, math.ceil(blocks / sm_count))
    transfer = _transfer(
        bm, bn, bk, element_bytes, dram_fraction, blocks, sm_count * blocks_per_sm, dram_rate
    )
    copy = max((COPY_LATENCY_CLOCKS + transfer) / lead, transfer)
    shared = k_steps * max(resident * step, copy) + resident * epilogue
    alone = k_steps * max(step, copy) + epilogue + BLOCK_LATENCY_CLOCKS
    return waves * max(shared, alone)


def _transfer(
    bm: int,
    bn: int,
    bk: int,
    element_bytes: int,
    fraction: float,
    blocks: int,
    slots: int,
    rate: float = DRAM_BYTES_PER_CLOCK,
) -> float:
    """Clocks a block's DRAM bytes of one step take at its share of DRAM's `rate` (bytes a
    clock): the rate over the blocks running at once (DRAM serves the requests of every block
    alike, so an SM running two blocks gets twice the share of one running one)."""
    return fraction * (bm + bn) * bk * element_bytes * min(blocks, slots) / rate


def walk_clocks(
    bm: int,
    bn: int,
    bk: int,
    k_steps: int,
    blocks: int,
    sm_count: int,
    max_stages: int,
    element_bytes: int = 2,
    dram_fraction: float = 0.0,
) -> float:
    """Clocks of the busiest SM where one block an SM with a producer warpgroup walks the
    grid's `blocks` tiles (`pipeline`'s options `persistent` and `warp_specialize`): it walks
    ceil(blocks / SMs) of them, each k-step as in `grid_clocks` but with the copies as many
    steps ahead as there are stages (the producer refills a slot as soon as it is released),
    plus each tile's epilogue -- during which the producer already fills the stages with the
    next tile's first steps -- and the first copies' latency and the last stores once an SM,
    not once a tile. So the walk gains where a block alone on its SM pays that latency for few
    steps a tile: bmm 8 x 1024^3 in 128x256 tiles (16 steps, two tiles an SM) 0.92 of
    `grid_clocks` (measured on the H100, 2026-12-06: 0.918); 4096^3 (64 steps, four) 0.97;
    nothing where every SM has one tile or two blocks an SM hide each other's."""
    step = (bk // K_STEP) * step_clocks(bm, bn, element_bytes)
    lead = max(1, stages_that_fit(bm, bn, bk, 1, max_stages, element_bytes))
    transfer = _transfer(bm, bn, bk, element_bytes, dram_fraction, blocks, sm_count)
    epilogue = 2 * bm * bn * element_bytes / SHARED_BYTES_PER_CLOCK
    tile = k_steps * max(step, (COPY_LATENCY_CLOCKS + transfer) / lead, transfer) + epilogue
    return math.ceil(blocks / sm_count) * tile + BLOCK_LATENCY_CLOCKS


def split_clocks(bm: int, bn: int, splits: int) -> float:
    """What splitting a BM x BN tile's k-steps `splits` ways adds to the grid's time: each
    block writes its f32 partial tile to the workspace and takes a ticket (a fence and an
    atomic, about a copy's latency), and the last block of the tile reads the `splits`
    partials back before its epilogue -- at `WORKSPACE_BYTES_PER_CLOCK`, an SM's share of
    the L2 cache's bandwidth (the workspace stays in L2)."""
    partial = bm * bn * 4 / WORKSPACE_BYTES_PER_CLOCK
    return partial + COPY_LATENCY_CLOCKS + splits * partial


def dram_fraction(
    bm: int, bn: int, bk: int, k_steps: int, blocks: int, element_bytes: int, operand_bytes: int
) -> float:
    """The share of the bytes a grid's copies move that DRAM supplies: each of the operands'
    `operand_bytes` is read from DRAM once, the rest hit in L2 (the same however the K loop
    is split). 0.04 for 4096^3 in 128x256 tiles; 0.78 for `x @ w.T` 16x11008x4096."""
    moved = blocks * k_steps * (bm + bn) * bk * element_bytes
    return min(1.0, operand_bytes / moved) if moved else 0.0


def best_split(
    bm: int,
    bn: int,
    bk: int,
    k_steps: int,
    blocks: int,
    blocks_per_sm: int,
    sm_count: int,
    max_stages: int,
    element_bytes: int = 2,
    most: int = MAX_SPLITS,
    operand_bytes: int = 0,
    dram_rate: float = DRAM_BYTES_PER_CLOCK,
) -> tuple[int, float]:
    """(S, clocks): the split of least `grid_clocks` for a grid of `blocks` tiles of
    `k_steps` steps of BK, from 1 (not split) to `most` and no more than the steps, none
    faster than `operand_bytes` (A's and B's bytes, each read from DRAM at least once) at
    `DRAM_BYTES_PER_CLOCK`; ties go to fewer splits (less workspace). The floor matters where
    a GEMM streams a weight it barely reuses: `a @ b.T` 64x4096x14336 bf16 reads 117 MB, 28 us
    at the H200's copy bandwidth, which S = 4 reaches (measured 38.2 us) and S = 8 only adds
    partials to (42.6 us; the model without the floor chose 8: docs/benchmarks.md)."""
    floor = operand_bytes / dram_rate
    fraction = dram_fraction(bm, bn, bk, k_steps, blocks, element_bytes, operand_bytes)
    args = (bm, bn, bk, k_steps, blocks, blocks_per_sm, sm_count, max_stages, element_bytes)
    rated = {"dram_fraction": fraction, "dram_rate": dram_rate}
    best, best_clocks = 1, max(floor, grid_clocks(*args, **rated))
    if blocks >= sm_count * blocks_per_sm:
        return best, best_clocks  # the tiles fill the GPU: splitting only adds work
    for count in range(2, min(most, k_steps) + 1):
        clocks = max(floor, grid_clocks(*args, splits=count, **rated))
        if clocks < best_clocks * (1 - 1e-9):
            best, best_clocks = count, clocks
    return best, best_clocks


# Ops that only move or reshape a tile's elements: an epilogue operand is what they start from.
_MOVES = (T.BroadcastOp, T.ExpandDimsOp, T.ReshapeOp, T.CastOp)


def epilogue_operands(dot: Operation, m: object, n: object) -> list[tuple[bool, bool]]:
    """For each tile the epilogue of `dot` (what computes from its accumulator after the
    loop that carries it) combines with the accumulator, loaded or computed apart from it:
    whether it spans the accumulator's rows (dimension `m`, a symbol or size) and its columns
    (`n`). Constants (`tile.full`) are not held; a broadcast operand counts as its source."""
    result: Value = dot.results[0]
    loop = dot.parent_op
    if isinstance(loop, scf.ForOp) and result in loop.yield_op.operands:
        result = loop.results[list(loop.yield_op.operands).index(result)]
    derived = {id(result)}
    users: list[Operation] = []
    work = [result]
    while work:  # everything computed from the accumulator, first
        v = work.pop()
        for use in v.uses:
            if not isinstance(use, Operation) or use in users:
                continue
            users.append(use)
            for r in use.results:
                if isinstance(r.type, TileType) and id(r) not in derived:
                    derived.add(id(r))
                    work.append(r)
    found: list[tuple[bool, bool]] = []
    seen: set[int] = set()
    for use in users:  # then what those ops combine it with
        if not use.results:
            continue
        for other in use.operands:
            if id(other) in derived or id(other) in seen or not isinstance(other.type, TileType):
                continue
            seen.add(id(other))
            source = other
            while isinstance(source, OpResult) and isinstance(source.op, _MOVES):
                source = source.op.operands[0]
            if isinstance(source, OpResult) and isinstance(source.op, T.FullOp):
                continue
            shape = list(source.type.shape)
            found.append((m in shape, n in shape))
    return found


def epilogue_words(operands: list[tuple[bool, bool]], bn: int) -> int:
    """32-bit words a thread holds of `epilogue_operands` in the wgmma accumulator's layout:
    of every 64 rows of a warpgroup a thread has 2, of BN columns BN / 4."""
    words = 0
    for rows, columns in operands:
        words += (2 if rows else 1) * (bn // 4 if columns else 1)
    return words
