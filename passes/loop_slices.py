"""What a loop's body computes from its induction variable alone: the slices of index
arithmetic (offsets, masks) that `pipeline` clones to address a tile of another iteration,
whether for an asynchronous copy into shared memory or a load into registers issued a step
ahead (`passes/register_prefetch.py`)."""

from __future__ import annotations

from collections.abc import Callable

from tilec.dialects import arith, scf
from tilec.ir.core import Operation, OpResult, Pure, Value

__all__ = ["affine_in_iv", "defined_inside", "depends_on_iv", "recompute_slice"]


def defined_inside(v: Value, loop: Operation) -> bool:
    """Whether `v` is defined by an op in `loop` (or is an argument of one of its blocks)."""
    owner = v.owner
    if not isinstance(v, OpResult):
        owner = owner.parent_op  # a block argument: of the op that owns the block
    return owner is not None and loop.is_ancestor_of(owner)


def depends_on_iv(v: Value, loop: scf.ForOp) -> bool:
    if v is loop.induction_var:
        return True
    if not isinstance(v, OpResult) or not defined_inside(v, loop):
        return False
    return any(depends_on_iv(x, loop) for x in v.op.operands)


def affine_in_iv(v: Value, loop: scf.ForOp) -> bool:
    """`v` is a + b * iv with a, b loop-invariant (computed with addi, subi, muli)."""
    if not depends_on_iv(v, loop) or v is loop.induction_var:
        return True
    op = v.op  # type: ignore[attr-defined]
    if isinstance(op, (arith.AddIOp, arith.SubIOp)):
        return affine_in_iv(op.lhs, loop) and affine_in_iv(op.rhs, loop)
    if isinstance(op, arith.MulIOp):
        one_invariant = not depends_on_iv(op.lhs, loop) or not depends_on_iv(op.rhs, loop)
        return one_invariant and affine_in_iv(op.lhs, loop) and affine_in_iv(op.rhs, loop)
    return False


def recompute_slice(
    roots: list[Value], loop: scf.ForOp, reads: Callable[[Operation], bool] | None = None
) -> list[Operation] | str:
    """The body ops that compute `roots` from the induction variable and loop-invariant
    values, in body order; or why they cannot be computed for another iteration. `reads`:
    which impure ops may be computed again too (loads the caller knows harmless to repeat,
    such as a paged kernel's read of its block table)."""
    body = loop.body.block
    needed: set[int] = set()
    work = list(roots)
    while work:
        v = work.pop()
        if not defined_inside(v, loop) or v is loop.induction_var:
            continue
        if not isinstance(v, OpResult):
            return "the load's offsets or mask depend on a value carried around the loop"
        op = v.op
        if op.parent is not body:
            return "the load's offsets or mask are computed inside nested control flow"
        if not op.has_trait(Pure) and not (reads is not None and reads(op)):
            return f"the load's offsets or mask depend on '{op.name}', which is not pure"
        if id(op) not in needed:
            needed.add(id(op))
            work.extend(op.operands)
    return [op for op in body.ops if id(op) in needed]
