"""The tensor memory accelerator on sm_90a: the boxes that fill a swizzled slot, the tensor
maps they need, and the lowering of `tile.tma_copy` and the mbarrier ops.

A slot of a wgmma operand buffer (`smem-placement`'s `wgmma_swizzle_for`) is a column of
128-byte swizzle atoms: rows of 128 bytes, the 16-byte chunk c of row r at chunk
c ^ (r % 8), rows wider than 128 bytes in blocks of 64 (f16) columns each holding every row
(`col_block`), and an A operand's 8-row groups in the accumulator's order (`interleave = 2`).
The TMA unit's 128-byte swizzle writes a box of rows of 128 bytes in the same pattern,
relative to a 1024-byte aligned address. So a slot is covered by boxes of (rows, 128 bytes):
one per column block and, where rows are interleaved, one per 8-row group (each lands on its
own atom); `box_plan` says where each goes. Every box of one copy has one shape, so one
tensor map per (argument, box) serves all of them (`tensormap_parameter_name`).

Tensor maps are encoded by the runtime (`tilec.runtime.tensormap`) from the argument's shape
and strides and passed as 128-byte `__grid_constant__` kernel parameters (docs/abi.md); the
copy names the parameter's generic address. Outside the tensor, the unit writes zeros.

Ops one thread issues (`_predicated`) run in a lane `elect.sync` picks in warp 0, tested on
the warp index read from lane 0 (`uniform_warp`), so that ptxas issues them from uniform
registers. mbarriers: `tile.mbarrier_init` (the elected thread: `mbarrier.init` per slot, then
`fence.mbarrier_init`), `tile.mbarrier_expect` (the elected thread:
`mbarrier.arrive.expect_tx`), `tile.tma_copy` (the elected thread: one `cp.async.bulk.tensor`
per box, `complete_tx` on the barrier), `tile.mbarrier_wait` (every thread:
`mbarrier.try_wait.parity` until it holds), `tile.mbarrier_inval` (the elected thread).

A multicast copy (`{multicast = C}`, a kernel in clusters of C: `tilec.lowering.cluster`) issues
only the boxes of the block's part of the tile, `.multicast::cluster` with the mask of all C
ranks, so each box lands in the slot, and on the barrier, of every block of the cluster. The
rank is read at run time (`%cluster_ctarank`), so the part's boxes are part 0's moved by the
rank times one shift in the slot and one in the tensor (`multicast_plan`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from tilec.dialects import tma as M
from tilec.dialects.tile import SharedLayout
from tilec.ir.core import Operation
from tilec.ir.types import SharedType
from tilec.lowering.cluster import check_cluster_size, cluster_rank
from tilec.lowering.layouts import element_bytes
from tilec.lowering.shared_memory import (
    I32,
    SharedBuffer,
    _asm,
    _i32,
    _shared_address,
    _slot_base,
    swizzled_offset,
)

if TYPE_CHECKING:
    from tilec.lowering.llvm import _KernelLowering

__all__ = [
    "TENSORMAP_ALIGNMENT",
    "TENSORMAP_BYTES",
    "Box",
    "MulticastPlan",
    "box_plan",
    "folded_plan",
    "lower_mbarrier_expect",
    "lower_mbarrier_init",
    "lower_mbarrier_inval",
    "lower_mbarrier_wait",
    "lower_tma_copy",
    "multicast_plan",
    "tensormap_boxes",
    "tensormap_parameter_name",
]

TENSORMAP_BYTES = 128  # a CUtensorMap
TENSORMAP_ALIGNMENT = 64
SWIZZLE_BYTES = 128  # the 128-byte swizzle's row
ATOM_BYTES = 1024  # 8 rows of 128 bytes: the swizzle repeats
MAX_BOX = 256  # elements per box dimension


@dataclass(frozen=True)
class Box:
    """One box of a slot: the bytes from the slot's start where it lands, and the element
    offsets (per slot dimension) of its first element within the slot's tile."""

    smem_offset: int
    start: tuple[int, ...]


