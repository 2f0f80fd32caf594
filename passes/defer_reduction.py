"""The `defer-reduction` pass: a loop that reduces a tile every iteration and adds the result
to a carried value carries the tile instead, and reduces once after the loop.

A column sum walks down the rows, one tile `[BM, BN]` an iteration, as `acc += sum(x[tm, tn],
axis=0)`: every iteration reduces across the BM rows, which are spread over the block's warps,
so every iteration pays a cross-warp exchange through shared memory and two barriers before
its next load may start. Carrying `acc2: [BM, BN]` with `acc2 = acc2 + x[tm, tn]` turns each
iteration into loads and element-wise adds, each thread summing its own elements; the one
reduction across rows runs after the loop. The rows of a tile then cost registers (the
carried tile), not an exchange per iteration — what a CUDA author does by hand (each thread
keeps partial column sums, reduced once at the end). Measured on the H200 (2026-12-02, col_sum
8192 x 8192 f32 with BM = 64, BN = 64): 189 µs per-iteration reductions, against torch's
74 µs (docs/benchmarks.md).

The rewrite is exact for max, min and integer sums, and reorders float sums (as the blocks of
`split-reduction` already do): checked with a tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.diagnostics import TileError
from tilec.dialects import scf
from tilec.dialects import split as W
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import IntegerAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Operation, OpResult, Value
from tilec.ir.types import TileType
from tilec.passes.split_reduction import COMBINES, Combine, identity_attr, is_identity
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["DeferReduction", "deferrable"]


@register_pass
class DeferReduction(Pass):
    """Carries a loop's reduced tile instead of its reduction, reducing once after the loop.

    Recognises, in any `scf.for`, a carried value `acc` updated only as `acc' = acc ⊕ r`
    (⊕: `arith.addf`, `addi`, `maximumf`, `minimumf`, `maxsi`, `minsi`), where `r` is a
    `tile.reduce` of ⊕'s kind along one axis of a static tile `g` computed in the loop, `r`
    is used only there, and `acc'` only by the yield. Such a loop carries `g`'s type instead,
    from ⊕'s identity, as `acc2' = acc2 ⊕ g`; after the loop `tile.reduce` of the carried
    tile along the same axis, ⊕ the loop's initial value (left out when it is ⊕'s identity),
    replaces the loop's result. A loop whose initial value is such a result of an earlier
    loop rewritten here (mask-bounds' full-tile loop and its remainder) starts from that
    loop's carried tile, so the two share one reduction. Runs after `split-reduction` and
    `mask-bounds` (each split block defers its own chunk; a masked load's fill is ⊕'s
    identity already) and before `assign-layouts`, which lays out the carried tile. The
    combine loop of `split-reduction` is left alone: its few rounds run in one block per
    output tile, and its carried tile would cost registers in every block.

    Options: `enable` (false: leave every loop alone — `--disable defer-reduction` does the
    same), `max_elements` (the largest carried tile, in elements: each costs registers for
    the whole loop). The tuner searches `enable`. Reorders float sums (checked with a
    tolerance). Remarks: per loop rewritten, the carried value, ⊕ and the tile now carried;
    per loop left alone with a reduction in it, why.
    """

    name = "defer-reduction"
    summary = "Carry a reduced tile through a loop and reduce once after it"
    exact = False  # float sums are added in another order

    @dataclass
    class Options:
        enable: bool = option(True, "defer reductions past their loop (false: leave loops alone)")
        max_elements: int = option(
            4096, "elements of the largest tile a loop may carry instead of its reduction"
        )

    def run(self, module: Operation, ctx: PassContext) -> None:
        if self.options.max_elements < 1:
            raise TileError(
                "defer-reduction: option max_elements must be at least 1, got "
                f"{self.options.max_elements}"
            )
        if not self.options.enable:
            return
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            deferred: dict[Value, _Deferred] = {}
            loops = [op for op in kernel.walk() if isinstance(op, scf.ForOp)]
            count = 0
            for loop in loops:  # in program order: an earlier loop's result is known by then
                for index in range(len(loop.iter_args)):
                    count += _defer(loop, index, self.options.max_elements, deferred, ctx)
            if count:  # what the tuner reads back (`tilec.tune.space.read_back`)
                kernel.attributes["tilec.deferred_reductions"] = IntegerAttr(count)


@dataclass(frozen=True)
class _Deferred:
    """What a rewritten loop's result is: `rest` ⊕ the reduction of `carried` (the loop's
    result, a tile) along `axis` by `combine` (⊕); no `rest` when the loop started from ⊕'s
    identity."""

    carried: Value
    axis: int
    combine: Combine
    rest: Value | None


@dataclass(frozen=True)
class _Match:
    """Carried value `i` of a loop updated only as `acc' = acc ⊕ r` (`update`), `r` the
    `tile.reduce` (`reduce`) of ⊕'s kind (`combine`) of a tile computed in the loop."""

    update: Operation
    reduce: Operation
    combine: Combine


