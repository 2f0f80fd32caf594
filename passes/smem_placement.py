"""The `smem-placement` pass: tensor-core dot operands go through swizzled shared memory, and
every shared buffer gets its place (an offset) in the kernel's shared memory.

It also owns what the `pipeline` pass reuses: the swizzle choice, the liveness-based offset
plan with its check against the device limit, and the rule that removes barriers nothing
needs (`remove_redundant_barriers`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from tilec.diagnostics import TileError
from tilec.dialects import arith, scf, shared, tma
from tilec.dialects import tile as T
from tilec.dialects.builtin import STAGED_A_ATTRIBUTE, FuncOp
from tilec.dialects.tile import DotOperandLayout, MmaLayout, SharedLayout
from tilec.dialects.tma import is_barrier_buffer
from tilec.ir.attributes import IntegerAttr, UnitAttr
from tilec.ir.builder import Builder
from tilec.ir.core import BlockArgument, Operation, Value
from tilec.ir.types import FloatType, IndexType, SharedType, TileType
from tilec.lowering.exchange import op_scratch_bytes
from tilec.lowering.layouts import element_bytes
from tilec.lowering.shared_memory import BUFFER_ALIGNMENT, buffer_live_ranges, scratch_bases_for
from tilec.passes.tiling_operands import stored_form
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = [
    "SHARED_LIMIT_SM90",
    "BufferPlace",
    "SharedPlan",
    "SmemPlacement",
    "apply_shared_plan",
    "buffer_bytes",
    "check_shared_plan",
    "operand_major",
    "plan_shared_memory",
    "remove_redundant_barriers",
    "swizzle_for",
]

# Shared memory one block may use on sm_90 (227 KiB); sm_80 allows 163 KiB, sm_86/89 99 KiB.
SHARED_LIMIT_SM90 = 232448
# Every buffer starts on a 128-byte line (the lowering's BUFFER_ALIGNMENT): 16-byte aligned
# as cp.async and ldmatrix need, and the swizzle's phases line up with the banks.
ALIGNMENT = BUFFER_ALIGNMENT
BANK_LINE = 128  # bytes: 32 banks of 4 bytes
LDMATRIX_ROW = 16  # bytes: one row of an 8x8 ldmatrix of 16-bit elements

_LDMATRIX_ELEMENTS = (FloatType("f16"), FloatType("bf16"))


@register_pass
class SmemPlacement(Pass):
    """Stages tensor-core dot operands through swizzled shared memory; places every buffer.

    For every `tile.dot` whose result has an `#mma` layout, each operand is written into a
    one-slot shared buffer (`tile.alloc_shared` at the top of the kernel) and read back in the
    `#dot_operand` layout that `ldmatrix` produces: `tile.barrier` (when earlier reads of the
    bytes may still be in progress), `tile.store_shared` of both operands, `tile.barrier`,
    `tile.load_shared` of both. An operand defined outside the loops around the dot is staged
    once, before the outermost of them. The swizzle (`swizzle_for`) makes one `ldmatrix`
    (8 rows of 16 bytes) and one wave of 16-byte stores touch each bank once. Then every
    `tile.alloc_shared` gets `offset` (bytes, on 128-byte lines): buffers whose live ranges
    (first to last use, a loop counting as a whole) do not overlap share bytes. The kernel gets
    `tilec.shared_bytes` (the end of the last buffer). The lowering's scratch for layout
    conversions and cross-warp reductions (`tilec.lowering.exchange`) of an op goes after the
    buffers still live there; the furthest byte either reaches is checked against
    `shared_limit`: when it does not fit, the error lists each buffer and the scratch.
    Assumes laid-out IR (`assign-layouts`, with `#mma` accumulators from `tiling`); dots
    without an `#mma` result are left to the lowering. Running it twice changes nothing.
    Remarks: the swizzle of each buffer and why, each offset, the kernel's total.
    """

    name = "smem-placement"
    summary = "Stage dot operands through swizzled shared memory; assign buffer offsets"

    @dataclass
    class Options:
        shared_limit: int = option(
            SHARED_LIMIT_SM90, "shared memory per block in bytes (sm_90: 227 KiB)"
        )

    def run(self, module: Operation, ctx: PassContext) -> None:
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            check_tile_sizes(kernel)
            _stage_dot_operands(kernel, ctx)
            remove_redundant_barriers(kernel)
            plan = plan_shared_memory(kernel)
            check_shared_plan(
                kernel,
                plan,
                self.options.shared_limit,
                "option shared_limit of smem-placement",
                "use smaller tiles: the option tiles of tiling (or specialize), or "
                "@kernel(tile={...})",
            )
            apply_shared_plan(kernel, plan, ctx, self.options.shared_limit)


# No block can hold tiles this large in registers; planning their exchanges would build
# arrays of every element (128 GiB for a pinned 4096 x 4096 x 32 tile).
MAX_ELEMENTS_PER_THREAD = 4096


def check_tile_sizes(kernel: FuncOp) -> None:
    """A `TileError` at the first op whose tile gives a thread more than
    `MAX_ELEMENTS_PER_THREAD` elements (tile sizes pinned far beyond what a block holds)."""
    warps = kernel.attributes.get("tilec.num_warps")
    threads = 32 * (warps.value if isinstance(warps, IntegerAttr) else 1)
    for op in kernel.walk():
        for result in op.results:
            t = result.type
            count = t.num_elements if isinstance(t, TileType) else None
            if count is not None and count > MAX_ELEMENTS_PER_THREAD * threads:
                raise TileError(
                    f"a tile of {t.element} {list(t.shape)} has {count} elements: "
                    f"{count // threads} for each of the "
                    f"{threads} threads, more than {MAX_ELEMENTS_PER_THREAD}",
                    op.loc,
                    hint="use smaller tiles: @kernel(tile={...}) or the option tiles of tiling",
                )


# ---------------------------------------------------------------------------------------------
# The swizzle


def swizzle_for(tile: TileType) -> tuple[SharedLayout, str]:
    """The `#shared` layout of a row-major 2-D tile that `ldmatrix` reads, and why.

    A row of `R` bytes is cut into 16-byte chunks (`vec` elements); chunk `c` of row `r` is
    stored at chunk `c ^ ((r / per_phase) % max_phase)`. With `per_phase = 128 / R` rows
    sharing one 128-byte line of banks and `max_phase = 8 / per_phase`, the 8 rows one
    `ldmatrix` reads (one chunk each) land in 8 different 16-byte groups of banks, as do the
    8 chunks of one wave of 16-byte stores along a row.
    """
    _, columns = tile.shape
    size = element_bytes(tile.element)
    row_bytes = columns * size
    if str(tile.element) == "i8":
        note = "i8, read by ldmatrix as 16-byte rows (its b16 view); "
    elif tile.element not in _LDMATRIX_ELEMENTS:
        note = f"{tile.element} is not 16-bit (no ldmatrix): 16-byte chunks swizzled as for f16; "
    else:
        note = ""
    if row_bytes < LDMATRIX_ROW:
        return (
            SharedLayout(1, 1, 1, (1, 0)),
            f"{note}rows of {row_bytes} bytes are narrower than one 16-byte chunk: no swizzle",
        )
    vec = LDMATRIX_ROW // size
    per_phase = max(1, BANK_LINE // row_bytes)
    max_phase = max(1, 8 // per_phase)
    chunks = row_bytes // LDMATRIX_ROW
    lines = (
        f"{note}rows of {row_bytes} bytes ({chunks} chunk{'s' if chunks != 1 else ''} of 16), "
        f"{per_phase} row{'s' if per_phase != 1 else ''} per 128-byte bank line: "
    )
    if max_phase == 1:
        why = lines + "the 8 rows of an ldmatrix already fill all 32 banks once: no swizzle"
    else:
        why = lines + (
            f"XOR of the chunk with (row / {per_phase}) % {max_phase} puts the 8 rows of an "
            "ldmatrix and a wave of 16-byte stores on all 32 banks once"
        )
    return SharedLayout(vec, per_phase, max_phase, (1, 0)), why


def wgmma_swizzle_for(
    tile: TileType, index: int, transposed: bool = False, natural_rows: bool = False
) -> tuple[SharedLayout, str]:
    """The `#shared` layout of a `wgmma` operand (`tilec.lowering.wgmma.lower_wgmma_dot`)
    stored as `tile` (2-D). Operand `index` read `transposed` (`tile.load_shared
    {transposed}`) has the other major-ness. A stored [M, K] and B stored [N, K] are K-major:
    rows of 128 bytes in 128-byte swizzle atoms, A's 8-row groups in the order of the
    accumulator's rows (`interleave = 2`). B stored [K, N] is N-major: blocks of 64 columns,
    each holding every row. A stored [K, M] is read into registers by `ldmatrix.trans`
    (`wgmma_a_in_registers`) from the N-major layout, which the TMA unit writes: from shared
    memory wgmma would read it M-major, which needs its 8-column groups in the accumulator's
    row order -- 16-byte pieces that split every 32-byte sector the copies bring in two,
    measured at 1.5x the L2 traffic and 0.35x cuBLAS on the H200 (docs/benchmarks.md);
    `ldmatrix.trans` takes one address per row and reads the rows in any order. Unless the
    accumulator keeps wgmma's own row order (`natural_rows`, `MmaLayout`): then A stored
    [K, M] is read M-major by its descriptor from that same layout, as the TMA unit writes it
    (warpgroup g's 64 rows are column block g)."""
    columns = tile.shape[1]
    size = element_bytes(tile.element)
    vec = LDMATRIX_ROW // size
    if index == 0 and transposed and natural_rows:
        block = BANK_LINE // size
        if columns % block:
            raise ValueError(
                f"wgmma's M-major A needs a multiple of {block} columns, not {columns}"
            )
        return SharedLayout(vec, 1, 8, (1, 0), col_block=block), (
            "wgmma's A stored [K, M], read M-major by its descriptor (the accumulator keeps "
            "wgmma's own row order, natural_rows): 128-byte swizzle atoms as the TMA unit "
            f"writes them, blocks of {block} columns each holding every row, warpgroup g "
            "reading block g"
        )
    if index == 0 and transposed:
        block = BANK_LINE // size
        if columns % block:  # narrower than an atom: the ldmatrix swizzle, cp.async copies
            layout, why = swizzle_for(tile)
            return layout, (
                "wgmma's A stored [K, M]: read into registers with ldmatrix.trans (rows of "
                f"the accumulator's order, no permuted copy); {why}"
            )
        return SharedLayout(vec, 1, 8, (1, 0), col_block=block), (
            "wgmma's A stored [K, M], read into registers with ldmatrix.trans (rows of the "
            "accumulator's order, no permuted copy), in 128-byte swizzle atoms the TMA unit "
            f"writes: blocks of {block} columns, each holding every row (16-byte chunk XOR "
            "row % 8: the 8 rows of an ldmatrix on all 32 banks once)"
        )
    if index == 0 or transposed:  # K-major: stored [M, K] (A) or [N, K] (B)
        if (columns * size) % BANK_LINE:
            raise ValueError(
                f"wgmma's K-major operand needs rows of a multiple of 128 bytes, not "
                f"{columns * size}"
            )
        # Rows longer than one atom: blocks of 64 columns, each holding every row, which the
        # descriptor walks one after the other (`wgmma_step_offset`).
        block = BANK_LINE // size if columns * size > BANK_LINE else 0
        blocks = f"; blocks of {block} columns, each holding every row" if block else ""
        if index == 0:
            return SharedLayout(vec, 1, 8, (1, 0), interleave=2, col_block=block), (
                "wgmma's K-major operand in 128-byte swizzle atoms (8 rows of 128 bytes, "
                "16-byte chunk XOR row % 8); its 8-row groups stored in the order of the "
                f"accumulator's rows (interleave = 2){blocks}"
            )
        return SharedLayout(vec, 1, 8, (1, 0), col_block=block), (
            "wgmma's K-major operand (B stored [N, K], read transposed: the descriptor's "
            "native layout) in 128-byte swizzle atoms (8 rows of 128 bytes, 16-byte chunk XOR "
            f"row % 8){blocks}"
        )
    block = BANK_LINE // size
    if columns % block:
        raise ValueError(
            f"wgmma's N-major operand needs a multiple of {block} columns, not {columns}"
        )
    return SharedLayout(vec, 1, 8, (1, 0), col_block=block), (
        f"wgmma's N-major operand in 128-byte swizzle atoms: blocks of {block} columns, each "
        "holding every row (16-byte chunk XOR row % 8)"
    )


def wgmma_a_in_registers(
    index: int,
    transposed: bool,
    before_loop: bool,
    staged_shared: bool = False,
    natural_rows: bool = False,
) -> bool:
    """Whether a `wgmma` dot takes operand `index` from registers (`mma.sync` A fragments,
    `#dot_operand` version 2) rather than by a descriptor: A stored [K, M] (`wgmma_swizzle_for`
    says why), and an A staged once before the dot's loop -- read into registers once, as on
    mma.sync, rather than from shared memory every iteration (attention's q) -- unless the
    kernel reads such an A by descriptor (`staged_shared`: tiling's option `staged_a`, which
    frees the registers its fragments held; the buffer then holds its 8-row groups in the
    accumulator's row order and, at a head dimension of 128, two column blocks). An
    accumulator in wgmma's own row order (`natural_rows`) reads its A by descriptor always:
    the register-A fragments hold the `#blocked` twin's rows."""
    if natural_rows:
        return False
    return index == 0 and (transposed or (before_loop and not staged_shared))


def operand_major(index: int, transposed: bool) -> str:
    """Which dimension of a dot operand is contiguous in its shared buffer: 'K' or 'M'/'N'."""
    if (index == 0) != transposed:
        return "K"
    return "M" if index == 0 else "N"


# ---------------------------------------------------------------------------------------------
# Staging dot operands


def _stage_dot_operands(kernel: FuncOp, ctx: PassContext) -> None:
    # Operands staged at the same point share the barriers around them.
    groups: dict[int, tuple[Operation, list[tuple[T.DotOp, int]]]] = {}
    # A loop-invariant operand staged before an earlier loop is read from there by the same
    # operand of a later dot (the copy of a loop `mask-bounds` split off): (stored value,
    # index, transposed, layout of the dot) -> the first (dot, index, anchor) staging it.
    invariant: dict[tuple, tuple[T.DotOp, int, Operation]] = {}
    reuse: list[tuple[T.DotOp, int, T.DotOp]] = []
    for dot in [op for op in kernel.walk() if isinstance(op, T.DotOp)]:
        if not isinstance(dot.result.type.layout, MmaLayout):
            continue
        for index in (0, 1):
            operand = dot.operands[index]
            if isinstance(operand.type.layout, DotOperandLayout):
                continue  # staged already
            stored = stored_form(operand)
            anchor = _staging_point(dot, stored.value)
            if anchor is not dot:
                key = (id(stored.value), index, stored.transposed, dot.result.type.layout)
                first = invariant.get(key)
                if first is not None and _comes_before(first[2], anchor):
                    reuse.append((dot, index, first[0]))
                    continue
                invariant.setdefault(key, (dot, index, anchor))
            groups.setdefault(id(anchor), (anchor, []))[1].append((dot, index))
    entry = kernel.body.block
    top = Builder(entry, _first_non_alloc(entry), kernel.loc)
    staged = kernel.attributes.get(STAGED_A_ATTRIBUTE)
    staged_shared = staged is not None and staged.value == "shared"
    zero: Value | None = None
    for anchor, members in groups.values():
        here = Builder.before_op(anchor)
        here.create(shared.BarrierOp)  # kept only where earlier reads may still run
        staged = []
        for dot, index in members:
            stored = stored_form(dot.operands[index])
            tile = stored.value.type
            plane = TileType(stored.plane, tile.element)
            version = dot.result.type.layout.version
            natural = dot.result.type.layout.natural_rows
            if (
                version == 3
                and not stored.transposed
                and wgmma_a_in_registers(
                    index, stored.transposed, anchor is not dot, staged_shared, natural
                )
            ):
                layout, why = swizzle_for(plane)
                why = (
                    "wgmma's A held in registers (staged once before the loop, read by "
                    f"ldmatrix once: mma.sync's A fragments, wgmma's register-A form); {why}"
                )
            elif version == 3:  # by descriptor, or stored [K, M] (`wgmma_swizzle_for`)
                layout, why = wgmma_swizzle_for(plane, index, stored.transposed, natural)
            else:
                layout, why = swizzle_for(plane)
            order = tuple(range(tile.rank - 1, -1, -1))
            layout = dataclasses.replace(layout, order=order)
            buffer_type = SharedType((1, *tile.shape), tile.element, layout)
            with top.located(dot.loc):
                alloc = top.create(shared.AllocSharedOp, result_types=[buffer_type])
            label = dot.operands[index].name_hint or stored.value.name_hint or "ab"[index]
            alloc.result.name_hint = f"{label}_smem"
            major = operand_major(index, stored.transposed)
            how = (
                f"stored {list(tile.shape)} as its tensor holds it, read transposed ({major}-major)"
                if stored.transposed
                else f"{major}-major"
            )
            if str(tile.element) == "i8" and dot.result.type.layout.version == 2:
                why += "; " + _int8_read(index, stored.transposed)
            ctx.remark(alloc, f"operand {'ab'[index]} of a tensor-core dot, {how}: {layout}: {why}")
            if zero is None:
                zero = _index_constant(top, 0)
                zero.name_hint = "c0"
            here.create(
                shared.StoreSharedOp,
                buffer=alloc.result,
                slot=zero,
                value=stored.value,
                loc=dot.loc,
            )
            staged.append((dot, index, alloc, stored))
        here.create(shared.BarrierOp)
        for dot, index, alloc, stored in staged:
            mma = dot.result.type.layout
            tile = dot.operands[index].type
            version = 3 if mma.version == 3 else 2
            if version == 3 and wgmma_a_in_registers(
                index, stored.transposed, anchor is not dot, staged_shared, mma.natural_rows
            ):
                version = 2  # fragments in registers
            load = here.create(
                shared.LoadSharedOp,
                buffer=alloc.result,
                slot=zero,
                result_types=[
                    TileType(
                        tile.shape,
                        tile.element,
                        DotOperandLayout(index, mma.warps_per_cta, version),
                    )
                ],
                loc=dot.loc,
            )
            if stored.transposed:
                load.attributes["transposed"] = UnitAttr()
            load.result.name_hint = f"{alloc.result.name_hint[: -len('_smem')]}_op"
            dot.set_operand(index, load.result)
            for op in stored.chain:  # the transpose and reshapes the read now does
                if not op.result.uses:
                    op.erase()
            if anchor is not dot:
                ctx.remark(load, "loop-invariant operand: staged once, before the loop")
    for dot, index, first in reuse:
        operand = dot.operands[index]
        dot.set_operand(index, first.operands[index])
        for op in stored_form(operand).chain:
            if not op.result.uses:
                op.erase()
        ctx.remark(dot, f"operand {'ab'[index]}: read from where an earlier loop's dot staged it")


def _int8_read(index: int, transposed: bool) -> str:
    """How `mma.sync.m16n8k32` reads an i8 operand from its buffer (`tilec.lowering.tensorcore`)."""
    if index == 0:
        return "mma.sync m16n8k32 reads it by ldmatrix.x4, one per m16 tile and k-step of 32"
    if transposed:
        return (
            "mma.sync m16n8k32 reads it by ldmatrix.x4, one per pair of n8 tiles and k-step of "
            "32 (rows 2 apart: 2 reads a bank where rows are 64 or 128 bytes)"
        )
    return (
        "mma.sync m16n8k32 reads it by ldmatrix.x4.trans of 16-bit column pairs, one per pair "
        "of n8 tiles and k-step of 32, then 4 prmt.b32 byte permutes give each lane 4 "
        "consecutive k of one column (rows chosen so that each 8x8 read keeps 8 swizzle phases)"
    )


def _comes_before(first: Operation, later: Operation) -> bool:
    """Whether `first` runs before `later` on every path: an earlier op of a block that holds
    `later` (or an op around it)."""
    op: Operation | None = later
    while op is not None and op.parent is not None:
        if op.parent is first.parent:
            ops = op.parent.ops
            return ops.index(first) < ops.index(op)
        op = op.parent_op
    return False


def _staging_point(dot: Operation, operand: Value) -> Operation:
    """Where `operand` is written to shared memory: before `dot`, or before the outermost of
    the loops around it that `operand` does not change in."""
    anchor = dot
    loop = dot.parent_op
    while isinstance(loop, scf.ForOp) and not _defined_inside(operand, loop):
        anchor = loop
        loop = loop.parent_op
    return anchor


def _defined_inside(v: Value, op: Operation) -> bool:
    owner = v.owner
    if isinstance(v, BlockArgument):
        owner = owner.parent_op
    return owner is not None and op.is_ancestor_of(owner)


def _first_non_alloc(block) -> Operation | None:
    for op in block.ops:
        if not isinstance(op, shared.AllocSharedOp):
            return op
    return None


def _index_constant(builder: Builder, value: int) -> Value:
    return builder.create(
        arith.ConstantOp, value=IntegerAttr(value), result_types=[IndexType()]
    ).result


# ---------------------------------------------------------------------------------------------
# Barriers


def _needs_barrier_after(op: Operation) -> bool:
    """Whether `op` touches shared memory in a way a later barrier must order: a write (or a
    landed copy) other threads will read, or a read a later write must wait for. Issuing a
    copy does not: it lands at a `tile.async_wait`."""
    lands = (shared.AsyncWaitOp, tma.MbarrierInitOp, tma.MbarrierWaitOp)
    return any(
        isinstance(o, (shared.StoreSharedOp, shared.LoadSharedOp, *lands)) for o in op.walk()
    )


def _barrier_needed(barrier: Operation) -> bool:
    op = barrier
    while True:
        block = op.parent
        for prev in reversed(block.ops[: block.ops.index(op)]):
            if isinstance(prev, shared.BarrierOp):
                return False
            if _needs_barrier_after(prev):
                return True
        owner = block.parent_op
        if owner is None or isinstance(owner, FuncOp):
            return False  # nothing before it in the kernel touched shared memory
        if not isinstance(owner, scf.IfOp):
            return True  # a loop body: the previous iteration may have
        op = owner


def remove_redundant_barriers(kernel: Operation) -> int:
    """Erase every `tile.barrier` with no shared-memory access (`_needs_barrier_after`) since
    the previous barrier (or the start of the kernel); returns how many."""
    removed = 0
    for op in [o for o in kernel.walk() if isinstance(o, shared.BarrierOp)]:
        if not _barrier_needed(op):
            op.erase()
            removed += 1
    return removed


# ---------------------------------------------------------------------------------------------
# Offsets


@dataclass
class BufferPlace:
    """One buffer's bytes, live range (positions in the kernel's op order) and offset."""

    alloc: Operation
    type: SharedType  # as planned (with the slots the plan assumed)
    bytes: int
    first: int
    last: int
    offset: int = 0

    @property
    def name(self) -> str:
        return f"%{self.alloc.result.name_hint}" if self.alloc.result.name_hint else "a buffer"

    def overlaps_in_time(self, other: BufferPlace) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass
class SharedPlan:
    buffers: list[BufferPlace]
    buffer_bytes: int  # the end of the last buffer: tilec.shared_bytes
    scratch_end: int  # the end of the furthest scratch of the lowering (0: none)

    @property
    def total(self) -> int:
        return max(self.buffer_bytes, self.scratch_end)


def buffer_bytes(t: SharedType) -> int:
    return math.prod(t.shape) * element_bytes(t.element)  # type: ignore[arg-type]


def _aligned(n: int, alignment: int = ALIGNMENT) -> int:
    return -(-n // alignment) * alignment


def plan_shared_memory(kernel: Operation, slots: dict[int, int] | None = None) -> SharedPlan:
    """Offsets for the kernel's buffers by first fit in order of first use; buffers live at
    the same time never share bytes. A use inside a loop keeps the buffer live for the whole
    loop, and a buffer fed by `tile.async_copy` stays live until the next `tile.async_wait 0`
    (a copy in flight still writes it). `slots` (by `id` of the alloc) plans with that many
    slots instead of the buffer's own."""
    _, ranges = buffer_live_ranges(kernel)
    buffers: list[BufferPlace] = []
    for op, (first, last) in ranges.items():
        t = op.result.type
        stages = (slots or {}).get(id(op), t.shape[0])
        planned = SharedType((stages, *t.shape[1:]), t.element, t.layout)
        buffers.append(BufferPlace(op, planned, buffer_bytes(planned), first, last))
    placed: list[BufferPlace] = []
    # mbarriers (8 bytes each) go after the operand buffers, which keep their 1 KiB alignment.
    for b in sorted(buffers, key=lambda b: (is_barrier_buffer(b.type), b.first, -b.bytes)):
        live = sorted((p for p in placed if p.overlaps_in_time(b)), key=lambda p: p.offset)
        offset = 0
        for p in live:
            if offset + b.bytes <= p.offset:
                break
            offset = max(offset, _aligned(p.offset + p.bytes))
        b.offset = offset
        placed.append(b)
    total = _aligned(max((b.offset + b.bytes for b in buffers), default=0))
    # The lowering's scratch goes where the lowering will put it (one rule for both).
    bases = scratch_bases_for(kernel, {b.alloc: (b.offset, b.offset + b.bytes) for b in buffers})
    scratch_end = max((base + op_scratch_bytes(op) for op, base in bases.items()), default=0)
    return SharedPlan(buffers, total, scratch_end)


def check_shared_plan(
    kernel: FuncOp, plan: SharedPlan, limit: int, limit_source: str, lower: str
) -> None:
    """Raise a `TileError` naming every buffer when `plan` needs more than `limit` bytes."""
    if plan.total <= limit:
        return
    lines = [
        f"kernel '{kernel.sym_name}' needs {plan.total} bytes of shared memory, more than the "
        f"limit of {limit} ({limit_source}):"
    ]
    for b in sorted(plan.buffers, key=lambda b: b.offset):
        lines.append(f"  {b.name}: {b.type}: {b.bytes} bytes at offset {b.offset}")
    lines.append(
        "  scratch of the lowering (layout conversions, reductions), after the buffers live "
        f"where it is used: up to byte {plan.scratch_end}"
    )
    raise TileError("\n".join(lines), kernel.loc, hint=lower)


def apply_shared_plan(kernel: FuncOp, plan: SharedPlan, ctx: PassContext, limit: int) -> None:
    """Write the offsets and `tilec.shared_bytes`, with a remark on each decision."""
    for b in plan.buffers:
        b.alloc.attributes["offset"] = IntegerAttr(b.offset)
        sharing = [
            o.name
            for o in plan.buffers
            if o is not b
            and not o.overlaps_in_time(b)
            and o.offset < b.offset + b.bytes
            and b.offset < o.offset + o.bytes
        ]
        reuse = f"; shares bytes with {', '.join(sharing)} (not live at the same time)"
        ctx.remark(b.alloc, f"offset {b.offset}, {b.bytes} bytes" + (reuse if sharing else ""))
    kernel.attributes["tilec.shared_bytes"] = IntegerAttr(plan.buffer_bytes)
    ctx.remark(
        kernel,
        f"shared memory: {plan.buffer_bytes} bytes of buffers (tilec.shared_bytes); the "
        f"lowering's scratch reaches byte {plan.scratch_end}; {plan.total} of {limit} bytes",
    )
