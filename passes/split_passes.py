"""The rewrite of `split-reduction` (passes/split_reduction.py) for a multi-pass kernel: loops
over one extent, the first reducing, up to two more reducing what the ones before them found
(a variance after a mean), and the last applying their results as it stores -- a softmax down
the columns of a tall matrix, a normalization over a long axis (`x - mean(x, axis=1)` of
[B, S, D]), a layer norm over few long rows written as three loops: kernels whose grid is a
few blocks, each walking every row once a pass.

The n blocks of a split take tickets (`tile.split_ticket`: the order they arrive in) and each
runs one pass: of k passes, pass p takes R_p = (n + k - 1 - p) // k consecutive tickets from
S_p = R_0 + ... + R_{p-1} (n >= k; the launch and the interpreter keep to it). A block of a
reducing pass p runs chunk t - S_p of its loop (of R_p chunks) from ⊕'s identity (chunk 0
from the loop's own initial values), writes its partials to its workspace slot and publishes
them (`tile.publish`). Before its own loop, a block of pass r waits, for each pass p < r in
turn, for that pass's R_p flags (`tile.wait_published`) and combines its partials in slot
order (as the split reduction's last block does, rescaled sums included): it has every result
its loop reads. The blocks of the last pass then apply chunk t - S_{k-1} of the last loop. A
block waits only for blocks that took their tickets before it, which never wait for it, so
every wait ends whatever the grid's size and order (no block needs another resident beside
it). What lies between the loops runs in every block (it reads only results); its effects
(storing a mean beside the normalized rows) run in the first block of the last pass only. The
last block of the last pass past its waits (`tile.last_arrival`) clears every reducer's flag
for the next launch. n = 1 runs the loops as written in the one block.

Every block of a pass combines the same partials in the same order, so all of them see
bit-identical results. Each loop's chunks are read once: a split multi-pass kernel moves the
bytes of the unsplit one, plus the partials written and read back.

Counters (hidden parameter, docs/abi.md), for B blocks of the other axes, as a split scan's:
tickets at `b`, finish counters at `B + b`, flags at `2B + b·n + t` (t < S_{k-1}).
"""

from __future__ import annotations

from tilec.dialects import arith, scf
from tilec.dialects import split as W
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp, ReturnOp
from tilec.ir.builder import Builder
from tilec.ir.core import Block, Region, Value
from tilec.ir.types import index
from tilec.passes.split_plan import Plan, first_effect
from tilec.passes.split_rewrite import (
    Rewrite,
    ceil_div_i32,
    chunk_bounds,
    loaded_bytes,
    stored_bytes,
)

__all__ = ["PassesRewrite"]


