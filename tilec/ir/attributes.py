"""IR attributes: compile-time constants attached to operations (and to tile types, as layouts).

Attributes are immutable and compared by value. Their `__str__` is their text form:

    42   -1.5   inf   true   "text"   [1, 0]   f32   @kernel   unit
    #name<key = value, ...>            (a parametric attribute such as a layout)

Parametric attributes (`#blocked<...>`, `#mma<...>`, `#swizzle<...>`) are declared once as a
subclass of `ParametricAttr` with typed fields; `parametric_attr` registers it so the parser
can read it back.
"""

from __future__ import annotations

import math
import re
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar

from tilec.ir.types import Type


class Attribute:
    """Base of all attributes."""

    __slots__ = ()

    @property
    def value(self) -> Any:
        """The plain Python value an op accessor returns for this attribute."""
        return self


@dataclass(frozen=True, slots=True)
class IntegerAttr(Attribute):
    value: int

    def __str__(self) -> str:
        return str(self.value)


def format_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


@dataclass(frozen=True, slots=True)
class FloatAttr(Attribute):
    value: float

    def __eq__(self, other: object) -> bool:
        # NaN constants are equal to each other as attributes (bitwise identity), so that CSE
        # and round-trips treat them like any other constant.
        if not isinstance(other, FloatAttr):
            return NotImplemented
        return format_float(self.value) == format_float(other.value)

    def __hash__(self) -> int:
        return hash(format_float(self.value))

    def __str__(self) -> str:
        return format_float(self.value)


@dataclass(frozen=True, slots=True)
class BoolAttr(Attribute):
    value: bool

    def __str__(self) -> str:
        return "true" if self.value else "false"


@dataclass(frozen=True, slots=True)
class StringAttr(Attribute):
    value: str

    def __str__(self) -> str:
        return quote_string(self.value)


def quote_string(s: str) -> str:
    escaped = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


@dataclass(frozen=True, slots=True)
class ArrayAttr(Attribute):
    elements: tuple[Attribute, ...]

    @property
    def value(self) -> tuple[Any, ...]:
        return tuple(e.value for e in self.elements)

    def __str__(self) -> str:
        return "[" + ", ".join(str(e) for e in self.elements) + "]"


@dataclass(frozen=True, slots=True)
class TypeAttr(Attribute):
    type: Type

    @property
    def value(self) -> Type:
        return self.type

    def __str__(self) -> str:
        return str(self.type)


@dataclass(frozen=True, slots=True)
class SymbolRefAttr(Attribute):
    name: str

    @property
    def value(self) -> str:
        return self.name

    def __str__(self) -> str:
        # Names the parser cannot read bare (spaces, leading digits) are written `@"..."`.
        return (
            f"@{self.name}" if _BARE_SYMBOL.fullmatch(self.name) else "@" + quote_string(self.name)
        )


_BARE_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*")


@dataclass(frozen=True, slots=True)
class UnitAttr(Attribute):
    """Presence-only attribute; `{fast}` in an attribute dictionary."""

    @property
    def value(self) -> bool:
        return True

    def __str__(self) -> str:
        return "unit"


class ParametricAttr(Attribute):
    """An attribute `#mnemonic<field = value, ...>` with declared, typed fields.

    Subclasses are frozen dataclasses whose fields are ints, bools, strings, tuples of ints or
    other parametric attributes (a slice layout's parent).
    """

    __slots__ = ()
    mnemonic: ClassVar[str]

    def __str__(self) -> str:
        # A field with a default is printed only when it differs from it (optional params).
        params = ", ".join(
            f"{f.name} = {_format_param(getattr(self, f.name))}"
            for f in fields(self)  # type: ignore[arg-type]
            if f.default is MISSING or getattr(self, f.name) != f.default
        )
        return f"#{self.mnemonic}<{params}>"


def _format_param(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return quote_string(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(_format_param(x) for x in v) + "]"
    if isinstance(v, ParametricAttr):
        return str(v)
    raise TypeError(f"unsupported parameter value {v!r}")


PARAMETRIC_ATTRS: dict[str, type[ParametricAttr]] = {}


def parametric_attr(cls: type[ParametricAttr]) -> type[ParametricAttr]:
    """Class decorator: register a parametric attribute under its mnemonic."""
    if cls.mnemonic in PARAMETRIC_ATTRS:
        raise ValueError(f"attribute #{cls.mnemonic} is declared twice")
    PARAMETRIC_ATTRS[cls.mnemonic] = cls
    return cls


@parametric_attr
@dataclass(frozen=True, slots=True)
class BlockedLayout(ParametricAttr):
    """Elements spread over threads and warps in contiguous runs (Triton's "blocked").

    Per dimension: each thread holds `size_per_thread` consecutive elements, a warp spans
    `threads_per_warp` threads and a block `warps_per_cta` warps; `order` lists dimensions
    from fastest- to slowest-varying.
    """

    mnemonic: ClassVar[str] = "blocked"
    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    order: tuple[int, ...]


def to_attribute(v: Any) -> Attribute:
    """Wrap a plain Python value as an attribute (attributes pass through unchanged)."""
    if isinstance(v, Attribute):
        return v
    if isinstance(v, bool):
        return BoolAttr(v)
    if isinstance(v, int):
        return IntegerAttr(v)
    if isinstance(v, float):
        return FloatAttr(v)
    if isinstance(v, str):
        return StringAttr(v)
    if isinstance(v, (tuple, list)):
        return ArrayAttr(tuple(to_attribute(x) for x in v))
    if isinstance(v, Type):
        return TypeAttr(v)
    raise TypeError(f"cannot make an attribute from {v!r}")
