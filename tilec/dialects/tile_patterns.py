"""Canonicalization patterns of the `tile` dialect's memory ops.

`StoreKeepsLanes`: a store that writes back, on some lanes, what it just read from the same
place stores only the other lanes.

    %old = tile.load %y[%i, %j]                      (no mask)
    %new = tile.select %m, %v, %old
    tile.store %y[%i, %j], %new                      ->   tile.store %y[%i, %j], %v, mask %m

(and `select %m, %old, %v` with the mask inverted). A user writes it as `y[t] = where(m, v,
y[t])` to update some rows of a tile (the rows of one expert in a grouped GEMM, the rows a
condition picks): the read of `y` costs a load of the whole tile, in the accumulator's layout
after a dot, and its latency sits between the last product and the store. Where the mask
hides a lane both forms leave its element as it was; lanes outside the view are skipped by
both (the load pads them, the store skips them). That takes the store and the load to be of
the same view at the same offsets (the same SSA values) with the same tile type, the load
before the store in the same block, and nothing between them that may write memory (a store,
an atomic, a call, a loop or branch holding one): else the load's values could be stale and
writing them back would be part of the meaning. Another block writing the same elements at
the same time is a race in both forms (blocks run in no defined order: docs/language.md,
"Races"); the masked store is the deterministic one of the two.

Runs in `canonicalize`, before `vectorize` decides the store's access width from its mask
(a store that already carries a width is left alone).
"""

from __future__ import annotations

from tilec.dialects import arith, scf
from tilec.dialects.tile import LoadOp, SelectOp, StoreOp
from tilec.ir.attributes import BoolAttr
from tilec.ir.core import Operation, OpResult, Pure, Value
from tilec.ir.rewrite import PatternRewriter, RewritePattern
from tilec.ir.types import TileType, i1

__all__ = ["StoreKeepsLanes"]


class StoreKeepsLanes(RewritePattern):
    """`store V[o], select(m, v, load V[o])` -> `store V[o], v, mask m` (module docstring)."""

    op_kind = StoreOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        assert isinstance(op, StoreOp)
        if op.vector is not None:
            return False
        select = _defining(op.value, SelectOp)
        if select is None or select.condition.type != TileType(
            op.value.type.shape, i1, op.value.type.layout
        ):
            return False
        choices = (
            (select.false_value, select.true_value, False),
            (select.true_value, select.false_value, True),
        )
        found = next(
            (
                (load, new, inverted)
                for old, new, inverted in choices
                if (load := _defining(old, LoadOp)) is not None and _rereads(load, op)
            ),
            None,
        )
        if found is None:
            return False
        load, new, inverted = found
        mask = select.condition
        if inverted:
            true = rewriter.constant(BoolAttr(True), mask.type)
            if true is None:
                return False
            mask = rewriter.create(arith.XOrIOp, lhs=mask, rhs=true).result
        if op.mask is not None:
            mask = rewriter.create(arith.AndIOp, lhs=mask, rhs=op.mask).result
        store = rewriter.create(
            StoreOp,
            view=op.view,
            offsets=list(op.offsets),
            value=new,
            mask=mask,
            **{k: v for k, v in op.attributes.items() if k in ("in_bounds", "frame", "checked")},
        )
        rewriter.erase_op(op)
        if not select.result.uses:
            rewriter.erase_op(select)
        gone = not load.result.uses
        if gone:  # a load is not pure (stores order it), but unread it is dead
            rewriter.erase_op(load)
        rewriter.remark(
            store,
            "stores only the lanes the select changes, under its mask: the other lanes would "
            "write back the values just loaded from the same place"
            + ("; that load is gone" if gone else ""),
        )
        return True


def _defining(v: Value, kind: type) -> Operation | None:
    if isinstance(v, OpResult) and isinstance(v.op, kind):
        return v.op
    return None


def _rereads(load: LoadOp, store: StoreOp) -> bool:
    """Whether `load` reads exactly the lanes `store` writes, and nothing between them may
    change those elements."""
    if load.mask is not None or load.view is not store.view:
        return False
    if load.result.type != store.value.type:
        return False
    if len(load.offsets) != len(store.offsets) or any(
        a is not b for a, b in zip(load.offsets, store.offsets)
    ):
        return False
    block = store.parent
    if block is None or load.parent is not block:
        return False
    ops = block.ops
    start, end = ops.index(load), ops.index(store)
    if start > end:
        return False
    return not any(_may_write(op) for op in ops[start + 1 : end])


def _may_write(op: Operation) -> bool:
    """Whether `op` (or an op nested in it) may write memory: anything but pure ops, loads
    and the structure around them."""
    for inner in op.walk():
        if inner.has_trait(Pure) or isinstance(inner, LoadOp):
            continue
        if isinstance(inner, (scf.ForOp, scf.IfOp, scf.YieldOp)):
            continue
        return True
    return False


StoreOp.canonicalization_patterns = (*StoreOp.canonicalization_patterns, StoreKeepsLanes())
