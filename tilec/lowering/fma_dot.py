"""The lowering of `tile.dot`: on tensor cores when the tiling chose them (`wgmma` on sm_90a,
`mma` otherwise: `tilec.lowering.wgmma`, `tilec.lowering.tensorcore`), else with FMAs: both
operands staged row-major in shared memory, then a loop over K of FMAs into the thread's
accumulator elements.

`DotLowering` is a part of the kernel lowering (`tilec.lowering.llvm._KernelLowering` inherits it):
its methods use the lowering's builder `self.b`, its lowered values `self.values` and its
helpers (thread coordinates, scratch).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tilec.ir.core import Operation
from tilec.ir.types import FloatType, Type
from tilec.lowering import tensorcore, wgmma
from tilec.lowering.exchange import dot_b_offset, thread_map
from tilec.lowering.llvm_types import I32, llvm_type

__all__ = ["DotLowering"]


class DotLowering:
    """Dots: the kernel lowering's methods for them."""

    def dot(self, op: Operation) -> list[Any]:
        if wgmma.is_wgmma_dot(op):
            return wgmma.lower_wgmma_dot(self, op)
        if tensorcore.is_tensor_core_dot(op):
            return tensorcore.lower_mma_dot(self, op)
        b = self.b
        a_t, b_t, acc_t = op.a.type, op.b.type, op.result.type
        inner, cols = b_t.shape
        b_offset = dot_b_offset(op)
        self.before_scratch_write(op)
        self.write_tile(a_t, self.values[op.a])
        self.write_tile(b_t, self.values[op.b], b_offset)
        self.barrier()
        m = thread_map(acc_t)
        row_index, col_index = self.dim_indices(m)
        row_start = [b.mul(r, ir.Constant(I32, inner)) for r in row_index]
        acc_in = self.values[op.acc]
        # for k in 0..inner: acc[r, c] += a[row r, k] * b[k, col c]
        before = b.block
        header = self.fn.append_basic_block("dot.k")
        after = self.fn.append_basic_block("dot.done")
        b.branch(header)
        b.position_at_end(header)
        k = b.phi(I32)
        k.add_incoming(ir.Constant(I32, 0), before)
        accs = []
        for v in acc_in:
            phi = b.phi(v.type)
            phi.add_incoming(v, before)
            accs.append(phi)
        a_vals = [
            self._widen(self.scratch_load(a_t.element, b.add(r, k)), a_t.element, acc_t.element)
            for r in row_start
        ]
        k_row = b.mul(k, ir.Constant(I32, cols))
        b_vals = [
            self._widen(
                self.scratch_load(b_t.element, b.add(k_row, c), b_offset),
                b_t.element,
                acc_t.element,
            )
            for c in col_index
        ]
        new = []
        for slot, acc in enumerate(accs):
            r, c = m.slot_multi_index(slot)
            x, y = a_vals[r], b_vals[c]
            if isinstance(acc_t.element, FloatType):
                new.append(self._float_intrinsic("fma", x, y, acc))
            else:
                new.append(b.add(acc, b.mul(x, y)))
        next_k = b.add(k, ir.Constant(I32, 1))
        latch = b.block
        k.add_incoming(next_k, latch)
        for phi, v in zip(accs, new):
            phi.add_incoming(v, latch)
        b.cbranch(b.icmp_unsigned("<", next_k, ir.Constant(I32, inner)), header, after)
        b.position_at_end(after)
        self.after_scratch_read(op)
        return [new]

    def _widen(self, x: ir.Value, src: Type, dst: Type) -> ir.Value:
        if isinstance(src, FloatType):
            return self.convert_float(x, src, dst)  # type: ignore[arg-type]
        return self.resize_int(x, llvm_type(dst), signed=True)
