"""The rewrite of `split-reduction` (passes/split_reduction.py): the split axis, each block's
chunk of the loop, its partials to the workspace, the ticket, and the last block's combine --
a ⊕ reduced along the slots, a dot's accumulator added a slot a round, a rescaled sum brought
to the combined maximum -- before the epilogue, which runs once per output tile."""

from __future__ import annotations

import math
from typing import Any

from tilec.dialects import arith, scf
from tilec.dialects import math as M
from tilec.dialects import split as W
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp, ReturnOp
from tilec.ir.attributes import FloatAttr, to_attribute
from tilec.ir.builder import Builder
from tilec.ir.core import Block, Region, Value
from tilec.ir.types import TileType, i1, i32, index
from tilec.passes.specialize import attribute_pairs
from tilec.passes.split_plan import Carried, Plan, identity_attr, is_identity

__all__ = [
    "SLOT_ALIGNMENT",
    "Rewrite",
    "ceil_div_i32",
    "chunk_bounds",
    "loaded_bytes",
    "stored_bytes",
]


SLOT_ALIGNMENT = 16  # a slot starts 16-byte aligned: its tiles may be read 16 bytes at a time


class Rewrite:
    def __init__(self, kernel: FuncOp, plan: Plan, combine_elements: int):
        self.kernel = kernel
        self.plan = plan
        self.combine_elements = combine_elements
        grid = kernel.attributes.get("tilec.grid")
        self.base_axes = len(grid.value) if grid is not None else 0
        offset = 0
        for c in plan.carried:
            bytes_each = max(getattr(c.type.element, "width", 64) // 8, 1)
            offset = -(-offset // bytes_each) * bytes_each
            c.offset = offset
            offset += W.tile_bytes(c.type)
        self.slot_bytes = -(-offset // SLOT_ALIGNMENT) * SLOT_ALIGNMENT
        self.trip_bytes = loaded_bytes(plan.loop)
        if plan.atomic:
            self.rows_per_round = 0
        elif any(self.slot_a_round(c) for c in plan.carried):
            # A dot's accumulator is read back a slot a round, in its own layout.
            self.rows_per_round = 1
        else:
            self.rows_per_round = min(self.rows(c) for c in plan.carried)

    def slot_a_round(self, c: Carried) -> bool:
        """Whether the combine reads `c` back a slot a round in its own layout (a tile of two
        or more dimensions: a dot's accumulator, a reduction over the middle axis of [B, S,
        D]) rather than `rows` slots a round reduced along the slots: a rescaled sum and its
        maximum, whatever their rank, go by rows (the rescaling weighs each slot's sum by its
        own maximum)."""
        rescaling = c.scaled_by is not None or any(
            x.scaled_by == c.index for x in self.plan.carried
        )
        return c.type.rank > 1 and not rescaling

    def constant(self, b: Builder, value: int | bool) -> Value:
        t = i1 if isinstance(value, bool) else index
        return b.create(arith.ConstantOp, value=value, result_types=[t]).result

    def run(self, pinned: int | None) -> None:
        loop = self.plan.loop
        b = Builder.before_op(loop)
        axis = self.base_axes
        splits = b.create(T.NumProgramsOp, axis=axis).result
        split = b.create(T.ProgramIdOp, axis=axis).result
        splits.name_hint, split.name_hint = "splits", "split"
        # The chunk of iterations [k0, k1) of this block.
        step = loop.step
        trips = b.create(arith.CeilDivSIOp, lhs=loop.upper, rhs=step).result
        chunk = ceil_div_i32(b, trips, splits)
        first = b.create(arith.MulIOp, lhs=split, rhs=chunk).result
        end = b.create(arith.AddIOp, lhs=first, rhs=chunk).result
        end = b.create(arith.MinSIOp, lhs=end, rhs=trips).result
        lower = b.create(arith.MulIOp, lhs=first, rhs=step).result
        upper = b.create(arith.MulIOp, lhs=end, rhs=step).result
        loop.set_operand(0, lower)
        loop.set_operand(1, upper)
        self.start_from_identity(b, split)
        if not self.plan.atomic:
            self.after_loop(splits, split)
        attrs = [
            ["dim", self.plan.dim],
            ["step", self.plan.step],
            ["slot_bytes", 0 if self.plan.atomic else self.slot_bytes],
            ["trip_bytes", self.trip_bytes],
            ["rows", 0 if self.plan.atomic else self.rows_per_round],
            ["pinned", pinned or 0],
        ]
        if self.plan.atomic:
            attrs.append(["atomic", 1])
        dot = self.dot()
        if dot is not None:
            bm, bn = dot.acc.type.shape
            attrs += [["dot_bm", bm], ["dot_bn", bn], ["dot_bytes", _element_bytes(dot.a.type)]]
            grid = attribute_pairs(self.kernel, "tilec.grid")
            attrs.append(["dot_dims", ",".join(str(d) for d, _ in grid)])
        self.kernel.attributes["tilec.split"] = to_attribute(attrs)

    def record(self, pinned: int | None, kind: list) -> None:
        """`tilec.split` for a split that shares a workspace (`kind`: its own last entry,
        ["scan", 1] or ["passes", [bytes, ...]])."""
        self.kernel.attributes["tilec.split"] = to_attribute(
            [
                ["dim", self.plan.dim],
                ["step", self.plan.step],
                ["slot_bytes", self.slot_bytes],
                ["trip_bytes", self.trip_bytes],
                ["rows", self.rows_per_round],
                ["pinned", pinned or 0],
                kind,
            ]
        )

    def dot(self) -> T.DotOp | None:
        """The dot whose accumulator the loop carries (a split-K GEMM), if any."""
        for c in self.plan.carried:
            if isinstance(c.update, T.DotOp):
                return c.update
        return None

    def start_from_identity(self, b: Builder, split: Value) -> None:
        """Blocks other than split 0 start each carried value from ⊕'s identity (split 0
        from the loop's own initial value, which the result must count once)."""
        loop = self.plan.loop
        changed = [c for c in self.plan.carried if not is_identity(loop.inits[c.index], c.combine)]
        if not changed:
            return
        zero = self.constant(b, 0)
        is_first = b.create(arith.CmpIOp, predicate="eq", lhs=split, rhs=zero).result
        choose = b.create(
            scf.IfOp,
            condition=is_first,
            result_types=[self.carried_type(c) for c in changed],
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        then_b = Builder.at_end(choose.then.block, loc=loop.loc)
        then_b.create(scf.YieldOp, values=[loop.inits[c.index] for c in changed])
        else_b = Builder.at_end(choose.otherwise.block, loc=loop.loc)
        else_b.create(scf.YieldOp, values=[self.identity(else_b, c) for c in changed])
        for c, v in zip(changed, choose.results):
            loop.set_operand(3 + c.index, v)

    def after_loop(self, splits: Value, split: Value) -> None:
        loop = self.plan.loop
        body = self.kernel.body.block
        position = body.ops.index(loop)
        epilogue = [op for op in body.ops[position + 1 :] if not isinstance(op, ReturnOp)]
        b = Builder.after_op(loop)
        types = [self.carried_type(c) for c in self.plan.carried]
        one = self.constant(b, 1)
        alone = b.create(arith.CmpIOp, predicate="eq", lhs=splits, rhs=one).result
        route = b.create(
            scf.IfOp,
            condition=alone,
            result_types=[i1, *types],
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        # S = 1: the epilogue runs on the loop's results, as before.
        then_b = Builder.at_end(route.then.block, loc=loop.loc)
        then_b.create(scf.YieldOp, values=[self.constant(then_b, True), *loop.results])
        # S > 1: partials to the workspace, a ticket, and the combine in the last block.
        e = Builder.at_end(route.otherwise.block, loc=loop.loc)
        tile_index = self.base_block(e)
        slot_base = e.create(arith.MulIOp, lhs=tile_index, rhs=splits).result
        slot = e.create(arith.AddIOp, lhs=slot_base, rhs=split).result
        self.store_partials(e, [loop.results[c.index] for c in self.plan.carried], slot)
        last = e.create(W.LastArrivalOp, counter=tile_index, count=splits).result
        last.name_hint = "last"
        gather = e.create(
            scf.IfOp,
            condition=last,
            result_types=types,
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        g = Builder.at_end(gather.then.block, loc=loop.loc)
        g.create(scf.YieldOp, values=self.combine(g, slot_base, splits))
        # A block that is not the last has no result: it yields ⊕'s identity, so that its
        # partials' registers are free once they are in the workspace.
        idle = Builder.at_end(gather.otherwise.block, loc=loop.loc)
        idle.create(scf.YieldOp, values=[self.identity(idle, c) for c in self.plan.carried])
        e.create(scf.YieldOp, values=[last, *gather.results])
        run, *finals = route.results
        # The epilogue, once per output tile: in the block that has the whole result.
        guard = Builder.after_op(route).create(
            scf.IfOp, condition=run, result_types=[], then=Region([Block()])
        )
        block = guard.then.block
        for op in epilogue:
            op.detach()
            block.append(op)
        Builder.at_end(block, loc=loop.loc).create(scf.YieldOp, values=[])
        for c, final in zip(self.plan.carried, finals):
            loop.results[c.index].replace_uses_if(final, guard.is_ancestor_of)
        # Carried values that are not partial results (none: every one is) keep their uses.

    def store_partials(self, b: Builder, values: list[Value], slot: Value) -> None:
        """Each carried value's partial (`values`, in `plan.carried`'s order) to its place in
        workspace slot `slot` (a scalar as its 1-element tile)."""
        for c, value in zip(self.plan.carried, values):
            if c.scalar:
                value = b.create(T.SplatOp, input=value, result_types=[c.type]).result
            b.create(
                W.WorkspaceStoreOp,
                value=value,
                slot=slot,
                offset=c.offset,
                slot_bytes=self.slot_bytes,
            )

    def carried_type(self, c: Carried) -> Any:
        """The type the loop carries `c` in (its slot holds a scalar as a 1-element tile)."""
        return c.type.element if c.scalar else c.type

    def identity(self, b: Builder, c: Carried) -> Value:
        """⊕'s identity as the loop carries `c`."""
        value = identity_attr(c.combine, c.type)
        if c.scalar:
            return b.create(arith.ConstantOp, value=value, result_types=[c.type.element]).result
        return b.create(T.FullOp, value=value, result_types=[c.type]).result

    def base_block(self, b: Builder) -> Value:
        """This block's linear index over the grid's other axes (axis 0 fastest)."""
        linear: Value | None = None
        for axis in reversed(range(self.base_axes)):
            pid = b.create(T.ProgramIdOp, axis=axis).result
            if linear is None:
                linear = pid
                continue
            count = b.create(T.NumProgramsOp, axis=axis).result
            linear = b.create(arith.MulIOp, lhs=linear, rhs=count).result
            linear = b.create(arith.AddIOp, lhs=linear, rhs=pid).result
        return linear if linear is not None else self.constant(b, 0)

    def base_count(self, b: Builder) -> Value:
        """The blocks of the grid's other axes."""
        count: Value = self.constant(b, 1)
        for axis in range(self.base_axes):
            n = b.create(T.NumProgramsOp, axis=axis).result
            count = b.create(arith.MulIOp, lhs=count, rhs=n).result
        return count

    def rows(self, c: Carried) -> int:
        """Partials of `c` the combine reads a round: a power of two, about
        `combine_elements` elements in all."""
        per_row = math.prod(c.type.shape)
        rows = max(self.combine_elements // per_row, 1)
        return 1 << (rows.bit_length() - 1)

    def combine(self, b: Builder, slot_base: Value, splits: Value) -> list[Value]:
        """The S partials, read back in slot order and combined: one loop, whose rounds read
        `rows` consecutive slots of each carried value and reduce them along the slots; the
        results in the types the loop carries."""
        loop = self.plan.loop
        rows = self.rows_per_round
        zero = self.constant(b, 0)
        step = self.constant(b, rows)
        inits = [
            b.create(T.FullOp, value=identity_attr(c.combine, c.type), result_types=[c.type]).result
            for c in self.plan.carried
        ]
        block = Block([index, *(c.type for c in self.plan.carried)])
        gather = b.create(
            scf.ForOp, lower=zero, upper=splits, step=step, inits=inits, body=Region([block])
        )
        r = Builder.at_end(block, loc=loop.loc)
        j, *partials = block.args
        j.name_hint = "round"
        first = r.create(arith.AddIOp, lhs=slot_base, rhs=j).result
        left = r.create(arith.SubIOp, lhs=splits, rhs=j).result
        updated: list[Value] = []
        rows_read: dict[int, Value] = {}  # each carried value's slots of this round
        for c, acc in zip(self.plan.carried, partials):
            if c.scaled_by is not None:
                updated.append(acc)  # below, once its maximum's round is combined
                continue
            if self.slot_a_round(c):
                # A slot a round, read back in the partial's own layout (a GEMM's
                # accumulator): nothing to reduce along the slots.
                read = r.create(
                    W.WorkspaceReadOp,
                    slot=first,
                    offset=c.offset,
                    slot_bytes=self.slot_bytes,
                    result_types=[c.type],
                ).result
                updated.append(r.create(c.combine.op, lhs=acc, rhs=read).result)
                continue
            read = self.read_round(r, c, first, left)
            rows_read[c.index] = read
            reduced = r.create(T.ReduceOp, kind=c.combine.reduce_kind, input=read, axis=0).result
            updated.append(r.create(c.combine.op, lhs=acc, rhs=reduced).result)
        position = {c.index: k for k, c in enumerate(self.plan.carried)}
        for k, c in enumerate(self.plan.carried):
            if c.scaled_by is not None:
                m = position[c.scaled_by]
                updated[k] = self.rescaled_round(
                    r, c, partials[k], first, left, rows_read[c.scaled_by], partials[m], updated[m]
                )
        r.create(scf.YieldOp, values=updated)
        return [  # as the loop carries them: a scalar's 1-element tile read back as the scalar
            b.create(T.ReduceOp, kind="max", input=v, axis=0).result if c.scalar else v
            for c, v in zip(self.plan.carried, gather.results)
        ]

    def read_round(
        self, r: Builder, c: Carried, first: Value, left: Value, row: TileType | None = None
    ) -> Value:
        """The `rows` partials of `c` in slots first .. first + rows - 1, the slots past the
        last (`left` of them remain) read as ⊕'s identity; each a row of type `row` (default:
        `c`'s own; a slot holds its tile's elements row-major, so any shape of them)."""
        row = row or c.type
        return r.create(
            W.WorkspaceLoadOp,
            first=first,
            count=left,
            offset=c.offset,
            slot_bytes=self.slot_bytes,
            padding=identity_attr(c.combine, c.type),
            result_types=[TileType((self.rows_per_round, *row.shape), row.element)],
        ).result

    def rescaled_round(
        self,
        r: Builder,
        c: Carried,
        acc: Value,
        first: Value,
        left: Value,
        maxima: Value,
        old: Value,
        new: Value,
    ) -> Value:
        """One round of a rescaled sum's combine (`_rescaled_sums`): the sum so far, at the
        maximum `old`, and this round's partials x_j, each at its own maximum m_j (`maxima`),
        brought to the combined maximum `new`: acc * exp(old - new) + sum_j x_j exp(m_j - new).
        A factor whose maximum is -inf (a chunk that saw nothing, a padding slot) is 0, not
        exp(-inf + inf)."""
        read = self.read_round(r, c, first, left)
        spread = r.create(T.ExpandDimsOp, input=new, axis=0).result
        spread = r.create(T.BroadcastOp, input=spread, result_types=[maxima.type]).result
        weights = _spread(r, _rescale_factor(r, maxima, spread), read.type)
        terms = r.create(arith.MulFOp, lhs=read, rhs=weights).result
        reduced = r.create(T.ReduceOp, kind="sum", input=terms, axis=0).result
        kept = _spread(r, _rescale_factor(r, old, new), c.type)
        kept = r.create(arith.MulFOp, lhs=acc, rhs=kept).result
        return r.create(arith.AddFOp, lhs=kept, rhs=reduced).result


def _spread(b: Builder, factor: Value, t: TileType) -> Value:
    """`factor` of a maximum's slot shape over a rescaled sum's type `t` (a scalar maximum's
    1-element slot over a 1-D tile: a unit dimension broadcast)."""
    if factor.type == t:
        return factor
    return b.create(T.BroadcastOp, input=factor, result_types=[t]).result


def _rescale_factor(b: Builder, m: Value, new: Value) -> Value:
    """exp(m - new), and 0 where m is -inf (exp(-inf + inf) would be NaN)."""
    t = m.type
    shifted = b.create(arith.SubFOp, lhs=m, rhs=new).result
    factor = b.create(M.ExpOp, operand=shifted).result
    lowest = b.create(T.FullOp, value=FloatAttr(-math.inf), result_types=[t]).result
    zero = b.create(T.FullOp, value=FloatAttr(0.0), result_types=[t]).result
    empty = b.create(arith.CmpFOp, predicate="oeq", lhs=m, rhs=lowest).result
    return b.create(T.SelectOp, condition=empty, true_value=zero, false_value=factor).result


def _element_bytes(t: TileType) -> int:
    return max(getattr(t.element, "width", 16) // 8, 1)


def ceil_div_i32(b: Builder, lhs: Value, rhs: Value) -> Value:
    """`ceil(lhs / rhs)` of a trip count and a block count, computed in i32: both are below
    2**31 (extents are), and a 64-bit division by a run-time value is a subroutine call in
    SASS, which makes nvJitLink serialize every `wgmma` of a split GEMM
    (`tiling_rewrites.block_divmod` says more)."""
    narrow = [b.create(arith.IndexCastOp, input=v, result_types=[i32]).result for v in (lhs, rhs)]
    result = b.create(arith.CeilDivSIOp, lhs=narrow[0], rhs=narrow[1]).result
    return b.create(arith.IndexCastOp, input=result, result_types=[index]).result


def loaded_bytes(loop: scf.ForOp) -> int:
    """Bytes the loads of one iteration of `loop` read from memory: a region loaded twice
    (`x[tn] * x[tn]` is two loads of one tile) counts once, its second read hitting L1."""
    regions = {
        (op.view, tuple(op.offsets), str(op.result.type)): W.tile_bytes(op.result.type)
        for op in loop.body.walk()
        if isinstance(op, T.LoadOp) and op.result.type.is_static
    }
    return sum(regions.values())


def chunk_bounds(b: Builder, ticket: Value, chunk: Value, trips: Value, step: Value):
    """The loop bounds of chunk `ticket`: iterations [ticket·chunk, min((ticket+1)·chunk,
    trips)) times the step."""
    first = b.create(arith.MulIOp, lhs=ticket, rhs=chunk).result
    end = b.create(arith.AddIOp, lhs=first, rhs=chunk).result
    end = b.create(arith.MinSIOp, lhs=end, rhs=trips).result
    lower = b.create(arith.MulIOp, lhs=first, rhs=step).result
    upper = b.create(arith.MulIOp, lhs=end, rhs=step).result
    return lower, upper


def stored_bytes(loop: scf.ForOp) -> int:
    """Bytes the stores of one iteration of `loop` write."""
    return sum(
        W.tile_bytes(op.value.type)
        for op in loop.body.walk()
        if isinstance(op, T.StoreOp) and op.value.type.is_static
    )
