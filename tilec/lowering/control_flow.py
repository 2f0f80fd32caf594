"""The lowering of structured control flow: `scf.for` is a loop whose carried values are phis
(one per slot); `scf.if` branches and merges with phis. Barriers only ever appear under
uniform control flow: conditions and trip counts are scalars, which every thread computes
alike. Both keep the scratch fences right across their regions: what one iteration leaves
unfenced is fenced before the next, and what either arm of an `if` may leave unfenced stays so.

`ControlFlowLowering` is a part of the kernel lowering (`tilec.lowering.llvm._KernelLowering` inherits it):
its methods use the lowering's builder `self.b`, its lowered values `self.values` and its
helpers (thread coordinates, scratch).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tilec.dialects import scf
from tilec.lowering import wgmma

__all__ = ["ControlFlowLowering"]


class ControlFlowLowering:
    """`scf.for` and `scf.if`: the kernel lowering's methods for them."""

    def for_op(self, op: scf.ForOp) -> list[Any]:
        """A bottom-tested loop behind a guard: `loop.body` runs while the induction variable
        is below the bound, `loop.exit` is reached only from the last iteration and
        `loop.end` joins it with the guard's path (the loop ran zero times). Work that must
        finish before the loop's results are read, and that a zero-trip path must not reach,
        goes in `loop.exit` (`wgmma.drain_loop`): e.g. the wait for wgmmas still in
        flight, since ptxas serializes every wgmma whose accumulators some path defines
        before that wait."""
        b = self.b
        lower, upper, step = (self.values[v] for v in (op.lower, op.upper, op.step))
        inits = [self.values[v] for v in op.inits]
        before = b.block
        body = self.fn.append_basic_block("loop.body")
        exit_ = self.fn.append_basic_block("loop.exit")
        end = self.fn.append_basic_block("loop.end")
        b.cbranch(b.icmp_signed("<", lower, upper), body, end)
        b.position_at_end(body)
        iv = b.phi(lower.type)
        iv.add_incoming(lower, before)
        carried = [_phis(b, init, before) for init in inits]
        self.values[op.induction_var] = iv
        for arg, phis in zip(op.iter_args, carried):
            self.values[arg] = phis
        entering = list(self.unfenced_reads)
        yielded = self.block(op.body.block)
        assert yielded is not None
        yielded = wgmma.finish_iteration(self, op, list(yielded))
        if self.unfenced_reads:  # read at the end of one iteration, written in the next
            self.barrier()
        # After the loop: what was unfenced before it (it may run zero times).
        self.unfenced_reads = entering
        latch = b.block
        following = b.add(iv, step)
        iv.add_incoming(following, latch)
        for phis, value in zip(carried, yielded):
            _add_incoming(phis, value, latch)
        b.cbranch(b.icmp_signed("<", following, upper), body, exit_)
        b.position_at_end(exit_)
        results = wgmma.drain_loop(self, op, list(yielded))
        last = b.block
        b.branch(end)
        b.position_at_end(end)
        merged = [_phis(b, init, before) for init in inits]
        for phis, value in zip(merged, results):
            _add_incoming(phis, value, last)
        return merged

    def if_op(self, op: scf.IfOp) -> list[Any]:
        b = self.b
        then_bb = self.fn.append_basic_block("if.then")
        else_bb = self.fn.append_basic_block("if.else") if not op.otherwise.empty else None
        merge = self.fn.append_basic_block("if.end")
        b.cbranch(self.values[op.condition], then_bb, else_bb or merge)
        arms = []
        entering = list(self.unfenced_reads)
        unfenced = list(entering) if else_bb is None else []
        for region, bb in ((op.then, then_bb), (op.otherwise, else_bb)):
            if bb is None:
                continue
            b.position_at_end(bb)
            self.unfenced_reads = list(entering)
            yielded = self.block(region.block) or []
            unfenced += self.unfenced_reads
            arms.append((yielded, b.block))
            b.branch(merge)
        self.unfenced_reads = unfenced  # what either arm may leave unfenced
        b.position_at_end(merge)
        results = []
        for i in range(len(op.results)):
            first = arms[0][0][i]
            if isinstance(first, list):
                phis = [b.phi(v.type) for v in first]
                for yielded, block in arms:
                    for phi, v in zip(phis, yielded[i]):
                        phi.add_incoming(v, block)
                results.append(phis)
            else:
                phi = b.phi(first.type)
                for yielded, block in arms:
                    phi.add_incoming(yielded[i], block)
                results.append(phi)
        return results


def _phis(b: ir.IRBuilder, init: Any, before: ir.Block) -> Any:
    if isinstance(init, list):
        return [_phis(b, v, before) for v in init]
    phi = b.phi(init.type)
    phi.add_incoming(init, before)
    return phi


def _add_incoming(phis: Any, value: Any, block: ir.Block) -> None:
    if isinstance(phis, list):
        for p, v in zip(phis, value):
            p.add_incoming(v, block)
    else:
        phis.add_incoming(value, block)
