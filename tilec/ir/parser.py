"""The IR parser: reads the text form written by `tilec.ir.printer` (custom and generic forms).

Values must be defined before they are used (tilec has structured control flow only), so an
operand's type is always known from its definition and custom forms need not repeat it.
Errors are `TileError`s located at the offending token. An op without `loc(...)` is located at
its own position in the text being parsed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import TypeVar

from tilec.diagnostics import Location, SourceFile, TileError, register_source
from tilec.ir import attributes as A
from tilec.ir import types as T
from tilec.ir.core import (
    OP_REGISTRY,
    SEGMENTS_ATTR,
    Block,
    IsolatedFromAbove,
    Operation,
    Region,
    Value,
)

# Alternatives are ordered by how often they occur in IR text (the lexer is on every
# compile's path); identifiers cannot start with a digit or '-', so numbers are unambiguous.
_TOKEN_RE = re.compile(
    r"""
    (?P<skip>(?:[ \t\r\n]+|//[^\n]*)+)
  | (?P<value>%[A-Za-z0-9_$.\-]+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<shape><[ \t]*(?:(?:\d+|\?|[A-Z][A-Z0-9_]*)x)+)
  | (?P<arrow>->)
  | (?P<float>-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)|-inf\b)
  | (?P<int>-?(?:0x[0-9a-fA-F]+|\d+))
  | (?P<punct>[(){}\[\]<>,:=?*+\-])
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<symbol>@[A-Za-z_][A-Za-z0-9_$.\-]*|@"(?:[^"\\\n]|\\.)*")
  | (?P<hash>\#[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<bang>![A-Za-z_][A-Za-z0-9_.]*)
  | (?P<block>\^[A-Za-z0-9_$.\-]+)
  | (?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
)

_SHAPE_DIM_RE = re.compile(r"(\d+|\?|[A-Z][A-Z0-9_]*)x")

_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def unquote(text: str) -> str:
    body = text[1:-1]
    if "\\" not in body:
        return body
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


R = TypeVar("R")


class Parser:
    """Recursive-descent parser over a token list. Custom op parsers (`parse_custom`) and the
    assembly-format parser use the `parse_*` / `expect` / `optional` methods."""

    def __init__(self, text: str, filename: str = "<input>", line_offset: int = 0):
        self.source = SourceFile(filename, text)
        self.filename = filename
        self.line_offset = line_offset
        register_source(filename, text, line_offset)
        self.tokens = self._lex(text)
        self.pos = 0
        # Visible names: one dict per region scope; isolated ops start a fresh stack.
        self._scopes: list[dict[str, Value]] = [{}]
        self.aliases: dict[str, A.Attribute] = {}  # `#blocked1 = #blocked<...>` definitions

    # -- tokens ---------------------------------------------------------------------------

    def _lex(self, text: str) -> list[tuple[str, str, int]]:
        tokens = []
        append = tokens.append
        for m in _TOKEN_RE.finditer(text):
            kind = m.lastgroup
            if kind == "skip":
                continue
            if kind == "bad":
                raise TileError(f"unexpected character {m.group()!r}", self.loc_at(m.start()))
            append((kind, m.group(), m.start()))
        append(("eof", "", len(text)))
        return tokens

    def loc_at(self, offset: int) -> Location:
        return self.source.location(offset, self.line_offset)

    @property
    def current(self) -> tuple[str, str, int]:
        return self.tokens[self.pos]

    def here(self) -> Location:
        return self.loc_at(self.tokens[self.pos][2])

    def error(self, message: str, *, hint: str | None = None, at: int | None = None) -> TileError:
        """An error located at the current token (or at token index `at`)."""
        offset = self.tokens[self.pos if at is None else at][2]
        return TileError(message, self.loc_at(offset), hint=hint)

    def _describe_current(self) -> str:
        kind, text, _ = self.current
        return "end of input" if kind == "eof" else f"'{text}'"

    def peek(self, text: str) -> bool:
        return self.tokens[self.pos][1] == text and self.tokens[self.pos][0] not in ("string",)

    def peek_kind(self, kind: str) -> bool:
        return self.tokens[self.pos][0] == kind

    def optional(self, text: str) -> bool:
        """Consume `text` (punctuation or keyword) if it is next."""
        kind, tok, _ = self.tokens[self.pos]
        if tok == text and kind != "string":
            self.pos += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> None:
        if not self.optional(text):
            raise self.error(
                f"expected '{text}'{' ' + what if what else ''}, found {self._describe_current()}"
            )

    def take(self, kind: str, what: str) -> str:
        tok_kind, text, _ = self.tokens[self.pos]
        if tok_kind != kind:
            raise self.error(f"expected {what}, found {self._describe_current()}")
        self.pos += 1
        return text

    def comma_list(self, parse_one: Callable[[], R], close: str | None = None) -> list[R]:
        """Items separated by ','. If `close` is given, the list may be empty before it."""
        if close is not None and self.peek(close):
            return []
        items = [parse_one()]
        while self.optional(","):
            items.append(parse_one())
        return items

    # -- names ----------------------------------------------------------------------------

    def lookup(self, name: str) -> Value | None:
        for scope in reversed(self._scopes):
            v = scope.get(name)
            if v is not None:
                return v
        return None

    def define(self, name: str, value: Value, at: int) -> None:
        if self.lookup(name) is not None:
            raise self.error(f"redefinition of value '{name}'", at=at)
        self._scopes[-1][name] = value
        hint = name[1:]
        if hint and not hint[0].isdigit():
            value.name_hint = hint

    def parse_operand(self) -> Value:
        """A use of a value: `%name`, which must already be defined and visible."""
        at = self.pos
        name = self.take("value", "a value such as '%x'")
        v = self.lookup(name)
        if v is None:
            raise self.error(f"use of undefined value '{name}'", at=at)
        return v

    def parse_operands(self) -> list[Value]:
        """Zero or more comma-separated operands."""
        if not self.peek_kind("value"):
            return []
        return self.comma_list(self.parse_operand)

    def parse_new_value(self) -> tuple[str, int]:
        """The name of a value about to be defined (a block argument), and its token index."""
        at = self.pos
        return self.take("value", "a value name such as '%x'"), at

    # -- types ----------------------------------------------------------------------------

    def parse_type(self) -> T.Type:
        kind, text, _ = self.current
        if kind == "ident":
            t = T.SCALAR_TYPES.get(text)
            if t is not None:
                self.pos += 1
                return t
            if text == "tile":
                self.pos += 1
                shape, element, layout = self._parse_shaped_body(allow_layout=True)
                return T.TileType(shape, element, layout)
        elif kind == "bang":
            if text == "!tile.tensor":
                self.pos += 1
                shape, element, _ = self._parse_shaped_body(allow_layout=False)
                return T.TensorType(shape, element)
            if text == "!smem":
                self.pos += 1
                shape, element, layout = self._parse_shaped_body(allow_layout=True)
                return T.SharedType(shape, element, layout)
            raise self.error(f"unknown type '{text}'", hint="types: !tile.tensor<...>, !smem<...>")
        raise self.error(
            f"expected a type, found {self._describe_current()}",
            hint="types are i1, i8, i16, i32, i64, index, f8e4m3, f8e5m2, f16, bf16, f32, f64, "
            "tile<...>, !tile.tensor<...>, !smem<...>",
        )

    def _parse_shaped_body(
        self, *, allow_layout: bool
    ) -> tuple[tuple[T.Dim, ...], T.Type, A.Attribute | None]:
        kind, text, _ = self.current
        shape: list[T.Dim] = []
        if kind == "shape":
            for m in _SHAPE_DIM_RE.finditer(text):
                d = m.group(1)
                shape.append(int(d) if d.isdigit() else None if d == "?" else d)
            self.pos += 1
        elif not self.optional("<"):
            raise self.error(f"expected '<' after the type name, found {self._describe_current()}")
        element_at = self.pos
        element = self.parse_type()
        if not T.is_scalar(element):
            raise self.error("element type must be a scalar type", at=element_at)
        layout = None
        if self.optional(","):
            if not allow_layout:
                raise self.error("this type takes no layout")
            layout = self.parse_attribute()
        self.expect(">", "to close the type")
        return tuple(shape), element, layout

    def parse_types(self) -> list[T.Type]:
        return self.comma_list(self.parse_type)

    def parse_type_list_parens_or_single(self) -> list[T.Type]:
        """`t` or `(t, u, ...)` (possibly `()`)."""
        if self.optional("("):
            types = self.comma_list(self.parse_type, close=")")
            self.expect(")")
            return types
        return [self.parse_type()]

    # -- attributes -----------------------------------------------------------------------

    def parse_attribute(self) -> A.Attribute:
        kind, text, _ = self.current
        if kind == "int":
            self.pos += 1
            return A.IntegerAttr(int(text, 0))
        if kind == "float":
            self.pos += 1
            return A.FloatAttr(float(text))
        if kind == "string":
            self.pos += 1
            return A.StringAttr(unquote(text))
        if kind == "symbol":
            self.pos += 1
            return A.SymbolRefAttr(unquote(text[1:]) if text[1] == '"' else text[1:])
        if kind == "ident":
            if text in ("true", "false"):
                self.pos += 1
                return A.BoolAttr(text == "true")
            if text == "nan":
                self.pos += 1
                return A.FloatAttr(float("nan"))
            if text == "inf":
                self.pos += 1
                return A.FloatAttr(float("inf"))
            if text == "unit":
                self.pos += 1
                return A.UnitAttr()
            return A.TypeAttr(self.parse_type())
        if kind == "bang":
            return A.TypeAttr(self.parse_type())
        if kind == "punct" and text == "[":
            self.pos += 1
            elements = self.comma_list(self.parse_attribute, close="]")
            self.expect("]", "to close the array")
            return A.ArrayAttr(tuple(elements))
        if kind == "hash":
            return self._parse_parametric_attr()
        raise self.error(f"expected an attribute value, found {self._describe_current()}")

    def _parse_parametric_attr(self) -> A.Attribute:
        at = self.pos
        name = self.take("hash", "an attribute such as '#blocked<...>'")
        if not self.peek("<"):
            # A use of an alias defined at the top of the file (`#blocked1`).
            aliased = self.aliases.get(name)
            if aliased is None:
                raise self.error(
                    f"undefined attribute alias '{name}'",
                    at=at,
                    hint="define it before the module: " + name + " = #mnemonic<...>",
                )
            return aliased
        mnemonic = name[1:]
        cls = A.PARAMETRIC_ATTRS.get(mnemonic)
        if cls is None:
            known = ", ".join(f"#{m}" for m in sorted(A.PARAMETRIC_ATTRS))
            raise self.error(
                f"unknown attribute '#{mnemonic}'", at=at, hint=f"known attributes: {known}"
            )
        from dataclasses import MISSING, fields

        declared = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        self.expect("<", f"after '#{mnemonic}'")
        values: dict[str, object] = {}
        while not self.peek(">"):
            key_at = self.pos
            key = self.take("ident", "a parameter name")
            if key not in declared:
                raise self.error(
                    f"'#{mnemonic}' has no parameter '{key}'",
                    at=key_at,
                    hint="parameters: " + ", ".join(sorted(declared)),
                )
            self.expect("=")
            values[key] = _plain(self.parse_attribute())
            if not self.optional(","):
                break
        self.expect(">", f"to close '#{mnemonic}<'")
        missing = {f.name for f in fields(cls) if f.default is MISSING} - values.keys()  # type: ignore[arg-type]
        if missing:
            raise self.error(f"'#{mnemonic}' is missing {', '.join(sorted(missing))}", at=at)
        try:
            return cls(**values)  # type: ignore[call-arg]
        except (TypeError, ValueError) as e:
            raise self.error(f"invalid '#{mnemonic}': {e}", at=at) from None

    def parse_attr_dict(self) -> dict[str, A.Attribute]:
        """An optional `{name = value, name2, ...}`."""
        attrs: dict[str, A.Attribute] = {}
        if not self.optional("{"):
            return attrs
        while not self.peek("}"):
            kind, text, _ = self.current
            if kind == "string":
                key = unquote(text)
            elif kind == "ident":
                key = text
            else:
                raise self.error(f"expected an attribute name, found {self._describe_current()}")
            if key in attrs:
                raise self.error(f"duplicate attribute '{key}'")
            self.pos += 1
            attrs[key] = self.parse_attribute() if self.optional("=") else A.UnitAttr()
            if not self.optional(","):
                break
        self.expect("}", "to close the attribute dictionary")
        return attrs

    # -- regions --------------------------------------------------------------------------

    def parse_region(self, arguments: list[tuple[str, T.Type, int]] | None = None) -> Region:
        """`{ ops }`, optionally with `^bb(...)` labels. `arguments` (name, type, token index)
        are entry-block arguments already written by a custom form."""
        self.expect("{", "to open a region")
        region = Region()
        self._scopes.append({})
        block = Block()
        region.add_block(block)
        for name, t, at in arguments or ():
            self.define(name, block.add_arg(t), at)
        first = True
        while not self.optional("}"):
            if self.peek_kind("eof"):
                raise self.error("expected '}' to close the region, found end of input")
            if self.peek_kind("block"):
                self.pos += 1
                if not (first and not block.ops and not block.args):
                    block = Block()
                    region.add_block(block)
                if self.optional("("):
                    for name, at in self.comma_list(self.parse_new_value_typed_pair, close=")"):
                        self.define(name[0], block.add_arg(name[1]), at)
                    self.expect(")")
                self.expect(":", "after the block label")
                first = False
                continue
            first = False
            block.append(self.parse_op())
        self._scopes.pop()
        if not arguments and len(region.blocks) == 1 and not block.ops and not block.args:
            # `{}` is a region without blocks (the printed form of an empty region).
            region.blocks.clear()
            block.parent = None
        return region

    def parse_new_value_typed_pair(self) -> tuple[tuple[str, T.Type], int]:
        name, at = self.parse_new_value()
        self.expect(":")
        return (name, self.parse_type()), at

    def parse_symbol_name(self) -> str:
        text = self.take("symbol", "a symbol name such as '@kernel'")
        return unquote(text[1:]) if text[1] == '"' else text[1:]

    # -- ops ------------------------------------------------------------------------------

    def parse_op(self) -> Operation:
        start = self.pos
        result_names: list[tuple[str, int]] = []
        if self.peek_kind("value"):
            result_names = self.comma_list(self.parse_new_value)
            self.expect("=", "after the result names")
        name_at = self.pos
        kind, text, _ = self.current
        if kind == "string":
            self.pos += 1
            name = unquote(text)
            cls = self._op_class(name, name_at)
            isolated = IsolatedFromAbove in cls._trait_set
            op = self._with_scope(isolated, lambda: self._parse_generic(cls))
        elif kind == "ident":
            self.pos += 1
            name = text if "." in text else "builtin." + text
            cls = self._op_class(name, name_at)
            isolated = IsolatedFromAbove in cls._trait_set
            parse_custom = getattr(cls, "parse_custom", None)
            if parse_custom is not None:
                op = self._with_scope(isolated, lambda: parse_custom(self))
            elif cls.assembly_format is not None:
                from tilec.ir.assembly import parse_with_format

                op = self._with_scope(isolated, lambda: parse_with_format(cls, self))
            else:
                op = self._with_scope(isolated, lambda: self._parse_generic_after_name(cls))
        else:
            raise self.error(f"expected an operation, found {self._describe_current()}")
        for d, region in zip(op.region_defs, op.regions):
            if region.empty and not d.may_be_empty:
                # `{}` prints a region whose one block is empty; read it back as that.
                region.add_block(Block())
        op.loc = self.loc_at(self.tokens[start][2])
        if self.peek("loc"):
            op.loc = self._parse_location()
        if len(result_names) != len(op.results):
            raise self.error(
                f"'{op.name}' has {len(op.results)} result(s) but {len(result_names)} name(s) "
                "are given",
                at=start,
            )
        for (rname, at), r in zip(result_names, op.results):
            self.define(rname, r, at)
        return op

    def _with_scope(self, isolated: bool, parse: Callable[[], Operation]) -> Operation:
        if not isolated:
            return parse()
        saved = self._scopes
        self._scopes = [{}]
        try:
            return parse()
        finally:
            self._scopes = saved

    def _op_class(self, name: str, at: int) -> type[Operation]:
        cls = OP_REGISTRY.get(name)
        if cls is None:
            close = difflib.get_close_matches(name, list(OP_REGISTRY), n=3)
            hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else None
            dialect = name.split(".")[0]
            if not close and any(k.startswith(dialect + ".") for k in OP_REGISTRY):
                ops = sorted(k for k in OP_REGISTRY if k.startswith(dialect + "."))
                hint = f"'{dialect}' has: {', '.join(ops)}"
            raise self.error(f"unknown operation '{name}'", at=at, hint=hint)
        return cls

    def _parse_location(self) -> Location:
        self.expect("loc")
        self.expect("(")
        if self.optional("unknown"):
            self.expect(")")
            return Location("", 0, 0)
        file = unquote(self.take("string", "a file name"))
        self.expect(":")
        line = int(self.take("int", "a line number"))
        self.expect(":")
        col = int(self.take("int", "a column number"))
        self.expect(")")
        return Location(file, line, col)

    def _parse_generic(self, cls: type[Operation]) -> Operation:
        return self._parse_generic_after_name(cls)

    def _parse_generic_after_name(self, cls: type[Operation]) -> Operation:
        self.expect("(", "to start the operand list")
        operands = self.comma_list(self.parse_operand, close=")")
        self.expect(")")
        regions: list[Region] = []
        if self.peek("(") and self.tokens[self.pos + 1][1] == "{":
            self.pos += 1
            regions = self.comma_list(self.parse_region)
            self.expect(")")
        attrs = self.parse_attr_dict()
        self.expect(":", "before the operation's type")
        types_at = self.pos
        self.expect("(")
        operand_types = self.comma_list(self.parse_type, close=")")
        self.expect(")")
        self.expect("->")
        result_types = self.parse_type_list_parens_or_single()
        if len(operand_types) != len(operands):
            raise self.error(
                f"{len(operands)} operand(s) but {len(operand_types)} operand type(s)", at=types_at
            )
        for i, (v, t) in enumerate(zip(operands, operand_types)):
            if v.type != t:
                raise self.error(
                    f"operand #{i} has type {v.type}, but the signature says {t}", at=types_at
                )
        return cls(operands, result_types, attrs, regions)

    # -- top level ------------------------------------------------------------------------

    def parse_module(self) -> Operation:
        """A whole file: `module { ... }`, or a list of ops that is wrapped in a module."""
        from tilec.dialects.builtin import ModuleOp

        while self.peek_kind("hash") and self.tokens[self.pos + 1][1] == "=":
            at = self.pos
            name = self.take("hash", "an alias")
            self.pos += 1
            if name in self.aliases:
                raise self.error(f"attribute alias '{name}' is defined twice", at=at)
            self.aliases[name] = self.parse_attribute()
        if self.peek("module") or self.current[1] == '"builtin.module"':
            op = self.parse_op()
            if not isinstance(op, ModuleOp):
                raise self.error("expected a module")
        else:
            start = self.pos
            region = Region([Block()])
            while not self.peek_kind("eof"):
                region.block.append(self.parse_op())
            op = ModuleOp([], [], {}, [region], self.loc_at(self.tokens[start][2]))
        if not self.peek_kind("eof"):
            raise self.error(
                f"expected end of input after the module, found {self._describe_current()}"
            )
        return op


def _plain(a: A.Attribute) -> object:
    return a if isinstance(a, A.ParametricAttr) else a.value


def parse_module(text: str, filename: str = "<input>", *, line_offset: int = 0) -> Operation:
    """Parse IR text into a `builtin.module` (not yet verified)."""
    import tilec.dialects  # noqa: F401  (registers every op)

    return Parser(text, filename, line_offset).parse_module()


__all__ = ["SEGMENTS_ATTR", "Parser", "parse_module"]