def box_plan(
    buffer: SharedType, box_rows: int | None = None
) -> tuple[tuple[int, ...], list[Box]] | str:
    """The box shape (elements per slot dimension) and the boxes that fill one slot of
    `buffer` with the TMA unit's 128-byte swizzle, or why the slot's layout is not one the
    unit writes. The slot's dimensions before the last two must be 1 (a batch's). `box_rows`:
    the rows of a box when not the most the slot allows (a multicast copy's parts, which
    must be whole boxes: passes/pipeline_cluster.py); whole swizzle atoms (8 rows) that
    divide the slot's."""
    layout = buffer.layout
    slot = tuple(buffer.shape[1:])
    size = element_bytes(buffer.element)
    if not isinstance(layout, SharedLayout):
        return "its layout is not a swizzled #shared one"
    if len(slot) < 2 or any(d != 1 for d in slot[:-2]):
        return f"a slot of {list(slot)} is not a 2-D tile (with leading 1s)"
    rows, cols = slot[-2], slot[-1]
    width = layout.col_block or cols
    if (layout.vec * size, layout.per_phase, layout.max_phase) != (16, 1, 8):
        return (
            f"#shared<vec = {layout.vec}, per_phase = {layout.per_phase}, max_phase = "
            f"{layout.max_phase}> is not the 128-byte swizzle (16-byte chunks XOR row % 8)"
        )
    if width * size != SWIZZLE_BYTES or cols % width:
        return f"its rows (blocks) are {width * size} bytes, not the swizzle's {SWIZZLE_BYTES}"
    if rows % 8 or (rows * cols * size) % ATOM_BYTES:
        return f"{rows} rows are not whole 1 KiB swizzle atoms"
    if box_rows is None:
        box_rows = 8 if layout.interleave != 1 else rows
        while box_rows > MAX_BOX:
            box_rows //= 2
    elif box_rows % 8 or box_rows > MAX_BOX or (layout.interleave != 1 and box_rows != 8):
        return f"boxes of {box_rows} rows are not whole swizzle atoms of its rows"
    if rows % box_rows:
        return f"{rows} rows do not split into boxes of at most {MAX_BOX}"
    boxes = []
    lead = (0,) * (len(slot) - 2)
    for c in range(0, cols, width):
        for r in range(0, rows, box_rows):
            offset = swizzled_offset(layout, slot, r, c) * size
            if offset % ATOM_BYTES:
                return f"the box at row {r}, column {c} does not start a swizzle atom"
            boxes.append(Box(offset, (*lead, r, c)))
    return (*(1,) * len(lead), box_rows, width), boxes