def _match(loop: scf.ForOp, i: int) -> _Match | None:
    """The structural half of the rewrite (the class docstring) for carried value `i`: what
    `defer-reduction` would move past `loop` if its tile's shape allows, or None."""
    arg = loop.iter_args[i]
    users = arg.uses
    if len(users) != 1:
        return None
    update = users[0]
    combine = COMBINES.get(type(update))
    if combine is None or update.parent is not loop.body.block:
        return None
    other = update.operands[1] if update.operands[0] is arg else update.operands[0]
    if other is arg or not isinstance(other, OpResult) or not isinstance(other.op, T.ReduceOp):
        return None
    reduce = other.op
    if reduce.attributes["kind"].value != combine.reduce_kind or reduce.parent is not update.parent:
        return None
    g = reduce.input
    if isinstance(g, OpResult) and isinstance(g.op, W.WorkspaceLoadOp):
        # split-reduction's combine: a few rounds (S / rows), run by one block of each output
        # tile, whose carried tile would hold registers in the whole kernel.
        return None
    if len(other.uses) != 1 or loop.yield_op.operands[i] is not update.results[0]:
        return None
    if len(update.results[0].uses) != 1:
        return None
    return _Match(update, reduce, combine)


def deferrable(reduce: Operation, limit: int | None = None) -> bool:
    """Whether `defer-reduction` (with `max_elements` = `limit`, its default when None)
    moves reduction `reduce` past the loop it runs in, so that it no longer runs every
    iteration -- what the occupancy model asks before the pass has run (`tile_shapes`)."""
    if limit is None:
        limit = DeferReduction.Options().max_elements
    if not isinstance(reduce, T.ReduceOp) or len(reduce.results[0].uses) != 1:
        return False
    loop = reduce.results[0].uses[0].parent_op
    if not isinstance(loop, scf.ForOp):
        return False
    t = reduce.input.type
    if not isinstance(t, TileType) or not t.is_static or t.num_elements > limit:
        return False
    return any(
        (m := _match(loop, i)) is not None and m.reduce is reduce
        for i in range(len(loop.iter_args))
    )


def _defer(
    loop: scf.ForOp, i: int, limit: int, deferred: dict[Value, _Deferred], ctx: PassContext
) -> bool:
    """Rewrite carried value `i` of `loop` if it is such a reduction (the class docstring);
    whether it was."""
    match = _match(loop, i)
    if match is None:
        return False
    arg = loop.iter_args[i]
    update, reduce, combine = match.update, match.reduce, match.combine
    name = _name(arg, loop.inits[i])
    g = reduce.input
    t = g.type
    if not isinstance(t, TileType) or not t.is_static:
        ctx.remark(loop, f"{name}: not deferred: the reduced tile {t} has no static shape")
        return False
    if t.num_elements > limit:
        ctx.remark(
            loop,
            f"{name}: not deferred: carrying the {_shape(t)} tile would hold {t.num_elements} "
            f"elements through the loop (max_elements={limit})",
        )
        return False
    axis = reduce.attributes["axis"].value
    before = Builder.before_op(loop)
    init = loop.inits[i]
    earlier = deferred.get(init)
    if earlier is not None and (
        earlier.carried.type != t or earlier.axis != axis or earlier.combine is not combine
    ):
        earlier = None
    if earlier is not None:
        start, rest = earlier.carried, earlier.rest
    else:
        start = before.create(T.FullOp, value=identity_attr(combine, t), result_types=[t]).result
        rest = None if is_identity(init, combine) else init
    # The loop carries the tile: its argument, yield and result take `t`.
    loop.set_operand(3 + i, start)
    arg.type = t
    inside = Builder.before_op(update)
    new_update = inside.create(type(update), lhs=arg, rhs=g, result_types=[t])
    loop.yield_op.set_operand(i, new_update.results[0])
    update.detach()
    update.drop_all_references()
    reduce.detach()
    reduce.drop_all_references()
    result = loop.results[i]
    users = list(result.uses)
    result.type = t
    after = Builder.after_op(loop)
    reduced = after.create(
        T.ReduceOp,
        input=result,
        kind=combine.reduce_kind,
        axis=axis,
        result_types=[T.ReduceOp.reduced_type(t, axis)],
    ).result
    value = reduced
    if rest is not None:
        value = after.create(
            combine.op, lhs=rest, rhs=reduced, result_types=[reduced.type]
        ).results[0]
    for user in users:
        for k, v in enumerate(user.operands):
            if v is result:
                user.set_operand(k, value)
    deferred[value] = _Deferred(result, axis, combine, rest)
    joined = " (continuing the previous loop's tile)" if earlier is not None else ""
    ctx.remark(
        loop,
        f"{name}: the {combine.reduce_kind} along axis {axis} deferred past the loop: it "
        f"carries the {_shape(t)} tile{joined}, combined element-wise by {combine.name}, and "
        "reduces it once after the loop instead of every iteration",
    )
    return True


def _shape(t: TileType) -> str:
    return "x".join(str(d) for d in t.shape)


def _name(v: Value, init: Value | None) -> str:
    for x in (v, init):  # the argument's own name first: CSE may have merged equal inits
        hint = getattr(x, "name_hint", None)
        if hint:
            return hint
    return "a carried value"
