"""The `dce` pass: dead-code elimination of pure ops and unused loop-carried values."""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects.scf import ForOp, IfOp, YieldOp
from tilec.ir.core import BlockArgument, Operation, OpResult, Pure, Terminator, Value
from tilec.passmanager import Pass, PassContext, register_pass


@register_pass
class DCE(Pass):
    """Removes pure ops whose results are never used, and loop-carried values nobody reads.

    Liveness starts from the ops with effects (stores, loops, branches, `return`) and
    flows back through operands. A value yielded by `scf.for` or `scf.if` is live only if the
    matching result is, or (for a loop) the iteration argument that receives it is read by
    something live; otherwise that slot is removed from the loop or branch, with the chain of
    pure ops that only fed it. Everything nested is handled, in one analysis (no repeated
    sweeps). Assumes every op without the `Pure` trait has an effect; loops and branches are
    therefore kept, even when nothing they compute is used.
    Remarks: per kernel, how many ops were removed; per loop or branch, which results were
    dropped.
    """

    name = "dce"
    summary = "Remove unused pure ops and unused loop-carried values"

    @dataclass
    class Options:
        pass

    def run(self, module: Operation, ctx: PassContext) -> None:
        liveness = _Liveness()
        liveness.mark_from_roots(module)
        removed_by_kernel: dict[Operation, int] = {}
        dead_slots = {op: slots for op in liveness.slot_ops if (slots := liveness.dead_slots(op))}
        for op, slots in dead_slots.items():
            _drop_yielded_operands(op, slots)
        dead_ops = [
            op for op in module.walk() if op.has_trait(Pure) and op not in liveness.live_ops
        ]
        dead_set = set(dead_ops)
        for op in dead_ops:
            # Nested ops of a dead op go with it; operand uses are dropped first so that
            # erasing in any order finds no remaining uses.
            if op.parent_op in dead_set:
                continue
            op.drop_all_references()
        for op in dead_ops:
            if op.parent_op in dead_set:
                continue
            kernel = _kernel_of(op)
            removed_by_kernel[kernel] = removed_by_kernel.get(kernel, 0) + 1
            op.detach()
        for op, slots in dead_slots.items():
            _drop_slots(op, slots)
            ctx.remark(
                op,
                f"removed unused result{'s' if len(slots) > 1 else ''} "
                f"#{', #'.join(map(str, slots))}: never read"
                + (" after or inside the loop" if isinstance(op, ForOp) else ""),
            )
        for kernel, count in removed_by_kernel.items():
            if kernel is not module:
                ctx.remark(kernel, f"removed {count} unused op{'s' if count > 1 else ''}")


def _kernel_of(op: Operation) -> Operation:
    """The outermost op below the root (the kernel function) that contains `op`."""
    while op.parent_op is not None and op.parent_op.parent_op is not None:
        op = op.parent_op
    return op


class _Liveness:
    """Live ops and values: reached backwards from ops with effects."""

    def __init__(self) -> None:
        self.live_ops: set[Operation] = set()
        self.live_values: set[Value] = set()
        self.slot_ops: list[Operation] = []  # the scf.for / scf.if ops seen
        self._worklist: list[Value] = []

    def mark_from_roots(self, root: Operation) -> None:
        for op in root.walk():
            if isinstance(op, (ForOp, IfOp)):
                self.slot_ops.append(op)
            # Terminators are live with the op they end (and a loop's or branch's yield only
            # slot by slot), not on their own.
            if not op.has_trait(Pure) and not op.has_trait(Terminator):
                self._mark_op(op)
        while self._worklist:
            self._propagate(self._worklist.pop())

    def _mark_value(self, v: Value) -> None:
        if v not in self.live_values:
            self.live_values.add(v)
            self._worklist.append(v)

    def _mark_op(self, op: Operation) -> None:
        if op in self.live_ops:
            return
        self.live_ops.add(op)
        if isinstance(op, ForOp):
            operands = (op.lower, op.upper, op.step)  # inits: slot by slot
        else:
            operands = op.operands
        for v in operands:
            self._mark_value(v)
        if op.regions and not isinstance(op, (ForOp, IfOp)):
            for region in op.regions:
                for block in region.blocks:
                    if block.terminator is not None:
                        self._mark_op(block.terminator)
        parent = op.parent_op
        if parent is not None and parent.has_trait(Pure):
            self._mark_op(parent)  # a live op keeps the pure op it is nested in

    def _propagate(self, v: Value) -> None:
        if isinstance(v, OpResult):
            self._mark_op(v.op)
            if isinstance(v.op, (ForOp, IfOp)):
                self._mark_slot(v.op, v.index)
        elif isinstance(v, BlockArgument):
            owner = v.block.parent_op
            if isinstance(owner, ForOp) and v.index > 0:
                self._mark_slot(owner, v.index - 1)

    def _mark_slot(self, op: Operation, slot: int) -> None:
        """Slot `slot` of a loop or branch is live: its yielded values, its loop init, its
        result and (for a loop) its iteration argument are needed."""
        self._mark_value(op.results[slot])
        if isinstance(op, ForOp):
            self._mark_value(op.inits[slot])
        for region in op.regions:
            for block in region.blocks:
                term = block.terminator
                if isinstance(term, YieldOp):
                    self.live_ops.add(term)
                    self._mark_value(term.operands[slot])

    def dead_slots(self, op: Operation) -> list[int]:
        return [i for i, r in enumerate(op.results) if r not in self.live_values]


def _yields(op: Operation) -> list[YieldOp]:
    return [
        block.terminator
        for region in op.regions
        for block in region.blocks
        if isinstance(block.terminator, YieldOp)
    ]


def _drop_yielded_operands(op: Operation, slots: list[int]) -> None:
    """Stop yielding (and, for a loop, passing in) the values of dead `slots`."""
    dead = set(slots)
    for term in _yields(op):
        term.set_operands([v for i, v in enumerate(term.operands) if i not in dead])
    if isinstance(op, ForOp):
        kept = [v for i, v in enumerate(op.inits) if i not in dead]
        op.set_operands([op.lower, op.upper, op.step, *kept])


def _drop_slots(op: Operation, slots: list[int]) -> None:
    """Remove the (now unused) results and loop iteration arguments of dead `slots`."""
    dead = set(slots)
    if isinstance(op, ForOp):
        block = op.body.block
        for i in sorted(dead, reverse=True):
            block.erase_arg(i + 1)
    op.results = [r for i, r in enumerate(op.results) if i not in dead]
    for i, r in enumerate(op.results):
        r.index = i
