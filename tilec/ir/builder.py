"""The builder: creates ops at an insertion point, stamping a source location on each.

b = Builder.at_end(func.body.block, loc=some_loc)
s = b.create(AddFOp, lhs=x, rhs=y).result
with b.before(s.op):
    ...
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tilec.diagnostics import UNKNOWN_LOC, Location
from tilec.ir.core import Block, Operation

OpT = TypeVar("OpT", bound=Operation)


class Builder:
    """Inserts into `block` before `anchor` (at the end when `anchor` is None)."""

    __slots__ = ("anchor", "block", "loc")

    def __init__(
        self,
        block: Block | None = None,
        anchor: Operation | None = None,
        loc: Location = UNKNOWN_LOC,
    ):
        self.block = block
        self.anchor = anchor
        self.loc = loc

    @classmethod
    def at_end(cls, block: Block, loc: Location = UNKNOWN_LOC) -> Builder:
        return cls(block, None, loc)

    @classmethod
    def at_start(cls, block: Block, loc: Location = UNKNOWN_LOC) -> Builder:
        return cls(block, block.ops[0] if block.ops else None, loc)

    @classmethod
    def before_op(cls, op: Operation) -> Builder:
        """Inserting before `op`, with `op`'s location as the default."""
        return cls(op.parent, op, op.loc)

    @classmethod
    def after_op(cls, op: Operation) -> Builder:
        block = op.parent
        assert block is not None
        index = block.ops.index(op)
        anchor = block.ops[index + 1] if index + 1 < len(block.ops) else None
        return cls(block, anchor, op.loc)

    def insert(self, op: OpT) -> OpT:
        if self.block is None:
            raise ValueError("builder has no insertion point")
        if self.anchor is None:
            self.block.append(op)
        else:
            self.block.insert(self.block.ops.index(self.anchor), op)
        return op

    def create(self, cls: type[OpT], *, loc: Location | None = None, **fields: Any) -> OpT:
        """Make an op of kind `cls` from its field names (see `Operation.make`) and insert it."""
        op = cls.make(loc=self.loc if loc is None else loc, **fields)
        return self.insert(op)  # type: ignore[return-value]

    @contextmanager
    def at(
        self, block: Block, anchor: Operation | None = None, loc: Location | None = None
    ) -> Iterator[Builder]:
        """Temporarily insert into `block` before `anchor`."""
        saved = (self.block, self.anchor, self.loc)
        self.block, self.anchor = block, anchor
        if loc is not None:
            self.loc = loc
        try:
            yield self
        finally:
            self.block, self.anchor, self.loc = saved

    @contextmanager
    def located(self, loc: Location) -> Iterator[Builder]:
        """Temporarily stamp `loc` on created ops."""
        saved = self.loc
        self.loc = loc
        try:
            yield self
        finally:
            self.loc = saved
