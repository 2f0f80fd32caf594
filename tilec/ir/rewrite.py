"""Rewrite patterns and the greedy driver that applies them (MLIR's greedy pattern rewriter,
kept small).

A pattern matches one op kind and rewrites it through a `PatternRewriter`, which inserts new
ops before the matched op and tells the driver what changed:

    class RemoveDoubleNegation(RewritePattern):   # (negf's folder does this; an example)
        op_kind = NegFOp

        def match_and_rewrite(self, op, rewriter) -> bool:
            inner = op.operand
            if not (isinstance(inner, OpResult) and isinstance(inner.op, NegFOp)):
                return False
            rewriter.replace_op(op, [inner.op.operand])
            return True

`apply_patterns_greedily` runs a worklist over every op under a root: it erases ops that are
pure and unused, folds ops (`Operation.fold`, materializing constant results), and applies the
op kind's `canonicalization_patterns` and any extra patterns, until nothing changes. Constants
live at the start of their kernel: the driver hoists each constant op there and reuses an equal
one instead of creating a duplicate (as MLIR's OperationFolder does), so folding never leaves
two copies of a constant for CSE to find.

Patterns must change the IR only through the rewriter (`insert`/`create`, `replace_op`,
`erase_op`, `set_operands`, `notify_modified`, `constant`): the driver's worklist and constant
table follow those calls, not direct edits. An erased op stops using its operands at once but
stays in its block's op list until the end of the sweep (`rewriter.is_erased` tells).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar

from tilec.diagnostics import Location
from tilec.ir.attributes import Attribute, BoolAttr, FloatAttr, IntegerAttr
from tilec.ir.builder import Builder, OpT
from tilec.ir.core import (
    OP_REGISTRY,
    Block,
    ConstantLike,
    IsolatedFromAbove,
    Operation,
    OpResult,
    Pure,
    Terminator,
    Value,
)
from tilec.ir.folding import from_numpy_scalar, to_numpy_scalar
from tilec.ir.types import FloatType, TileType, Type, element_type, is_scalar

__all__ = [
    "PatternRewriter",
    "RewriteDidNotConverge",
    "RewritePattern",
    "apply_patterns_greedily",
    "is_trivially_dead",
]

RemarkSink = Callable[[Operation, str], None]


class RewritePattern:
    """A local rewrite of one op kind. `op_kind` (a class or tuple of classes; None: any op)
    selects the ops it is tried on when given as an extra pattern; in an op class's
    `canonicalization_patterns` it is tried on that kind's ops."""

    op_kind: ClassVar[type[Operation] | tuple[type[Operation], ...] | None] = None

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        """Rewrite `op` through `rewriter` and return True, or leave the IR as it is and
        return False."""
        raise NotImplementedError

    @property
    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return self.name


class RewriteDidNotConverge(RuntimeError):
    """The patterns kept rewriting past the driver's bound: two of them undo each other, or
    one reports success without changing anything. A bug in the patterns, not in the input."""


def is_trivially_dead(op: Operation) -> bool:
    """Pure, not a terminator, and none of its results is used."""
    return (
        op.has_trait(Pure) and not op.has_trait(Terminator) and not any(r.uses for r in op.results)
    )


class PatternRewriter(Builder):
    """A builder positioned before the op being rewritten, which reports every change to the
    driver (so that affected ops are revisited)."""

    __slots__ = ("_driver",)

    def __init__(self, driver: _GreedyDriver):
        super().__init__()
        self._driver = driver

    def insert(self, op: OpT) -> OpT:
        super().insert(op)
        self._driver.notify_inserted(op)
        return op

    def replace_op(self, op: Operation, values: Sequence[Value]) -> None:
        """Replace every use of `op`'s results with `values`, then erase `op`."""
        if len(values) != len(op.results):
            raise ValueError(f"{op.name}: {len(values)} values for {len(op.results)} results")
        for r, v in zip(op.results, values):
            self.replace_all_uses_with(r, v)
        self.erase_op(op)

    def replace_all_uses_with(self, old: Value, new: Value) -> None:
        if old is new:
            return
        for user in old.uses:
            self._driver.add(user)
        old.replace_all_uses_with(new)
        self._driver.changed = True

    def erase_op(self, op: Operation) -> None:
        """Erase `op` (its results must be unused) and everything nested in it.

        The op stops using its operands at once, but leaves its block's op list only at the
        end of the driver's sweep (one pass over the list instead of a search per erased op);
        `is_erased` tells such ops apart until then."""
        for r in op.results:
            if r.uses:
                raise ValueError(f"cannot erase {op.name}: result #{r.index} still has uses")
        self._driver.notify_erasing(op)
        op.drop_all_references()

    def is_erased(self, op: Operation) -> bool:
        return op in self._driver.erased

    def set_operands(self, op: Operation, values: Sequence[Value]) -> None:
        """Change `op`'s operands in place (the op is revisited)."""
        for v in op.operands:
            self._driver.add_defining_op(v)
        op.set_operands(values)
        self._driver.notify_modified(op)

    def notify_modified(self, op: Operation) -> None:
        """Call after changing `op` in place (attributes, operands): `op` and its users are
        revisited."""
        self._driver.notify_modified(op)

    def remark(self, op: Operation, message: str) -> None:
        """Explain a rewrite of `op` (the pass's remarks; nothing when it collects none)."""
        if self._driver.remark is not None:
            self._driver.remark(op, message)

    def constant(self, value: Attribute, type: Type, loc: Location | None = None) -> Value | None:
        """A constant of `type` holding `value` (a splat for tiles), shared with any equal
        constant already at the start of the kernel; None if it cannot be materialized."""
        return self._driver.constant(value, type, self.loc if loc is None else loc, self.block)


