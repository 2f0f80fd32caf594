"""The rewrite of `split-reduction` (passes/split_reduction.py) for a two-pass kernel: a loop
that reduces (the first pass) and, after it, a loop over the same extent that applies what the
first found as it stores (the second pass) -- a softmax down the columns of a tall matrix, a
normalization over a long axis (`x - mean(x, axis=1)` of [B, S, D]): kernels whose grid is a
few blocks of columns, each walking every row twice.

The n blocks of a split take tickets (`tile.split_ticket`: the order they arrive in). The first
R = ceil(n / 2) to arrive are *reducers*: reducer t runs chunk t of the first loop (of R
chunks) from ⊕'s identity (chunk 0 from the loop's own initial values), writes its partials to
its workspace slot and publishes them (`tile.publish`). The other A = n - R are *appliers*:
applier t waits for the R flags (`tile.wait_published`), combines the R partials in slot order
(as the split reduction's last block does, rescaled sums included), and runs what follows the
first loop on the combined results -- the second loop over its chunk t - R (of A chunks). An
applier waits only for reducers, which took their tickets before it and never wait, so every
wait ends whatever the grid's size and order (no block needs another to be resident with
it). Effects between or after the loops (storing the mean beside the normalized rows) run in
the first applier only. The last applier past its wait (`tile.last_arrival`) clears the R flags
for the next launch. n = 1 runs both loops as written in the one block.

Every applier combines the same partials in the same order, so all of them see bit-identical
results. The first loop's chunks are read once; the second loop's too: a split two-pass
kernel moves the bytes of the unsplit one, plus R partials written and A x R read back.

Counters (hidden parameter, docs/abi.md), for B blocks of the other axes, as a split scan's:
tickets at `b`, finish counters at `B + b`, flags at `2B + b·n + k` (k < R).
"""

from __future__ import annotations

from tilec.dialects import arith, scf
from tilec.dialects import split as W
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp, ReturnOp
from tilec.ir.builder import Builder
from tilec.ir.core import Block, Region, Value
from tilec.ir.types import i1, index
from tilec.passes.split_plan import Plan, first_effect
from tilec.passes.split_rewrite import Rewrite, ceil_div_i32, chunk_bounds, stored_bytes

__all__ = ["TwoPassRewrite"]


