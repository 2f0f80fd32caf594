"""The IR printer: text form of modules and ops, custom where declared, generic otherwise.

Value names come from `name_hint`s (so names written by a frontend or read from a file
survive), made unique within each kernel, else numbers `%0, %1, ...` in order of definition.
The printed form is canonical: printing what the parser read from printed text gives the same
text again.

`print_op_lines` also says which op each printed line belongs to (the op printed on it, or for
a closing brace or block label the op whose region it is; None for alias definitions): what
ties a stage's IR lines to source locations and remarks (`tilec.compiler.Stage`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from tilec.diagnostics import Location
from tilec.ir.attributes import Attribute, ParametricAttr, quote_string
from tilec.ir.core import (
    SEGMENTS_ATTR,
    Block,
    BlockArgument,
    IsolatedFromAbove,
    Operation,
    Region,
    Value,
)
from tilec.ir.types import Type

# Attribute names the parser reads unquoted (its identifier token): `tilec.num_warps` too.
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_NO_SPACE_BEFORE = frozenset({",", ")", "]", ">", "}"})
_NO_SPACE_AFTER = frozenset({"(", "[", "<", "{"})

RemarkLookup = Callable[[Operation], Sequence[str]]


class Printer:
    """Writes ops as text. Custom printers (`Operation.print_custom`) and the assembly-format
    printer write through `token`, `operand`, `type`, `attribute`, `region` and friends."""

    def __init__(
        self,
        *,
        print_locations: bool = False,
        generic: bool = False,
        remarks: RemarkLookup | None = None,
        track_lines: bool = False,
    ):
        self.print_locations = print_locations
        self.generic = generic
        self.remarks = remarks
        # With `track_lines`, per printed line the op it belongs to, and the ops being printed.
        self.line_ops: list[Operation | None] | None = [None] if track_lines else None
        self._open_ops: list[Operation] = []
        self._parts: list[str] = []
        self._indent = 0
        self._at_line_start = True
        self._last = "("
        self._names: dict[Value, str] = {}
        self._used: set[str] = set()
        self._next_number = 0
        self._block_labels: dict[Block, str] = {}
        # Parametric attributes (layouts) printed by alias: `#blocked1` for `#blocked<...>`.
        self._aliases: dict[Attribute, str] = {}

    # -- low level ------------------------------------------------------------------------

    def token(self, text: str) -> None:
        """Write one token, with a space before it unless punctuation says otherwise."""
        if (
            not self._at_line_start
            and text not in _NO_SPACE_BEFORE
            and self._last not in _NO_SPACE_AFTER
        ):
            self._parts.append(" ")
        self._parts.append(text)
        self._last = text
        self._at_line_start = False

    def raw(self, text: str) -> None:
        """Write text exactly as given (no spacing logic)."""
        self._parts.append(text)
        self._last = text[-1:] if text else self._last
        self._at_line_start = False

    def newline(self) -> None:
        self._parts.append("\n" + "  " * self._indent)
        self._at_line_start = True
        self._last = "("
        if self.line_ops is not None:
            self.line_ops.append(self._open_ops[-1] if self._open_ops else None)

    def text(self) -> str:
        return "".join(self._parts)

    # -- names ----------------------------------------------------------------------------

    def define(self, value: Value) -> str:
        """Give `value` its printed name (at its definition) and return it."""
        name = self._names.get(value)
        if name is not None:
            return name
        hint = value.name_hint
        if hint and not hint[0].isdigit():
            name = hint
            suffix = 1
            while name in self._used:
                name = f"{hint}_{suffix}"
                suffix += 1
        else:
            name = str(self._next_number)
            self._next_number += 1
        self._used.add(name)
        name = "%" + name
        self._names[value] = name
        return name

    def name_of(self, value: Value) -> str:
        name = self._names.get(value)
        if name is None:
            # A use before its definition was printed: only in malformed IR (or when
            # printing a lone op); give it a name that shows the problem.
            name = self.define(value)
            if not name[1:].isidentifier():
                name = "%<<undefined:" + name[1:] + ">>"
                self._names[value] = name
        return name

    # -- pieces ---------------------------------------------------------------------------

    def operand(self, value: Value) -> None:
        self.token(self.name_of(value))

    def operands(self, values: Iterable[Value]) -> None:
        for i, v in enumerate(values):
            if i:
                self.token(",")
            self.operand(v)

    def type(self, t: Type) -> None:
        layout = getattr(t, "layout", None)
        alias = self._aliases.get(layout) if layout is not None else None
        if alias is None:
            self.token(str(t))
        else:
            self.token(str(t)[: -len(str(layout)) - 1] + alias + ">")

    def types(self, ts: Iterable[Type]) -> None:
        for i, t in enumerate(ts):
            if i:
                self.token(",")
            self.type(t)

    def attribute(self, a: Attribute) -> None:
        self.token(self._aliases.get(a) or str(a))

    def define_aliases(self, root: Operation) -> None:
        """Write `#name = #mnemonic<...>` for every layout attribute in `root`'s types, and
        print those attributes by name from here on (long layouts would drown the IR)."""
        seen: dict[Attribute, None] = {}
        for op in root.walk():
            values = [*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)]
            for v in values:
                layout = getattr(v.type, "layout", None)
                if isinstance(layout, ParametricAttr):
                    seen.setdefault(layout, None)
            for a in op.attributes.values():
                if isinstance(a, ParametricAttr):
                    seen.setdefault(a, None)
        counts: dict[str, int] = {}
        for attr in seen:
            mnemonic = attr.mnemonic  # type: ignore[attr-defined]
            n = counts.get(mnemonic, 0)
            counts[mnemonic] = n + 1
            alias = f"#{mnemonic}" + (str(n) if n else "")
            self.raw(f"{alias} = {attr}")
            self.newline()
            self._aliases[attr] = alias

    def attr_dict(
        self, attributes: dict[str, Attribute], elided: Iterable[str] = (), *, keyword: bool = False
    ) -> None:
        """`{name = value, ...}` of the attributes not printed elsewhere (nothing if none)."""
        skip = set(elided)
        items = [(k, v) for k, v in attributes.items() if k not in skip]
        if not items:
            return
        if keyword:
            self.token("attributes")
        self.token("{")
        for i, (k, v) in enumerate(items):
            if i:
                self.token(",")
            key = k if _BARE_KEY.fullmatch(k) else quote_string(k)
            from tilec.ir.attributes import UnitAttr

            if isinstance(v, UnitAttr):
                self.token(key)
            else:
                self.token(key)
                self.token("=")
                self.attribute(v)
        self.token("}")

    def block_args(self, block: Block) -> None:
        """`(%a: t, %b: u)`: defines the block's arguments."""
        self.raw("(")
        for i, arg in enumerate(block.args):
            if i:
                self.token(",")
            self.token(self.define(arg))
            self.raw(":")
            self.type(arg.type)
        self.token(")")

    def region(self, region: Region, *, print_entry_args: bool = True) -> None:
        """`{ ops }`. Entry block arguments are printed as `^bb0(...)` unless the op's custom
        form has already defined them (`print_entry_args=False`)."""
        self.token("{")
        self._last = "}"  # the region's first line starts fresh
        self._indent += 1
        for index, block in enumerate(region.blocks):
            show_label = index > 0 or (print_entry_args and block.args)
            if show_label:
                self._indent -= 1
                self.newline()
                self.raw(self._label(block))
                if block.args:
                    self.block_args(block)
                self.raw(":")
                self._indent += 1
            for op in block.ops:
                self.newline()
                self.op(op)
        self._indent -= 1
        self.newline()
        self.raw("}")
        self._last = "}"

    def _label(self, block: Block) -> str:
        label = self._block_labels.get(block)
        if label is None:
            label = f"^bb{len(self._block_labels)}"
            self._block_labels[block] = label
        return label

    def location(self, loc: Location) -> None:
        if loc.known:
            self.token(f"loc({quote_string(loc.file)}:{loc.line}:{loc.col})")
        else:
            self.token("loc(unknown)")

    # -- ops ------------------------------------------------------------------------------

    def op(self, op: Operation) -> None:
        line_ops = self.line_ops
        if line_ops is not None:
            if self._at_line_start:
                line_ops[-1] = op
            self._open_ops.append(op)
        if self.remarks is not None:
            for remark in self.remarks(op):
                self.raw("// " + remark)
                self.newline()
        isolated = op.has_trait(IsolatedFromAbove)
        if isolated:
            saved = (self._used, self._next_number)
            self._used, self._next_number = set(), 0
        if op.results:
            for i, r in enumerate(op.results):
                if i:
                    self.token(",")
                self.token(self.define(r))
            self.token("=")
        cls = type(op)
        if not self.generic and "print_custom" in _custom_printers(cls):
            self.token(_short_name(op.name))
            op.print_custom(self)  # type: ignore[attr-defined]
        elif not self.generic and cls.assembly_format is not None:
            from tilec.ir.assembly import print_with_format

            self.token(_short_name(op.name))
            print_with_format(op, self)
        else:
            self._generic_op(op)
        if self.print_locations:
            self.location(op.loc)
        if isolated:
            self._used, self._next_number = saved
        if line_ops is not None:
            self._open_ops.pop()

    def _generic_op(self, op: Operation) -> None:
        self.token(quote_string(op.name))
        self.raw("(")
        self._last = "("
        self.operands(op.operands)
        self.token(")")
        if op.regions:
            self.token("(")
            for i, r in enumerate(op.regions):
                if i:
                    self.token(",")
                self.region(r)
            self.token(")")
        self.attr_dict(op.attributes)
        self.token(":")
        self.token("(")
        self.types(v.type for v in op.operands)
        self.token(")")
        self.token("->")
        if len(op.results) == 1:
            self.type(op.results[0].type)
        else:
            self.token("(")
            self.types(r.type for r in op.results)
            self.token(")")


