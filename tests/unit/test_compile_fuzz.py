"""Generated tile programs go through the whole frontend: IR that verifies, or a `TileError`.

The mutation fuzz (test_frontend_fuzz.py) mostly produces syntax errors and name errors; few of
its inputs reach IR generation. This one writes kernels the way an author would, from a
type-directed grammar: tensor reads of every index kind (tile, whole, scalar, element
variable), arithmetic with broadcasting and literals, every builtin, reductions with and
without keepdims, dots of tiles and of computed operands, casts, transposes, new axes, stores
with conversions, sequential loops that carry values, element loops. About one operand in
twenty is picked without regard to its shape, and dtypes are mixed freely, so that about half
of the programs are wrong in ways only analysis can tell.

Every program must compile with `tilec.compile` to IR that verifies and prints back to the
same text, or raise a located `TileError`. Nothing else may escape: an `InternalCompilerError`
is a bug in IR generation. The seed is fixed, so a failure names a program that reproduces it.
"""

from __future__ import annotations

import random
import traceback
from dataclasses import dataclass

import pytest

import tilec
from tilec.diagnostics import TileError
from tilec.ir.parser import parse_module
from tilec.ir.printer import print_op

PROGRAMS_PER_SCENARIO = 1_400
SEED = 20261130

FLOATS = ("f16", "bf16", "f32", "f64")
INTS = ("i8", "i16", "i32", "i64")
DTYPES = ("i1", *INTS, *FLOATS)
DOT_OPERANDS = ("f16", "bf16", "f32", "f64", "i8")
DOT_RESULTS = {"i8": "i32", "f64": "f64"}
MATH = (
    *("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "tanh", "erf"),
    *("sigmoid", "gelu", "sin", "cos", "floor", "ceil"),
)
# The dtypes of Python literals until they meet a typed operand, in the order of kinds.
WEAK = ("bool", "int", "float")


@dataclass(frozen=True)
class Value:
    """An expression's text and (approximate) type: the generator's model, not sema's."""

    text: str
    dtype: str
    shape: tuple = ()


@dataclass(frozen=True)
class Loop:
    """A sequential tiles() loop a scenario may open, and what can be read inside it."""

    header: str
    variable: str
    symbol: str | None  # the tile-size symbol of its dimension (None: an element loop)
    leaves: tuple[Value, ...]


@dataclass(frozen=True)
class Scenario:
    """A kernel signature, its grid, what can be read, and what can be written."""

    name: str
    signature: str
    grid: str
    symbols: dict  # tile-size symbol -> how a shape list names it ("BM" -> "tm")
    leaves: tuple[Value, ...]
    targets: tuple[Value, ...]  # store targets: text and region type
    loops: tuple[Loop, ...]
    pin: str  # a tile size the author may pin, as @kernel(tile={...}) writes it


SCENARIOS = (
    Scenario(
        name="tiled",
        pin='"M": 64, "K": 32',
        signature="def k(a: f16[M, K], b: f16[K, N], x: f32[M, N], v: f32[N], w: i32[M, N], "
        "q: i8[M, 4], z: f64[4], g: bf16[E, N], c: f32[M, N], ci: i32[M, N], r: f32[M], "
        "s: f32, n: i32):",
        grid="for tm, tn in tiles(M, N):",
        symbols={"BM": "tm", "BN": "tn"},
        leaves=(
            Value("x[tm, tn]", "f32", ("BM", "BN")),
            Value("w[tm, tn]", "i32", ("BM", "BN")),
            Value("v[tn]", "f32", ("BN",)),
            Value("q[tm, :]", "i8", ("BM", 4)),
            Value("q[tm, 3]", "i8", ("BM",)),
            Value("z[:]", "f64", (4,)),
            Value("z[2]", "f64", ()),
            Value("r[tm]", "f32", ("BM",)),
            Value("s", "f32"),
            Value("n", "i32"),
            Value("M", "i32"),
            Value("offsets(tm)", "i32", ("BM",)),
            Value("offsets(tn)", "i32", ("BN",)),
            Value("arange(4)", "i32", (4,)),
        ),
        targets=(
            Value("c[tm, tn]", "f32", ("BM", "BN")),
            Value("ci[tm, tn]", "i32", ("BM", "BN")),
            Value("r[tm]", "f32", ("BM",)),
            Value("x[tm, tn]", "f32", ("BM", "BN")),
            Value("ci[tm, 0]", "i32", ("BM",)),
            Value("z[1]", "f64", ()),
        ),
        loops=(
            Loop(
                "for tk in tiles(K):",
                "tk",
                "BK",
                (
                    Value("a[tm, tk]", "f16", ("BM", "BK")),
                    Value("b[tk, tn]", "f16", ("BK", "BN")),
                    Value("offsets(tk)", "i32", ("BK",)),
                ),
            ),
            Loop(
                "for e in tiles(E, tile={E: 1}):",
                "e",
                None,
                (Value("g[e, tn]", "bf16", ("BN",)), Value("e", "i32")),
            ),
        ),
    ),
    Scenario(
        name="rows",
        pin='"M": 16',
        signature="def k(x: f16[M, N], g: f32[N], p: i1[M, N], y: f32[M, N], yi: i8[M, N], "
        "r: f32[M], eps: f32):",
        grid="for tm in tiles(M):",
        symbols={"BM": "tm", "BN": "N"},
        leaves=(
            Value("x[tm, :]", "f16", ("BM", "BN")),
            Value("g[:]", "f32", ("BN",)),
            Value("p[tm, :]", "i1", ("BM", "BN")),
            Value("r[tm]", "f32", ("BM",)),
            Value("eps", "f32"),
            Value("N", "i32"),
            Value("offsets(N)", "i32", ("BN",)),
            Value("offsets(tm)", "i32", ("BM",)),
            Value("g[0]", "f32"),
        ),
        targets=(
            Value("y[tm, :]", "f32", ("BM", "BN")),
            Value("yi[tm, :]", "i8", ("BM", "BN")),
            Value("p[tm, :]", "i1", ("BM", "BN")),
            Value("r[tm]", "f32", ("BM",)),
        ),
        loops=(),
    ),
    Scenario(
        name="heads",
        pin='"M": 128, N: 64',
        signature="def k(q: f16[B, M, D], kv: f16[B, N, D], o: f32[B, M, D], t: f32[B], "
        "u: i32[B, 8], scale: f32):",
        grid="for bi, tm in tiles(B, M, tile={B: 1}):",
        symbols={"BM": "tm", "BD": "D"},
        leaves=(
            Value("q[bi, tm, :]", "f16", ("BM", "BD")),
            Value("t[bi]", "f32"),
            Value("u[bi, :]", "i32", (8,)),
            Value("bi", "i32"),
            Value("scale", "f32"),
            Value("offsets(D)", "i32", ("BD",)),
        ),
        targets=(
            Value("o[bi, tm, :]", "f32", ("BM", "BD")),
            Value("t[bi]", "f32"),
            Value("u[bi, :]", "i32", (8,)),
        ),
        loops=(
            Loop(
                "for tn in tiles(N):",
                "tn",
                "BN",
                (
                    Value("kv[bi, tn, :]", "f16", ("BN", "BD")),
                    Value("kv[bi, tn, :].T", "f16", ("BD", "BN")),
                    Value("offsets(tn)", "i32", ("BN",)),
                ),
            ),
        ),
    ),
)
LITERALS = (
    Value("2", "int"),
    Value("0.5", "float"),
    Value("-1", "int"),
    Value("True", "bool"),
    Value("inf", "float"),
    Value("1e-6", "float"),
)


def broadcasts_to(shape: tuple, target: tuple) -> bool:
    if len(shape) > len(target):
        return False
    return all(s in (t, 1) for s, t in zip(reversed(shape), reversed(target)))


def promote(a: str, b: str) -> str:
    """The language's promotion, roughly: enough for the generator to stay mostly typed."""
    if a in WEAK:
        a, b = b, a
    if b in WEAK:
        if a in WEAK:
            return max(a, b, key=WEAK.index)
        kind = "float" if a in FLOATS else "int" if a in INTS else "bool"
        return a if WEAK.index(b) <= WEAK.index(kind) else {"int": "i32", "float": "f32"}[b]
    if a == b:
        return a
    rank = {d: i for i, d in enumerate(DTYPES)}
    if {a, b} == {"f16", "bf16"}:
        return "f32"
    return max(a, b, key=lambda d: (d in FLOATS, d in INTS, rank[d]))


class ProgramWriter:
    """Writes one random kernel of a scenario."""

    def __init__(self, rng: random.Random, scenario: Scenario):
        self.rng = rng
        self.scenario = scenario
        self.locals: dict[str, Value] = {}
        self.in_loop: list[Loop] = []  # the open loops, outermost first
        self.counter = 0

    # -- expressions

    def leaves(self) -> list[Value]:
        found = [*self.scenario.leaves, *LITERALS, *self.locals.values()]
        for loop in self.in_loop:
            found += loop.leaves
        return found

    def symbol_text(self, dim) -> str:
        """How a shape list names a tile size: its loop variable or dimension name."""
        if isinstance(dim, int):
            return str(dim)
        known = dict(self.scenario.symbols)
        known.update((loop.symbol, loop.variable) for loop in self.in_loop if loop.symbol)
        return known.get(dim, "1")

    def shape_text(self, shape: tuple) -> str:
        return "[" + ", ".join(self.symbol_text(d) for d in shape) + "]"

    def expr(self, shape: tuple, depth: int) -> Value:
        """An expression whose shape broadcasts to `shape` (most of the time)."""
        rng = self.rng
        if rng.random() < 0.05:
            return rng.choice(self.leaves())  # any shape: type errors are inputs too
        if depth <= 0 or rng.random() < 0.2:
            fitting = [v for v in self.leaves() if broadcasts_to(v.shape, shape)]
            if fitting:
                return rng.choice(fitting)
            return self.creation(shape)
        choice = rng.randrange(16)
        if choice < 4:
            return self.binary(shape, depth)
        if choice == 4:
            return self.math(shape, depth)
        if choice == 5:
            return self.reduction(shape, depth)
        if choice == 6:
            inner = self.expr(shape, depth - 1)
            dtype = rng.choice(DTYPES)
            return Value(f"({inner.text}).to({dtype})", dtype, inner.shape)
        if choice == 7 and len(shape) == 2:
            inner = self.expr((shape[1], shape[0]), depth - 1)
            if len(inner.shape) != 2:
                return inner
            return Value(f"({inner.text}).T", inner.dtype, inner.shape[::-1])
        if choice == 8 and len(shape) == 2:
            return self.new_axis(shape, depth)
        if choice == 9:
            cond = self.expr(shape, depth - 1)
            on_true, on_false = self.expr(shape, depth - 1), self.expr(shape, depth - 1)
            test = rng.choice((" > 0", " <= 0.5")) if cond.dtype not in ("i1", "bool") else ""
            return Value(
                f"where({cond.text}{test}, {on_true.text}, {on_false.text})",
                promote(on_true.dtype, on_false.dtype),
                max(on_true.shape, on_false.shape, cond.shape, key=len),
            )
        if choice == 10:
            a, b = self.expr(shape, depth - 1), self.expr(shape, depth - 1)
            fn = rng.choice(("maximum", "minimum"))
            return Value(f"{fn}({a.text}, {b.text})", promote(a.dtype, b.dtype), a.shape)
        if choice == 11 and len(shape) == 2:
            return self.dot(shape, depth)
        if choice == 12:
            inner = self.expr(shape, depth - 1)
            if inner.dtype in ("i1", "bool"):
                op = "~"
            else:
                op = rng.choice(("-", "+", "~") if inner.dtype in INTS else ("-", "+"))
            return Value(f"({op}{inner.text})", inner.dtype, inner.shape)
        if choice == 13:
            return self.creation(shape)
        return rng.choice(self.leaves())

    def binary(self, shape: tuple, depth: int) -> Value:
        rng = self.rng
        a, b = self.expr(shape, depth - 1), self.expr(shape, depth - 1)
        dtype = promote(a.dtype, b.dtype)
        operators = ["+", "-", "*", "/", "//", "%", "**", "<", "<=", ">", ">=", "==", "!="]
        if dtype in INTS or dtype in ("int", "i1", "bool"):
            operators += ["&", "|", "^"]
        if dtype in INTS or dtype == "int":
            operators += ["<<", ">>"]
        op = rng.choice(operators)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            dtype = "i1"
        elif op in ("/", "**") and dtype not in FLOATS:
            dtype = "f32"
        result_shape = a.shape if len(a.shape) >= len(b.shape) else b.shape
        return Value(f"({a.text} {op} {b.text})", dtype, result_shape)

    def math(self, shape: tuple, depth: int) -> Value:
        inner = self.expr(shape, depth - 1)
        fn = self.rng.choice(MATH)
        dtype = inner.dtype if inner.dtype in FLOATS or fn == "abs" else "f32"
        return Value(f"{fn}({inner.text})", dtype, inner.shape)

    def reduction(self, shape: tuple, depth: int) -> Value:
        """A reduction whose result has `shape`: an axis is added back, then reduced."""
        rng = self.rng
        extra = rng.choice((*self.symbols_in_scope(), 4, 1))
        position = rng.randrange(len(shape) + 1)
        keepdims = position < len(shape) and shape[position] == 1 and rng.random() < 0.7
        source = list(shape)
        if keepdims:
            source[position] = extra
        else:
            source.insert(position, extra)
        inner = self.expr(tuple(source), depth - 1)
        if not inner.shape:
            return inner
        kind = rng.choice(("sum", "max", "min", "mean"))
        axis = rng.choice((position, position - len(source)))
        arguments = f"{inner.text}, axis={axis}" + (", keepdims=True" if keepdims else "")
        if rng.random() < 0.1:  # all axes
            arguments = inner.text + (", keepdims=True" if rng.random() < 0.3 else "")
        dtype = inner.dtype
        if kind == "mean" and dtype not in FLOATS:
            dtype = "f32"
        elif kind == "sum" and dtype in ("i1", "i8", "i16", "bool"):
            dtype = "i32"
        return Value(f"{kind}({arguments})", dtype, tuple(shape))

    def new_axis(self, shape: tuple, depth: int) -> Value:
        """`x[:, None]` or `x[None, :]` of a 1-D expression, `x[None, None]` of a scalar."""
        if self.rng.random() < 0.2:
            inner = self.expr((), depth - 1)
            if not inner.shape:
                return Value(f"({inner.text})[None, None]", inner.dtype, (1, 1))
        if self.rng.random() < 0.5:
            inner = self.expr(shape[:1], depth - 1)
            text = f"({inner.text})[:, None]"
            new_shape = (*inner.shape, 1)
        else:
            inner = self.expr(shape[1:], depth - 1)
            text = f"({inner.text})[None, :]"
            new_shape = (1, *inner.shape)
        return Value(text, inner.dtype, new_shape) if len(inner.shape) == 1 else inner

    def dot(self, shape: tuple, depth: int) -> Value:
        rng = self.rng
        inner = rng.choice([*self.symbols_in_scope(), 16])
        dtype = rng.choice(DOT_OPERANDS)
        lhs = self.operand((shape[0], inner), dtype, depth - 1)
        rhs = self.operand((inner, shape[1]), dtype, depth - 1)
        return Value(f"({lhs} @ {rhs})", DOT_RESULTS.get(dtype, "f32"), shape)

    def operand(self, shape: tuple, dtype: str, depth: int) -> str:
        """A dot operand: a read of exactly this shape and dtype when there is one, else a
        computed tile (which IR generation must mask along the contraction)."""
        reads = [v for v in self.leaves() if v.shape == shape and v.dtype == dtype]
        if reads and self.rng.random() < 0.5:
            return self.rng.choice(reads).text
        inner = self.expr(shape, depth)
        return f"(zeros({self.shape_text(shape)}, {dtype}) + ({inner.text}).to({dtype}))"

    def creation(self, shape: tuple) -> Value:
        rng = self.rng
        dtype = rng.choice(DTYPES)
        if rng.random() < 0.5:
            return Value(f"zeros({self.shape_text(shape)}, {dtype})", dtype, shape)
        fill = rng.choice([*LITERALS, *(v for v in self.leaves() if not v.shape)])
        return Value(f"full({self.shape_text(shape)}, {fill.text}, {dtype})", dtype, shape)

    def symbols_in_scope(self) -> list[str]:
        return [*self.scenario.symbols, *(loop.symbol for loop in self.in_loop if loop.symbol)]

    # -- statements

    def random_shape(self) -> tuple:
        rng = self.rng
        symbols = self.symbols_in_scope()
        shape = [rng.choice(symbols) for _ in range(rng.choice((0, 1, 2, 2, 2)))]
        return tuple(d if rng.random() < 0.85 else 1 for d in shape)

    def statements(self, indent: int, count: int, depth: int) -> list[str]:
        rng = self.rng
        pad = "    " * indent
        lines: list[str] = []
        for _ in range(count):
            choice = rng.randrange(10)
            if choice < 4:
                if self.locals and rng.random() < 0.4:
                    # Rebinding a name: inside a loop, this makes it a carried value.
                    name = rng.choice(list(self.locals))
                    bound = self.locals[name]
                    text = self.expr(bound.shape, depth).text
                    op = rng.choice(("=", "+=", "-=", "*=", "/=", "//=", "%=", "|=", "@="))
                    if op == "=" and rng.random() < 0.8:
                        text = f"({text}).to({bound.dtype})" if bound.dtype not in WEAK else text
                    lines.append(f"{pad}{name} {op} {text}")
                else:
                    self.counter += 1
                    name = f"t{self.counter}"
                    value = self.expr(self.random_shape(), depth)
                    lines.append(f"{pad}{name} = {value.text}")
                    self.locals[name] = value
            elif choice < 7:
                target = rng.choice(self.scenario.targets)
                value = self.expr(target.shape, depth)
                text = value.text
                if (value.dtype in FLOATS) != (target.dtype in FLOATS) and rng.random() < 0.9:
                    text = f"({text}).to({target.dtype})"
                op = "+=" if rng.random() < 0.15 and target.dtype != "i1" else "="
                lines.append(f"{pad}{target.text} {op} {text}")
            elif choice < 9 and indent < 5:
                lines += self.loop(indent, depth)
            else:
                lines.append(f"{pad}pass")
        return lines

    def loop(self, indent: int, depth: int) -> list[str]:
        rng = self.rng
        # A dimension is tiled by one loop at a time: no loop nests in itself.
        choices = [loop for loop in self.scenario.loops if loop not in self.in_loop]
        if not choices:
            return []
        loop = rng.choice(choices)
        pad = "    " * indent
        outer_locals = dict(self.locals)
        self.in_loop.append(loop)
        body = self.statements(indent + 1, rng.randint(1, 3), depth)
        self.in_loop.pop()
        # Names first bound in the loop are local to it; rebound outer names are carried.
        self.locals = outer_locals
        return [f"{pad}{loop.header}", *(body or [f"{pad}    pass"])]

    def program(self) -> str:
        scenario = self.scenario
        lines = [scenario.signature, f"    {scenario.grid}"]
        if self.rng.random() < 0.2:
            # Pinned decisions become func attributes; they must not disturb anything else.
            pins = f"tile={{{scenario.pin}}}, " if self.rng.random() < 0.5 else ""
            lines.insert(0, f"@kernel({pins}warps={self.rng.choice((2, 4, 8))}, stages=2)")
        body = self.statements(2, self.rng.randint(1, 6), self.rng.randint(1, 4))
        return "\n".join([*lines, *(body or ["        pass"])]) + "\n"


def test_promotion_model_agrees_with_the_language_on_samples():
    # The generator's model is rough, but where the language is plain it must agree.
    assert promote("f16", "f32") == "f32"
    assert promote("i8", "int") == "i8"
    assert promote("i32", "float") == "f32"
    assert promote("f16", "bf16") == "f32"
    assert promote("i1", "i8") == "i8"
    assert broadcasts_to(("BN",), ("BM", "BN")) and not broadcasts_to(("BM",), ("BM", "BN"))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_generated_programs_compile_or_fail_with_tile_errors(scenario: Scenario):
    rng = random.Random(f"{SEED}-{scenario.name}")
    compiled = rejected = 0
    for _ in range(PROGRAMS_PER_SCENARIO):
        text = ProgramWriter(rng, scenario).program()
        try:
            program = tilec.compile(text)
        except TileError as error:
            rejected += 1
            assert error.loc.known, f"error without a position: {error.message}\n{text}"
            continue
        except Exception:  # the property under test: nothing else may escape
            pytest.fail(f"{traceback.format_exc()}\nfor input:\n{text}")
        compiled += 1
        ir = program.tir
        assert print_op(parse_module(ir, "generated.tir")) == ir, text
    # The generator must reach IR generation often, and still produce wrong programs.
    assert compiled >= PROGRAMS_PER_SCENARIO // 3, (compiled, rejected)
    assert rejected > 0
