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
  tensor-core paths, f32, f64, i8, and f8e4m3/f8e5m2 products in f32: wgmma k32 when both
  operands are K-major, widened to f16 otherwise);
* an online sum after the body of some kernels without a dot (a running maximum and the sum of
  exponentials it rescales, over a K loop: what split-reduction splits as a rescaled sum),
  from a chooser of its own so that the other programs stay what their seeds always gave;
* sequential `tiles()` loops (tiled and element loops, nested) with carried values and
  augmented assignments, whole dimensions, extents that no tile divides;
* scalar control flow: `range()` loops over counts from an `i32` argument (empty, negative,
  strided and counting down) and `if`/`else` on comparisons of one (with `and`/`or`/`not`),
  their bodies carrying outer names;
* pins: `@kernel(tile=..., warps=..., stages=...)` and `tiles(..., tile={B: 1})`.

Choices go through a `Chooser`: `RandomChooser` for seeded bulk runs (`sample_program(seed)`),
`HypothesisChooser` inside hypothesis strategies (`programs()`), so that a failing program
shrinks: every choice's first alternative is the simplest one.

Three modules, each building on the one before: `tilec.fuzz.model` (dtypes, promotion,
broadcasting, the choosers), `tilec.fuzz.expressions` (`ExpressionWriter`: an expression for a
shape) and this one (`KernelWriter`, an `ExpressionWriter`: statements, loops and the kernel
around them; whole programs, the sampler and the hypothesis strategy).

