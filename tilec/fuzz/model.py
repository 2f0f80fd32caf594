"""The fuzz generator's model of the tile language: dtypes and their promotion, shapes and
broadcasting, the values, tensors and loops a generated kernel is made of, and where the
generator's decisions come from (a `Chooser`: seeded for bulk runs, hypothesis for shrinking).

The writers (`tilec.fuzz.expressions`, `tilec.fuzz.generate`) build on it; it knows neither.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

__all__ = [
    "DTYPES",
    "Chooser",
    "HypothesisChooser",
    "Loop",
    "RandomChooser",
    "Tensor",
    "Value",
    "broadcast",
    "broadcasts_to",
    "chance",
    "choose",
    "kind",
    "promote",
]

T = TypeVar("T")

FLOATS = ("f16", "bf16", "f32", "f64")
INTS = ("i8", "i16", "i32", "i64")
DTYPES = ("f32", "f16", "i32", "bf16", "i8", "i1", "i16", "i64", "f64")
# Math functions; on f64 values only these compile to PTX (docs/language.md).
MATH = (
    *("exp", "abs", "sqrt", "log", "exp2", "log2", "rsqrt", "tanh", "erf"),
    *("sigmoid", "gelu", "sin", "cos", "floor", "ceil"),
)
MATH_F64 = ("abs", "sqrt", "rsqrt", "floor", "ceil")
DOT_OPERANDS = ("f16", "bf16", "f32", "i8", "f64")
DOT_RESULTS = {
    "f16": "f32",
    "bf16": "f32",
    "f32": "f32",
    "f64": "f64",
    "i8": "i32",
    "f8e4m3": "f32",
    "f8e5m2": "f32",
}
# Element types PTX converts only on sm_90 and later: a program that reads them is not lowered
# for sm_80 (the lowering's located error there is the defined behaviour, docs/language.md).
SM90_ONLY = ("f8e4m3", "f8e5m2")
# Weak operands (Python literals) by kind, lowest first.
WEAK = ("bool", "int", "float")
WEAK_DEFAULT = {"bool": "i1", "int": "i32", "float": "f32"}

# Extents by dimension role: small, and mostly not divisible by any tile.
GRID_EXTENTS = (37, 1, 3, 17, 33, 50)
LOOP_EXTENTS = (19, 1, 5, 16, 40)
WHOLE_EXTENTS = (5, 1, 3, 8, 13, 16)
ELEMENT_EXTENTS = (2, 1, 3)
# For programs with a tensor-core matmul loop, half the time: multiples of 8 that no tile
# divides, so that 16-bit rows are 16-byte multiples and the TMA unit's copies (and warp
# specialization, persistent blocks behind them) apply, with partial tiles on every edge. They
# are every kernel's of the program, so they stay small: with 200 (two dimensions of it give
# the other kernels 200x200 grids of small tiles) one program in ten took a third of the
# interpreter's time (seed 40: 37 s of 113 over seeds 0-47); 136 still leaves a 128-row tile
# and a partial one, 104 a partial 256-wide one.
ALIGNED_EXTENTS = (72, 40, 136, 104)
TENSOR_CORE_DOTS = ("f16", "bf16", "i8", "f8e4m3", "f8e5m2")
FIXED = 4  # the fixed extent of `f32[M, 4]`-style dimensions


class Chooser(Protocol):
    """Where the generator's decisions come from."""

    def integer(self, low: int, high: int) -> int:
        """A number in [low, high]; shrinks towards `low`."""
        ...


class RandomChooser:
    """Decisions from a seeded `random.Random` (bulk runs)."""

    def __init__(self, seed: int | str):
        self.rng = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)


class HypothesisChooser:
    """Decisions drawn from hypothesis (`st.data()`), so that failures shrink."""

    def __init__(self, data: Any):
        from hypothesis import strategies as st

        self.data = data
        self.st = st

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(self.st.integers(low, high))


def choose(chooser: Chooser, options: Sequence[T]) -> T:
    return options[chooser.integer(0, len(options) - 1)]


def chance(chooser: Chooser, percent: int) -> bool:
    """True `percent` times in a hundred; shrinks to False."""
    return chooser.integer(0, 99) >= 100 - percent


# ---------------------------------------------------------------------------------------------
# The type model


@dataclass(frozen=True)
class Value:
    """An expression: its text, dtype (a dtype name, or a weak kind for literals) and shape
    (tile-size symbols such as "BM", and integers)."""

    text: str
    dtype: str
    shape: tuple = ()
    # Made only of literals and tile constructors: the frontend folds it, and a conversion
    # of a folded value that does not fit (`full([], inf, f32).to(i32)`) is an error.
    constant: bool = False

    @property
    def weak(self) -> bool:
        return self.dtype in WEAK


def kind(dtype: str) -> str:
    if dtype in WEAK:
        return dtype
    return "float" if dtype in FLOATS else "int" if dtype in INTS else "bool"


def promote(a: str, b: str) -> str:
    """The dtype both operands of a binary operation convert to (docs/language.md)."""
    if a in WEAK and b in WEAK:
        return max(a, b, key=WEAK.index)
    if a in WEAK:
        a, b = b, a
    if b in WEAK:
        if WEAK.index(b) > WEAK.index(kind(a)):
            return WEAK_DEFAULT[b]
        return a
    if a == b:
        return a
    if {a, b} == {"f16", "bf16"}:
        return "f32"
    ka, kb = WEAK.index(kind(a)), WEAK.index(kind(b))
    if ka != kb:
        return a if ka > kb else b
    width = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "f16": 16, "bf16": 16}
    width.update({"f32": 32, "f64": 64})
    return a if width[a] >= width[b] else b


def broadcast(a: tuple, b: tuple) -> tuple | None:
    """numpy's broadcast of two shapes, or None."""
    result = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x == y or y == 1:
            result.append(x)
        elif x == 1:
            result.append(y)
        else:
            return None
    return tuple(reversed(result))


def broadcasts_to(shape: tuple, target: tuple) -> bool:
    return len(shape) <= len(target) and broadcast(shape, target) == tuple(target)


# ---------------------------------------------------------------------------------------------
# What a kernel is made of


@dataclass
class Tensor:
    """A tensor parameter: name, dtype, one entry per axis (a dimension name or an int)."""

    name: str
    dtype: str
    dims: tuple
    written: bool = False

    def parameter(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.dims))}]"


@dataclass(frozen=True)
class Loop:
    """An open sequential loop: its variable, dimension, and tile-size symbol (None: an
    element loop)."""

    variable: str
    dim: str
    symbol: str | None
