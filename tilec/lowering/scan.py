"""Lowering of `tile.scan`, `tile.arg_reduce` and `tile.topk` (tilec.dialects.scan) to
per-thread LLVM IR, registered in `tilec.lowering.llvm`'s table of lowerings.

All three walk the op's axis as `tile.reduce` does (`ScanPlan` says how far each step goes):

1. **in the thread**: a thread holds runs of `run` consecutive positions, `repeats` times
   (every `run * lanes * warps` positions);
2. **across lanes**: the `lanes` lanes along the axis exchange through `shfl.sync`. A scan
   takes `shfl.sync.up` steps of 1, 2, 4, ... lanes (Hillis-Steele on each thread's run
   total), then one more up-shuffle for the lanes before it (the exclusive prefix) and one
   `shfl.sync.idx` from the last lane for the warp's total. An arg-reduction or a topk
   round takes `shfl.sync.bfly` steps over (value, position) pairs;
3. **across warps** (when the axis spreads over `warps > 1` warps): each warp's totals go to
   the scratch shared memory, one barrier, and every thread reads them back: the warps before
   its own are its carry (a scan), all of them the answer (an arg-reduction).

A scan's repeats are chained last: repeat r adds the totals of repeats 0..r-1 (each known to
every thread after step 3). The identity of a combine is what masked steps add (-0.0 for
float sums, so that -0.0 survives).

Pairs compare as the dialect says: NaN beats every number, equal values go to the lower
position (f16/bf16 compare as f32, exactly). `tile.topk` is `k` rounds of the arg-reduction
over the elements not yet taken (a per-element flag; a taken element loses to every other),
each round marking its winner, so its results are sorted and ties go to lower positions. Each
round's winner is known to every thread of its row; a thread's result slot at position j of
the k keeps round j's. Results are in the operand's layout (`passes/scan_layouts.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from tilec.dialects import scan as S
from tilec.ir.core import Operation
from tilec.ir.types import FloatType, IntegerType, TileType, Type, f32, i1, i32
from tilec.lowering import mathlib
from tilec.lowering.exchange import SCRATCH_ALIGNMENT, thread_map
from tilec.lowering.layouts import (
    DimMap,
    ThreadMap,
    element_bytes,
    local_source_slots,
    row_major_strides,
)
from tilec.lowering.llvm_types import constant

__all__ = ["LOWERINGS", "ScanPlan", "scan_plan", "scan_scratch_bytes"]

I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)


@dataclass(frozen=True)
class ScanPlan:
    """How the positions of `axis` spread: `run` consecutive ones a thread, `repeats` times,
    over `lanes` lanes and `warps` warps that hold distinct positions (others hold copies)."""

    axis: int
    dim: DimMap
    run: int
    repeats: int
    lanes: int
    warps: int
    natural: ThreadMap  # the thread's elements without the axis (its rows)

    @property
    def natural_size(self) -> int:
        return math.prod(self.natural.shape) if self.natural.shape else 1


def scan_plan(t: TileType, axis: int) -> ScanPlan:
    m = thread_map(t)
    d = m.dims[axis]
    spt, tpw, wpc = d.lane_mul, d.lane_mask + 1, d.warp_mask + 1
    run = min(spt, d.size)
    lanes = min(tpw, max(1, d.size // spt))
    warps = min(wpc, max(1, d.size // (spt * tpw)))
    repeats = m.counts[axis] // run
    return ScanPlan(axis, d, run, repeats, lanes, warps, m.without_dim(axis))


def _aligned(n: int) -> int:
    return -(-n // SCRATCH_ALIGNMENT) * SCRATCH_ALIGNMENT


def scan_scratch_bytes(op: Operation) -> int:
    """Shared-memory bytes `op` uses between its barriers (0: none)."""
    plan = scan_plan(op.input.type, op.axis)
    if plan.warps == 1:
        return 0
    t = op.input.type.element
    if isinstance(op, S.ScanOp):
        return plan.warps * plan.repeats * plan.natural_size * element_bytes(t)
    values = _aligned(plan.warps * plan.natural_size * element_bytes(t))
    positions = plan.warps * plan.natural_size * 4
    if isinstance(op, S.TopKOp):  # and the flags of taken elements, a byte each
        return values + _aligned(positions) + plan.warps * plan.natural_size
    return values + positions


# ---------------------------------------------------------------------------------------------
# Helpers on the kernel lowering `L` (tilec.lowering.llvm._KernelLowering)


def _shuffle(L: Any, v: ir.Value, mode: str, operand: ir.Value | int) -> ir.Value:
    return mathlib.warp_shuffle(L.b, v, mode, operand)


def _field(L: Any, value: ir.Value, shift: int, mask: int) -> ir.Value:
    """`(value >> shift) & mask`, computed once in the entry block."""
    p = L.prologue
    return p.and_(p.lshr(value, ir.Constant(I32, shift)), ir.Constant(I32, mask))


def _identity(kind: str, t: Type) -> ir.Constant:
    if isinstance(t, FloatType):
        value = {"sum": -0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}[kind]
        return constant(t, value)
    assert isinstance(t, IntegerType)
    low, high = -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
    return constant(t, {"sum": 0, "prod": 1, "max": low, "min": high}[kind])


def _slot(m: ThreadMap, natural: tuple[int, ...], axis: int, k: int) -> int:
    full = (*natural[:axis], k, *natural[axis:])
    return sum(i * s for i, s in zip(full, m.slot_strides))


def _writer(L: Any, plan: ScanPlan) -> ir.Value:
    """True in one thread per (warp along the axis, row): lane 0 of the axis, a warp that
    holds distinct positions, the unique owner of the row."""
    p = L.prologue
    d = plan.dim
    lane_field = _field(L, L.lane, d.lane_shift, d.lane_mask)
    warp_row = _field(L, L.warp, d.warp_shift, d.warp_mask)
    writer = p.and_(
        p.icmp_unsigned("==", lane_field, ir.Constant(I32, 0)),
        p.icmp_unsigned("<", warp_row, ir.Constant(I32, plan.warps)),
    )
    owner = L.unique_owner(plan.natural)
    return writer if owner is None else p.and_(writer, owner)


def _natural_flats(L: Any, plan: ScanPlan) -> list[ir.Value]:
    if not plan.natural.shape:
        return [ir.Constant(I32, 0)]
    return L.flat_indices(plan.natural, row_major_strides(plan.natural.shape))


# ---------------------------------------------------------------------------------------------
# tile.scan


def lower_scan(L: Any, op: Operation) -> list[Any]:
    src_t: TileType = op.input.type
    if op.result.type.layout != src_t.layout:
        from tilec.lowering.llvm import NotLowered  # llvm.py imports this module

        raise NotLowered(op, "is lowered only with its result in its operand's layout")
    t = src_t.element
    kind = op.kind
    m = thread_map(src_t)
    plan = scan_plan(src_t, op.axis)
    d = plan.dim
    b = L.b
    values = L.values[op.input]
    identity = _identity(kind, t)

    def combine(x: ir.Value | None, y: ir.Value) -> ir.Value:
        return y if x is None else L._combine(kind, t, x, y)

    lane_eff = _field(L, L.lane, d.lane_shift, plan.lanes - 1) if plan.lanes > 1 else None
    rows = [plan.natural.slot_multi_index(s) for s in range(plan.natural.num_slots)]
    # 1. in the thread: each run's inclusive prefix
    local = [
        [
            [values[_slot(m, row, op.axis, r * plan.run + j)] for j in range(plan.run)]
            for r in range(plan.repeats)
        ]
        for row in rows
    ]
    for runs in local:
        for run in runs:
            for j in range(1, plan.run):
                run[j] = combine(run[j - 1], run[j])
    # 2. across lanes: inclusive scan of the run totals, the lanes before, the warp's total
    before_lanes: list[list[ir.Value | None]] = []
    warp_totals: list[list[ir.Value]] = []
    last_lane = (plan.lanes - 1) << d.lane_shift
    for runs in local:
        befores, totals = [], []
        for run in runs:
            total = run[-1]
            if lane_eff is None:
                befores.append(None)
                totals.append(total)
                continue
            inclusive = total
            for i in range(plan.lanes.bit_length() - 1):
                step = 1 << i
                earlier = _shuffle(L, inclusive, "up", step << d.lane_shift)
                has = b.icmp_unsigned(">=", lane_eff, ir.Constant(I32, step))
                inclusive = b.select(has, combine(earlier, inclusive), inclusive)
            earlier = _shuffle(L, inclusive, "up", 1 << d.lane_shift)
            has = b.icmp_unsigned(">=", lane_eff, ir.Constant(I32, 1))
            befores.append(b.select(has, earlier, identity))
            source = b.or_(L.lane, ir.Constant(I32, last_lane))
            totals.append(_shuffle(L, inclusive, "idx", source))
        before_lanes.append(befores)
        warp_totals.append(totals)
    # 3. across warps: the totals of the warps before this one, and of all of them
    before_warps: list[list[ir.Value | None]] = [[None] * plan.repeats for _ in rows]
    repeat_totals = warp_totals
    if plan.warps > 1:
        size = plan.natural_size
        flats = _natural_flats(L, plan)
        warp_eff = _field(L, L.warp, d.warp_shift, plan.warps - 1)
        p = L.prologue
        warp_start = p.mul(warp_eff, ir.Constant(I32, plan.repeats * size))

        def emit() -> None:
            for flat, totals in zip(flats, warp_totals):
                for r, total in enumerate(totals):
                    index = b.add(warp_start, b.add(flat, ir.Constant(I32, r * size)))
                    L.scratch_store(t, index, total)

        L.before_scratch_write(op)
        L.when(_writer(L, plan), emit)
        L.barrier()
        repeat_totals = []
        for row_index, flat in enumerate(flats):
            totals = []
            for r in range(plan.repeats):
                carry: ir.Value | None = None
                whole: ir.Value | None = None
                for w in range(plan.warps):
                    offset = ir.Constant(I32, (w * plan.repeats + r) * size)
                    total = L.scratch_load(t, b.add(flat, offset))
                    if w < plan.warps - 1:
                        has = b.icmp_unsigned(">", warp_eff, ir.Constant(I32, w))
                        grown = combine(carry, total)
                        carry = b.select(has, grown, identity if carry is None else carry)
                    whole = combine(whole, total)
                before_warps[row_index][r] = carry
                totals.append(whole)
            repeat_totals.append(totals)
        L.after_scratch_read(op)
    # 4. the repeats, in order, then every element: carry, warps before, lanes before, own
    out = [None] * m.num_slots
    for row_index, row in enumerate(rows):
        carry: ir.Value | None = None
        for r in range(plan.repeats):
            prefix = carry
            for part in (before_warps[row_index][r], before_lanes[row_index][r]):
                if part is not None:
                    prefix = combine(prefix, part)
            for j, v in enumerate(local[row_index][r]):
                out[_slot(m, row, op.axis, r * plan.run + j)] = combine(prefix, v)
            carry = combine(carry, repeat_totals[row_index][r])
    return [out]


# ---------------------------------------------------------------------------------------------
# tile.arg_reduce and tile.topk: (value, position[, available]) pairs


class _Pairs:
    """Which of two (value, position) candidates wins, for `kind` max or min."""

    def __init__(self, L: Any, kind: str, t: Type):
        self.L, self.kind, self.t = L, kind, t

    def _wide(self, v: ir.Value) -> ir.Value:
        if isinstance(self.t, FloatType) and self.t.width < 32:
            return self.L._widen(v, self.t, f32)
        return v

    def first_wins(self, a: tuple, b_: tuple) -> ir.Value:
        """Whether candidate `a` beats `b_` (each (value, position, available or None))."""
        b = self.L.b
        va, vb = self._wide(a[0]), self._wide(b_[0])
        ia, ib = a[1], b_[1]
        lower = b.icmp_signed("<", ia, ib)
        if isinstance(self.t, FloatType):
            a_nan = b.fcmp_unordered("uno", va, va)
            b_nan = b.fcmp_unordered("uno", vb, vb)
            beats = b.fcmp_ordered(">" if self.kind == "max" else "<", va, vb)
            same = b.or_(b.fcmp_ordered("==", va, vb), b.and_(a_nan, b_nan))
            nan_first = b.and_(a_nan, b.not_(b_nan))
            wins = b.or_(b.or_(nan_first, beats), b.and_(same, lower))
        else:
            beats = b.icmp_signed(">" if self.kind == "max" else "<", va, vb)
            wins = b.or_(beats, b.and_(b.icmp_signed("==", va, vb), lower))
        if a[2] is not None:
            # a taken element loses to every other; two available ones compare as above
            wins = b.and_(a[2], b.or_(b.not_(b_[2]), wins))
        return wins

    def best(self, a: tuple, b_: tuple) -> tuple:
        b = self.L.b
        wins = self.first_wins(a, b_)
        return tuple(None if x is None else b.select(wins, x, y) for x, y in zip(a, b_))


def _positions(L: Any, m: ThreadMap, axis: int) -> list[ir.Value]:
    """Per slot along `axis`, the position (i32) the thread's element there has."""
    return L.dim_indices(m)[axis]


