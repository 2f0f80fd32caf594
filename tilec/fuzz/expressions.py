"""The expressions of a generated tile kernel: for a shape it must broadcast to,
`ExpressionWriter` makes a well-typed expression of the language (`docs/language.md`) and
gives its text, dtype and shape by the language's rules (`tilec.fuzz.model`): tensor reads with
every index kind, operators, casts, the builtins, reductions, scans, dots, literals, scalars.

It holds what an expression may name where it is written: the kernel's tensors and scalar
arguments so far, its locals, its open loops, its grid. The statements and the kernel around
them are `tilec.fuzz.generate.KernelWriter`'s, which builds on this class.
"""

from __future__ import annotations

from typing import Any

from tilec.fuzz.model import (
    DOT_OPERANDS,
    DOT_RESULTS,
    DTYPES,
    FIXED,
    FLOATS,
    INTS,
    MATH,
    MATH_F64,
    WEAK_DEFAULT,
    Chooser,
    Loop,
    Tensor,
    Value,
    broadcast,
    broadcasts_to,
    chance,
    choose,
    kind,
    promote,
)

__all__ = ["ExpressionWriter"]


class ExpressionWriter:
    """Writes the expressions of one kernel, collecting the parameters they read."""

    def __init__(self, chooser: Chooser, features: set[str], first_name: int = 0):
        self.c = chooser
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
        if fn in ("max", "min") and inner.dtype == "f32" and chance(c, 50):
            # The extreme of a tile scaled by an f32 argument (attention's max(s * scale)):
            # hoist-scale's rewrite where the specialization says the scale is positive.
            scale = self.scalar_argument("f32")
            inner = Value(f"({inner.text} * {scale.text})", "f32", inner.shape)
            self.features.add("reduce:scaled-extreme")
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
