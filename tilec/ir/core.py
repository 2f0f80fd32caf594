"""The IR's data structures: values with use lists, operations, blocks and regions.

An operation kind is declared once, as a subclass of `Operation` whose class attributes are
its definition (as in xDSL):

    @register_op
    class AddFOp(Operation):
        name = "arith.addf"
        summary = "Elementwise floating-point addition."
        lhs = Operand(FLOAT_LIKE)
        rhs = Operand(FLOAT_LIKE)
        result = Result(FLOAT_LIKE)
        traits = (Pure, SameOperandsAndResultType)
        assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"

From that declaration follow the accessors (`op.lhs`), the builder (`AddFOp.make(lhs=a, rhs=b)`),
the structural verifier, and the custom text form (see `tilec.ir.assembly`). Every op also has
the generic text form `"arith.addf"(%a, %b) : (f32, f32) -> f32`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from tilec.diagnostics import UNKNOWN_LOC, Location, TileError
from tilec.ir.attributes import ArrayAttr, Attribute, IntegerAttr, to_attribute
from tilec.ir.types import Type

# ---------------------------------------------------------------------------------------------
# Values


class Value:
    """An SSA value. `uses` lists the operations that take it as an operand (once per use)."""

    __slots__ = ("name_hint", "type", "uses")

    def __init__(self, type: Type, name_hint: str | None = None):
        self.type = type
        self.uses: list[Operation] = []
        self.name_hint = name_hint

    @property
    def owner(self) -> Operation | Block:
        raise NotImplementedError

    def replace_all_uses_with(self, new: Value) -> None:
        if new is self:
            return
        for user in list(self.uses):
            operands = user.operands
            for i, v in enumerate(operands):
                if v is self:
                    user.set_operand(i, new)

    def replace_uses_if(self, new: Value, predicate: Callable[[Operation], bool]) -> None:
        for user in list(self.uses):
            if predicate(user):
                for i, v in enumerate(user.operands):
                    if v is self:
                        user.set_operand(i, new)

    @property
    def has_uses(self) -> bool:
        return bool(self.uses)


class OpResult(Value):
    __slots__ = ("index", "op")

    def __init__(self, type: Type, op: Operation, index: int):
        super().__init__(type)
        self.op = op
        self.index = index

    @property
    def owner(self) -> Operation:
        return self.op

    def __repr__(self) -> str:
        return f"<result #{self.index} of {self.op.name}: {self.type}>"


class BlockArgument(Value):
    __slots__ = ("block", "index")

    def __init__(self, type: Type, block: Block, index: int, name_hint: str | None = None):
        super().__init__(type, name_hint)
        self.block = block
        self.index = index

    @property
    def owner(self) -> Block:
        return self.block

    def __repr__(self) -> str:
        return f"<block argument #{self.index}: {self.type}>"


# ---------------------------------------------------------------------------------------------
# Declarations


class TypeConstraint:
    """A named predicate on types; `description` appears in verifier messages."""

    __slots__ = ("description", "predicate")

    def __init__(self, description: str, predicate: Callable[[Type], bool]):
        self.description = description
        self.predicate = predicate

    def __call__(self, t: Type) -> bool:
        return self.predicate(t)


ANY_TYPE = TypeConstraint("any type", lambda t: True)


class _Field:
    """Base of declared op fields; `name` and `index` are filled in when the op class is made."""

    name: str = ""
    index: int = 0


class Operand(_Field):
    """A declared operand. `variadic`: zero or more; `optional`: zero or one."""

    def __init__(
        self,
        constraint: TypeConstraint = ANY_TYPE,
        *,
        variadic: bool = False,
        optional: bool = False,
    ):
        self.constraint = constraint
        self.variadic = variadic
        self.optional = optional

    @property
    def single(self) -> bool:
        return not (self.variadic or self.optional)

    def __get__(self, op: Operation | None, owner: type) -> Any:
        if op is None:
            return self
        if owner.single_operands:  # every operand one value: its index is its place
            return op.operands[self.index]
        start, size = op._operand_range(self.index)
        if self.variadic:
            return op.operands[start : start + size]
        if self.optional:
            return op.operands[start] if size else None
        return op.operands[start]


class Result(_Field):
    def __init__(self, constraint: TypeConstraint = ANY_TYPE, *, variadic: bool = False):
        self.constraint = constraint
        self.variadic = variadic

    def __get__(self, op: Operation | None, owner: type) -> Any:
        if op is None:
            return self
        if not owner.has_variadic_result:  # every result one value: its index is its place
            return op.results[self.index]
        defs = type(op).result_defs
        n_variadic = len(op.results) - (len(defs) - 1)
        start = sum(n_variadic if d.variadic else 1 for d in defs[: self.index])
        if self.variadic:
            return op.results[start : start + n_variadic]
        return op.results[start]


class Attr(_Field):
    """A declared attribute.

    `kind`: the attribute class(es) accepted. `choices`: allowed plain values (an enum).
    `optional`: may be absent (accessor gives `default`).
    """

    def __init__(
        self,
        kind: type[Attribute] | tuple[type[Attribute], ...],
        *,
        optional: bool = False,
        default: Any = None,
        choices: tuple[Any, ...] | None = None,
        doc: str = "",
    ):
        self.kind = kind
        self.optional = optional or default is not None
        self.default = default
        self.choices = choices
        self.doc = doc

    def __get__(self, op: Operation | None, owner: type) -> Any:
        if op is None:
            return self
        attr = op.attributes.get(self.name)
        return self.default if attr is None else attr.value

    def __set__(self, op: Operation, value: Any) -> None:
        if value is None:
            op.attributes.pop(self.name, None)
        else:
            op.attributes[self.name] = to_attribute(value)


class RegionDef(_Field):
    def __init__(self, *, may_be_empty: bool = False):
        self.may_be_empty = may_be_empty

    def __get__(self, op: Operation | None, owner: type) -> Any:
        if op is None:
            return self
        return op.regions[self.index]


class Trait:
    """Marker for a property an op has. `verify(op)` may check it (raise `VerifyError`)."""

    @classmethod
    def verify(cls, op: Operation) -> None:
        pass


class Pure(Trait):
    """No side effects: unused results may be removed, and equal ops merged by CSE."""


class Terminator(Trait):
    """Must be the last op of its block."""


class IsolatedFromAbove(Trait):
    """Its regions see no values from outside (a kernel function); names restart inside."""


class Commutative(Trait):
    """Operands may be swapped (canonicalize puts constants on the right)."""


class ConstantLike(Trait):
    """Materializes a constant; its `value` attribute is the constant."""


class SameOperandsAndResultType(Trait):
    @classmethod
    def verify(cls, op: Operation) -> None:
        types = {v.type for v in op.operands} | {r.type for r in op.results}
        if len(types) > 1:
            raise op.error(
                "requires the same type for all operands and results, got "
                + ", ".join(sorted(str(t) for t in types))
            )


class SameOperandsShape(Trait):
    """All operands have the same shape (scalars count as shape ())."""


class VerifyError(TileError):
    """A verifier failure: names the op, its location and what is wrong."""


OP_REGISTRY: dict[str, type[Operation]] = {}


def register_op(cls: type[Operation]) -> type[Operation]:
    """Class decorator: make an op kind known to the parser and to `tilec.ir.op_class`."""
    if cls.name in OP_REGISTRY and OP_REGISTRY[cls.name] is not cls:
        raise ValueError(f"operation '{cls.name}' is declared twice")
    OP_REGISTRY[cls.name] = cls
    return cls


def op_class(name: str) -> type[Operation] | None:
    return OP_REGISTRY.get(name)


# ---------------------------------------------------------------------------------------------
# Operations

SEGMENTS_ATTR = "operand_segments"


class Operation:
    """An operation: operands, results, attributes, regions and a source location."""

    __slots__ = ("__weakref__", "attributes", "loc", "operands", "parent", "regions", "results")

    # -- the declaration, filled in by subclasses -----------------------------------------
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    traits: ClassVar[tuple[type[Trait], ...]] = ()
    assembly_format: ClassVar[str | None] = None
    # -- derived from the declaration by __init_subclass__ --------------------------------
    operand_defs: ClassVar[tuple[Operand, ...]] = ()
    result_defs: ClassVar[tuple[Result, ...]] = ()
    attr_defs: ClassVar[tuple[Attr, ...]] = ()
    region_defs: ClassVar[tuple[RegionDef, ...]] = ()
    needs_segments: ClassVar[bool] = False
    single_operands: ClassVar[bool] = True  # no variadic or optional operand
    has_variadic_result: ClassVar[bool] = False
    variadic_result_index: ClassVar[int] = -1
    _trait_set: ClassVar[frozenset[type[Trait]]] = frozenset()
    _format: ClassVar[Any] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared: dict[str, _Field] = {}
        for base in reversed(cls.__mro__):
            for key, value in vars(base).items():
                if isinstance(value, _Field):
                    value.name = key
                    declared.pop(key, None)
                    declared[key] = value
        fields = list(declared.values())
        operands = [f for f in fields if isinstance(f, Operand)]
        results = [f for f in fields if isinstance(f, Result)]
        attrs = [f for f in fields if isinstance(f, Attr)]
        regions = [f for f in fields if isinstance(f, RegionDef)]
        for group in (operands, results, regions):
            for i, f in enumerate(group):
                f.index = i
        cls.operand_defs = tuple(operands)
        cls.result_defs = tuple(results)
        cls.attr_defs = tuple(attrs)
        cls.region_defs = tuple(regions)
        cls.needs_segments = sum(not d.single for d in cls.operand_defs) > 1
        cls.single_operands = all(d.single for d in cls.operand_defs)
        variadic_results = [r.index for r in cls.result_defs if r.variadic]
        if len(variadic_results) > 1:
            raise TypeError(f"{cls.name}: at most one variadic result group is supported")
        cls.has_variadic_result = bool(variadic_results)
        cls.variadic_result_index = variadic_results[0] if variadic_results else -1
        cls._trait_set = frozenset(cls.traits)
        cls._format = None  # compiled lazily by tilec.ir.assembly

    def __init__(
        self,
        operands: Sequence[Value] = (),
        result_types: Sequence[Type] = (),
        attributes: dict[str, Attribute] | None = None,
        regions: Sequence[Region] = (),
        loc: Location = UNKNOWN_LOC,
    ):
        self.operands: list[Value] = list(operands)
        for v in self.operands:
            v.uses.append(self)
        self.results: list[OpResult] = [OpResult(t, self, i) for i, t in enumerate(result_types)]
        self.attributes: dict[str, Attribute] = dict(attributes) if attributes else {}
        self.regions: list[Region] = []
        for r in regions:
            self.add_region(r)
        self.loc = loc
        self.parent: Block | None = None

    # -- building -------------------------------------------------------------------------

    @classmethod
    def make(
        cls,
        *,
        loc: Location = UNKNOWN_LOC,
        result_types: Sequence[Type] | None = None,
        **fields: Any,
    ) -> Operation:
        """Build an op from its declared field names.

        Operand fields take a `Value` (a sequence for variadic ones, `None` for an absent
        optional one), attribute fields take plain values or attributes, region fields a
        `Region` (default: a new region with one empty block, or none when `may_be_empty`).
        Result types are inferred by `infer_result_types` when not given.
        """
        operands: list[Value] = []
        segments: list[int] = []
        for d in cls.operand_defs:
            v = fields.pop(d.name, None)
            if d.variadic:
                group = list(v or ())
            elif d.optional:
                group = [] if v is None else [v]
            else:
                if v is None:
                    raise TypeError(f"{cls.name}: operand '{d.name}' is required")
                group = [v]
            operands.extend(group)
            segments.append(len(group))
        attributes: dict[str, Attribute] = {}
        for d in cls.attr_defs:
            v = fields.pop(d.name, None)
            if v is not None:
                attributes[d.name] = to_attribute(v)
        if cls.needs_segments:
            attributes[SEGMENTS_ATTR] = ArrayAttr(tuple(IntegerAttr(s) for s in segments))
        regions: list[Region] = []
        for d in cls.region_defs:
            r = fields.pop(d.name, None)
            if r is None:
                r = Region() if d.may_be_empty else Region([Block()])
            regions.append(r)
        if fields:
            raise TypeError(f"{cls.name}: unknown fields {sorted(fields)}")
        if result_types is None:
            result_types = cls.infer_result_types(operands, attributes)
        return cls(operands, result_types, attributes, regions, loc)

    @classmethod
    def infer_result_types(
        cls, operands: list[Value], attributes: dict[str, Attribute]
    ) -> list[Type]:
        """Result types from operands and attributes; ops whose results can be inferred
        override this. The default handles `SameOperandsAndResultType`."""
        if SameOperandsAndResultType in cls._trait_set and operands:
            return [operands[0].type] * len(cls.result_defs)
        if not cls.result_defs:
            return []
        raise TypeError(f"{cls.name}: result types cannot be inferred; pass result_types")

    # -- structure ------------------------------------------------------------------------

    def has_trait(self, trait: type[Trait]) -> bool:
        return trait in self._trait_set

    @property
    def result(self) -> OpResult:
        """The single result (error if the op has not exactly one)."""
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results, not 1")
        return self.results[0]

    def _operand_range(self, index: int) -> tuple[int, int]:
        defs = self.operand_defs
        if self.needs_segments:
            segs = self.attributes[SEGMENTS_ATTR].value  # type: ignore[union-attr]
            return sum(segs[:index]), segs[index]
        n_non_single = len(self.operands) - (len(defs) - 1)
        start = 0
        for d in defs[:index]:
            start += 1 if d.single else n_non_single
        return start, (1 if defs[index].single else n_non_single)

    def operand_groups(self) -> list[list[Value]]:
        """Operands split by declared operand field."""
        return [
            self.operands[s : s + n]
            for s, n in (self._operand_range(i) for i in range(len(self.operand_defs)))
        ]

    def set_operand(self, index: int, value: Value) -> None:
        old = self.operands[index]
        old.uses.remove(self)
        self.operands[index] = value
        value.uses.append(self)

    def set_operands(self, values: Sequence[Value]) -> None:
        for v in self.operands:
            v.uses.remove(self)
        self.operands = list(values)
        for v in self.operands:
            v.uses.append(self)

    def add_region(self, region: Region) -> Region:
        assert region.parent is None, "region already belongs to an op"
        region.parent = self
        self.regions.append(region)
        return region

    @property
    def parent_op(self) -> Operation | None:
        return self.parent.parent_op if self.parent is not None else None

    @property
    def block(self) -> Block | None:
        return self.parent

    def walk(self, *, post_order: bool = False) -> Iterator[Operation]:
        """This op and every op nested in it (pre-order by default)."""
        if not post_order:
            yield self
        for region in self.regions:
            for block in region.blocks:
                for op in list(block.ops):
                    yield from op.walk(post_order=post_order)
        if post_order:
            yield self

    def is_ancestor_of(self, other: Operation) -> bool:
        op: Operation | None = other
        while op is not None:
            if op is self:
                return True
            op = op.parent_op
        return False

    # -- rewriting ------------------------------------------------------------------------

    def detach(self) -> Operation:
        """Remove from its block without dropping operand uses (to move it elsewhere)."""
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None
        return self

    def drop_all_references(self) -> None:
        """Drop this op's (and nested ops') uses of operands."""
        for op in self.walk():
            for v in op.operands:
                v.uses.remove(op)
            op.operands = []

    def erase(self) -> None:
        """Remove this op and everything nested in it. Its results must be unused."""
        for r in self.results:
            if r.uses:
                raise ValueError(f"cannot erase {self.name}: result #{r.index} still has uses")
        self.detach()
        self.drop_all_references()

    def replace_with(self, values: Sequence[Value]) -> None:
        """Replace all uses of the results with `values`, then erase this op."""
        if len(values) != len(self.results):
            raise ValueError(f"{self.name}: {len(values)} values for {len(self.results)} results")
        for r, v in zip(self.results, values):
            r.replace_all_uses_with(v)
        self.erase()

    def move_before(self, other: Operation) -> None:
        self.detach()
        block = other.parent
        assert block is not None
        block.insert(block.ops.index(other), self)

    def move_after(self, other: Operation) -> None:
        self.detach()
        block = other.parent
        assert block is not None
        block.insert(block.ops.index(other) + 1, self)

    def clone(self, mapping: dict[Value, Value] | None = None) -> Operation:
        """Deep copy; operands found in `mapping` are remapped, and `mapping` is extended with
        the clone's results and nested block arguments."""
        mapping = {} if mapping is None else mapping
        new = type(self)(
            [mapping.get(v, v) for v in self.operands],
            [r.type for r in self.results],
            dict(self.attributes),
            [r.clone(mapping) for r in self.regions],
            self.loc,
        )
        for old_r, new_r in zip(self.results, new.results):
            new_r.name_hint = old_r.name_hint
            mapping[old_r] = new_r
        return new

    # -- verification ---------------------------------------------------------------------

    def error(self, message: str, *, hint: str | None = None) -> VerifyError:
        """A `VerifyError` about this op, located at it."""
        return VerifyError(f"'{self.name}' op {message}", self.loc, hint=hint)

    def verify_(self) -> None:
        """Op-specific checks beyond the declaration; raise `self.error(...)`."""

    def fold(self) -> list[Attribute | Value] | None:
        """Constant-fold: a constant attribute or an existing value per result, or None."""
        return None

    # Rewrite patterns that `canonicalize` applies to ops of this kind.
    canonicalization_patterns: ClassVar[tuple[Any, ...]] = ()

    def __repr__(self) -> str:
        from tilec.ir.printer import print_op

        return print_op(self)

    def __str__(self) -> str:
        from tilec.ir.printer import print_op

        return print_op(self)