def _arg_rows(
    L: Any, op: Operation, plan: ScanPlan, pairs: _Pairs, available: list | None
) -> list[tuple]:
    """Steps 1 and 2: per row of the thread, the best (value, position, available) of the
    warp's part of it, known to every lane of that part."""
    m = thread_map(op.input.type)
    values = L.values[op.input]
    positions = _positions(L, m, op.axis)
    rows = []
    for s in range(plan.natural.num_slots):
        row = plan.natural.slot_multi_index(s)
        best = None
        for k in range(m.counts[op.axis]):
            slot = _slot(m, row, op.axis, k)
            here = (values[slot], positions[k], None if available is None else available[slot])
            best = here if best is None else pairs.best(best, here)
        for i in range(plan.lanes.bit_length() - 1):
            mask = (1 << plan.dim.lane_shift) << i
            other = tuple(None if x is None else _shuffle(L, x, "bfly", mask) for x in best)
            best = pairs.best(best, other)
        rows.append(best)
    return rows


def _across_warps(
    L: Any, op: Operation, plan: ScanPlan, pairs: _Pairs, rows: list[tuple], reads: list
) -> list[tuple]:
    """Step 3: every warp's best through the scratch; the best of all of them at each of the
    flat row indices `reads` (the thread's result elements)."""
    b = L.b
    t = op.input.type.element
    size = plan.natural_size
    flats = _natural_flats(L, plan)
    index_offset = _aligned(plan.warps * size * element_bytes(t))
    warp_eff = _field(L, L.warp, plan.dim.warp_shift, plan.warps - 1)
    warp_start = L.prologue.mul(warp_eff, ir.Constant(I32, size))

    flag_offset = index_offset + _aligned(plan.warps * size * 4)
    flagged = rows[0][2] is not None  # a topk round: taken elements travel with their flag

    def emit() -> None:
        for flat, (value, position, available) in zip(flats, rows):
            index = b.add(warp_start, flat)
            L.scratch_store(t, index, value)
            L.scratch_store(i32, index, position, index_offset)
            if flagged:
                L.scratch_store(i1, index, available, flag_offset)

    L.before_scratch_write(op)
    L.when(_writer(L, plan), emit)
    L.barrier()
    out = []
    for flat in reads:
        best = None
        for w in range(plan.warps):
            index = b.add(flat, ir.Constant(I32, w * size))
            flag = L.scratch_load(i1, index, flag_offset) if flagged else None
            here = (L.scratch_load(t, index), L.scratch_load(i32, index, index_offset), flag)
            best = here if best is None else pairs.best(best, here)
        out.append(best)
    L.after_scratch_read(op)
    return out


