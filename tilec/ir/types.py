"""IR types: scalars, block-held tiles, global tensor views and shared-memory buffers.

Types are immutable and compared by value. Their `__str__` is their text form, which
`tilec.ir.parser` reads back:

    i1 i8 i16 i32 i64 index f8e4m3 f8e5m2 f16 bf16 f32 f64
    tile<128x64xf16>            tile<BMxBKxf16, #blocked<...>>
    !tile.tensor<MxKxf16>       !tile.tensor<?x?xf32>
    !smem<3x128x64xf16, #swizzle<...>>

A dimension is an `int`, a symbol (`str` matching `[A-Z][A-Z0-9_]*`: a tile size or a tensor
extent not known until tiling or launch), or `None` (written `?`: dynamic, unnamed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from tilec.ir.attributes import Attribute

Dim = Union[int, str, None]

SYMBOL_RE = re.compile(r"[A-Z][A-Z0-9_]*")


class Type:
    """Base of all IR types."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class IntegerType(Type):
    width: int

    def __str__(self) -> str:
        return f"i{self.width}"


@dataclass(frozen=True, slots=True)
class IndexType(Type):
    def __str__(self) -> str:
        return "index"


@dataclass(frozen=True, slots=True)
class FloatType(Type):
    name: str  # f8e4m3, f8e5m2, f16, bf16, f32, f64

    @property
    def width(self) -> int:
        return {"f8e4m3": 8, "f8e5m2": 8, "f16": 16, "bf16": 16, "f32": 32, "f64": 64}[self.name]

    @property
    def is_f8(self) -> bool:
        """The 8-bit floats (OCP FP8 E4M3 without infinities, and E5M2): storage and
        conversion only; they compute nothing themselves."""
        return self.width == 8

    def __str__(self) -> str:
        return self.name


ScalarType = Union[IntegerType, IndexType, FloatType]

i1 = IntegerType(1)
i8 = IntegerType(8)
i16 = IntegerType(16)
i32 = IntegerType(32)
i64 = IntegerType(64)
index = IndexType()
f16 = FloatType("f16")
bf16 = FloatType("bf16")
f8e4m3 = FloatType("f8e4m3")
f8e5m2 = FloatType("f8e5m2")
f32 = FloatType("f32")
f64 = FloatType("f64")

SCALAR_TYPES: dict[str, Type] = {
    str(t): t for t in (i1, i8, i16, i32, i64, index, f8e4m3, f8e5m2, f16, bf16, f32, f64)
}


def format_shape(shape: tuple[Dim, ...]) -> str:
    return "".join(f"{'?' if d is None else d}x" for d in shape)


def _check_dims(shape: tuple[Dim, ...]) -> None:
    for d in shape:
        if isinstance(d, bool) or not (
            d is None
            or (isinstance(d, int) and d >= 0)
            or (isinstance(d, str) and SYMBOL_RE.fullmatch(d))
        ):
            raise ValueError(f"invalid dimension {d!r}: expected int >= 0, symbol or None")


class ShapedType(Type):
    """A type with a shape and an element type."""

    __slots__ = ()
    shape: tuple[Dim, ...]
    element: Type

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    @property
    def num_elements(self) -> int | None:
        n = 1
        for d in self.shape:
            if not isinstance(d, int):
                return None
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class TileType(ShapedType):
    """A tile of values held by one block (one logical thread per block at the tile level)."""

    shape: tuple[Dim, ...]
    element: Type
    layout: Attribute | None = None

    def __post_init__(self) -> None:
        _check_dims(self.shape)

    def with_shape(self, shape: tuple[Dim, ...]) -> TileType:
        return TileType(tuple(shape), self.element, None)

    def with_element(self, element: Type) -> TileType:
        return TileType(self.shape, element, self.layout)

    def __str__(self) -> str:
        layout = f", {self.layout}" if self.layout is not None else ""
        return f"tile<{format_shape(self.shape)}{self.element}{layout}>"


@dataclass(frozen=True, slots=True)
class TensorType(ShapedType):
    """A view of a tensor in global memory; extents and strides are known at launch."""

    shape: tuple[Dim, ...]
    element: Type

    def __post_init__(self) -> None:
        _check_dims(self.shape)

    def __str__(self) -> str:
        return f"!tile.tensor<{format_shape(self.shape)}{self.element}>"


@dataclass(frozen=True, slots=True)
class SharedType(ShapedType):
    """A shared-memory buffer; for pipelined buffers the stage index is the first dimension."""

    shape: tuple[Dim, ...]
    element: Type
    layout: Attribute | None = None

    def __post_init__(self) -> None:
        _check_dims(self.shape)

    def __str__(self) -> str:
        layout = f", {self.layout}" if self.layout is not None else ""
        return f"!smem<{format_shape(self.shape)}{self.element}{layout}>"


def element_type(t: Type) -> Type:
    """The scalar type of `t`: itself for scalars, the element type for shaped types."""
    return t.element if isinstance(t, ShapedType) else t


def is_float(t: Type) -> bool:
    return isinstance(element_type(t), FloatType)


def is_integer(t: Type) -> bool:
    """Integer-like element (integers and `index`)."""
    return isinstance(element_type(t), (IntegerType, IndexType))


def is_scalar(t: Type) -> bool:
    return isinstance(t, (IntegerType, IndexType, FloatType))


def bit_width(t: Type) -> int:
    """Bit width of a scalar type; `index` counts as 64 bits."""
    e = element_type(t)
    return 64 if isinstance(e, IndexType) else e.width  # type: ignore[union-attr]