class UnregisteredOp(Operation):
    """Never instantiated: the parser rejects unknown op names. Exists for typing only."""


# ---------------------------------------------------------------------------------------------
# Blocks and regions


class Block:
    """A list of operations with typed arguments. In tilec every region has a single block
    (structured control flow); the data structure allows more."""

    __slots__ = ("args", "ops", "parent")

    def __init__(self, arg_types: Sequence[Type] = (), ops: Sequence[Operation] = ()):
        if any(isinstance(t, Operation) for t in arg_types):
            # `Block([op])` would silently make an argument typed by the op.
            raise TypeError("Block's first parameter is argument types; pass ops=[...]")
        self.args: list[BlockArgument] = [
            BlockArgument(t, self, i) for i, t in enumerate(arg_types)
        ]
        self.ops: list[Operation] = []
        self.parent: Region | None = None
        for op in ops:
            self.append(op)

    def add_arg(self, type: Type, name_hint: str | None = None) -> BlockArgument:
        arg = BlockArgument(type, self, len(self.args), name_hint)
        self.args.append(arg)
        return arg

    def erase_arg(self, index: int) -> None:
        arg = self.args[index]
        if arg.uses:
            raise ValueError("cannot erase a block argument that still has uses")
        del self.args[index]
        for i, a in enumerate(self.args):
            a.index = i

    def append(self, op: Operation) -> Operation:
        assert op.parent is None, f"{op.name} is already in a block"
        op.parent = self
        self.ops.append(op)
        return op

    def insert(self, index: int, op: Operation) -> Operation:
        assert op.parent is None, f"{op.name} is already in a block"
        op.parent = self
        self.ops.insert(index, op)
        return op

    @property
    def terminator(self) -> Operation | None:
        if self.ops and self.ops[-1].has_trait(Terminator):
            return self.ops[-1]
        return None

    @property
    def parent_op(self) -> Operation | None:
        return self.parent.parent if self.parent is not None else None

    def __iter__(self) -> Iterator[Operation]:
        return iter(self.ops)


class Region:
    __slots__ = ("blocks", "parent")

    def __init__(self, blocks: Sequence[Block] = ()):
        self.blocks: list[Block] = []
        self.parent: Operation | None = None
        for b in blocks:
            self.add_block(b)

    def add_block(self, block: Block) -> Block:
        assert block.parent is None
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def block(self) -> Block:
        """The single block of this region."""
        if len(self.blocks) != 1:
            raise ValueError(f"region has {len(self.blocks)} blocks, not 1")
        return self.blocks[0]

    @property
    def empty(self) -> bool:
        return not self.blocks

    def clone(self, mapping: dict[Value, Value]) -> Region:
        new = Region()
        for block in self.blocks:
            nb = Block()
            for a in block.args:
                mapping[a] = nb.add_arg(a.type, a.name_hint)
            new.add_block(nb)
        for block, nb in zip(self.blocks, new.blocks):
            for op in block.ops:
                nb.append(op.clone(mapping))
        return new

    def walk(self) -> Iterator[Operation]:
        for block in self.blocks:
            for op in list(block.ops):
                yield from op.walk()
