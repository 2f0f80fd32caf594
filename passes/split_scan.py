"""The rewrite of `split-reduction` (passes/split_reduction.py) for a scan: a loop that stores,
as it goes, what its carried ⊕-reductions have reached (a cumulative sum down the columns of a
tall matrix, whose grid is a few blocks of columns).

Each of the S blocks of a split takes a chunk of the loop's iterations -- the chunk of its
*ticket* (`tile.split_ticket`: the order blocks arrive in, so that a block waits only for blocks
that have started) -- and runs it twice:

1. **Reduce.** A copy of the loop without its stores (and what only they needed) runs the
   chunk from ⊕'s identity: the chunk's partials, written to the block's workspace slot and
   published (`tile.publish`: its flag, released at GPU scope).
2. **Prefix.** The block waits for the flags of the chunks before its own
   (`tile.wait_published`), combines their partials in slot order (`rows` slots a round, as
   the split reduction's combine) and adds them to the loop's initial values: the carried
   values as they would be on entering its chunk.
3. **Scan.** The loop itself runs the chunk from there, storing as before.

The block with the last chunk has the whole reduction after its loop and runs the epilogue
(whatever follows the loop). The last block to finish its prefix (`tile.last_arrival` on a
second counter) clears the S flags for the next launch. S = 1 takes none of this: one branch
on the split count, and the loop runs as written.

The second pass over a chunk reads what the first just read, mostly from L2 (a chunk is the
tensor's bytes over S), so a split scan moves about the bytes of one read more than the kernel
unsplit; it is worth it where the grid alone leaves SMs idle, which the launch decides
(`tilec.runtime.split`, `scan`: each iteration counted twice).

Counters of a split scan (hidden parameter, docs/abi.md), for B blocks of the other axes:
tickets at `b`, finish counters at `B + b`, flags at `2B + b·S + k`.
"""

from __future__ import annotations

import math

from tilec.dialects import arith, scf
from tilec.dialects import split as W
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp, ReturnOp
from tilec.dialects.tile_shapes import ReshapeOp
from tilec.ir.builder import Builder
from tilec.ir.core import Block, Operation, Pure, Region, Value
from tilec.ir.types import TileType, index
from tilec.passes.split_plan import Carried, Plan, identity_attr
from tilec.passes.split_rewrite import Rewrite, ceil_div_i32, chunk_bounds, stored_bytes

__all__ = ["ScanRewrite"]