# ---------------------------------------------------------------------------------------------
# Constants


@functools.lru_cache(maxsize=4096)  # folding asks about the same few constants again and again
def materializable_constant(value: Attribute, type: Type) -> Attribute | None:
    """`value` in the form the constant op of `type` holds (floats as FloatAttr rounded to the
    element type, i1 as BoolAttr, integers wrapped into range), or None if `type` has no
    constant op or the value does not fit its kind."""
    e = element_type(type)
    if not (is_scalar(type) or (isinstance(type, TileType) and _tile_constant_op() is not None)):
        return None
    if not isinstance(value, (IntegerAttr, FloatAttr, BoolAttr)):
        return None
    if isinstance(value, FloatAttr) and not isinstance(e, FloatType):
        return None
    x = to_numpy_scalar(value, e)
    if x is None:
        # No exact numpy type (bf16 without ml_dtypes): keep a value that is already a float.
        return value if isinstance(value, FloatAttr) else None
    return from_numpy_scalar(x, e)


def _tile_constant_op() -> type[Operation] | None:
    """`tile.full`, if the tile dialect is available (it is imported lazily: the IR core does
    not depend on it)."""
    cls = OP_REGISTRY.get("tile.full")
    if cls is None:
        try:
            importlib.import_module("tilec.dialects.tile")
        except ImportError:
            return None
        cls = OP_REGISTRY.get("tile.full")
    return cls


def _make_constant(value: Attribute, type: Type, loc: Location) -> Operation:
    if is_scalar(type):
        from tilec.dialects.arith import ConstantOp

        op = ConstantOp([], [type], {"value": value}, [], loc)
    else:
        full = _tile_constant_op()
        assert full is not None
        op = full([], [type], {"value": value}, [], loc)
    op.results[0].name_hint = _constant_name(value, type)
    return op


def _constant_name(value: Attribute, type: Type) -> str:
    """MLIR's names for constants: `%c4` (index), `%c-1_i32`, `%true`, `%cst` (floats, tiles)."""
    if isinstance(value, BoolAttr) and is_scalar(type):
        return "true" if value.value else "false"
    if isinstance(value, IntegerAttr) and is_scalar(type):
        return f"c{value.value}" + ("" if str(type) == "index" else f"_{type}")
    return "cst"


def _constant_key(op: Operation) -> tuple:
    """What makes two constant ops interchangeable. The value is compared as the type holds
    it, so `0.1 : f16` and `0.0999755859375 : f16` (the same f16), or `1 : f32` and
    `1.0 : f32`, are one constant."""
    t = op.results[0].type
    attributes = dict(op.attributes)
    value = attributes.get("value")
    if value is not None:
        attributes["value"] = materializable_constant(value, t) or value
    return (op.name, t, frozenset(attributes.items()))


def constant_scope(block: Block) -> Block:
    """The block constants used in `block` are hoisted to: the entry block of the nearest
    enclosing region whose op is isolated from above (the kernel's body)."""
    while True:
        region = block.parent
        parent = region.parent if region is not None else None
        if parent is None or parent.has_trait(IsolatedFromAbove) or parent.parent is None:
            return region.blocks[0] if region is not None else block
        block = parent.parent


