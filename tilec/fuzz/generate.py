"""Random well-typed tile kernels: source text, extents and pins, for the differential check.

The generator writes kernels the way an author would, from a type-directed grammar that models
the language (`docs/language.md`) exactly enough that every program it writes compiles: each
expression is made for a shape it must broadcast to, and its dtype follows the promotion rules.
It covers the language as it stands:

* tensor reads with every index kind: a loop variable (a tile), `:` of a whole dimension or of
  a fixed extent, an element variable, a constant index; tensors stored transposed (`x[tn, tm]`
  read and `.T`), new axes (`v[:, None]`);
* every dtype, arithmetic, bitwise, shift and comparison operator, unary operators, `.to()`,
  Python literals (weak operands), scalar arguments, dimension names, element variables;
* every builtin: the math functions, `maximum`/`minimum`, `where`, `zeros`/`full`/`arange`,
  `rand`/`randn`/`randint` (integer-argument or literal seeds, offsets of any integer value),
  `offsets` (masks made from them), `sum`/`max`/`min`/`mean` with `axis` and `keepdims`, `dot`
  and `@` of read and of computed operands (f16/bf16 products in f32 over tiles that take the
  tensor-core paths, f32, f64, i8);
* sequential `tiles()` loops (tiled and element loops, nested) with carried values and
  augmented assignments, whole dimensions, extents that no tile divides;
* scalar control flow: `range()` loops over counts from an `i32` argument (empty, negative,
  strided and counting down) and `if`/`else` on comparisons of one (with `and`/`or`/`not`),
  their bodies carrying outer names;
* pins: `@kernel(tile=..., warps=..., stages=...)` and `tiles(..., tile={B: 1})`.

Choices go through a `Chooser`: `RandomChooser` for seeded bulk runs (`sample_program(seed)`),
`HypothesisChooser` inside hypothesis strategies (`programs()`), so that a failing program
shrinks: every choice's first alternative is the simplest one.

**Adding a construct** when the language grows: add its case to `ExpressionWriter.expression`
(or a statement kind to `KernelWriter.statements`) with the type rule the language gives it,
keep the first alternative of every choice the simplest, and run
`python -m tilec.fuzz.differential --count 200` (docs/testing.md).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

__all__ = [
    "DTYPES",
    "Chooser",
    "GeneratedProgram",
    "HypothesisChooser",
    "RandomChooser",
    "generate_program",
    "programs",
    "sample_program",
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
DOT_RESULTS = {"f16": "f32", "bf16": "f32", "f32": "f32", "f64": "f64", "i8": "i32"}
# Weak operands (Python literals) by kind, lowest first.
WEAK = ("bool", "int", "float")
WEAK_DEFAULT = {"bool": "i1", "int": "i32", "float": "f32"}

# Extents by dimension role: small, and mostly not divisible by any tile.
GRID_EXTENTS = (37, 1, 3, 17, 33, 50)
LOOP_EXTENTS = (19, 1, 5, 16, 40)
WHOLE_EXTENTS = (5, 1, 3, 8, 13, 16)
ELEMENT_EXTENTS = (2, 1, 3)
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
# Programs


@dataclass
class Tensor:
    """A tensor parameter: name, dtype, one entry per axis (a dimension name or an int)."""

    name: str
    dtype: str
    dims: tuple
    written: bool = False

    def parameter(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.dims))}]"


@dataclass
class GeneratedProgram:
    """A `.tile` source of one or more generated kernels, and how to run them: the extent of
    every dimension (shared by the kernels) and the random-input seed."""

    source: str
    kernels: list[str]
    extents: dict[str, int]
    seed: int
    features: set[str] = field(default_factory=set)  # constructs used, for coverage counts
    kernel_sources: list[str] = field(default_factory=list)  # the text of each kernel

    def single(self, index: int) -> GeneratedProgram:
        """The program of kernel `index` alone (same extents and seed)."""
        return GeneratedProgram(
            self.kernel_sources[index],
            [self.kernels[index]],
            dict(self.extents),
            self.seed,
            set(self.features),
            [self.kernel_sources[index]],
        )


@dataclass(frozen=True)
class Loop:
    """An open sequential loop: its variable, dimension, and tile-size symbol (None: an
    element loop)."""

    variable: str
    dim: str
    symbol: str | None


class KernelWriter:
    """Writes one kernel: its body first, collecting the parameters it reads and writes."""

    def __init__(self, chooser: Chooser, name: str, features: set[str], first_name: int = 0):
        self.c = chooser
        self.name = name
        self.features = features
        self.tensors: list[Tensor] = []
        self.scalars: list[tuple[str, str]] = []
        self.locals: dict[str, Value] = {}
        self.loops: list[Loop] = []
        self.counter = first_name  # names are unique across the kernels of a program
        self.has_dot = False
        # The grid: M always; N and an element dimension B sometimes.
        self.grid_n = chance(chooser, 70)
        self.grid_b = chance(chooser, 20)
        self.grid_dims = ["M"] + (["N"] if self.grid_n else [])
        self.uses_d = False
        self.loop_dims: set[str] = set()
        self.outer_names: list[set[str]] = []  # per open loop, the names bound before it

    # -- naming

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def symbols(self) -> list:
        """Tile sizes available for new shapes here: the grid's, the whole dimension's, the
        open tiled loops', and the fixed extent."""
        found: list = ["BM"] + (["BN"] if self.grid_n else [])
        found += [loop.symbol for loop in self.loops if loop.symbol]
        found += ["BD", FIXED]
        return found

    def shape_entry(self, dim: Any) -> str:
        """How a shape list (`zeros([tm, D], f32)`) names a tile size."""
        if isinstance(dim, int):
            return str(dim)
        if dim == "BD":
            self.use_whole()
            return "D"
        names = {"BM": "tm", "BN": "tn"}
        names.update({loop.symbol: loop.variable for loop in self.loops if loop.symbol})
        return names[dim]

    def shape_list(self, shape: tuple) -> str:
        return "[" + ", ".join(self.shape_entry(d) for d in shape) + "]"

    def use_whole(self) -> None:
        self.uses_d = True
        self.features.add("D:whole")

    def element_indices(self) -> list[tuple[str, str]]:
        """(dimension, index text) pairs that index one element here."""
        found = [("B", "b")] if self.grid_b else []
        found += [(loop.dim, loop.variable) for loop in self.loops if loop.symbol is None]
        return found

    # -- reads

    def tensor(self, dtype: str, dims: tuple) -> Tensor:
        for t in self.tensors:  # reuse an input of the same type sometimes
            if not t.written and t.dtype == dtype and t.dims == dims and chance(self.c, 40):
                return t
        t = Tensor(self.fresh("x"), dtype, dims)
        self.tensors.append(t)
        return t

    def read(self, shape: tuple, dtype: str) -> Value:
        """A tensor read whose tile has exactly `shape` (no size-1 axes)."""
        dims: list = []
        indices: list[str] = []
        for d in shape:
            if d == "BD":
                self.use_whole()
                dims.append("D")
                indices.append(":")
            elif d == FIXED:
                dims.append(FIXED)
                indices.append(":")
            else:
                names = {"BM": ("M", "tm"), "BN": ("N", "tn")}
                names.update({loop.symbol: (loop.dim, loop.variable) for loop in self.loops})
                dim, variable = names[d]
                dims.append(dim)
                indices.append(variable)
        # Axes indexed by one element are dropped from the tile.
        for dim, variable in self.element_indices():
            if chance(self.c, 30):
                at = self.c.integer(0, len(dims))
                dims.insert(at, dim)
                indices.insert(at, variable)
                self.features.add("index:element")
        if chance(self.c, 15) or not dims:
            at = self.c.integer(0, len(dims))
            dims.insert(at, FIXED)
            indices.insert(at, str(self.c.integer(0, FIXED - 1)))
            self.features.add("index:constant")
        transposed = len(shape) == 2 and shape[0] != shape[1] and chance(self.c, 15)
        if transposed:
            # Stored the other way round: read the transposed region and transpose it back.
            tile_axes = [k for k, index in enumerate(indices) if index in (":", "tm", "tn", "tk")]
            i, j = tile_axes[:2]
            dims[i], dims[j] = dims[j], dims[i]
            indices[i], indices[j] = indices[j], indices[i]
        tiled = {"tm", "tn"} | {loop.variable for loop in self.loops if loop.symbol}
        gatherable = [k for k, index in enumerate(indices) if index in tiled]
        if gatherable and chance(self.c, 10):
            # Rows chosen by an index tensor over the same dimension: `x[g[tm], ...]` has the
            # shape of `x[tm, ...]`; the inputs draw g in range (interp.gather.index_bounds).
            k = choose(self.c, gatherable)
            index_dtype = choose(self.c, ["i32", "i64"])
            g = Tensor(self.fresh("g"), index_dtype, (dims[k],))
            self.tensors.append(g)
            indices[k] = f"{g.name}[{indices[k]}]"
            self.features.add("gather")
        t = self.tensor(dtype, tuple(dims))
        text = f"{t.name}[{', '.join(indices)}]"
        if transposed:
            text += ".T"
            self.features.add("transpose")
        self.features.add(f"read:{dtype}")
        for index in indices:
            self.features.add("index:whole" if index == ":" else "index:tile")
        return Value(text, dtype, shape)

    def scalar_argument(self, dtype: str) -> Value:
        for name, existing in self.scalars:
            if existing == dtype and chance(self.c, 50):
                return Value(name, dtype)
        name = self.fresh("s")
        self.scalars.append((name, dtype))
        self.features.add("scalar-argument")
        return Value(name, dtype)

    # -- the body

    def program(self) -> str:
        self.features.add("grid:" + "x".join(self.grid_dims))
        body: list[str] = []
        self.writes = 0
        count = self.c.integer(1, 5)
        body += self.statements(2, count, self.c.integer(1, 4))
        # Values nobody stores are dead code, which dce removes before the lowering sees it:
        # store some of what is left (every matmul accumulator).
        for name, value in list(self.locals.items()):
            if name.startswith("acc") or chance(self.c, 40):
                body += self.sink(2, value)
        if not any(t.written for t in self.tensors):
            body += self.store(2, self.c.integer(1, 3))
        # Every dimension a loop or a shape names must be a dimension of some tensor.
        known = {d for t in self.tensors for d in t.dims}
        # (An atomic's output may leave out grid dimensions.)
        named = self.loop_dims | set(self.grid_dims) | ({"B"} if self.grid_b else set())
        for dim in sorted(named | ({"D"} if self.uses_d else set())):
            if dim not in known:
                self.tensors.append(Tensor(self.fresh("u"), "f32", (dim,)))
        grid_names = (["b"] if self.grid_b else []) + ["tm"] + (["tn"] if self.grid_n else [])
        grid_dims = (["B"] if self.grid_b else []) + self.grid_dims
        pin = ", tile={B: 1}" if self.grid_b and chance(self.c, 50) else ""
        decorator = self.decorator(pinned_b=bool(pin) or not self.grid_b)
        grid = f"    for {', '.join(grid_names)} in tiles({', '.join(grid_dims)}{pin}):"
        parameters = [t.parameter() for t in self.tensors]
        parameters += [f"{name}: {dtype}" for name, dtype in self.scalars]
        lines = [*decorator, f"def {self.name}({', '.join(parameters)}):", grid, *body]
        return "\n".join(lines) + "\n"

    def decorator(self, pinned_b: bool) -> list[str]:
        """`@kernel(...)` pins, sometimes (B: 1 must be pinned somewhere when B is a grid
        element dimension)."""
        entries = [] if pinned_b else ['"B": 1']
        options = []
        if chance(self.c, 25):
            self.features.add("pin:tile")
            entries.append(f'"M": {choose(self.c, (16, 32, 64, 128))}')
            if self.grid_n and chance(self.c, 50):
                entries.append(f'"N": {choose(self.c, (16, 32, 64, 128))}')
        if entries:
            options.append("tile={" + ", ".join(entries) + "}")
        if chance(self.c, 15) and not self.has_dot:  # tiling picks warps for mma tiles
            self.features.add("pin:warps")
            options.append(f"warps={choose(self.c, (4, 1, 2, 8))}")
        if chance(self.c, 15):
            self.features.add("pin:stages")
            options.append(f"stages={choose(self.c, (2, 1, 3))}")
        return [f"@kernel({', '.join(options)})"] if options else []

    def statements(self, indent: int, count: int, depth: int) -> list[str]:
        lines: list[str] = []
        for _ in range(count):
            what = self.c.integer(0, 11)
            if what <= 3:
                lines += self.assign(indent, depth)
            elif what <= 5:
                lines += self.store(indent, depth)
            elif what <= 7 and len(self.loops) < 2:
                lines += self.loop(indent, depth)
            elif what == 8 and not self.loops:
                lines += self.matmul(indent)
            elif what == 9 and self.locals:
                lines += self.rebind(indent, depth)
            elif what == 10:
                lines += self.atomic(indent, depth)
            elif what == 11 and len(self.outer_names) < 3 and chance(self.c, 40):
                lines += self.scalar_control(indent, depth)
            else:
                lines += self.assign(indent, depth)
        return lines

    def assign(self, indent: int, depth: int) -> list[str]:
        shape = self.random_shape()
        value = self.strong(self.expression(shape, depth))
        name = self.fresh("t")
        self.locals[name] = Value(name, value.dtype, value.shape, value.constant)
        return [f"{'    ' * indent}{name} = {value.text}"]

    def rebind(self, indent: int, depth: int) -> list[str]:
        """`name = ...` or `name op= ...` with the type `name` has: inside a loop, a carried
        value."""
        name = choose(self.c, list(self.locals))
        bound = self.locals[name]
        pad = "    " * indent
        value = self.expression(bound.shape, depth)
        if any(name in outer for outer in self.outer_names):
            self.features.add("loop:carried")
        operators = ["="]
        if bound.dtype != "i1":
            operators += ["+=", "-=", "*="]
            if bound.dtype in FLOATS:
                operators += ["/="]
            else:
                operators += ["|=", "^=", "&="]
        if bound.dtype == "i1":
            operators += ["&=", "|=", "^="]
        op = choose(self.c, operators)
        if value.constant and kind(value.dtype) == "float" and kind(bound.dtype) != "float":
            value = Value("1", "int", constant=True)
        if value.dtype != bound.dtype:
            value = Value(f"({value.text}).to({bound.dtype})", bound.dtype, value.shape)
        self.features.add(f"augassign:{op}")
        carried = any(name in outer for outer in self.outer_names)
        if op == "=" and not carried:  # a plain rebinding: the name takes the new type
            self.locals[name] = Value(name, bound.dtype, value.shape, value.constant)
        return [f"{pad}{name} {op} {value.text}"]

    def store(self, indent: int, depth: int) -> list[str]:
        """A store into a new output tensor, indexed by every grid variable (no two blocks
        write one element) and, for `+=` in a loop, by the loop's variables."""
        pad = "    " * indent
        dims: list = []
        indices: list[str] = []
        if self.grid_b:
            dims.append("B")
            indices.append("b")
        dims.append("M")
        indices.append("tm")
        if self.grid_n:
            dims.append("N")
            indices.append("tn")
        augmented = chance(self.c, 15)
        for loop in self.loops:
            if augmented or chance(self.c, 50):
                dims.append(loop.dim)
                indices.append(loop.variable)
        if chance(self.c, 20) and len(dims) < 3:
            dims.append("D")
            indices.append(":")
            self.use_whole()
        if chance(self.c, 10) and len(dims) < 3:
            dims.append(FIXED)
            indices.append(":" if chance(self.c, 50) else str(self.c.integer(0, FIXED - 1)))
        order = list(range(len(dims)))
        if chance(self.c, 25):  # stored transposed, or in another axis order
            order.reverse()
        dims = [dims[i] for i in order]
        indices = [indices[i] for i in order]
        loop_symbols = {loop.variable: loop.symbol for loop in self.loops}
        region: list = []
        for dim, index in zip(dims, indices):
            if index == ":":
                region.append("BD" if dim == "D" else FIXED)
            elif index in ("tm", "tn"):
                region.append("B" + dim)
            elif loop_symbols.get(index):
                region.append(loop_symbols[index])
        dtype = choose(self.c, DTYPES)
        name = self.fresh("y")
        value = self.strong(self.expression(tuple(region), depth), tuple(region))
        if value.constant and kind(value.dtype) == "float" and kind(dtype) != "float":
            dtype = "f32"
        t = Tensor(name, dtype, tuple(dims), written=True)
        self.tensors.append(t)
        if value.dtype != dtype and (value.dtype != "i1" or chance(self.c, 50)):
            if kind(value.dtype) != kind(dtype) or chance(self.c, 50):
                value = Value(f"({value.text}).to({dtype})", dtype, value.shape)
            else:
                self.features.add("store:implicit-conversion")
        op = "+=" if augmented and dtype != "i1" else "="
        self.features.add(f"store:{op}")
        return [f"{pad}{t.name}[{', '.join(indices)}] {op} {value.text}"]

    def atomic(self, indent: int, depth: int) -> list[str]:
        """`atomic_add` (or max/min) of a value into a new output tensor indexed by some of
        the grid's variables only, so blocks that differ in the others update the same
        elements. The old values are never used: the order the blocks run in decides them,
        and the GPU's order is not the interpreter's."""
        pad = "    " * indent
        grid = [("B", "b", None)] if self.grid_b else []
        grid += [("M", "tm", "BM")] + ([("N", "tn", "BN")] if self.grid_n else [])
        kept = [g for g in grid if chance(self.c, 40)]
        dims = [dim for dim, _, _ in kept]
        indices = [index for _, index, _ in kept]
        region = [symbol for _, _, symbol in kept if symbol]
        if not dims or chance(self.c, 20):
            index = ":" if chance(self.c, 50) else str(self.c.integer(0, FIXED - 1))
            dims.append(FIXED)
            indices.append(index)
            if index == ":":
                region.append(FIXED)
        fn = choose(self.c, ("atomic_add", "atomic_max", "atomic_add", "atomic_min"))
        dtype = choose(self.c, ("f32", "i32", "i64", "f64"))
        value = self.strong(self.expression(tuple(region), depth), tuple(region))
        if value.dtype != dtype:
            value = Value(f"({value.text}).to({dtype})", dtype, value.shape)
        gatherable = [k for k, index in enumerate(indices) if index in ("tm", "tn")]
        if gatherable and chance(self.c, 25):
            # A gathered region: the rows an index tensor over the same dimension names
            # (`y[g[tm], ...]`; repeated indices all count; the inputs draw g in range).
            k = choose(self.c, gatherable)
            g = Tensor(self.fresh("g"), choose(self.c, ["i32", "i64"]), (dims[k],))
            self.tensors.append(g)
            indices[k] = f"{g.name}[{indices[k]}]"
            self.features.add("atomic:gathered")
        t = Tensor(self.fresh("y"), dtype, tuple(dims), written=True)
        self.tensors.append(t)
        self.features.add(f"builtin:{fn}")
        return [f"{pad}{fn}({t.name}[{', '.join(indices)}], {value.text})"]

    def sink(self, indent: int, value: Value) -> list[str]:
        """Store `value` (a local at the grid's level) into a new output tensor whose region
        it broadcasts to: its own axes, led by the grid's that it lacks."""
        grid = ["BM"] + (["BN"] if self.grid_n else [])
        region = list(value.shape)
        for i, d in enumerate(region):
            if d == 1:
                missing = [g for g in grid if g not in region]
                region[i] = missing[0] if missing else FIXED
        region = [g for g in grid if g not in region] + region
        if len(region) > 3:
            return []  # 4-D tiles cost the interpreter and ptxas much for little coverage
        dims: list = ["B"] if self.grid_b else []
        indices: list[str] = ["b"] if self.grid_b else []
        for d in region:
            dim, index = {"BM": ("M", "tm"), "BN": ("N", "tn"), "BD": ("D", ":")}.get(
                d, (FIXED, ":")
            )
            dims.append(dim)
            indices.append(index)
        dtype = value.dtype if not value.weak else WEAK_DEFAULT[value.dtype]
        t = Tensor(self.fresh("y"), dtype, tuple(dims), written=True)
        self.tensors.append(t)
        self.features.add("store:local")
        return [f"{'    ' * indent}{t.name}[{', '.join(indices)}] = {value.text}"]

    def loop(self, indent: int, depth: int) -> list[str]:
        pad = "    " * indent
        open_dims = {loop.dim for loop in self.loops}
        choices = [d for d in ("K", "E") if d not in open_dims]
        if not choices:
            return []
        dim = choose(self.c, choices)
        if dim == "K":
            loop = Loop("tk", "K", "BK")
            header = f"{pad}for tk in tiles(K):"
        else:
            loop = Loop("e", "E", None)
            header = f"{pad}for e in tiles(E, tile={{E: 1}}):"
        self.features.add(f"loop:{dim}")
        self.loop_dims.add(dim)
        outer = dict(self.locals)
        self.loops.append(loop)
        self.outer_names.append(set(outer))
        body = self.statements(indent + 1, self.c.integer(1, 3), depth)
        self.outer_names.pop()
        self.loops.pop()
        # Names first bound in the loop are local to it; rebound outer names are carried.
        self.locals = outer
        return [header, *(body or [f"{pad}    pass"])]

    def scalar_control(self, indent: int, depth: int) -> list[str]:
        """A `range()` loop or an `if` decided by an `i32` scalar argument (block-uniform);
        names bound in the body are local to it, rebound outer names are carried out."""
        pad = "    " * indent
        s = self.scalar_argument("i32").text
        if chance(self.c, 50):
            var = self.fresh("r")
            # Few iterations (the interpreter runs every one): at most 4, and none for some
            # values of s (empty and negative ranges).
            bounds = choose(
                self.c, [f"{s} // 4", f"1, {s} % 4, 2", f"{s} % 3, -1, -1", f"{s} // 3, 1"]
            )
            headers = [f"{pad}for {var} in range({bounds}):"]
            self.features.add("control:range")
        else:
            cond = choose(
                self.c, [f"{s} > 0", f"{s} > -2 and {s} != 3", f"not ({s} < 1) or {s} == -5"]
            )
            headers = [f"{pad}if {cond}:"] + ([f"{pad}else:"] if chance(self.c, 50) else [])
            self.features.add("control:if" + (":else" if len(headers) == 2 else ""))
        lines: list[str] = []
        outer = dict(self.locals)
        for header in headers:
            self.outer_names.append(set(outer))
            body = self.statements(indent + 1, self.c.integer(1, 2), depth)
            self.outer_names.pop()
            self.locals = dict(outer)
            lines += [header, *(body or [f"{pad}    pass"])]
        return lines

    def matmul(self, indent: int) -> list[str]:
        """The matmul idiom: an accumulator carried through a K loop of dots of tiles read
        from memory (what tiling maps to mma.sync or wgmma)."""
        pad = "    " * indent
        self.has_dot = True
        dtype = choose(self.c, ("f16", "bf16", "f32", "i8", "f64"))
        result = DOT_RESULTS[dtype]
        shape = ("BM", "BN") if self.grid_n else ("BM", "BD")
        acc = self.fresh("acc")
        self.features.add(f"dot:{dtype}:loop")
        self.loops.append(Loop("tk", "K", "BK"))
        lhs = self.read((shape[0], "BK"), dtype)
        rhs = self.read(("BK", shape[1]), dtype)
        self.loops.pop()
        op = "@" if chance(self.c, 70) else "dot"
        product = f"{lhs.text} @ {rhs.text}" if op == "@" else f"dot({lhs.text}, {rhs.text})"
        lines = [
            f"{pad}{acc} = zeros({self.shape_list(shape)}, {result})",
            f"{pad}for tk in tiles(K):",
            f"{pad}    {acc} += {product}",
        ]
        self.features.add("loop:K")
        self.loop_dims.add("K")
        self.locals[acc] = Value(acc, result, shape)
        return lines

    def random_shape(self) -> tuple:
        symbols = self.symbols()
        rank = choose(self.c, (2, 1, 0, 2))
        shape = tuple(choose(self.c, symbols) for _ in range(rank))
        if rank == 2 and shape[0] == shape[1] and shape[0] != FIXED:
            shape = (shape[0], FIXED)  # [BM, BM] cannot be made from reads of distinct dims
        return shape

    # -- expressions

    def strong(self, value: Value, shape: tuple | None = None) -> Value:
        """`value` with a dtype of its own (a literal becomes a `full` tile or is cast)."""
        if not value.weak:
            return value
        dtype = WEAK_DEFAULT[value.dtype]
        shape = shape or ()
        text = f"full({self.shape_list(shape)}, {value.text}, {dtype})"
        return Value(text, dtype, shape, constant=True)

    def literal(self, for_dtype: str | None = None) -> Value:
        """A Python literal that fits `for_dtype` when it is an integer dtype."""
        what = self.c.integer(0, 5)
        self.features.add("literal")
        if what <= 1:
            small = for_dtype in ("i8", None)
            value = choose(self.c, (2, 1, 0, 3, -1, 7, 100) if small else (2, 1, 3, -5, 1000))
            return Value(str(value), "int", constant=True)
        if what <= 3:
            text = choose(self.c, ("0.5", "1.5", "-2.0", "1e-3", "3.0", "0.1"))
            return Value(text, "float", constant=True)
        if what == 4:
            return Value(choose(self.c, ("True", "False")), "bool", constant=True)
        if chance(self.c, 30):
            return Value("0x1f", "int", constant=True)
        return Value(choose(self.c, ("inf", "-inf", "1e30")), "float", constant=True)

    def leaf(self, shape: tuple) -> Value:
        """A read, a scalar, a literal, offsets, a local: something whose shape broadcasts to
        `shape`."""
        c = self.c
        what = c.integer(0, 9)
        fitting = [v for v in self.locals.values() if broadcasts_to(v.shape, shape)]
        if what <= 3 or (what == 9 and not fitting):
            sub = self.sub_shape(shape)
            if 1 in sub:
                inner = self.read(tuple(d for d in sub if d != 1), choose(c, DTYPES))
                return self.with_new_axes(inner, sub)
            return self.read(sub, choose(c, DTYPES))
        if what == 4:
            return self.scalar_argument(choose(c, ("f32", "i32", "f16", "i64", "f64", "i8")))
        if what == 5:
            found = [("M", "dimension"), *((d, "element") for d, _ in self.element_indices())]
            dim, why = choose(c, found)
            self.features.add(f"scalar:{why}")
            return Value({"B": "b", "E": "e"}.get(dim, dim) if why == "element" else dim, "i32")
        if what == 6:
            return self.literal()
        if what == 7:
            axes = [d for d in shape if d != 1]
            if axes:
                d = choose(c, axes)
                return self.with_new_axes(self.offsets(d), self.axis_of(shape, d))
            return Value("arange(4)", "i32", (FIXED,)) if shape[-1:] == (FIXED,) else self.literal()
        if what == 8 and shape and shape[-1] == FIXED:
            self.features.add("arange")
            return Value("arange(4)", "i32", (FIXED,))
        if fitting:
            return choose(c, fitting)
        return self.literal()

    def offsets(self, symbol: Any) -> Value:
        self.features.add("offsets")
        if symbol == FIXED:
            return Value("arange(4)", "i32", (FIXED,))
        return Value(f"offsets({self.shape_entry(symbol)})", "i32", (symbol,))

    def sub_shape(self, shape: tuple) -> tuple:
        """A shape that broadcasts to `shape`: leading axes dropped, some sizes 1."""
        drop = self.c.integer(0, len(shape)) if chance(self.c, 30) else 0
        kept = shape[drop:]
        return tuple(1 if chance(self.c, 10) else d for d in kept)

    def with_new_axes(self, value: Value, shape: tuple) -> Value:
        """`value`, whose shape is `shape` without its 1s, indexed with None where `shape`
        has 1s (`v[:, None]`)."""
        if value.shape == shape:
            return value
        assert value.shape == tuple(d for d in shape if d != 1), (value, shape)
        self.features.add("index:none")
        index = ", ".join("None" if d == 1 else ":" for d in shape)
        return Value(f"({value.text})[{index}]", value.dtype, shape, value.constant)

    def axis_of(self, shape: tuple, d: Any) -> tuple:
        """`shape` with only its first `d` kept, every other entry 1."""
        at = shape.index(d)
        return tuple(x if i == at else 1 for i, x in enumerate(shape))

    def expression(self, shape: tuple, depth: int) -> Value:
        """An expression whose shape broadcasts to `shape`."""
        value = self.any_expression(shape, depth)
        assert broadcasts_to(value.shape, shape), (value, shape)
        return value

    def any_expression(self, shape: tuple, depth: int) -> Value:
        c = self.c
        if depth <= 0:
            return self.leaf(shape)
        what = c.integer(0, 16)
        if what <= 2:
            return self.leaf(shape)
        if what <= 5:
            return self.binary(shape, depth)
        if what == 6:
            return self.math(shape, depth)
        if what == 7:
            return self.reduction(shape, depth)
        if what == 8:
            inner = self.strong(self.expression(shape, depth - 1))
            dtype = choose(c, DTYPES)
            if inner.constant and kind(dtype) == "int" and kind(inner.dtype) == "float":
                dtype = "f32"  # a folded inf or 1e30 does not fit an integer
            self.features.add(f"cast:{dtype}")
            return Value(f"({inner.text}).to({dtype})", dtype, inner.shape, inner.constant)
        if what == 9:
            return self.select(shape, depth)
        if what == 10:
            return self.extremum(shape, depth)
        if what == 11 and len(shape) == 2 and 1 not in shape and shape[0] != shape[1]:
            return self.dot(shape, depth)
        if what == 12:
            return self.unary(shape, depth)
        if what == 13 and len(shape) == 2 and shape[0] != shape[1]:
            inner = self.expression((shape[1], shape[0]), depth - 1)
            if len(inner.shape) == 2:
                self.features.add("transpose")
                fn = choose(c, ("{}.T", "transpose({})"))
                return Value(fn.format(f"({inner.text})"), inner.dtype, inner.shape[::-1])
            return self.leaf(shape)
        if what == 14:
            return self.creation(shape)
        if what == 15 and len(shape) >= 1 and 1 not in shape:
            return self.new_axis(shape, depth)
        if what == 16:
            return self.random(shape, depth)
        return self.leaf(shape)

    def random(self, shape: tuple, depth: int) -> Value:
        """`rand`/`randn`/`randint(seed, offsets)`: an integer scalar argument (or literal)
        seed, integer offsets of any expression; the result has the offsets' shape."""
        c = self.c
        seed = self.scalar_argument(choose(c, ("i32", "i64", "i8")))
        if chance(c, 20):
            seed = Value(choose(c, ("0", "1234", "-7")), "int", constant=True)
        offsets = self.expression(shape, depth - 1)
        if offsets.dtype == "i1" or offsets.dtype == "bool":
            offsets = Value(
                f"({self.strong(offsets, offsets.shape).text}).to(i32)", "i32", offsets.shape
            )
        offsets = self.integer(offsets)
        fn = choose(c, ("rand", "randint", "randn"))
        self.features.add(f"random:{fn}")
        dtype = "i32" if fn == "randint" else "f32"
        return Value(f"{fn}({seed.text}, {offsets.text})", dtype, offsets.shape)

    def numeric(self, value: Value) -> Value:
        """`value`, converted when it is i1 (arithmetic on i1 is an error)."""
        if value.dtype == "i1":
            return Value(f"({value.text}).to(i32)", "i32", value.shape)
        if value.dtype == "bool":
            return Value("1", "int")
        return value

    def binary(self, shape: tuple, depth: int) -> Value:
        c = self.c
        a = self.expression(shape, depth - 1)
        b = self.expression(shape, depth - 1)
        if a.constant and b.constant:
            a = self.scalar_argument(choose(c, ("f32", "i32")))  # no folding (x // 0)
        if a.weak:
            a, b = b, a
        group = c.integer(0, 3)
        result_shape = broadcast(a.shape, b.shape)
        assert result_shape is not None
        if group == 0 or (group == 3 and kind(promote(a.dtype, b.dtype)) == "float"):
            a, b = self.numeric(a), self.numeric(b)
            op = choose(c, ("+", "*", "-", "/", "//", "%", "**"))
            if op == "**" and "f64" in (a.dtype, b.dtype):
                op = "*"  # f64 powers do not lower to PTX yet
            if b.weak and kind(a.dtype) == "int" and b.dtype == "int":
                b = self.fit_literal(b, a.dtype)
            dtype = promote(a.dtype, b.dtype)
            if op in ("/", "**") and kind(dtype) != "float":
                dtype = "f32"
            self.features.add(f"op:{op}")
            return Value(f"({a.text} {op} {b.text})", dtype, result_shape)
        if group == 1:
            if b.weak and b.dtype == "int" and kind(a.dtype) == "int":
                b = self.fit_literal(b, a.dtype)
            if a.dtype == "i1" or b.dtype in ("i1", "bool"):
                op = choose(c, ("==", "!="))
                if a.dtype != "i1" or b.dtype not in ("i1", "bool"):
                    a, b = self.numeric(a), self.numeric(b)
            else:
                op = choose(c, ("<", "<=", ">", ">=", "==", "!="))
            self.features.add(f"op:{op}")
            return Value(f"({a.text} {op} {b.text})", "i1", result_shape)
        if group == 2:
            # Bitwise: two booleans, or two integers.
            if a.dtype == "i1" and b.dtype in ("i1", "bool"):
                op = choose(c, ("&", "|", "^"))
                self.features.add(f"op:{op}")
                return Value(f"({a.text} {op} {b.text})", "i1", result_shape)
            a, b = self.integer(a), self.integer(b)
            if b.weak:
                b = self.fit_literal(b, a.dtype)
            op = choose(c, ("&", "|", "^"))
            self.features.add(f"op:{op}")
            return Value(f"({a.text} {op} {b.text})", promote(a.dtype, b.dtype), result_shape)
        # Shifts by a small literal amount (by the width or more is undefined on the GPU).
        a = self.integer(a)
        op = choose(c, ("<<", ">>"))
        self.features.add(f"op:{op}")
        return Value(f"({a.text} {op} {c.integer(0, 3)})", a.dtype, a.shape)

    def integer(self, value: Value) -> Value:
        """`value` as an integer (cast to i32 when it is not one)."""
        if kind(value.dtype) == "int":
            return value
        if value.weak:
            return Value(str(self.c.integer(1, 7)), "int", constant=True)
        if value.constant:  # a folded inf does not convert: an integer tile of its shape
            number = self.c.integer(1, 7)
            return Value(
                f"full({self.shape_list(value.shape)}, {number}, i32)", "i32", value.shape, True
            )
        return Value(f"({value.text}).to(i32)", "i32", value.shape)

    def fit_literal(self, literal: Value, dtype: str) -> Value:
        """An integer literal that fits `dtype`."""
        if literal.dtype != "int" or dtype not in ("i8",):
            return literal
        number = int(literal.text, 0)
        return literal if -128 <= number <= 127 else Value("7", "int")

    def unary(self, shape: tuple, depth: int) -> Value:
        inner = self.strong(self.expression(shape, depth - 1))
        if inner.dtype == "i1":
            op = "~"
        elif inner.dtype in INTS:
            op = choose(self.c, ("-", "~", "+"))
        else:
            op = choose(self.c, ("-", "+"))
        self.features.add(f"op:unary{op}")
        return Value(f"({op}{inner.text})", inner.dtype, inner.shape, inner.constant)

    def math(self, shape: tuple, depth: int) -> Value:
        inner = self.numeric(self.strong(self.expression(shape, depth - 1)))
        functions = MATH_F64 if inner.dtype == "f64" else MATH
        fn = choose(self.c, functions)
        self.features.add(f"math:{fn}")
        dtype = inner.dtype if inner.dtype in FLOATS or fn == "abs" else "f32"
        return Value(f"{fn}({inner.text})", dtype, inner.shape, inner.constant)

    def extremum(self, shape: tuple, depth: int) -> Value:
        a = self.numeric(self.strong(self.expression(shape, depth - 1)))
        b = self.numeric(self.expression(shape, depth - 1))
        if a.constant and b.constant:
            a = self.scalar_argument("f32")
        if b.weak and b.dtype == "int" and kind(a.dtype) == "int":
            b = self.fit_literal(b, a.dtype)
        fn = choose(self.c, ("maximum", "minimum"))
        self.features.add(f"builtin:{fn}")
        shape_out = broadcast(a.shape, b.shape)
        return Value(f"{fn}({a.text}, {b.text})", promote(a.dtype, b.dtype), shape_out)

    def condition(self, shape: tuple, depth: int) -> Value:
        """An i1 value: a mask from offsets, a comparison, or a boolean read."""
        c = self.c
        what = c.integer(0, 3)
        if what == 0 and shape and any(d != 1 for d in shape):
            # A mask from element indices: `offsets(tm)[:, None] <= offsets(tn)[None, :]`.
            axes = [d for d in shape if d != 1]
            x, y = choose(c, axes), choose(c, axes)
            left = self.with_new_axes(self.offsets(x), self.axis_of(shape, x))
            if x == y or chance(c, 40):
                bound = choose(c, ("M", "3", "s"))
                if bound == "s":
                    right = self.scalar_argument("i32")
                else:
                    right = Value(bound, "i32" if bound == "M" else "int")
            else:
                right = self.with_new_axes(self.offsets(y), self.axis_of(shape, y))
            op = choose(c, ("<", "<=", ">=", "==", "!="))
            self.features.add("mask:offsets")
            return Value(
                f"({left.text} {op} {right.text})", "i1", broadcast(left.shape, right.shape)
            )
        value = self.expression(shape, depth - 1)
        if value.dtype == "i1":
            return value
        if value.weak:
            return Value(choose(c, ("True", "False")), "bool")
        op = choose(c, (">", "<=", "=="))
        return Value(f"({value.text} {op} 0)", "i1", value.shape)

    def select(self, shape: tuple, depth: int) -> Value:
        condition = self.condition(shape, depth)
        a = self.expression(shape, depth - 1)
        b = self.expression(shape, depth - 1)
        if a.constant and b.constant:
            a = self.scalar_argument("f32")
        if condition.weak:
            condition = Value(f"full([], {condition.text}, i1)", "i1", ())
        out = broadcast(broadcast(a.shape, b.shape) or (), condition.shape)
        self.features.add("builtin:where")
        return Value(f"where({condition.text}, {a.text}, {b.text})", promote(a.dtype, b.dtype), out)

    def reduction(self, shape: tuple, depth: int) -> Value:
        """A reduction whose result broadcasts to `shape`: an axis is added, then reduced."""
        c = self.c
        if chance(c, 15):
            return self.scan(shape, depth)
        if len(shape) >= 2 and 1 not in shape:
            return self.binary(shape, depth)
        extra = choose(c, [d for d in self.symbols() if d not in shape] or [FIXED])
        source = list(shape)
        keepdims = False
        if 1 in shape and chance(c, 70):
            position = shape.index(1)
            source[position] = extra
            keepdims = True
        else:
            position = c.integer(0, len(shape))
            source.insert(position, extra)
        source_shape = tuple(source)
        if len(set(d for d in source_shape if d != 1)) < len([d for d in source_shape if d != 1]):
            return self.leaf(shape)  # [BM, BM] is not a shape reads can make
        inner = self.strong(self.expression(source_shape, depth - 1), source_shape)
        if inner.shape != source_shape:
            inner = self.full_shape(inner, source_shape)
        fn = choose(c, ("sum", "max", "min", "mean"))
        inner = self.numeric(inner)
        if chance(c, 15):  # an arg-reduction instead: i32 positions, an axis always named
            return self.arg_reduction(inner, position, keepdims)
        everything = chance(c, 10)
        if everything:
            keep = chance(c, 30) and len(source_shape) <= len(shape)
            arguments = inner.text + (", keepdims=True" if keep else "")
            result = tuple(1 for _ in source_shape) if keep else ()
        else:
            axis = choose(c, (position, position - len(source_shape)))
            arguments = f"{inner.text}, axis={axis}" + (", keepdims=True" if keepdims else "")
            result = list(source_shape)
            if keepdims:
                result[position] = 1
            else:
                del result[position]
            result = tuple(result)
        dtype = inner.dtype
        if fn == "mean" and dtype not in FLOATS:
            dtype = "f32"
        elif fn == "sum" and dtype in ("i8", "i16"):
            dtype = "i32"
        self.features.add(f"reduce:{fn}" + (":all" if everything else ""))
        return Value(f"{fn}({arguments})", dtype, result, inner.constant)

    def arg_reduction(self, inner: Value, position: int, keepdims: bool) -> Value:
        """`argmax`/`argmin` of `inner` along `position` (tilec/frontend/sema_scan.py)."""
        fn = choose(self.c, ("argmax", "argmin"))
        axis = choose(self.c, (position, position - len(inner.shape)))
        keep = ", keepdims=True" if keepdims else ""
        result = list(inner.shape)
        if keepdims:
            result[position] = 1
        else:
            del result[position]
        self.features.add(f"arg:{fn}")
        return Value(f"{fn}({inner.text}, axis={axis}{keep})", "i32", tuple(result))

    def scan(self, shape: tuple, depth: int) -> Value:
        """A scan of `shape` along one of its axes; `topk` along the fixed extent's axis (whose
        k largest of a tile of that size are the whole axis, sorted)."""
        c = self.c
        axes = [i for i, d in enumerate(shape) if d != 1]
        if not axes:
            return self.binary(shape, depth)
        inner = self.strong(self.expression(shape, depth - 1), shape)
        if inner.shape != shape:
            inner = self.full_shape(inner, shape)
        inner = self.numeric(inner)
        fixed = [i for i in axes if shape[i] == FIXED]
        topk = bool(fixed) and chance(c, 50)
        position = fixed[0] if topk else choose(c, axes)
        axis = choose(c, (position, position - len(shape)))
        if topk:
            fn = choose(c, ("topk", "topk_indices"))
            self.features.add(f"scan:{fn}")
            dtype = "i32" if fn == "topk_indices" else inner.dtype
            return Value(f"{fn}({inner.text}, {FIXED}, axis={axis})", dtype, shape)
        fn = choose(c, ("cumsum", "cumprod", "cummax", "cummin"))
        dtype = inner.dtype
        if fn in ("cumsum", "cumprod") and dtype in ("i8", "i16"):
            dtype = "i32"
        self.features.add(f"scan:{fn}")
        return Value(f"{fn}({inner.text}, axis={axis})", dtype, shape, inner.constant)

    def full_shape(self, value: Value, shape: tuple) -> Value:
        """`value` broadcast to exactly `shape` (adds a zero tile of its dtype)."""
        dtype = value.dtype
        zero = f"zeros({self.shape_list(shape)}, {dtype})"
        if dtype == "i1":
            return Value(f"({zero} | {value.text})", "i1", shape, value.constant)
        return Value(f"({zero} + {value.text})", dtype, shape, value.constant)

    def dot(self, shape: tuple, depth: int) -> Value:
        c = self.c
        inner = choose(c, [d for d in self.symbols() if d not in shape] or [16])
        if inner == 16:
            return self.binary(shape, depth)
        dtype = choose(c, DOT_OPERANDS)
        lhs = self.operand((shape[0], inner), dtype, depth - 1)
        rhs = self.operand((inner, shape[1]), dtype, depth - 1)
        self.has_dot = True
        self.features.add(f"dot:{dtype}")
        text = f"({lhs} @ {rhs})" if chance(c, 70) else f"dot({lhs}, {rhs})"
        return Value(text, DOT_RESULTS[dtype], shape)

    def operand(self, shape: tuple, dtype: str, depth: int) -> str:
        """A dot operand of exactly `shape` and `dtype`: a read, or a computed tile (which IR
        generation must mask along the contraction)."""
        if chance(self.c, 50) or depth <= 0:
            return self.read(shape, dtype).text
        inner = self.expression(shape, depth)
        self.features.add("dot:computed-operand")
        return f"(zeros({self.shape_list(shape)}, {dtype}) + ({inner.text}).to({dtype}))"

    def new_axis(self, shape: tuple, depth: int) -> Value:
        """`x[:, None]` / `x[None, :]` of an expression of one axis fewer."""
        position = self.c.integer(0, len(shape) - 1)
        reduced = shape[:position] + shape[position + 1 :]
        inner = self.strong(self.expression(reduced, depth - 1), reduced)
        if inner.shape != reduced or not reduced:  # scalar arguments cannot be indexed
            inner = self.full_shape(inner, reduced)
        target = (*shape[:position], 1, *shape[position + 1 :])
        index = ["None" if i == position else ":" for i in range(len(shape))]
        self.features.add("index:none")
        return Value(f"({inner.text})[{', '.join(index)}]", inner.dtype, target, inner.constant)

    def creation(self, shape: tuple) -> Value:
        dtype = choose(self.c, DTYPES)
        sub = self.sub_shape(shape)
        if chance(self.c, 50):
            self.features.add("builtin:zeros")
            return Value(f"zeros({self.shape_list(sub)}, {dtype})", dtype, sub, constant=True)
        fill = self.literal() if chance(self.c, 60) else self.scalar_argument("f32")
        if fill.weak and kind(dtype) == "int" and fill.dtype == "float":
            fill = Value("3", "int")
        if fill.weak and dtype == "i8" and fill.dtype == "int":
            fill = self.fit_literal(fill, "i8")
        if fill.weak and dtype == "i1":
            fill = Value(choose(self.c, ("True", "False")), "bool")
        if not fill.weak and kind(dtype) != kind(fill.dtype):
            fill = Value(f"({fill.text}).to({dtype})", dtype)
        self.features.add("builtin:full")
        text = f"full({self.shape_list(sub)}, {fill.text}, {dtype})"
        return Value(text, dtype, sub, fill.constant)