def lower_arg_reduce(L: Any, op: Operation) -> list[Any]:
    src_t: TileType = op.input.type
    plan = scan_plan(src_t, op.axis)
    pairs = _Pairs(L, op.kind, src_t.element)
    rows = _arg_rows(L, op, plan, pairs, None)
    result_t = op.result.type
    if not isinstance(result_t, TileType):
        if plan.warps == 1:
            return [rows[0][1]]
        return [_across_warps(L, op, plan, pairs, rows, [ir.Constant(I32, 0)])[0][1]]
    result_map = thread_map(result_t)
    strides = row_major_strides(result_t.shape)
    if plan.warps == 1:
        slots = local_source_slots(plan.natural, result_map, strides)
        if slots is not None:
            return [[rows[s][1] for s in slots]]
    reads = L.flat_indices(result_map, strides)
    return [[best[1] for best in _across_warps(L, op, plan, pairs, rows, reads)]]


def lower_topk(L: Any, op: Operation) -> list[Any]:
    from tilec.lowering.llvm import NotLowered  # llvm.py imports this module

    src_t: TileType = op.input.type
    values_t: TileType = op.values.type
    if values_t.layout != src_t.layout or op.indices.type.layout != src_t.layout:
        raise NotLowered(op, "is lowered only with its results in its operand's layout")
    b = L.b
    m = thread_map(src_t)
    plan = scan_plan(src_t, op.axis)
    pairs = _Pairs(L, "max", src_t.element)
    positions = _positions(L, m, op.axis)
    available = [ir.Constant(I1, 1)] * m.num_slots
    winners = []  # per round, per row: (value, position)
    for _ in range(op.k):
        rows = _arg_rows(L, op, plan, pairs, available)
        if plan.warps > 1:
            rows = _across_warps(L, op, plan, pairs, rows, _natural_flats(L, plan))
        winners.append([(value, position) for value, position, _ in rows])
        for s in range(plan.natural.num_slots):
            row = plan.natural.slot_multi_index(s)
            for k in range(m.counts[op.axis]):
                slot = _slot(m, row, op.axis, k)
                taken = b.icmp_signed("==", positions[k], winners[-1][s][1])
                available[slot] = b.and_(available[slot], b.not_(taken))
    # Result slot at position j of the k (a runtime value where k wraps over the lanes)
    # keeps round j's winner of its row.
    result_map = thread_map(values_t)
    if [x for i, x in enumerate(result_map.dims) if i != op.axis] != plan.natural.dims:
        raise NotLowered(op, "is lowered only when its results keep the operand's rows")
    result_positions = _positions(L, result_map, op.axis)
    out_values, out_indices = [], []
    for slot in range(result_map.num_slots):
        full = result_map.slot_multi_index(slot)
        row = full[: op.axis] + full[op.axis + 1 :]
        s = sum(i * st for i, st in zip(row, plan.natural.slot_strides))
        j = result_positions[full[op.axis]]
        value, index = winners[0][s][0], winners[0][s][1]
        for round_ in range(1, op.k):
            here = b.icmp_unsigned("==", j, ir.Constant(I32, round_))
            value = b.select(here, winners[round_][s][0], value)
            index = b.select(here, winners[round_][s][1], index)
        out_values.append(value)
        out_indices.append(index)
    return [out_values, out_indices]


LOWERINGS = {
    S.ScanOp: lower_scan,
    S.ArgReduceOp: lower_arg_reduce,
    S.TopKOp: lower_topk,
}
SCRATCH_BYTES = {cls: scan_scratch_bytes for cls in LOWERINGS}
