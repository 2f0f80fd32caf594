"""The lowering of `tile.reduce`: within the thread (a pairwise tree), then `shfl.sync.bfly`
across lanes, then across warps through shared memory (`exchange.reduce_plan` says which
steps a layout needs and where the result lands).

`ReductionLowering` is a part of the kernel lowering (`tilec.lowering.llvm._KernelLowering` inherits it):
its methods use the lowering's builder `self.b`, its lowered values `self.values` and its
helpers (thread coordinates, scratch).
"""

from __future__ import annotations

import math
from typing import Any

from llvmlite import ir

from tilec.ir.core import Operation
from tilec.ir.types import FloatType, TileType, Type
from tilec.lowering import mathlib
from tilec.lowering.exchange import reduce_plan, thread_map
from tilec.lowering.layouts import row_major_strides
from tilec.lowering.llvm_types import F32, I32

__all__ = ["ReductionLowering"]


class ReductionLowering:
    """Reductions (and the combining step scans share): the kernel lowering's methods."""

    def _combine(self, kind: str, t: Type, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.b
        if isinstance(t, FloatType):
            if kind == "sum":
                return b.fadd(x, y)
            if kind == "prod":
                return b.fmul(x, y)
            return self._float_intrinsic("maximum" if kind == "max" else "minimum", x, y)
        if kind == "sum":
            return b.add(x, y)
        if kind == "prod":
            return b.mul(x, y)
        return b.select(b.icmp_signed(">" if kind == "max" else "<", x, y), x, y)

    def shuffle_xor(self, v: ir.Value, lane_mask: int) -> ir.Value:
        """The value `v` of lane `lane ^ lane_mask` (every lane of the warp takes part)."""
        b = self.b
        args = [ir.Constant(I32, -1), None, ir.Constant(I32, lane_mask), ir.Constant(I32, 31)]
        if v.type == F32:
            args[1] = v
            return mathlib.call_intrinsic(b, "llvm.nvvm.shfl.sync.bfly.f32", F32, args)
        return mathlib.warp_shuffle(b, v, "bfly", lane_mask)

    def reduce(self, op: Operation) -> list[Any]:
        src_t: TileType = op.input.type
        t = src_t.element
        kind = op.kind
        m = thread_map(src_t)
        plan = reduce_plan(op)
        values = self.values[op.input]
        natural = m.without_dim(plan.axis)
        # 1. within the thread, 2. across lanes
        partials = []
        for slot in range(natural.num_slots):
            k = list(natural.slot_multi_index(slot))
            row = []
            for ka in range(m.counts[plan.axis]):
                full = (*k[: plan.axis], ka, *k[plan.axis :])
                row.append(values[sum(i * s for i, s in zip(full, m.slot_strides))])
            # Pairwise: a chain of n dependent combines would wait out each one's latency
            # (attention's row max: 32 in a row); a tree has log2(n) levels of independent
            # ones. Sums are then rounded in numpy's pairwise order, not left to right.
            while len(row) > 1:
                pairs = [self._combine(kind, t, x, y) for x, y in zip(row[::2], row[1::2])]
                row = pairs + row[len(pairs) * 2 :]
            acc = row[0]
            for lane_mask in plan.lane_bits:
                acc = self._combine(kind, t, acc, self.shuffle_xor(acc, lane_mask))
            partials.append(acc)
        result_t = op.result.type
        if plan.result_slots is not None:
            if isinstance(result_t, TileType):
                return [[partials[s] for s in plan.result_slots]]
            return [partials[0]]
        # 3. across warps (and into the result's layout) through shared memory
        d = m.dims[plan.axis]
        p = self.prologue
        size = math.prod(result_t.shape) if isinstance(result_t, TileType) else 1
        warp_row = p.and_(
            p.lshr(self.warp, ir.Constant(I32, d.warp_shift)), ir.Constant(I32, d.warp_mask)
        )
        lane_field = p.and_(
            p.lshr(self.lane, ir.Constant(I32, d.lane_shift)), ir.Constant(I32, d.lane_mask)
        )
        writer = p.and_(
            p.icmp_unsigned("==", lane_field, ir.Constant(I32, 0)),
            p.icmp_unsigned("<", warp_row, ir.Constant(I32, plan.warps)),
        )
        other_owner = self.unique_owner(natural)
        if other_owner is not None:
            writer = p.and_(writer, other_owner)
        row_start = p.mul(warp_row, ir.Constant(I32, size))
        flats = (
            self.flat_indices(natural, row_major_strides(result_t.shape))
            if isinstance(result_t, TileType)
            else [ir.Constant(I32, 0)]
        )

        def emit() -> None:
            for flat, v in zip(flats, partials):
                self.scratch_store(t, self.b.add(row_start, flat), v)

        self.before_scratch_write(op)
        self.when(writer, emit)
        self.barrier()
        if isinstance(result_t, TileType):
            reads = self.flat_indices(thread_map(result_t), row_major_strides(result_t.shape))
        else:
            reads = [ir.Constant(I32, 0)]
        results = []
        for flat in reads:
            acc = self.scratch_load(t, flat)
            for w in range(1, plan.warps):
                other = self.scratch_load(t, self.b.add(flat, ir.Constant(I32, w * size)))
                acc = self._combine(kind, t, acc, other)
            results.append(acc)
        self.after_scratch_read(op)
        return [results] if isinstance(result_t, TileType) else [results[0]]