class _ConstantTable:
    """Constants hoisted to the start of each kernel body, one op per distinct constant.

    Invariant: the first `hoisted[scope]` ops of `scope` are the table's constants of that
    scope, so that a new constant is inserted right after them (in order of first use)."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[Block, tuple], Operation] = {}
        self.key_of: dict[Operation, tuple[Block, tuple]] = {}
        self.hoisted: dict[Block, int] = {}

    def lookup(self, scope: Block, key: tuple) -> Operation | None:
        return self.by_key.get((scope, key))

    def add(self, scope: Block, key: tuple, op: Operation) -> bool:
        """Record `op` and place it after the hoisted constants; True if it moved."""
        position = self.hoisted.get(scope, 0)
        moved = False
        if op.parent is not scope or scope.ops[position] is not op:
            op.detach()
            scope.insert(position, op)
            moved = True
        self.hoisted[scope] = position + 1
        self.by_key[(scope, key)] = op
        self.key_of[op] = (scope, key)
        return moved

    def forget(self, op: Operation) -> None:
        entry = self.key_of.pop(op, None)
        if entry is not None:
            del self.by_key[entry]
            self.hoisted[entry[0]] -= 1


# ---------------------------------------------------------------------------------------------
# The driver


class _GreedyDriver:
    def __init__(
        self,
        patterns: Sequence[RewritePattern],
        fold: bool,
        remark: RemarkSink | None,
        disabled: frozenset[str] = frozenset(),
    ):
        self.extra_patterns = list(patterns)
        self.disabled = disabled
        self.fold_enabled = fold
        self.remark = remark
        self.worklist: list[Operation] = []
        self.in_worklist: set[Operation] = set()
        self.erased: set[Operation] = set()
        self.blocks_with_erased_ops: set[Block] = set()
        self.constants = _ConstantTable()
        self.rewriter = PatternRewriter(self)
        self.changed = False
        self._patterns_by_kind: dict[type[Operation], tuple[RewritePattern, ...]] = {}

    # -- worklist ------------------------------------------------------------------------

    def add(self, op: Operation) -> None:
        if op not in self.in_worklist:
            self.in_worklist.add(op)
            self.worklist.append(op)

    def add_defining_op(self, v: Value) -> None:
        # A value that lost a use may leave its definition dead (or foldable differently).
        if isinstance(v, OpResult):
            self.add(v.op)

    def notify_inserted(self, op: Operation) -> None:
        self.changed = True
        for nested in op.walk():
            self.add(nested)

    def notify_modified(self, op: Operation) -> None:
        self.changed = True
        self.add(op)
        for r in op.results:
            for user in r.uses:
                self.add(user)

    def notify_erasing(self, op: Operation) -> None:
        self.changed = True
        if op.parent is not None:
            self.blocks_with_erased_ops.add(op.parent)
        for nested in op.walk():
            self.erased.add(nested)
            if nested in self.constants.key_of:
                # Hoisted constants leave at once: the table counts the ops at the block's start.
                self.constants.forget(nested)
                nested.detach()
            for v in nested.operands:
                self.add_defining_op(v)

    def remove_erased_ops(self) -> None:
        for block in self.blocks_with_erased_ops:
            kept = []
            for op in block.ops:
                if op in self.erased:
                    op.parent = None
                else:
                    kept.append(op)
            block.ops = kept
        self.blocks_with_erased_ops.clear()

    # -- patterns ------------------------------------------------------------------------

    def patterns_for(self, cls: type[Operation]) -> tuple[RewritePattern, ...]:
        found = self._patterns_by_kind.get(cls)
        if found is None:
            extra = [
                p for p in self.extra_patterns if p.op_kind is None or issubclass(cls, p.op_kind)
            ]
            found = tuple(
                p for p in (*cls.canonicalization_patterns, *extra) if p.name not in self.disabled
            )
            self._patterns_by_kind[cls] = found
        return found

    # -- constants -----------------------------------------------------------------------

    def constant(
        self, value: Attribute, type: Type, loc: Location, near: Block | None
    ) -> Value | None:
        value = materializable_constant(value, type)
        if value is None or near is None:
            return None
        op = _make_constant(value, type, loc)
        scope = constant_scope(near)
        key = _constant_key(op)
        existing = self.constants.lookup(scope, key)
        if existing is not None:
            return existing.results[0]
        self.constants.add(scope, key, op)
        self.notify_inserted(op)
        return op.results[0]

    def visit_constant(self, op: Operation) -> None:
        """Hoist `op` to its kernel's start, or replace it with an equal hoisted constant."""
        if op.parent is None or not op.results:
            return
        scope = constant_scope(op.parent)
        key = _constant_key(op)
        existing = self.constants.lookup(scope, key)
        if existing is op:
            return
        if existing is not None:
            self.rewriter.replace_op(op, existing.results)
        elif self.constants.add(scope, key, op):
            self.changed = True

    # -- one op --------------------------------------------------------------------------

    def visit(self, op: Operation) -> None:
        if is_trivially_dead(op):
            self.rewriter.erase_op(op)
            return
        if op.has_trait(ConstantLike):
            # Constants are not folded or rewritten, only hoisted and deduplicated.
            if self.fold_enabled:
                self.visit_constant(op)
            return
        if self.fold_enabled and self.try_fold(op):
            return
        rewriter = self.rewriter
        for pattern in self.patterns_for(type(op)):
            rewriter.block, rewriter.anchor, rewriter.loc = op.parent, op, op.loc
            if pattern.match_and_rewrite(op, rewriter):
                self.changed = True
                return

    def try_fold(self, op: Operation) -> bool:
        folded = op.fold()
        if folded is None:
            return False
        if len(folded) != len(op.results):
            raise RuntimeError(
                f"folder of {op.name} returned {len(folded)} values for {len(op.results)} results"
            )
        if all(f is r for f, r in zip(folded, op.results)):
            return False  # folded to itself: nothing to do
        # Check every constant first, so that a fold is applied whole or not at all.
        constants = [
            None if isinstance(f, Value) else materializable_constant(f, r.type)
            for f, r in zip(folded, op.results)
        ]
        if any(c is None and not isinstance(f, Value) for c, f in zip(constants, folded)):
            return False
        values: list[Value] = []
        for f, c, r in zip(folded, constants, op.results):
            if isinstance(f, Value):
                values.append(f)
                continue
            v = self.constant(c, r.type, op.loc, op.parent)
            assert v is not None
            if self.remark is not None:
                self.remark(v.op, f"folded {op.name} to {c}")  # type: ignore[attr-defined]
            values.append(v)
        self.rewriter.replace_op(op, values)
        return True

    # -- whole runs ----------------------------------------------------------------------

    def run(self, root: Operation, max_iterations: int) -> bool:
        """Sweep until a sweep changes nothing; returns whether any sweep changed the IR."""
        # Sweeps that change the IR, and one more that finds nothing left to do.
        for iteration in range(max_iterations + 1):
            self.changed = False
            ops = list(root.walk())
            # Pre-order, popped from the end: definitions are visited before their users, so
            # a chain of constant operations folds in one sweep.
            self.worklist = ops[::-1]
            self.in_worklist = set(ops)
            self.erased = set()
            # A sweep visits each op a few times (after each change near it); far more
            # visits than that means patterns are cycling.
            budget = 32 * len(ops) + 1024
            try:
                while self.worklist:
                    op = self.worklist.pop()
                    self.in_worklist.discard(op)
                    if op in self.erased or op is root:
                        continue
                    self.visit(op)
                    budget -= 1
                    if budget < 0:
                        raise RewriteDidNotConverge(
                            f"rewriting did not settle within one sweep over {len(ops)} ops; "
                            f"last op visited: {op.name} at {op.loc}"
                        )
            finally:
                self.remove_erased_ops()
            if not self.changed:
                return iteration > 0
        raise RewriteDidNotConverge(
            f"rewriting still changed the IR after {max_iterations} sweeps; "
            "some patterns undo each other or report changes they did not make"
        )


def apply_patterns_greedily(
    root: Operation,
    patterns: Iterable[RewritePattern] = (),
    *,
    fold: bool = True,
    max_iterations: int = 10,
    remark: RemarkSink | None = None,
    disabled: Iterable[str] = (),
) -> bool:
    """Fold, canonicalize and apply `patterns` to every op nested in `root` until nothing
    changes; erase pure ops whose results are unused along the way.

    `fold`: use op folders (and hoist/deduplicate constants). `max_iterations`: sweeps over
    the IR that may change it; one more must find nothing left to do, else
    `RewriteDidNotConverge` (a bug in some pattern or folder, never an endless loop). `remark(op, message)` receives a
    note for each constant produced by folding. `disabled`: names of patterns not to apply
    (a pass's option pinning one off). Returns whether the IR changed.
    """
    if max_iterations < 1:
        raise ValueError("max_iterations must be at least 1")
    driver = _GreedyDriver(list(patterns), fold, remark, frozenset(disabled))
    return driver.run(root, max_iterations)