# ---------------------------------------------------------------------------------------------
# Whole programs


def generate_program(
    chooser: Chooser, kernels: int = 1, seed: int = 0, prefix: str = "k"
) -> GeneratedProgram:
    """A program of `kernels` generated kernels (named prefix0, prefix1, ...) with extents for
    every dimension they use."""
    features: set[str] = set()
    texts = []
    names = []
    for i in range(kernels):
        name = f"{prefix}{i}"
        writer = KernelWriter(chooser, name, features, first_name=1000 * i)
        texts.append(writer.program())
        names.append(name)
    extents = {
        "M": choose(chooser, GRID_EXTENTS),
        "N": choose(chooser, GRID_EXTENTS),
        "K": choose(chooser, LOOP_EXTENTS),
        "D": choose(chooser, WHOLE_EXTENTS),
        "E": choose(chooser, ELEMENT_EXTENTS),
        "B": choose(chooser, ELEMENT_EXTENTS),
    }
    return GeneratedProgram("\n\n".join(texts), names, extents, seed, features, texts)


def sample_program(seed: int, kernels: int = 1) -> GeneratedProgram:
    """The program of `seed` (bulk runs: the same seed gives the same program)."""
    return generate_program(RandomChooser(f"tilec-fuzz-{seed}"), kernels, seed)


def programs(kernels: int = 1) -> Any:
    """A hypothesis strategy of generated programs (they shrink towards small kernels)."""
    from hypothesis import strategies as st

    @st.composite
    def strategy(draw: Any) -> GeneratedProgram:
        data = draw(st.data())
        seed = draw(st.integers(0, 2**16))
        return generate_program(HypothesisChooser(data), kernels, seed)

    return strategy()