**Adding a construct** when the language grows: add its case to
`ExpressionWriter.any_expression` (or a statement kind to `KernelWriter.statements`) with the
type rule the language gives it, keep the first alternative of every choice the simplest, and
run `python -m tilec.fuzz.differential --count 200` (docs/testing.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilec.fuzz.expressions import ExpressionWriter
from tilec.fuzz.model import (
    ALIGNED_EXTENTS,
    DOT_RESULTS,
    DTYPES,
    ELEMENT_EXTENTS,
    FIXED,
    FLOATS,
    GRID_EXTENTS,
    LOOP_EXTENTS,
    TENSOR_CORE_DOTS,
    WEAK_DEFAULT,
    WHOLE_EXTENTS,
    Chooser,
    HypothesisChooser,
    Loop,
    RandomChooser,
    Tensor,
    Value,
    chance,
    choose,
    kind,
)

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


ONLINE_SHARE = 15  # percent of the kernels without a dot that get an online sum after their body
# Percent of the other kernels without a dot and with a 1-D grid of rows that get a running
# scan before their body (what split-reduction splits as a scan, passes/split_scan.py).
SCAN_SHARE = 20
# Percent of the kernels left (no dot, a 1-D grid of rows, no online sum or scan) that get a
# two-pass idiom before their body: a row reduction over K, then a loop over K applying it
# (what split-reduction splits into a pass of blocks each, passes/split_passes.py).
TWO_PASS_SHARE = 30


class KernelWriter(ExpressionWriter):
    """Writes one kernel: its body first, collecting the parameters it reads and writes."""

    def __init__(
        self,
        chooser: Chooser,
        name: str,
        features: set[str],
        first_name: int = 0,
        idioms: Chooser | None = None,
    ):
        super().__init__(chooser, features, first_name)
        self.name = name
        # Idioms added after the body from a chooser of their own (`online_sum`), so that the
        # programs without them are the ones the main chooser always wrote for their seeds.
        self.idioms = idioms
        self.loop_dims: set[str] = set()
        self.outer_names: list[set[str]] = []  # per open loop, the names bound before it

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
        if self.idioms is not None and not self.has_dot and chance(self.idioms, ONLINE_SHARE):
            # Written last, from its own chooser (the main chooser's program is unchanged),
            # but placed first: a loop with no store before it, as split-reduction wants.
            online, values = self.idiom(self.online_sum)
            body = online + body + [line for v in values for line in self.sink(2, v)]
        elif self.idioms is not None and not self.has_dot and not self.grid_n:
            # The same for a running scan (what split-reduction splits as a scan) or two passes
            # (a reduction, then a loop applying it); the other ops of the body follow, so the
            # kernel's first loops are the idiom's.
            if chance(self.idioms, SCAN_SHARE):
                body = self.idiom(self.running_scan) + body
            elif chance(self.idioms, TWO_PASS_SHARE):
                body = self.idiom(self.two_pass) + body
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

    def idiom(self, write: Any) -> Any:
        """`write(2)` with the idioms' chooser in place of the main one."""
        main, self.c = self.c, self.idioms
        try:
            return write(2)
        finally:
            self.c = main

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
        dtype = choose(self.c, ("f16", "bf16", "f32", "i8", "f64", "f8e4m3", "f8e5m2"))
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

    def online_sum(self, indent: int) -> tuple[list[str], list[Value]]:
        """The online softmax's normalizer: a running maximum of the rows of tiles read in a
        K loop, and the sum of exponentials it rescales whenever it grows (what
        split-reduction splits as a sum rescaled by a carried maximum); its lines, and the two
        values for the caller to store."""
        pad = "    " * indent
        m, total, s, grown = (self.fresh(p) for p in ("m", "l", "s", "mn"))
        rows = self.shape_list(("BM",))
        self.features.add("loop:online-sum")
        self.loops.append(Loop("tk", "K", "BK"))
        read = self.read(("BM", "BK"), "f32")
        self.loops.pop()
        value = read.text if read.dtype == "f32" else f"({read.text}).to(f32)"
        lines = [
            f"{pad}{m} = full({rows}, -inf, f32)",
            f"{pad}{total} = zeros({rows}, f32)",
            f"{pad}for tk in tiles(K):",
            f"{pad}    {s} = {value}",
            f"{pad}    {grown} = maximum({m}, max({s}, axis=1))",
            f"{pad}    {total} = {total} * exp({m} - {grown}) + sum(exp({s} - {grown}[:, None]), "
            "axis=1)",
            f"{pad}    {m} = {grown}",
        ]
        self.features.add("loop:K")
        self.loop_dims.add("K")
        return lines, [Value(m, "f32", ("BM",)), Value(total, "f32", ("BM",))]

    def running_scan(self, indent: int) -> list[str]:
        """A running scan over a K loop: each row's tiles of a read scanned along K (`cumsum`
        or `cummax`), the running total (or maximum) of the tiles before added, stored at the
        loop's variable, and the total carried (what split-reduction splits as a scan)."""
        pad = "    " * indent
        total, s = self.fresh("run"), self.fresh("s")
        rows = self.shape_list(("BM",))
        kind = choose(self.c, ("sum", "max"))
        self.features.add(f"loop:scan-{kind}")
        self.loops.append(Loop("tk", "K", "BK"))
        read = self.read(("BM", "BK"), "f32")
        self.loops.pop()
        value = read.text if read.dtype == "f32" else f"({read.text}).to(f32)"
        target = self.row_output()
        if kind == "sum":
            start = f"zeros({rows}, f32)"
            stored = f"cumsum({s}, axis=1) + {total}[:, None]"
            update = f"{total} + sum({s}, axis=1)"
        else:
            start = f"full({rows}, -inf, f32)"
            stored = f"maximum(cummax({s}, axis=1), {total}[:, None])"
            update = f"maximum({total}, max({s}, axis=1))"
        self.features.add("loop:K")
        self.loop_dims.add("K")
        return [
            f"{pad}{total} = {start}",
            f"{pad}for tk in tiles(K):",
            f"{pad}    {s} = {value}",
            f"{pad}    {target} = {stored}",
            f"{pad}    {total} = {update}",
        ]

    def row_output(self) -> str:
        """A new f32 output over ([B,] M, K), indexed at the grid's rows and the K loop's
        variable (where the idioms' K loops store)."""
        dims = (("B",) if self.grid_b else ()) + ("M", "K")
        where = (["b"] if self.grid_b else []) + ["tm", "tk"]
        out = Tensor(self.fresh("y"), "f32", dims, written=True)
        self.tensors.append(out)
        return f"{out.name}[{', '.join(where)}]"

    def two_pass(self, indent: int) -> list[str]:
        """A reduction of each row's tiles over a K loop (a sum, or a maximum), then a second
        loop over K that stores a read combined with it (`x - m`, `x * s`), at the loop's
        variable: two passes over the rows, the second applying the first; sometimes a
        reduction between them, of the squares about the first's result (three passes)."""
        pad = "    " * indent
        total, s = self.fresh("red"), self.fresh("s")
        rows = self.shape_list(("BM",))
        kind = choose(self.c, ("sum", "max"))
        self.features.add(f"loop:two-pass-{kind}")
        self.loops.append(Loop("tk", "K", "BK"))
        first = self.read(("BM", "BK"), "f32")
        second = self.read(("BM", "BK"), "f32")
        self.loops.pop()
        target = self.row_output()
        value = first.text if first.dtype == "f32" else f"({first.text}).to(f32)"
        applied = second.text if second.dtype == "f32" else f"({second.text}).to(f32)"
        if kind == "sum":
            start, update = f"zeros({rows}, f32)", f"{total} + sum({s}, axis=1)"
            stored = f"{applied} * {total}[:, None]"
        else:
            start, update = f"full({rows}, -inf, f32)", f"maximum({total}, max({s}, axis=1))"
            stored = f"{applied} - {total}[:, None]"
        self.features.add("loop:K")
        self.loop_dims.add("K")
        lines = [
            f"{pad}{total} = {start}",
            f"{pad}for tk in tiles(K):",
            f"{pad}    {s} = {value}",
            f"{pad}    {total} = {update}",
        ]
        # Drawn last (the two-pass programs stay as they were): now and then a third pass
        # between, the squares about the first's result (a variance about a mean).
        if chance(self.c, 40):
            self.features.add("loop:three-pass")
            spread, d = self.fresh("var"), self.fresh("d")
            lines += [
                f"{pad}{spread} = zeros({rows}, f32)",
                f"{pad}for tk in tiles(K):",
                f"{pad}    {d} = {value} - {total}[:, None]",
                f"{pad}    {spread} = {spread} + sum({d} * {d}, axis=1)",
            ]
            stored = f"({stored}) * rsqrt({spread} + 1.0)[:, None]"
        return [*lines, f"{pad}for tk in tiles(K):", f"{pad}    {target} = {stored}"]

    def random_shape(self) -> tuple:
        symbols = self.symbols()
        rank = choose(self.c, (2, 1, 0, 2))
        shape = tuple(choose(self.c, symbols) for _ in range(rank))
        if rank == 2 and shape[0] == shape[1] and shape[0] != FIXED:
            shape = (shape[0], FIXED)  # [BM, BM] cannot be made from reads of distinct dims
        return shape


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
        idioms = RandomChooser(f"tilec-fuzz-idioms-{seed}-{i}") if seed is not None else None
        writer = KernelWriter(chooser, name, features, first_name=1000 * i, idioms=idioms)
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
    tensor_core = any(f"dot:{d}:loop" in features for d in TENSOR_CORE_DOTS)
    if tensor_core and chance(chooser, 50):
        for dim in ("M", "N", "K"):
            extents[dim] = choose(chooser, ALIGNED_EXTENTS)
        features.add("extents:aligned")
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