def _short_name(name: str) -> str:
    return name[len("builtin.") :] if name.startswith("builtin.") else name


_custom_cache: dict[type, frozenset[str]] = {}


def _custom_printers(cls: type) -> frozenset[str]:
    found = _custom_cache.get(cls)
    if found is None:
        found = frozenset(n for n in ("print_custom",) if getattr(cls, n, None) is not None)
        _custom_cache[cls] = found
    return found


def print_op(
    op: Operation,
    *,
    print_locations: bool = False,
    generic: bool = False,
    remarks: RemarkLookup | None = None,
    local_scope: bool = False,
) -> str:
    """Text of `op` (a module prints as the whole file), ending in a newline for modules.

    A top-level op defines aliases for its layout attributes first (`#blocked1 = ...`) and
    uses them; `local_scope` prints every attribute in full where it is used instead."""
    return _print(op, print_locations, generic, remarks, local_scope, False)[0]


def print_op_lines(
    op: Operation,
    *,
    print_locations: bool = False,
    generic: bool = False,
    remarks: RemarkLookup | None = None,
    local_scope: bool = False,
) -> tuple[str, tuple[Operation | None, ...]]:
    """`print_op`'s text, and per line of it (`text.splitlines()`) the op the line belongs
    to: the op printed on it (also its remark comments), else the innermost op whose region
    the line is in (a closing brace, a block label); None for `#alias = ...` lines."""
    text, line_ops = _print(op, print_locations, generic, remarks, local_scope, True)
    assert line_ops is not None
    return text, tuple(line_ops)


def _print(
    op: Operation,
    print_locations: bool,
    generic: bool,
    remarks: RemarkLookup | None,
    local_scope: bool,
    track_lines: bool,
) -> tuple[str, list[Operation | None] | None]:
    p = Printer(
        print_locations=print_locations,
        generic=generic,
        remarks=remarks,
        track_lines=track_lines,
    )
    if op.parent is None and op.regions and not local_scope:
        p.define_aliases(op)
    p.op(op)
    text = p.text()
    return (text + "\n" if op.regions else text), p.line_ops


def value_names(op: Operation) -> dict[Value, str]:
    """The name each value in `op` gets when printed (for messages that mention values)."""
    p = Printer()
    p.op(op)
    return dict(p._names)


__all__ = [
    "SEGMENTS_ATTR",
    "BlockArgument",
    "Printer",
    "print_op",
    "print_op_lines",
    "value_names",
]