def folded_plan(buffer: SharedType) -> tuple[tuple[int, ...], list[Box]] | None:
    """For a 2-D slot with interleaved rows (`interleave = 2`: 8-row group L of G stored at
    2 (L mod G/2) + L div G/2), the one box per column block that fills a whole tile of rows
    through a 5-D view of the tensor -- (tile t, group q < G/2, half h < 2, row r < 8,
    column), row 16 (G/2) t + 8 (G/2) h + 8 q + r -- whose box (1, G/2, 2, 8, 64) the unit
    writes q-major, so group L = (G/2) h + q lands at 2 q + h: the interleaved order. Only a
    tile whose rows all lie inside the tensor may take it (the view folds rows, so its bounds
    cannot stop a partial tile); None for other slots."""
    plan = box_plan(buffer)
    slot = tuple(buffer.shape[1:])
    layout = buffer.layout
    if isinstance(plan, str) or len(slot) != 2 or layout.interleave == 1:  # type: ignore[union-attr]
        return None
    rows = slot[0]
    width = plan[0][-1]
    size = element_bytes(buffer.element)
    boxes = [Box(c * rows * size, (0, c)) for c in range(0, slot[1], width)]
    return (1, rows // 16, 2, 8, width), boxes


@dataclass(frozen=True)
class MulticastPlan:
    """How the block of rank r issues its part of a multicast copy (`multicast_part`): part
    0's boxes, each moved by r `smem_step` bytes in the slot and r `step` elements along slot
    dimension `dim` in the tensor."""

    boxes: list[Box]
    dim: int
    step: int
    smem_step: int


def multicast_plan(slot: tuple[int, ...], box: tuple[int, ...], boxes: list[Box], ctas: int):
    """The `MulticastPlan` of a slot of `slot` filled by `boxes` (`box_plan`) and shared among
    `ctas` blocks, or why there is none. The rank is known only at run time, so part r must be
    part 0 moved by one constant offset in shared memory and one in the tensor: true of the
    column blocks (each its own run of atoms) and of interleaved 8-row groups (the groups of
    part r sit r atoms after those of part 0)."""
    part = M.multicast_part(slot, box, ctas)
    if isinstance(part, str):
        return part
    dim, step = part
    parts = [[p for p in boxes if p.start[dim] // step == r] for r in range(ctas)]
    first = parts[0]
    if not first or len(parts[1]) != len(first):
        return f"its {len(boxes)} boxes do not split evenly into {ctas} parts"
    smem_step = parts[1][0].smem_offset - first[0].smem_offset
    for r, pieces in enumerate(parts):
        moved = [
            Box(
                p.smem_offset + r * smem_step,
                tuple(s + r * step if d == dim else s for d, s in enumerate(p.start)),
            )
            for p in first
        ]
        if sorted(pieces, key=lambda p: p.start) != sorted(moved, key=lambda p: p.start):
            return (
                f"part {r} of {ctas} is not part 0 moved by {smem_step} bytes and {r * step} "
                f"elements along dimension {dim}"
            )
    return MulticastPlan(first, dim, step, smem_step)


def tensormap_parameter_name(argument: str, box: tuple[int, ...], fold: int = 0) -> str:
    """The hidden kernel parameter holding the tensor map of `argument` with `box` (`fold`:
    the rows of a tile folded into 5 dimensions, `folded_plan`; 0 for a plain map)."""
    name = f"{argument}.tensormap.{'x'.join(map(str, box))}"
    return f"{name}.fold{fold}" if fold else name


# ---------------------------------------------------------------------------------------------
# Lowering


def _elect_sync(k: _KernelLowering) -> ir.Value:
    """i1: this lane is the one `elect.sync` picks in its (converged) warp."""
    elect = ir.InlineAsm(
        ir.FunctionType(ir.IntType(1), []),
        "{\n\t.reg .pred p;\n\telect.sync _|p, 0xffffffff;\n\tselp.u16 $0, 1, 0, p;\n\t}",
        "=c",
        side_effect=True,
    )
    return k.b.call(elect, [])


def _predicated(k: _KernelLowering, pred: ir.Value | None, emit) -> None:
    """Run `emit()` in one thread (and where `pred` holds): a lane `elect.sync` picks in the
    block's warp 0 -- or, in a producer region (`tilec.lowering.warp_specialize`), whose one
    warp runs converged, in that warp. The warp is tested on its uniform index first
    (`uniform_warp`), so that ptxas sees a uniform issue: on `tid == 0` it wrapped each
    `cp.async.bulk.tensor` in a loop over the lanes (an ELECT / BRA.U.ANY loop)."""
    b = k.b
    then = k.fn.append_basic_block("tma.issue")
    done = k.fn.append_basic_block("tma.issued")
    if not k.elect_in_warp:
        in_warp = k.fn.append_basic_block("tma.warp0")
        first_warp = b.icmp_unsigned("==", k.uniform_warp(), _i32(0))
        b.cbranch(b.and_(first_warp, pred) if pred is not None else first_warp, in_warp, done)
        b.position_at_end(in_warp)
        b.cbranch(_elect_sync(k), then, done)
    else:
        elected = _elect_sync(k)
        b.cbranch(b.and_(elected, pred) if pred is not None else elected, then, done)
    b.position_at_end(then)
    emit()
    b.branch(done)
    b.position_at_end(done)


def _as_i32(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return b.trunc(v, I32) if v.type != I32 else v


def _barrier_address(k: _KernelLowering, barriers: SharedBuffer, slot: ir.Value) -> ir.Value:
    return _shared_address(k, _slot_base(k, barriers, slot))


def _pred(k: _KernelLowering, op: Operation) -> ir.Value | None:
    if op.pred is None:
        return None
    value = k.values[op.pred]
    return value if value.type == ir.IntType(1) else k.b.trunc(value, ir.IntType(1))


def lower_mbarrier_init(k: _KernelLowering, op: Operation) -> None:
    barriers: SharedBuffer = k.values[op.barriers]

    def emit() -> None:
        for s in range(barriers.type.shape[0]):
            address = _barrier_address(k, barriers, _i32(s))
            _asm(
                k,
                ir.VoidType(),
                [address],
                f"mbarrier.init.shared::cta.b64 [$0], {op.hardware_arrivals};",
                "r,~{memory}",
            )
        _asm(k, ir.VoidType(), [], "fence.mbarrier_init.release.cluster;", "~{memory}")

    _predicated(k, None, emit)


def lower_mbarrier_expect(k: _KernelLowering, op: Operation) -> None:
    barriers: SharedBuffer = k.values[op.barriers]
    address = _barrier_address(k, barriers, k.values[op.slot])
    _predicated(
        k,
        _pred(k, op),
        lambda: _asm(
            k,
            ir.VoidType(),
            [address],
            f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {int(op.bytes)};",
            "r,~{memory}",
        ),
    )


def lower_tma_copy(k: _KernelLowering, op: Operation) -> None:
    """One `cp.async.bulk.tensor` per box of the slot (`box_plan`), by the elected thread; coordinates
    innermost dimension first, as the tensor map orders them. A `folded` copy (interleaved
    rows, `folded_plan`) takes one 5-D box per column block when the whole tile of rows lies
    inside the tensor, the 8-row boxes otherwise (a branch on the row offset). A multicast
    copy issues its block's part of the boxes to every block of the cluster (`multicast_plan`;
    never folded: the verifier refuses that)."""
    buffer: SharedBuffer = k.values[op.buffer]
    barriers: SharedBuffer = k.values[op.barriers]
    plan = box_plan(buffer.type, op.box_shape[-2])
    if isinstance(plan, str):
        raise ValueError(f"tile.tma_copy into {buffer.type}: {plan}")
    box, boxes = plan
    if box != op.box_shape:
        raise ValueError(f"tile.tma_copy box {list(op.box_shape)} differs from the plan's {box}")
    b = k.b
    slot_start = _shared_address(k, _slot_base(k, buffer, k.values[op.slot]))
    bar = _barrier_address(k, barriers, k.values[op.barrier_slot])
    offsets = [_as_i32(b, k.values[v]) for v in op.offsets]

    ctas = op.multicast_ctas
    mask = [ir.Constant(ir.IntType(16), (1 << ctas) - 1)] if ctas > 1 else []

    def issue(tensormap: ir.Value, dst: ir.Value, inner_first: list[ir.Value]) -> None:
        rank = len(inner_first)
        names = ", ".join(f"${3 + i}" for i in range(rank))
        # A multicast lands at the same slot offset, and completes the same barrier, in every
        # block of the mask (ranks 0 .. ctas-1: the whole cluster).
        multicast = f".multicast::cluster [$0], [$1, {{{names}}}], [$2], ${3 + rank};"
        _asm(
            k,
            ir.VoidType(),
            [dst, tensormap, bar, *inner_first, *mask],
            f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes"
            + (multicast if mask else f" [$0], [$1, {{{names}}}], [$2];"),
            "r,l,r," + ",".join(["r"] * rank) + (",h" if mask else "") + ",~{memory}",
        )

    def emit_boxes() -> None:
        tensormap = k.tensormaps[(op.view, box, 0)]
        for piece in boxes:
            dst = b.add(slot_start, _i32(piece.smem_offset))
            coords = [b.add(o, _i32(s)) if s else o for o, s in zip(offsets, piece.start)]
            issue(tensormap, dst, coords[::-1])

    if ctas > 1:
        check_cluster_size(k, op, ctas)
        shared = multicast_plan(tuple(buffer.slot_shape), box, boxes, ctas)
        if isinstance(shared, str):
            raise ValueError(f"tile.tma_copy {{multicast = {ctas}}} into {buffer.type}: {shared}")

        def emit_part() -> None:
            # Part r of the tile: part 0's boxes moved by r parts, in the slot and the tensor.
            tensormap = k.tensormaps[(op.view, box, 0)]
            rank = cluster_rank(k)
            part_start = b.add(slot_start, b.mul(rank, _i32(shared.smem_step)))
            moved = list(offsets)
            moved[shared.dim] = b.add(offsets[shared.dim], b.mul(rank, _i32(shared.step)))
            for piece in shared.boxes:
                dst = b.add(part_start, _i32(piece.smem_offset))
                coords = [b.add(o, _i32(s)) if s else o for o, s in zip(moved, piece.start)]
                issue(tensormap, dst, coords[::-1])

        _predicated(k, _pred(k, op), emit_part)
        return

    folded = folded_plan(buffer.type) if op.is_folded else None
    if folded is None:
        _predicated(k, _pred(k, op), emit_boxes)
        return
    fold_box, pieces = folded
    rows = buffer.slot_shape[0]

    def emit_folded() -> None:
        tensormap = k.tensormaps[(op.view, fold_box, rows)]
        tile = b.udiv(offsets[0], _i32(rows))
        for piece in pieces:
            dst = b.add(slot_start, _i32(piece.smem_offset))
            column = b.add(offsets[1], _i32(piece.start[1])) if piece.start[1] else offsets[1]
            issue(tensormap, dst, [column, _i32(0), _i32(0), _i32(0), tile])

    def emit() -> None:
        extent = _as_i32(b, k.values[op.view].extents[0])
        whole = b.icmp_signed("<=", b.add(offsets[0], _i32(rows)), extent)
        full = k.fn.append_basic_block("tma.folded")
        partial = k.fn.append_basic_block("tma.boxes")
        done = k.fn.append_basic_block("tma.copied")
        b.cbranch(whole, full, partial)
        b.position_at_end(full)
        emit_folded()
        b.branch(done)
        b.position_at_end(partial)
        emit_boxes()
        b.branch(done)
        b.position_at_end(done)

    _predicated(k, _pred(k, op), emit)


def lower_mbarrier_wait(k: _KernelLowering, op: Operation) -> None:
    """Every thread spins on `mbarrier.try_wait.parity` (which itself waits a while in
    hardware before it gives up) until the phase has completed. The wait acquires at the
    block's scope (the default) in clustered kernels too: what a phase publishes is the
    TMA's writes into this block's shared memory, made visible by the barrier's own
    transaction count, and the other block's arrivals carry no data (`tilec.lowering.cluster`;
    `.acquire.cluster` cost a MEMBAR a wait on the H100)."""
    barriers: SharedBuffer = k.values[op.barriers]
    address = _barrier_address(k, barriers, k.values[op.slot])
    phase = k.values[op.phase]
    b = k.b
    parity = _as_i32(b, phase)
    spin = k.fn.append_basic_block("mbarrier.wait")
    done = k.fn.append_basic_block("mbarrier.done")
    b.branch(spin)
    b.position_at_end(spin)
    ready = _asm(
        k,
        I32,
        [address, parity],
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2;\n\t"
        "selp.u32 $0, 1, 0, p;\n\t}",
        "=r,r,r,~{memory}",
    )
    b.cbranch(b.icmp_unsigned("!=", ready, _i32(0)), done, spin)
    b.position_at_end(done)


def lower_mbarrier_inval(k: _KernelLowering, op: Operation) -> None:
    barriers: SharedBuffer = k.values[op.barriers]

    def emit() -> None:
        for s in range(barriers.type.shape[0]):
            _asm(
                k,
                ir.VoidType(),
                [_barrier_address(k, barriers, _i32(s))],
                "mbarrier.inval.shared::cta.b64 [$0];",
                "r,~{memory}",
            )

    _predicated(k, None, emit)


def tensormap_boxes(kernel: Operation) -> list[tuple[Any, tuple[int, ...], int]]:
    """The (view, box, fold) triples of the kernel's `tile.tma_copy` ops, in order of first
    use: one tensor-map parameter each (a folded copy has two: its 8-row boxes' map, and the
    5-D map of `folded_plan` with `fold` = the slot's rows)."""
    seen: list[tuple[Any, tuple[int, ...], int]] = []
    for op in kernel.walk():
        if not isinstance(op, M.TmaCopyOp):
            continue
        wanted = [(op.view, op.box_shape, 0)]
        folded = folded_plan(op.buffer.type) if op.is_folded else None
        if folded is not None:
            wanted.append((op.view, folded[0], op.buffer.type.shape[1]))
        seen += [w for w in wanted if w not in seen]
    return seen


LOWERINGS: dict[type, Any] = {
    M.MbarrierInitOp: lower_mbarrier_init,
    M.MbarrierExpectOp: lower_mbarrier_expect,
    M.TmaCopyOp: lower_tma_copy,
    M.MbarrierWaitOp: lower_mbarrier_wait,
    M.MbarrierInvalOp: lower_mbarrier_inval,
}