class PassesRewrite(Rewrite):
    """`Rewrite` for a multi-pass kernel (`Plan.apply`): the module docstring. Each reducing
    pass is combined and stored by a `Rewrite` of its own loop (`stages`), all with one slot
    size."""

    def __init__(self, kernel: FuncOp, plan: Plan, combine_elements: int):
        super().__init__(kernel, plan, combine_elements)
        assert plan.apply is not None
        self.stages: list[Rewrite] = [self] + [
            Rewrite(kernel, p, combine_elements) for p in plan.reductions
        ]
        slot_bytes = max(s.slot_bytes for s in self.stages)
        for s in self.stages:
            s.slot_bytes = slot_bytes
        # What an iteration of each pass moves (the launch's model): the reductions' loads,
        # the last loop's loads and stores.
        applied = loaded_bytes(plan.apply) + stored_bytes(plan.apply)
        self.pass_bytes = [max(s.trip_bytes, 1) for s in self.stages] + [max(applied, 1)]

    def run(self, pinned: int | None) -> None:
        apply = self.plan.apply
        assert apply is not None
        k = self.plan.passes
        body = self.kernel.body.block
        first = self.plan.loop
        # Each loop moves into an `scf.if` of its own, built where the loop was.
        b = Builder.before_op(first)
        n = b.create(T.NumProgramsOp, axis=self.base_axes).result
        n.name_hint = "splits"
        trips = b.create(arith.CeilDivSIOp, lhs=first.upper, rhs=first.step).result
        alone = b.create(arith.CmpIOp, predicate="eq", lhs=n, rhs=self.constant(b, 1)).result
        tile_index = self.base_block(b)
        blocks = self.base_count(b)
        counts, starts = self.pass_counts(b, n, k)
        ticket = self.take_ticket(b, alone, tile_index, n)
        slot_base = b.create(arith.MulIOp, lhs=tile_index, rhs=n).result
        twice = b.create(arith.MulIOp, lhs=blocks, rhs=self.constant(b, 2)).result
        flags = b.create(arith.AddIOp, lhs=twice, rhs=slot_base).result
        last = k - 1
        applies = self.member(b, alone, ticket, starts, last)
        is_first = b.create(arith.CmpIOp, predicate="eq", lhs=ticket, rhs=starts[last]).result
        first_applier = b.create(arith.OrIOp, lhs=alone, rhs=is_first).result

        ends = body.ops.index(next(op for op in body.ops if isinstance(op, ReturnOp)))
        between = body.ops[body.ops.index(first) : ends]
        loops = [s.plan.loop for s in self.stages] + [apply]
        for op in between:
            if op in loops:
                continue
            if first_effect(op) is not None:
                # Once, in the first block of the last pass (which has every result).
                guard = Builder.before_op(op).create(
                    scf.IfOp, condition=first_applier, result_types=[], then=Region([Block()])
                )
                op.detach()
                guard.then.block.append(op)
                Builder.at_end(guard.then.block, loc=op.loc).create(scf.YieldOp, values=[])
        for p, stage in enumerate(self.stages):
            runs = self.member(Builder.before_op(stage.plan.loop), alone, ticket, starts, p)
            self.reducing_pass(
                stage, p, runs, alone, ticket, trips, counts, starts, slot_base, flags
            )
        a = Builder.before_op(apply)
        bounds = self.chunk(a, alone, ticket, trips, counts, starts, last)[:2]
        guard = a.create(scf.IfOp, condition=applies, result_types=[], then=Region([Block()]))
        apply.detach()
        guard.then.block.append(apply)
        apply.set_operand(0, bounds[0])
        apply.set_operand(1, bounds[1])
        g = Builder.at_end(guard.then.block, loc=apply.loc)
        c = _unless(g, alone)
        # The last block of the last pass past its waits clears every reducer's flag.
        finish = c.create(arith.AddIOp, lhs=blocks, rhs=tile_index).result
        done = c.create(W.LastArrivalOp, counter=finish, count=counts[last]).result
        clear = c.create(scf.IfOp, condition=done, result_types=[], then=Region([Block()]))
        cl = Builder.at_end(clear.then.block, loc=apply.loc)
        cl.create(W.ClearCountersOp, first=flags, count=starts[last])
        cl.create(scf.YieldOp, values=[])
        c.create(scf.YieldOp, values=[])
        g.create(scf.YieldOp, values=[])
        self.record(pinned, ["passes", self.pass_bytes])

    def pass_counts(self, b: Builder, n: Value, k: int) -> tuple[list[Value], list[Value]]:
        """Each pass's blocks R_p = (n + k - 1 - p) // k and first ticket S_p."""
        counts, starts = [], [self.constant(b, 0)]
        for p in range(k):
            more = b.create(arith.AddIOp, lhs=n, rhs=self.constant(b, k - 1 - p)).result
            counts.append(b.create(arith.DivSIOp, lhs=more, rhs=self.constant(b, k)).result)
            if p + 1 < k:
                starts.append(b.create(arith.AddIOp, lhs=starts[p], rhs=counts[p]).result)
        counts[0].name_hint = "reducers"
        return counts, starts

    def take_ticket(self, b: Builder, alone: Value, tile_index: Value, n: Value) -> Value:
        """The block's ticket (0 alone)."""
        route = b.create(
            scf.IfOp,
            condition=alone,
            result_types=[index],
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        t = Builder.at_end(route.then.block, loc=self.plan.loop.loc)
        t.create(scf.YieldOp, values=[self.constant(t, 0)])
        e = Builder.at_end(route.otherwise.block, loc=self.plan.loop.loc)
        taken = e.create(W.SplitTicketOp, counter=tile_index, count=n).result
        taken.name_hint = "ticket"
        e.create(scf.YieldOp, values=[taken])
        ticket = route.results[0]
        ticket.name_hint = "ticket"
        return ticket

    def member(self, b: Builder, alone: Value, ticket: Value, starts: list[Value], p: int) -> Value:
        """Whether the block runs pass p: alone, or its ticket among pass p's."""
        inside = b.create(arith.CmpIOp, predicate="sge", lhs=ticket, rhs=starts[p]).result
        if p + 1 < len(starts):
            before = b.create(arith.CmpIOp, predicate="slt", lhs=ticket, rhs=starts[p + 1]).result
            inside = b.create(arith.AndIOp, lhs=inside, rhs=before).result
        return b.create(arith.OrIOp, lhs=alone, rhs=inside).result

    def chunk(
        self,
        b: Builder,
        alone: Value,
        ticket: Value,
        trips: Value,
        counts: list[Value],
        starts: list[Value],
        p: int,
    ) -> list[Value]:
        """Pass p's loop bounds for this block and its chunk's index among the pass's: the
        whole loop (chunk 0) alone, else its ticket's chunk."""
        step = self.plan.loop.step
        route = b.create(
            scf.IfOp,
            condition=alone,
            result_types=[index, index, index],
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        t = Builder.at_end(route.then.block, loc=self.plan.loop.loc)
        whole = t.create(arith.MulIOp, lhs=trips, rhs=step).result
        zero = self.constant(t, 0)
        t.create(scf.YieldOp, values=[zero, whole, zero])
        e = Builder.at_end(route.otherwise.block, loc=self.plan.loop.loc)
        local = e.create(arith.SubIOp, lhs=ticket, rhs=starts[p]).result
        size = ceil_div_i32(e, trips, counts[p])
        e.create(scf.YieldOp, values=[*chunk_bounds(e, local, size, trips, step), local])
        return list(route.results)

    def reducing_pass(
        self,
        stage: Rewrite,
        p: int,
        runs: Value,
        alone: Value,
        ticket: Value,
        trips: Value,
        counts: list[Value],
        starts: list[Value],
        slot_base: Value,
        flags: Value,
    ) -> None:
        """Pass p (`stage`'s loop) in place: run by its blocks (alone: all of it), its partials
        published; combined from the workspace by the blocks of later passes; ⊕'s identity in
        earlier ones (which stop after their own)."""
        loop = stage.plan.loop
        b = Builder.before_op(loop)
        lower, upper, local = self.chunk(b, alone, ticket, trips, counts, starts, p)
        types = [stage.carried_type(c) for c in stage.plan.carried]
        own = b.create(
            scf.IfOp,
            condition=runs,
            result_types=types,
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        loop.detach()
        own.then.block.append(loop)
        loop.set_operand(0, lower)
        loop.set_operand(1, upper)
        stage.start_from_identity(Builder.before_op(loop), local)
        r = Builder.at_end(own.then.block, loc=loop.loc)
        partials = [loop.results[c.index] for c in stage.plan.carried]
        publish = _unless(r, alone)
        slot = publish.create(arith.AddIOp, lhs=slot_base, rhs=ticket).result
        stage.store_partials(publish, partials, slot)
        mine = publish.create(arith.AddIOp, lhs=flags, rhs=ticket).result
        publish.create(W.PublishOp, counter=mine)
        publish.create(scf.YieldOp, values=[])
        r.create(scf.YieldOp, values=partials)
        # Not this pass's block: a later pass's combines it, an earlier one's skips it.
        e = Builder.at_end(own.otherwise.block, loc=loop.loc)
        later = e.create(arith.CmpIOp, predicate="sge", lhs=ticket, rhs=starts[p]).result
        read = e.create(
            scf.IfOp,
            condition=later,
            result_types=types,
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        g = Builder.at_end(read.then.block, loc=loop.loc)
        first = g.create(arith.AddIOp, lhs=flags, rhs=starts[p]).result
        g.create(W.WaitPublishedOp, first=first, count=counts[p])
        base = g.create(arith.AddIOp, lhs=slot_base, rhs=starts[p]).result
        g.create(scf.YieldOp, values=stage.combine(g, base, counts[p]))
        skip = Builder.at_end(read.otherwise.block, loc=loop.loc)
        skip.create(scf.YieldOp, values=[stage.identity(skip, c) for c in stage.plan.carried])
        e.create(scf.YieldOp, values=list(read.results))
        for c, value in zip(stage.plan.carried, own.results):
            loop.results[c.index].replace_uses_if(value, lambda op: not own.is_ancestor_of(op))


def _unless(b: Builder, condition: Value) -> Builder:
    """A builder inside `if not condition` (an `scf.if` whose then-block only yields), at
    its else-block's end: the caller ends that block with its yield."""
    guard = b.create(
        scf.IfOp,
        condition=condition,
        result_types=[],
        then=Region([Block()]),
        otherwise=Region([Block()]),
    )
    Builder.at_end(guard.then.block, loc=b.loc).create(scf.YieldOp, values=[])
    return Builder.at_end(guard.otherwise.block, loc=b.loc)