class ScanRewrite(Rewrite):
    """`Rewrite` for a scan (`Plan.scan`): the module docstring."""

    def __init__(self, kernel: FuncOp, plan: Plan, combine_elements: int):
        super().__init__(kernel, plan, combine_elements)
        # Every partial is read back flat, `rows` slots a round, whatever its rank.
        self.rows_per_round = min(self.rows(c) for c in plan.carried)
        self.trip_bytes += stored_bytes(plan.loop)

    def run(self, pinned: int | None) -> None:
        loop = self.plan.loop
        b = Builder.before_op(loop)
        splits = b.create(T.NumProgramsOp, axis=self.base_axes).result
        splits.name_hint = "splits"
        trips = b.create(arith.CeilDivSIOp, lhs=loop.upper, rhs=loop.step).result
        chunk = ceil_div_i32(b, trips, splits)
        one = self.constant(b, 1)
        alone = b.create(arith.CmpIOp, predicate="eq", lhs=splits, rhs=one).result
        inits = [loop.inits[c.index] for c in self.plan.carried]
        zero = self.constant(b, 0)
        route = b.create(
            scf.IfOp,
            condition=alone,
            result_types=[index, *(v.type for v in inits)],
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        Builder.at_end(route.then.block, loc=loop.loc).create(scf.YieldOp, values=[zero, *inits])
        e = Builder.at_end(route.otherwise.block, loc=loop.loc)
        ticket, entering = self.prefix(e, splits, chunk, trips)
        e.create(scf.YieldOp, values=[ticket, *entering])
        ticket, *entering = route.results
        ticket.name_hint = "chunk"
        lower, upper = chunk_bounds(b, ticket, chunk, trips, loop.step)
        loop.set_operand(0, lower)
        loop.set_operand(1, upper)
        for c, v in zip(self.plan.carried, entering):
            loop.set_operand(3 + c.index, v)
        self.epilogue_in_last_chunk(ticket, splits)
        self.record(pinned, ["scan", 1])

    def prefix(
        self, e: Builder, splits: Value, chunk: Value, trips: Value
    ) -> tuple[Value, list[Value]]:
        """In a split block: its ticket, and the carried values on entering its chunk (steps
        1 and 2 of the module docstring)."""
        loop = self.plan.loop
        tile_index = self.base_block(e)
        blocks = self.base_count(e)
        ticket = e.create(W.SplitTicketOp, counter=tile_index, count=splits).result
        ticket.name_hint = "ticket"
        lower, upper = chunk_bounds(e, ticket, chunk, trips, loop.step)
        partials = self.reduced_chunk(e, lower, upper)
        slot_base = e.create(arith.MulIOp, lhs=tile_index, rhs=splits).result
        slot = e.create(arith.AddIOp, lhs=slot_base, rhs=ticket).result
        self.store_partials(e, partials, slot)
        two = self.constant(e, 2)
        flag_base = e.create(arith.MulIOp, lhs=blocks, rhs=two).result
        flags = e.create(arith.AddIOp, lhs=flag_base, rhs=slot_base).result
        mine = e.create(arith.AddIOp, lhs=flags, rhs=ticket).result
        e.create(W.PublishOp, counter=mine)
        e.create(W.WaitPublishedOp, first=flags, count=ticket)
        before = self.combine_flat(e, slot_base, ticket)
        entering = [
            e.create(c.combine.op, lhs=loop.inits[c.index], rhs=v).result
            for c, v in zip(self.plan.carried, before)
        ]
        finish = e.create(arith.AddIOp, lhs=blocks, rhs=tile_index).result
        last = e.create(W.LastArrivalOp, counter=finish, count=splits).result
        clear = e.create(scf.IfOp, condition=last, result_types=[], then=Region([Block()]))
        c = Builder.at_end(clear.then.block, loc=loop.loc)
        c.create(W.ClearCountersOp, first=flags, count=splits)
        c.create(scf.YieldOp, values=[])
        return ticket, entering

    def reduced_chunk(self, b: Builder, lower: Value, upper: Value) -> list[Value]:
        """The loop over [lower, upper) without its stores, from ⊕'s identity: its results."""
        loop = self.plan.loop
        identities = [self.identity(b, c) for c in self.plan.carried]
        copy = b.insert(loop.clone({}))
        copy.set_operand(0, lower)
        copy.set_operand(1, upper)
        for c, v in zip(self.plan.carried, identities):
            copy.set_operand(3 + c.index, v)
        for op in [op for op in copy.body.walk() if isinstance(op, T.StoreOp)]:
            op.erase()
        _erase_dead(copy)
        return [copy.results[c.index] for c in self.plan.carried]

    def combine_flat(self, b: Builder, slot_base: Value, count: Value) -> list[Value]:
        """⊕ of the partials in slots slot_base .. slot_base + count - 1, each carried value
        read as rows of its elements (`rows` slots a round), in the carried value's type."""
        loop = self.plan.loop
        flat = [TileType((math.prod(c.type.shape),), c.type.element) for c in self.plan.carried]
        inits = [
            b.create(T.FullOp, value=identity_attr(c.combine, c.type), result_types=[t]).result
            for c, t in zip(self.plan.carried, flat)
        ]
        block = Block([index, *flat])
        rounds = b.create(
            scf.ForOp,
            lower=self.constant(b, 0),
            upper=count,
            step=self.constant(b, self.rows_per_round),
            inits=inits,
            body=Region([block]),
        )
        r = Builder.at_end(block, loc=loop.loc)
        j, *accs = block.args
        j.name_hint = "round"
        first = r.create(arith.AddIOp, lhs=slot_base, rhs=j).result
        left = r.create(arith.SubIOp, lhs=count, rhs=j).result
        updated = []
        for c, t, acc in zip(self.plan.carried, flat, accs):
            read = self.read_round(r, c, first, left, t)
            reduced = r.create(T.ReduceOp, kind=c.combine.reduce_kind, input=read, axis=0).result
            updated.append(r.create(c.combine.op, lhs=acc, rhs=reduced).result)
        r.create(scf.YieldOp, values=updated)
        return [self.unflatten(b, c, v) for c, v in zip(self.plan.carried, rounds.results)]

    def unflatten(self, b: Builder, c: Carried, v: Value) -> Value:
        if c.scalar:  # a scalar's 1-element tile, read back as the scalar
            return b.create(T.ReduceOp, kind="max", input=v, axis=0).result
        if c.type.rank == 1:
            return v
        return b.create(ReshapeOp, input=v, result_types=[c.type]).result

    def epilogue_in_last_chunk(self, ticket: Value, splits: Value) -> None:
        """What follows the loop runs in the block with the last chunk, which has the whole
        reduction (S = 1: the only block)."""
        loop = self.plan.loop
        body = self.kernel.body.block
        position = body.ops.index(loop)
        epilogue = [op for op in body.ops[position + 1 :] if not isinstance(op, ReturnOp)]
        if not epilogue:
            return
        b = Builder.after_op(loop)
        one = self.constant(b, 1)
        final = b.create(arith.SubIOp, lhs=splits, rhs=one).result
        is_last = b.create(arith.CmpIOp, predicate="eq", lhs=ticket, rhs=final).result
        guard = b.create(scf.IfOp, condition=is_last, result_types=[], then=Region([Block()]))
        for op in epilogue:
            op.detach()
            guard.then.block.append(op)
        Builder.at_end(guard.then.block, loc=loop.loc).create(scf.YieldOp, values=[])


def _erase_dead(op: Operation) -> None:
    """Erase the pure ops nested in `op` whose results nothing reads, until none is left."""
    changed = True
    while changed:
        changed = False
        for inner in reversed(list(op.walk())):
            if inner is op or not inner.has_trait(Pure):
                continue
            if all(not r.uses for r in inner.results):
                inner.erase()
                changed = True
