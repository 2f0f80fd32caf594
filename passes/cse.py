"""The `cse` pass: common-subexpression elimination of pure ops, scoped by dominance."""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects import tile as T
from tilec.dialects.gather import GatherOp
from tilec.ir.core import Block, IsolatedFromAbove, Operation, Pure
from tilec.passmanager import Pass, PassContext, register_pass


@register_pass
class CSE(Pass):
    """Replaces a pure op by an earlier identical one that dominates it.

    Two ops are identical when they have the same name, operands (the same values, in the same
    order), attributes and result types. A value defined in a block may replace one in the same
    block or in a region nested in it (a loop body may reuse a value computed before the loop),
    never one in a sibling region (the `then` and `else` of an `scf.if` see different values).
    Ops with regions and ops with side effects (stores, atomics) are never merged; a
    `tile.load` is merged into an identical load earlier in the same block when no op between
    them may write memory (`x[tn] * x[tn]` reads its tile once: two loads of it issued back to
    back both go to L2, costing registers and bandwidth). Assumes a `Pure` op's results
    depend only on its operands and attributes. Does not reorder operands of commutative ops:
    `canonicalize` first puts constants on the right.
    Remarks: each op that others were merged into says how many.
    """

    name = "cse"
    summary = "Merge identical pure ops (one dominates the other)"

    @dataclass
    class Options:
        pass

    def run(self, module: Operation, ctx: PassContext) -> None:
        merged: dict[Operation, int] = {}
        for region in module.regions:
            for block in region.blocks:
                _eliminate_in_block(block, {}, merged)
        for op, count in merged.items():
            ctx.remark(op, f"merged {count} identical op{'s' if count > 1 else ''} into this one")


def _eliminate_in_block(
    block: Block, available: dict[tuple, Operation], merged: dict[Operation, int]
) -> None:
    """Merge ops of `block` (and its nested regions) into those in `available`, which holds
    the ops of the enclosing blocks; keys added here are removed on return (scoping)."""
    added: list[tuple] = []
    replaced: set[Operation] = set()
    loads: dict[tuple, Operation] = {}  # this block's loads since the last possible write
    for op in block.ops:
        if _may_write(op):
            loads.clear()
        if isinstance(op, T.LoadOp):
            key = (tuple(op.operands), frozenset(op.attributes.items()), op.result.type)
            existing = loads.get(key)
            if existing is None:
                loads[key] = op
            else:
                op.result.replace_all_uses_with(existing.result)
                op.drop_all_references()
                replaced.add(op)
                merged[existing] = merged.get(existing, 0) + 1
            continue
        if op.regions:
            # A kernel sees nothing from outside; other regions see the enclosing blocks.
            inner = {} if op.has_trait(IsolatedFromAbove) else available
            for region in op.regions:
                for nested in region.blocks:
                    _eliminate_in_block(nested, inner, merged)
            continue
        if not op.results or not op.has_trait(Pure):
            continue
        key = (
            op.name,
            tuple(op.operands),
            frozenset(op.attributes.items()),
            tuple(r.type for r in op.results),
        )
        existing = available.get(key)
        if existing is None:
            available[key] = op
            added.append(key)
            continue
        for old, new in zip(op.results, existing.results):
            old.replace_all_uses_with(new)
        op.drop_all_references()
        replaced.add(op)
        merged[existing] = merged.get(existing, 0) + 1
    for key in added:
        del available[key]
    if replaced:
        # One pass over the block rather than a search of it per replaced op.
        for op in replaced:
            op.parent = None
        block.ops = [op for op in block.ops if op not in replaced]


def _may_write(op: Operation) -> bool:
    """Whether `op` (or an op nested in it) may write memory: anything but pure ops, reads
    and the structure around them."""
    for inner in op.walk():
        if inner.has_trait(Pure) or isinstance(inner, (T.LoadOp, GatherOp)):
            continue
        if inner.name in ("scf.for", "scf.if", "scf.yield", "builtin.return", "builtin.func"):
            continue
        if inner.name in ("tile.load_shared", "tile.workspace_load", "tile.workspace_read"):
            continue
        return True
    return False