class TwoPassRewrite(Rewrite):
    """`Rewrite` for a two-pass kernel (`Plan.apply`): the module docstring."""

    def __init__(self, kernel: FuncOp, plan: Plan, combine_elements: int):
        super().__init__(kernel, plan, combine_elements)
        assert plan.apply is not None
        # What an iteration of the second loop moves (the launch's model; `trip_bytes`: the
        # first loop's loads).
        self.apply_bytes = max(_loaded_bytes(plan.apply) + stored_bytes(plan.apply), 1)

    def run(self, pinned: int | None) -> None:
        first, second = self.plan.loop, self.plan.apply
        assert second is not None
        body = self.kernel.body.block
        after = [op for op in body.ops[body.ops.index(first) + 1 :] if not isinstance(op, ReturnOp)]
        b = Builder.before_op(first)
        n = b.create(T.NumProgramsOp, axis=self.base_axes).result
        n.name_hint = "splits"
        trips = b.create(arith.CeilDivSIOp, lhs=first.upper, rhs=first.step).result
        alone = b.create(arith.CmpIOp, predicate="eq", lhs=n, rhs=self.constant(b, 1)).result
        tile_index = self.base_block(b)
        blocks = self.base_count(b)
        reducers = ceil_div_i32(b, n, self.constant(b, 2))
        reducers.name_hint = "reducers"
        appliers = b.create(arith.SubIOp, lhs=n, rhs=reducers).result
        route = self.route(b, alone, n, trips, tile_index, reducers, appliers)
        reduces, applies, ticket, lower1, upper1, lower2, upper2 = route.results
        ticket.name_hint = "ticket"
        slot_base = b.create(arith.MulIOp, lhs=tile_index, rhs=n).result
        twice = b.create(arith.MulIOp, lhs=blocks, rhs=self.constant(b, 2)).result
        flags = b.create(arith.AddIOp, lhs=twice, rhs=slot_base).result

        # The first pass, in the reducers (and the block alone).
        reduce = b.create(
            scf.IfOp,
            condition=reduces,
            result_types=[self.carried_type(c) for c in self.plan.carried],
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        # What follows goes before the kernel's return (`first` moves into `reduce`, the ops
        # after it into `apply`).
        b = Builder.before_op(next(op for op in body.ops if isinstance(op, ReturnOp)))
        first.detach()
        reduce.then.block.append(first)
        first.set_operand(0, lower1)
        first.set_operand(1, upper1)
        self.start_from_identity(Builder.before_op(first), ticket)
        r = Builder.at_end(reduce.then.block, loc=first.loc)
        partials = [first.results[c.index] for c in self.plan.carried]
        p = _unless(r, alone)
        slot = p.create(arith.AddIOp, lhs=slot_base, rhs=ticket).result
        self.store_partials(p, partials, slot)
        p.create(W.PublishOp, counter=p.create(arith.AddIOp, lhs=flags, rhs=ticket).result)
        p.create(scf.YieldOp, values=[])
        r.create(scf.YieldOp, values=partials)
        idle = Builder.at_end(reduce.otherwise.block, loc=first.loc)
        idle.create(scf.YieldOp, values=[self.identity(idle, c) for c in self.plan.carried])

        # The second pass, in the appliers (and the block alone).
        apply = b.create(scf.IfOp, condition=applies, result_types=[], then=Region([Block()]))
        a = Builder.at_end(apply.then.block, loc=second.loc)
        finals = self.finals(a, alone, list(reduce.results), flags, slot_base, reducers)
        is_first = a.create(arith.CmpIOp, predicate="eq", lhs=ticket, rhs=reducers).result
        first_applier = a.create(arith.OrIOp, lhs=alone, rhs=is_first).result
        for op in after:
            op.detach()
            apply.then.block.append(op)
            if op is not second and first_effect(op) is not None:
                # Once, not in every applier (the same values: every applier combined the
                # same partials in the same order).
                guard = Builder.before_op(op).create(
                    scf.IfOp, condition=first_applier, result_types=[], then=Region([Block()])
                )
                op.detach()
                guard.then.block.append(op)
                Builder.at_end(guard.then.block, loc=op.loc).create(scf.YieldOp, values=[])
        second.set_operand(0, lower2)
        second.set_operand(1, upper2)
        t = Builder.at_end(apply.then.block, loc=second.loc)
        c = _unless(t, alone)
        # The last applier past its wait clears the R flags for the next launch.
        finish = c.create(arith.AddIOp, lhs=blocks, rhs=tile_index).result
        last = c.create(W.LastArrivalOp, counter=finish, count=appliers).result
        clear = c.create(scf.IfOp, condition=last, result_types=[], then=Region([Block()]))
        cl = Builder.at_end(clear.then.block, loc=second.loc)
        cl.create(W.ClearCountersOp, first=flags, count=reducers)
        cl.create(scf.YieldOp, values=[])
        c.create(scf.YieldOp, values=[])
        t.create(scf.YieldOp, values=[])
        for carried, final in zip(self.plan.carried, finals):
            first.results[carried.index].replace_uses_if(final, apply.is_ancestor_of)
        self.record(pinned, ["two_pass", self.apply_bytes])

    def route(
        self,
        b: Builder,
        alone: Value,
        n: Value,
        trips: Value,
        tile_index: Value,
        reducers: Value,
        appliers: Value,
    ) -> scf.IfOp:
        """(reduces, applies, ticket, the first loop's bounds, the second's): alone, (true,
        true, 0, the whole loops); split, by the block's ticket, a reducer's chunk of the first
        loop or an applier's of the second."""
        step = self.plan.loop.step
        route = b.create(
            scf.IfOp,
            condition=alone,
            result_types=[i1, i1, index, index, index, index, index],
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        t = Builder.at_end(route.then.block, loc=self.plan.loop.loc)
        whole = [self.constant(t, 0), t.create(arith.MulIOp, lhs=trips, rhs=step).result]
        yes = self.constant(t, True)
        t.create(scf.YieldOp, values=[yes, yes, self.constant(t, 0), *whole, *whole])
        e = Builder.at_end(route.otherwise.block, loc=self.plan.loop.loc)
        ticket = e.create(W.SplitTicketOp, counter=tile_index, count=n).result
        ticket.name_hint = "ticket"
        reduces = e.create(arith.CmpIOp, predicate="slt", lhs=ticket, rhs=reducers).result
        applies = e.create(arith.CmpIOp, predicate="sge", lhs=ticket, rhs=reducers).result
        bounds1 = chunk_bounds(e, ticket, ceil_div_i32(e, trips, reducers), trips, step)
        chunk = e.create(arith.SubIOp, lhs=ticket, rhs=reducers).result
        bounds2 = chunk_bounds(e, chunk, ceil_div_i32(e, trips, appliers), trips, step)
        e.create(scf.YieldOp, values=[reduces, applies, ticket, *bounds1, *bounds2])
        return route

    def finals(
        self,
        a: Builder,
        alone: Value,
        partials: list[Value],
        flags: Value,
        slot_base: Value,
        reducers: Value,
    ) -> list[Value]:
        """The first loop's results in an applier: its own (alone), else the R partials,
        waited for and combined in slot order."""
        types = [self.carried_type(c) for c in self.plan.carried]
        loc = self.plan.loop.loc
        choose = a.create(
            scf.IfOp,
            condition=alone,
            result_types=types,
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        Builder.at_end(choose.then.block, loc=loc).create(scf.YieldOp, values=list(partials))
        g = Builder.at_end(choose.otherwise.block, loc=loc)
        g.create(W.WaitPublishedOp, first=flags, count=reducers)
        combined = self.combine(g, slot_base, reducers)
        combined = [  # a scalar's 1-element tile, read back as the scalar
            g.create(T.ReduceOp, kind="max", input=v, axis=0).result if c.scalar else v
            for c, v in zip(self.plan.carried, combined)
        ]
        g.create(scf.YieldOp, values=combined)
        return list(choose.results)


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


def _loaded_bytes(loop: scf.ForOp) -> int:
    return sum(
        W.tile_bytes(op.result.type)
        for op in loop.body.walk()
        if isinstance(op, T.LoadOp) and op.result.type.is_static
    )
