"""Declarative assembly formats: one string per op gives both its printer and its parser.

The format language (a small subset of MLIR's):

    $name          an operand (a comma list if variadic), attribute or region of the op
    type($name)    the type(s) of an operand or result
    attr-dict      the attributes not printed elsewhere, as `{k = v}` (omitted when none)
    `lit`          a literal keyword or punctuation: `,` `:` `->` `[` `]` `(` `)` `to` ...
                   (`[` is printed without a space before it, as a subscript)
    ( ... )?       an optional group, printed when its first `$name` is present (an optional
                   operand given, a variadic operand non-empty, an attribute set); parsed when
                   its first element (a literal or an operand) is next in the input

Operand types need not be written: values are defined before use, so the parser knows them.
When `type($operand)` is written, the parser checks it. Result types not in the format come
from the op's `infer_result_types`. An enum attribute (declared with `choices`) prints as a
bare word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tilec.ir.attributes import ArrayAttr, Attribute, IntegerAttr, StringAttr
from tilec.ir.core import SEGMENTS_ATTR, Attr, Operand, Operation, RegionDef, Result
from tilec.ir.types import Type


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class FieldRef:
    field: Operand | Attr | RegionDef


@dataclass(frozen=True)
class TypeRef:
    field: Operand | Result


@dataclass(frozen=True)
class AttrDict:
    pass


@dataclass(frozen=True)
class OptionalGroup:
    elements: tuple
    anchor: Operand | Attr


_FORMAT_TOKEN = re.compile(r"\s*(?:`([^`]*)`|\$(\w+)|type\(\$(\w+)\)|(attr-dict)|(\()|(\)\?))")


def compile_format(cls: type[Operation]) -> tuple:
    """Parse `cls.assembly_format` into elements (cached on the class)."""
    cached = cls.__dict__.get("_format")
    if cached is not None:
        return cached
    fmt = cls.assembly_format or ""
    fields = {
        f.name: f for f in (*cls.operand_defs, *cls.result_defs, *cls.attr_defs, *cls.region_defs)
    }
    stack: list[list] = [[]]
    pos = 0
    while pos < len(fmt):
        if fmt[pos:].strip() == "":
            break
        m = _FORMAT_TOKEN.match(fmt, pos)
        if m is None:
            raise TypeError(f"{cls.name}: bad assembly format near {fmt[pos:]!r}")
        pos = m.end()
        literal, ref, type_ref, attr_dict, open_group, close_group = m.groups()
        if literal is not None:
            stack[-1].append(Literal(literal))
        elif ref is not None:
            field = fields.get(ref)
            if field is None or isinstance(field, Result):
                raise TypeError(f"{cls.name}: assembly format names unknown field ${ref}")
            stack[-1].append(FieldRef(field))
        elif type_ref is not None:
            field = fields.get(type_ref)
            if not isinstance(field, (Operand, Result)):
                raise TypeError(f"{cls.name}: type(${type_ref}) needs an operand or result")
            stack[-1].append(TypeRef(field))
        elif attr_dict:
            stack[-1].append(AttrDict())
        elif open_group:
            stack.append([])
        elif close_group:
            group = stack.pop()
            anchor = next(
                (
                    e.field
                    for e in group
                    if isinstance(e, FieldRef) and isinstance(e.field, (Operand, Attr))
                ),
                None,
            )
            if anchor is None:
                raise TypeError(f"{cls.name}: optional group without an operand or attribute")
            stack[-1].append(OptionalGroup(tuple(group), anchor))
    if len(stack) != 1:
        raise TypeError(f"{cls.name}: unclosed optional group in assembly format")
    cls._format = tuple(stack[0])
    return cls._format


def _printed_attrs(elements: tuple, out: set[str]) -> set[str]:
    for e in elements:
        if isinstance(e, FieldRef) and isinstance(e.field, Attr):
            out.add(e.field.name)
        elif isinstance(e, OptionalGroup):
            _printed_attrs(e.elements, out)
    return out


# ---------------------------------------------------------------------------------------------
# Printing


def print_with_format(op: Operation, p) -> None:  # p: tilec.ir.printer.Printer
    elements = compile_format(type(op))
    _print_elements(op, elements, p)


def _present(op: Operation, anchor: Operand | Attr) -> bool:
    if isinstance(anchor, Attr):
        return anchor.name in op.attributes
    value = anchor.__get__(op, type(op))
    return bool(value) if anchor.variadic else value is not None


def _print_elements(op: Operation, elements: tuple, p) -> None:
    for e in elements:
        if isinstance(e, Literal):
            if e.text == "[":
                p.raw("[")  # a subscript attaches to what it indexes: `%view[%i, %j]`
            else:
                p.token(e.text)
        elif isinstance(e, FieldRef):
            f = e.field
            if isinstance(f, Operand):
                value = f.__get__(op, type(op))
                if f.variadic:
                    p.operands(value)
                elif value is not None:
                    p.operand(value)
            elif isinstance(f, Attr):
                attr = op.attributes.get(f.name)
                if attr is not None:
                    if f.choices is not None and isinstance(attr, StringAttr):
                        p.token(attr.value)
                    else:
                        p.attribute(attr)
            else:
                p.region(op.regions[f.index])
        elif isinstance(e, TypeRef):
            f = e.field
            value = f.__get__(op, type(op))
            if isinstance(value, list):
                p.types(v.type for v in value)
            elif value is not None:
                p.type(value.type)
        elif isinstance(e, AttrDict):
            elided = _printed_attrs(compile_format(type(op)), {SEGMENTS_ATTR})
            p.attr_dict(op.attributes, elided)
        elif isinstance(e, OptionalGroup) and _present(op, e.anchor):
            _print_elements(op, e.elements, p)


# ---------------------------------------------------------------------------------------------
# Parsing


class _State:
    def __init__(self, cls: type[Operation]):
        self.operands: dict[str, list] = {d.name: [] for d in cls.operand_defs}
        self.attributes: dict[str, Attribute] = {}
        self.regions: dict[str, object] = {}
        self.result_types: dict[str, list[Type]] = {}


def parse_with_format(cls: type[Operation], p) -> Operation:  # p: tilec.ir.parser.Parser
    elements = compile_format(cls)
    state = _State(cls)
    _parse_elements(cls, elements, p, state)
    operands = []
    segments = []
    for d in cls.operand_defs:
        group = state.operands[d.name]
        operands.extend(group)
        segments.append(len(group))
    attributes = state.attributes
    if cls.needs_segments:
        attributes[SEGMENTS_ATTR] = ArrayAttr(tuple(IntegerAttr(s) for s in segments))
    regions = [state.regions[d.name] for d in cls.region_defs]
    if all(r.name in state.result_types for r in cls.result_defs):
        result_types = [t for r in cls.result_defs for t in state.result_types[r.name]]
    else:
        try:
            result_types = cls.infer_result_types(operands, attributes)
        except (TypeError, ValueError, IndexError) as e:
            raise p.error(f"cannot infer the result type of '{cls.name}': {e}") from None
    return cls(operands, result_types, attributes, regions)


def _starts(element, p) -> bool:
    """Whether the input continues with `element` (for optional groups)."""
    if isinstance(element, Literal):
        return p.peek(element.text)
    if isinstance(element, FieldRef) and isinstance(element.field, Operand):
        return p.peek_kind("value")
    raise TypeError("an optional group must start with a literal or an operand")


def _parse_elements(cls: type[Operation], elements: tuple, p, state: _State) -> None:
    for e in elements:
        if isinstance(e, Literal):
            p.expect(e.text)
        elif isinstance(e, FieldRef):
            f = e.field
            if isinstance(f, Operand):
                if f.variadic:
                    state.operands[f.name] = p.parse_operands()
                else:
                    state.operands[f.name] = [p.parse_operand()]
            elif isinstance(f, Attr):
                at = p.pos
                if f.choices is not None and p.peek_kind("ident"):
                    attr: Attribute = StringAttr(p.take("ident", "a keyword"))
                else:
                    attr = p.parse_attribute()
                if f.choices is not None and attr.value not in f.choices:
                    raise p.error(
                        f"'{cls.name}' {f.name} must be one of {', '.join(map(str, f.choices))}",
                        at=at,
                    )
                state.attributes[f.name] = attr
            else:
                state.regions[f.name] = p.parse_region()
        elif isinstance(e, TypeRef):
            f = e.field
            at = p.pos
            if isinstance(f, Result):
                state.result_types[f.name] = p.parse_types() if f.variadic else [p.parse_type()]
            else:
                values = state.operands[f.name]
                types = (
                    p.parse_types()
                    if f.variadic and values
                    else []
                    if f.variadic
                    else [p.parse_type()]
                )
                if len(types) != len(values) or any(v.type != t for v, t in zip(values, types)):
                    got = ", ".join(str(v.type) for v in values)
                    raise p.error(
                        f"type of '{f.name}' is written as {', '.join(map(str, types))}, "
                        f"but the value has type {got}",
                        at=at,
                    )
        elif isinstance(e, AttrDict):
            for key, value in p.parse_attr_dict().items():
                if key in state.attributes:
                    raise p.error(f"attribute '{key}' is given twice")
                state.attributes[key] = value
        elif isinstance(e, OptionalGroup) and _starts(e.elements[0], p):
            _parse_elements(cls, e.elements, p, state)
