"""The `mask-bounds` pass: a loop stops before the tiles a mask hides entirely, and runs the
tiles every mask shows entirely without the masks.

Causal attention masks its scores with `offsets(tt)[None, :] <= offsets(ts)[:, None]`: key
tile `tt` is invisible to every query of tile `ts` once `tt >= ts + BS`, and on such a tile the
online softmax changes nothing (the row max stays, the probabilities are 0, the rescale is 1).
This pass proves both facts from the IR, for any kernel, and then ends the loop there: half the
key tiles of causal attention are never loaded or multiplied.

**Which masks.** A `tile.select %cond, %x, %c` in the body of an `scf.for` over `t` (step S)
whose false value `%c` is a constant tile and whose condition is `arith.cmpi` of two offset
ranges broadcast to the select's shape, one moving with the loop (`t + [0, n)`: what
`offsets(t)` builds) and one not (`r + [0, m)`, `r` defined outside the loop). With the
loop's range on the left, `sle` is false everywhere once `t >= r + m`, `slt` once
`t >= r + m - 1` (and `sge`/`sgt` with the ranges swapped): the tiles past that are a suffix.

**Why skipping them changes nothing.** The body is evaluated symbolically on such a tile: the
select gives its constant, and constants flow through the ops that keep them (a max or min
reduction of a constant, `maximumf(x, -inf) = x`, `-inf - x = -inf`, `exp(-inf) = 0`,
`exp(0) = 1`, `x * 1`, `x + 0`, `x - x = 0`, a dot of a zero tile adding nothing to its
accumulator); values not derived from the mask are unknown. If every value the body yields is
the loop-carried value it received, the iteration is the identity and the suffix can go. That
argument assumes the carried and loaded floats are finite on those tiles: `x - x = 0` and
`0 * v = 0` fail for infinities. Where a carried value is not (an online softmax row that has
seen no visible key keeps its row max at -inf, and `-inf - -inf` is NaN), the loop without the
suffix can give a number where the full loop gave NaN; for causal attention every row sees key
0 in the first tile, so it does not arise. `enable=false` (or `--disable mask-bounds`) keeps
every loop whole.

**What it changes.** The loop's upper bound becomes `min(upper, r + m)` (`r + m - 1` for the
strict comparisons), computed before the loop. The mask stays: it still hides the diagonal
tile's upper triangle. Remarks: per loop, the mask, the bound and the carried values proved
unchanged; or why a loop with a constant-filling select was left alone.

**Tiles a mask shows entirely.** The same comparisons are true everywhere on a prefix of the
loop's tiles: `t + [0, n) <= r + [0, m)` once `t + n - 1 <= r` (`slt`: `< r`), and the padding
mask of a tile of the loop's own dimension, `iota(n) < U - t` (what the frontend builds for
`tiles(U)`), once `t + n <= U`. The loop is split at the first tile past the least of those
bounds (rounded to the loop's steps, clamped to its range): a copy of the loop runs the
prefix with every such select replaced by its true value, the original runs the rest (for
causal attention: the diagonal tile, and a partial last tile), carrying on from the copy's
results. Exact, with no assumption about the values. Remarks: the split, its bound and the
masks dropped. `split=false` keeps one loop.

**Conjunctions, shifts, hidden prefixes.** A condition `a & b` (`arith.andi`) is false
wherever one conjunct is and true only where all are, so each conjunct bounds the hidden tiles
on its own and the shown tiles only together. A range may be shifted by scalars defined before
the loop or constants (`offsets(ts) - W`: an `arith.subi` of a `tile.splat`); the loop's own
shifts move to the fixed side. A lower comparison (`t + [0, n) > r + [0, m)`, `sgt`; `sge`) is
false everywhere while `t < r - n + 2` (`r - n + 1`): a prefix. With the same identity
argument as for the suffix, the loop's lower bound becomes `first_tile`, the first tile on its
steps at or past that bound (`lower + ceil(max(0, b - lower) / step) * step`, at most the
upper bound). A sliding window `(keys <= queries) & (keys > queries - W)` so runs only the key
tiles it reaches (`examples/attention_window.tile`); its carried values must be finite on the
hidden prefix too (the kernel starts its row max at -1e30). Remarks: the masks, and the new
lower and upper bounds. The tiles a window shows entirely lie in the middle of the loop: a
lower comparison is true everywhere on a suffix of the tiles (`t + [0, n) > r + [0, m)` once
`t >= r + m`; `sge`: `r + m - 1`), an upper one on a prefix, so a window's shown tiles are the
range between (option `middle`, on): the loop splits in three, the tiles before
`visible_start` (the first on the loop's steps at or past the largest suffix bound) and those
from `visible_end` on keeping the masks, the range between without them -- the steady state
of a window of W keys is then plain attention's (`examples/attention_window.tile`: 4 loops of
a 64-tile window become 1 + 2 + 1). `middle=false` splits off prefixes only.

**Longest first.** A shortened bound `program_id(a) * c + k` (c > 0) makes the trip count
grow with the block's index along grid axis a; that axis is then walked backwards
(`num_programs(a) - 1 - program_id(a)`, `tilec.longest_first = a`), so the blocks that start
last are the shortest and the SMs finish together (causal attention's diagonal). Not done when
the lower bound moves too (a window: the trip count no longer grows with the block).

Assumes static tile shapes (after `tiling`). The interpreter runs the IR before and after
(translation validation) and finds the same results for finite inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects import arith, scf
from tilec.dialects import math as mathd
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import IntegerAttr
from tilec.ir.builder import Builder
from tilec.ir.core import BlockArgument, Operation, OpResult, Pure, Value
from tilec.ir.folding import constant_value
from tilec.ir.types import IndexType
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["MIDDLE_ATTR", "MaskBounds", "iota_below"]

# On a kernel: how many loops had the tiles a window shows entirely split off (option middle).
MIDDLE_ATTR = "tilec.shown_middles"


@register_pass
class MaskBounds(Pass):
    """Ends a loop over tiles before the suffix of tiles a mask hides entirely, and starts it
    after the prefix a mask hides, when the body provably leaves its carried values unchanged
    there (module docstring: which masks, why,
    what it assumes). Remarks: each loop shortened, with its bound; each loop with a
    constant-filling mask left whole, and why."""

    name = "mask-bounds"
    summary = "Stop loops before the tiles a comparison of offsets masks entirely"

    @dataclass
    class Options:
        enable: bool = option(True, "shorten loops whose masked tail is provably a no-op")
        split: bool = option(
            True,
            "run the tiles every recognised mask shows entirely in a loop of their own, "
            "without the masks (false: one loop, masked everywhere)",
        )
        middle: bool = option(
            True,
            "split off shown tiles in the middle of the loop too, where a lower comparison "
            "(a sliding window's left edge) shows a suffix of the tiles (false: prefixes only)",
        )

    def run(self, module: Operation, ctx: PassContext) -> None:
        if not self.options.enable:
            return
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            middles = 0
            for loop in [op for op in kernel.walk() if isinstance(op, scf.ForOp)]:
                _shorten(loop, ctx)
                if self.options.split:
                    middles += _split_visible(loop, ctx, self.options.middle)
            if middles:  # what the tuner reads back (`tilec.tune.space.read_back`)
                kernel.attributes[MIDDLE_ATTR] = IntegerAttr(middles)


@dataclass(frozen=True)
class _Range:
    """`start + shifts + offset + [0, size)` as a 1-D i32 tile: what `offsets(t)` builds, and
    `offsets(t) - W` (shifted by a scalar or a constant): `shifts` are (scalar, +1 or -1)."""

    start: Value  # an index scalar
    size: int
    shifts: tuple[tuple[Value, int], ...] = ()
    offset: int = 0


def _shift_text(shifts: tuple[tuple[Value, int], ...], offset: int = 0) -> str:
    text = "".join(f" {'+' if k > 0 else '-'} {v.name_hint or 'a scalar'}" for v, k in shifts)
    return text + (f" {'+' if offset > 0 else '-'} {abs(offset)}" if offset else "")


@dataclass(frozen=True)
class _Bound:
    """The index `start + shifts + offset`, computed before the loop."""

    start: Value
    shifts: tuple[tuple[Value, int], ...]
    offset: int

    @property
    def text(self) -> str:
        start = self.start.name_hint or "the block's offset"
        sign = "+" if self.offset >= 0 else "-"
        return f"{start}{_shift_text(self.shifts)} {sign} {abs(self.offset)}"

    def build(self, b: Builder) -> Value:
        value = self.start
        for scalar, sign in self.shifts:
            if not isinstance(scalar.type, IndexType):
                scalar = b.create(
                    arith.IndexCastOp, input=scalar, result_types=[IndexType()]
                ).result
            op = arith.AddIOp if sign > 0 else arith.SubIOp
            value = b.create(op, lhs=value, rhs=scalar).result
        offset = b.create(
            arith.ConstantOp, value=IntegerAttr(self.offset), result_types=[IndexType()]
        )
        return b.create(arith.AddIOp, lhs=value, rhs=offset.result).result


@dataclass(frozen=True)
class _Hidden:
    """The tiles on which `select`'s condition is false everywhere: those with
    `t >= min(suffix)` and those with `t < max(prefix)` (each bound: one conjunct false)."""

    select: T.SelectOp
    suffix: list[tuple[_Bound, str]]
    prefix: list[tuple[_Bound, str]]


_SWAPPED = {"sge": "sle", "sgt": "slt", "sle": "sge", "slt": "sgt"}
_SYMBOL = {"sle": "<=", "slt": "<", "sge": ">=", "sgt": ">"}


def _atoms(cond: Value) -> list[Value]:
    """The conjuncts of a condition: `a & b` split, broadcasts looked through."""
    cond = _condition_root(cond)
    if isinstance(cond, OpResult) and isinstance(cond.op, arith.AndIOp):
        return _atoms(cond.op.lhs) + _atoms(cond.op.rhs)
    return [cond]


@dataclass(frozen=True)
class _Comparison:
    """`t + [0, n) <predicate> fixed`: the loop's range moved to the left, its own shifts
    moved to the fixed side."""

    predicate: str
    size: int  # n
    fixed: _Range
    text: str


def _comparison(atom: Value, loop: scf.ForOp, name: str) -> _Comparison | None:
    if not isinstance(atom, OpResult) or not isinstance(atom.op, arith.CmpIOp):
        return None
    cmp = atom.op
    predicate = str(cmp.attributes["predicate"].value)
    left, right = _spread(cmp.lhs, loop), _spread(cmp.rhs, loop)
    if left is None or right is None or predicate not in _SYMBOL:
        return None
    (l_range, l_moves), (r_range, r_moves) = left, right
    if l_moves == r_moves:
        return None
    if r_moves:  # put the moving range on the left
        predicate, l_range, r_range = _SWAPPED[predicate], r_range, l_range
    mine = "offsets of the loop" + _shift_text(l_range.shifts, l_range.offset)
    others = "others" + _shift_text(r_range.shifts, r_range.offset)
    fixed = _Range(
        r_range.start,
        r_range.size,
        r_range.shifts + tuple((v, -k) for v, k in l_range.shifts),
        r_range.offset - l_range.offset,
    )
    text = f"{name} ({mine} {_SYMBOL[predicate]} {others})"
    return _Comparison(predicate, l_range.size, fixed, text)


def _hidden(select: T.SelectOp, loop: scf.ForOp) -> _Hidden | None:
    """Where `select`'s condition is false everywhere: a suffix of the loop's tiles for an
    upper comparison (`t + [0, n) <= r + [0, m)`: from `t >= r + m`), a prefix for a lower
    one (`t + [0, n) > r + [0, m)`: while `t < r - n + 2`); one false conjunct hides."""
    cond = select.operands[0]
    name = _condition_root(cond).name_hint or "the mask"
    suffix, prefix = [], []
    for atom in _atoms(cond):
        c = _comparison(atom, loop, name)
        if c is None:
            continue
        r = c.fixed
        if c.predicate in ("sle", "slt"):  # min(t + [0, n)) = t > max(r + [0, m)) (>= for slt)
            offset = r.offset + r.size - (1 if c.predicate == "slt" else 0)
            suffix.append((_Bound(r.start, r.shifts, offset), c.text))
        else:  # max(t + [0, n)) <= min(r + [0, m)) = r (< r for sge)
            offset = r.offset - c.size + (2 if c.predicate == "sgt" else 1)
            prefix.append((_Bound(r.start, r.shifts, offset), c.text))
    return _Hidden(select, suffix, prefix) if suffix or prefix else None


def _shorten(loop: scf.ForOp, ctx: PassContext) -> None:
    body = loop.body.block
    masks = [op for op in body.ops if isinstance(op, T.SelectOp) and _constant(op.operands[2])]
    if not masks:
        return
    step = constant_value(loop.step)
    counts_up = isinstance(getattr(step, "value", None), int) and step.value > 0
    for hidden in [h for h in (_hidden(op, loop) for op in masks) if h is not None]:
        prefix = hidden.prefix if counts_up else []  # the grid arithmetic needs a known step
        if not hidden.suffix and not prefix:
            continue
        texts = ", ".join(dict.fromkeys(t for _, t in hidden.suffix + prefix))
        if _neutral(loop, hidden.select) is None:
            ctx.remark(
                loop,
                f"not shortened: the tiles where {texts} is false everywhere still "
                "change what the loop carries (the body is not the identity there)",
            )
            continue
        carried = (
            ", ".join(a.name_hint or f"#{i}" for i, a in enumerate(loop.iter_args)) or "nothing"
        )
        b = Builder.before_op(loop)
        if hidden.suffix:
            upper = loop.upper
            for bound, _ in hidden.suffix:
                upper = b.create(arith.MinSIOp, lhs=upper, rhs=bound.build(b)).result
            loop.set_operand(1, upper)
            bounds = ", ".join(bound.text for bound, _ in hidden.suffix)
            text = ", ".join(dict.fromkeys(t for _, t in hidden.suffix))
            ctx.remark(
                loop,
                f"stops at min(upper, {bounds}): from there {text} is false "
                f"for every element, and the body leaves {carried} unchanged on such a tile "
                "(assuming finite values: docs/passes.md, mask-bounds)",
            )
        if prefix:
            _raise_lower(loop, [bound for bound, _ in prefix], b, step.value)
            bounds = ", ".join(bound.text for bound, _ in prefix)
            bounds = f"max({bounds})" if len(prefix) > 1 else bounds
            text = ", ".join(dict.fromkeys(t for _, t in prefix))
            ctx.remark(
                loop,
                f"starts at first_tile = the first of its tiles at or past {bounds} (at most "
                f"upper): before it {text} is false for every element, and the body leaves "
                f"{carried} unchanged on such a tile (assuming finite values: docs/passes.md, "
                "mask-bounds)",
            )
        else:  # with both bounds moving, the trip count need not grow with the block
            _longest_first(loop, hidden.suffix[0][0].start, ctx)
        return


def _raise_lower(loop: scf.ForOp, bounds: list[_Bound], b: Builder, step: int) -> None:
    """lower := min(upper, lower + ceil(max(0, first - lower) / step) * step), `first` the
    largest bound: the first tile of the loop's steps that is not hidden."""

    def index(value: int) -> Value:
        return b.create(
            arith.ConstantOp, value=IntegerAttr(value), result_types=[IndexType()]
        ).result

    first: Value | None = None
    for bound in bounds:
        value = bound.build(b)
        first = value if first is None else b.create(arith.MaxSIOp, lhs=first, rhs=value).result
    assert first is not None
    lower, upper = loop.lower, loop.upper
    since = b.create(arith.SubIOp, lhs=first, rhs=lower).result
    since = b.create(arith.MaxSIOp, lhs=since, rhs=index(0)).result
    rounded = b.create(arith.AddIOp, lhs=since, rhs=index(step - 1)).result
    steps = b.create(arith.DivSIOp, lhs=rounded, rhs=index(step)).result
    distance = b.create(arith.MulIOp, lhs=steps, rhs=index(step)).result
    start = b.create(arith.AddIOp, lhs=lower, rhs=distance).result
    start = b.create(arith.MinSIOp, lhs=start, rhs=upper).result
    start.name_hint = "first_tile"
    loop.set_operand(0, start)


def _constant(v: Value) -> bool:
    return constant_value(v) is not None


def _integer(v: Value) -> int | None:
    value = getattr(constant_value(v), "value", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _shift(v: Value, loop: scf.ForOp) -> tuple[tuple[tuple[Value, int], ...], int] | None:
    """A shift added to an offset range, as (scalars, constant): a constant tile, or a splat
    of a scalar defined before the loop."""
    if _constant(v):
        value = _integer(v)
        return None if value is None else ((), value)
    while isinstance(v, OpResult) and isinstance(v.op, (T.BroadcastOp, T.ExpandDimsOp)):
        v = v.op.operands[0]
    if not (isinstance(v, OpResult) and isinstance(v.op, T.SplatOp)):
        return None
    scalar = v.op.input
    if isinstance(scalar, OpResult) and isinstance(scalar.op, arith.IndexCastOp):
        scalar = scalar.op.operands[0]
    if _defined_inside(scalar, loop):
        return None
    if _constant(scalar):
        value = _integer(scalar)
        return None if value is None else ((), value)
    return ((scalar, 1),), 0


def _is_iota(v: Value) -> bool:
    return isinstance(v, OpResult) and isinstance(v.op, T.IotaOp)


def _spread(v: Value, loop: scf.ForOp) -> tuple[_Range, bool] | None:
    """The offset range a 2-D comparison operand broadcasts, and whether it moves with `loop`'s
    induction variable (None: not such an operand)."""
    while isinstance(v, OpResult) and isinstance(v.op, (T.BroadcastOp, T.ExpandDimsOp)):
        v = v.op.operands[0]
    if not isinstance(v, OpResult) or not isinstance(v.op, (arith.AddIOp, arith.SubIOp)):
        return None
    a, b = v.op.lhs, v.op.rhs
    if isinstance(v.op, arith.SubIOp) or not (_is_iota(a) or _is_iota(b)):
        # a shifted range: `range - shift`, `range + shift`, `shift + range`
        sign = -1 if isinstance(v.op, arith.SubIOp) else 1
        for inner, shifted_by in [(a, b)] if sign < 0 else [(a, b), (b, a)]:
            shift = _shift(shifted_by, loop)
            spread = _spread(inner, loop) if shift is not None else None
            if shift is None or spread is None:
                continue
            (r, moves), (scalars, constant) = spread, shift
            shifts = r.shifts + tuple((s, sign * k) for s, k in scalars)
            return _Range(r.start, r.size, shifts, r.offset + sign * constant), moves
        return None
    for iota, splat in ((a, b), (b, a)):
        if not _is_iota(iota):
            continue
        if not (isinstance(splat, OpResult) and isinstance(splat.op, T.SplatOp)):
            continue
        scalar = splat.op.input
        if isinstance(scalar, OpResult) and isinstance(scalar.op, arith.IndexCastOp):
            scalar = scalar.op.operands[0]
        shape = iota.type.shape
        if (
            not isinstance(scalar.type, IndexType)
            or len(shape) != 1
            or not isinstance(shape[0], int)
        ):
            return None
        if scalar is loop.induction_var:
            return _Range(scalar, shape[0]), True
        if _defined_inside(scalar, loop):
            return None
        return _Range(scalar, shape[0]), False
    return None


def _defined_inside(v: Value, loop: Operation) -> bool:
    owner = v.owner.parent_op if isinstance(v, BlockArgument) else v.owner
    return owner is not None and loop.is_ancestor_of(owner)


# Abstract values of the body on a fully masked tile: ("const", x), ("arg", i) the i-th carried
# value itself, ("spread", i) a broadcast or expansion of it, FINITE an unknown (finite) value.
FINITE = ("finite",)


def _neutral(loop: scf.ForOp, select: T.SelectOp) -> bool | None:
    """True when every value the body yields on a tile where `select` gives its constant is
    the carried value it received; None otherwise."""
    value: dict[int, tuple] = {}
    for i, arg in enumerate(loop.iter_args):
        value[id(arg)] = ("arg", i)
    body = loop.body.block

    def of(v: Value) -> tuple:
        if id(v) in value:
            return value[id(v)]
        c = constant_value(v)
        if c is not None and isinstance(getattr(c, "value", None), (int, float)):
            return ("const", float(c.value))
        return FINITE  # defined before the loop, or by an op the evaluation does not know

    for op in body.ops:
        if isinstance(op, scf.YieldOp):
            break
        if not op.has_trait(Pure) and not isinstance(op, (T.LoadOp, T.DotOp)):
            return None  # a store or an atomic: the tile does something
        if op.regions:
            return None
        if not op.results:
            continue
        value[id(op.results[0])] = _evaluate(op, select, of)
    yielded = [of(v) for v in loop.yield_op.operands]
    return True if all(y == ("arg", i) for i, y in enumerate(yielded)) else None


def _known(x: tuple) -> bool:
    return (
        x == FINITE
        or x[0] in ("arg", "spread")
        or (x[0] == "const" and abs(x[1]) != float("inf") and x[1] == x[1])
    )


def _evaluate(op: Operation, select: T.SelectOp, of) -> tuple:
    args = [of(v) for v in op.operands]
    inf = float("inf")
    if op is select:
        return args[2]
    if isinstance(op, T.SelectOp):
        return args[1] if args[1] == args[2] else FINITE
    if isinstance(op, T.ConvertLayoutOp):  # the same values, held elsewhere
        return args[0]
    if isinstance(op, (T.BroadcastOp, T.ExpandDimsOp, T.ReshapeOp)):
        x = args[0]
        return ("spread", x[1]) if x[0] in ("arg", "spread") else x
    if isinstance(op, T.CastOp):
        return args[0] if args[0][0] == "const" else FINITE
    if isinstance(op, T.ReduceOp):
        x, kind = args[0], str(op.attributes["kind"].value)
        if x[0] == "const" and (kind in ("max", "min") or (kind == "sum" and x[1] == 0)):
            return x
        return FINITE
    if isinstance(op, (arith.MaximumFOp, arith.MinimumFOp)):
        neutral = -inf if isinstance(op, arith.MaximumFOp) else inf
        x, y = args
        if y == ("const", neutral):
            return x
        if x == ("const", neutral):
            return y
        return FINITE
    if isinstance(op, arith.SubFOp):
        x, y = args
        if x[0] == "const" and abs(x[1]) == inf and _known(y):
            return x
        if x[0] in ("arg", "spread") and y[0] in ("arg", "spread") and x[1] == y[1]:
            return ("const", 0.0)
        return FINITE
    if isinstance(op, mathd.ExpOp):
        x = args[0]
        if x == ("const", -inf):
            return ("const", 0.0)
        if x == ("const", 0.0):
            return ("const", 1.0)
        return FINITE
    if isinstance(op, arith.MulFOp):
        x, y = args
        if y == ("const", 1.0):
            return x
        if x == ("const", 1.0):
            return y
        if ("const", 0.0) in (x, y) and _known(x) and _known(y):
            return ("const", 0.0)
        return FINITE
    if isinstance(op, arith.AddFOp):
        x, y = args
        if y == ("const", 0.0):
            return x
        if x == ("const", 0.0):
            return y
        return FINITE
    if isinstance(op, T.DotOp):
        a, b, acc = args
        if ("const", 0.0) in (a, b) and _known(a) and _known(b):
            return acc
        return FINITE
    return FINITE


# ---------------------------------------------------------------------------------------------
# The prefix of tiles every mask shows


@dataclass(frozen=True)
class _Prefix:
    """Tiles with `t <= bound` see `compare` true everywhere (`after`: those with
    `t >= bound`, a suffix)."""

    compare: arith.CmpIOp
    bound: _Bound
    text: str
    after: bool = False


def _condition_root(v: Value) -> Value:
    while isinstance(v, OpResult) and isinstance(v.op, (T.BroadcastOp, T.ExpandDimsOp)):
        v = v.op.operands[0]
    return v


def _prefix(
    compare: arith.CmpIOp, loop: scf.ForOp, name: str, middle: bool = False
) -> _Prefix | None:
    """The tiles of `loop` on which `compare` is true everywhere, when they are a prefix
    (or, `middle`, a suffix: a lower comparison's)."""
    padding = _padding_bound(compare, loop)
    if padding is not None:
        upper, size = padding
        bound = _Bound(upper, (), -size)
        return _Prefix(compare, bound, f"{name} (the padding of the loop's tiles)")
    c = _comparison(compare.result, loop, name)
    if c is None:
        return None
    r = c.fixed
    if c.predicate in ("sle", "slt"):
        # max(t + [0, n)) <= min(r + [0, m)) = r: t <= r - n + 1 (slt: r - n)
        offset = r.offset + 1 - c.size - (1 if c.predicate == "slt" else 0)
        return _Prefix(compare, _Bound(r.start, r.shifts, offset), c.text)
    if not middle:
        return None  # a lower comparison is true on a suffix of the tiles, not a prefix
    # min(t + [0, n)) = t > max(r + [0, m)) = r + m - 1: t >= r + m (sge: r + m - 1)
    offset = r.offset + r.size - (1 if c.predicate == "sge" else 0)
    return _Prefix(compare, _Bound(r.start, r.shifts, offset), c.text, after=True)


def iota_below(compare: arith.CmpIOp) -> tuple[Value, Value] | None:
    """(the iota, x) for `compare` = `iota < splat(x)` (a 1-D iota; `x` without the
    `index_cast` the frontend puts on it): the padding mask of a tile, whose lanes at and past
    `x` are outside its dimension. Also what `fold-padding` recognises."""
    if str(compare.attributes["predicate"].value) != "slt":
        return None
    iota, splat = compare.lhs, compare.rhs
    if not (isinstance(iota, OpResult) and isinstance(iota.op, T.IotaOp)):
        return None
    if not (isinstance(splat, OpResult) and isinstance(splat.op, T.SplatOp)):
        return None
    if len(iota.type.shape) != 1:
        return None
    x = splat.op.input
    if isinstance(x, OpResult) and isinstance(x.op, arith.IndexCastOp):
        x = x.op.operands[0]
    return iota, x


def _padding_bound(compare: arith.CmpIOp, loop: scf.ForOp) -> tuple[Value, int] | None:
    """(U, n) for `iota(n) < splat(U - t)`, `t` the loop's induction variable and U defined
    before the loop."""
    found = iota_below(compare)
    if found is None:
        return None
    iota, x = found
    shape = iota.type.shape
    if not isinstance(shape[0], int):
        return None
    if not (isinstance(x, OpResult) and isinstance(x.op, arith.SubIOp)):
        return None
    upper, t = x.op.lhs, x.op.rhs
    if t is not loop.induction_var or _defined_inside(upper, loop):
        return None
    if not isinstance(upper.type, IndexType):
        return None
    return upper, shape[0]


def _shown_selects(loop: scf.ForOp, middle: bool = False) -> list[tuple[T.SelectOp, list[_Prefix]]]:
    """The selects whose condition is true everywhere on a prefix of the loop's tiles: every
    conjunct must be (the prefix is where all are); `middle`: or on a range of them, each
    conjunct true on a prefix or on a suffix (the range is where all are)."""
    found = []
    for op in loop.body.block.ops:
        if not isinstance(op, T.SelectOp):
            continue
        name = _condition_root(op.operands[0]).name_hint or "a mask"
        prefixes = []
        for atom in _atoms(op.operands[0]):
            prefix = None
            if isinstance(atom, OpResult) and isinstance(atom.op, arith.CmpIOp):
                prefix = _prefix(atom.op, loop, name, middle)
            if prefix is None:
                break
            prefixes.append(prefix)
        else:
            found.append((op, prefixes))
    return found


def _split_visible(loop: scf.ForOp, ctx: PassContext, middle: bool = False) -> bool:
    """Split off the tiles every recognised mask of `loop` shows entirely; whether they were a
    middle range (a loop before them too)."""
    step = constant_value(loop.step)
    if not isinstance(getattr(step, "value", None), int) or step.value <= 0:
        return False  # the prefix arithmetic below is for loops that count up by a known step
    shown = _shown_selects(loop, middle)
    if not shown:
        return False
    bounds = list({id(p.compare): p for _, ps in shown for p in ps}.values())
    prefixes = [p for p in bounds if not p.after]
    suffixes = [p for p in bounds if p.after]
    b = Builder.before_op(loop)

    def index(value: int) -> Value:
        return b.create(
            arith.ConstantOp, value=IntegerAttr(value), result_types=[IndexType()]
        ).result

    lower, upper, step = loop.lower, loop.upper, loop.step
    start = lower  # the first tile every mask shows entirely
    if suffixes:
        first: Value | None = None
        for p in suffixes:
            bound = p.bound.build(b)
            first = bound if first is None else b.create(arith.MaxSIOp, lhs=first, rhs=bound).result
        assert first is not None
        # the first tile at or past `first`: lower + ceil(max(0, first - lower) / step) * step
        since = b.create(
            arith.MaxSIOp, lhs=b.create(arith.SubIOp, lhs=first, rhs=lower).result, rhs=index(0)
        ).result
        steps = b.create(
            arith.DivSIOp,
            lhs=b.create(
                arith.AddIOp, lhs=since, rhs=b.create(arith.SubIOp, lhs=step, rhs=index(1)).result
            ).result,
            rhs=step,
        ).result
        start = b.create(
            arith.AddIOp, lhs=lower, rhs=b.create(arith.MulIOp, lhs=steps, rhs=step).result
        ).result
        start = b.create(arith.MinSIOp, lhs=start, rhs=upper).result
        start.name_hint = "visible_start"
    split = upper
    if prefixes:
        last: Value | None = None  # the last tile start every mask shows entirely
        for p in prefixes:
            bound = p.bound.build(b)
            last = bound if last is None else b.create(arith.MinSIOp, lhs=last, rhs=bound).result
        assert last is not None
        # the first tile past `last`: lower + ((last - lower + step) / step) * step, in [start, upper]
        since = b.create(arith.SubIOp, lhs=last, rhs=lower).result
        steps = b.create(
            arith.DivSIOp, lhs=b.create(arith.AddIOp, lhs=since, rhs=step).result, rhs=step
        ).result
        past = b.create(
            arith.AddIOp, lhs=lower, rhs=b.create(arith.MulIOp, lhs=steps, rhs=step).result
        ).result
        split = b.create(arith.MaxSIOp, lhs=start, rhs=past).result
        split = b.create(arith.MinSIOp, lhs=split, rhs=upper).result
    split.name_hint = "visible_end"
    before_loop = None
    if suffixes:  # the tiles before every mask shows entirely: masked, as they were
        before_loop = loop.clone({})
        b.insert(before_loop)
        before_loop.set_operand(1, start)
    shown_loop = loop.clone({})
    b.insert(shown_loop)
    shown_loop.set_operand(0, start)
    shown_loop.set_operand(1, split)
    for select, _ in _shown_selects(shown_loop, middle):
        select.replace_with([select.operands[1]])
    if before_loop is not None:
        for i, result in enumerate(before_loop.results):
            shown_loop.set_operand(3 + i, result)
    loop.set_operand(0, split)
    for i, result in enumerate(shown_loop.results):
        loop.set_operand(3 + i, result)
    masks = ", ".join(dict.fromkeys(p.text for p in bounds))
    ends = ", ".join(_bound_text(p) for p in prefixes)
    ends = f"min({ends})" if len(prefixes) > 1 else ends
    which = "the tiles before visible_end = the first past " + ends if prefixes else ""
    if suffixes:
        starts = ", ".join(_bound_text(p) for p in suffixes)
        starts = f"max({starts})" if len(suffixes) > 1 else starts
        which = f"the tiles from visible_start = the first at or past {starts}" + (
            f" up to visible_end = the first past {ends}" if prefixes else ""
        )
    ctx.remark(
        shown_loop,
        f"{which} run without {len(shown)} select{'s' if len(shown) != 1 else ''}: {masks} "
        "true everywhere there; the loop"
        + (" before and the loop after keep them" if suffixes else " after it keeps them"),
    )
    return bool(suffixes)


def _bound_text(p: _Prefix) -> str:
    start = p.bound.start.name_hint or "a bound"
    sign = "+" if p.bound.offset >= 0 else "-"
    return f"{start}{_shift_text(p.bound.shifts)} {sign} {abs(p.bound.offset)}"


def _longest_first(loop: scf.ForOp, start: Value, ctx: PassContext) -> None:
    """Launch the blocks whose shortened loop runs longest first: when the new bound is
    `program_id(a) * c` (c > 0) plus a constant, the trip count grows with the block's index
    along grid axis a, so that axis is walked backwards (`num_programs(a) - 1 - program_id(a)`,
    a bijection): the last blocks to start are the shortest, and the SMs finish together
    (causal attention's diagonal, Stage K). Kernels whose grid is split or grouped later keep
    the mapping: it replaces every `tile.program_id` of the axis."""
    if not (isinstance(start, OpResult) and isinstance(start.op, arith.MulIOp)):
        return
    pid, scale = start.op.lhs, start.op.rhs
    if not (isinstance(pid, OpResult) and isinstance(pid.op, T.ProgramIdOp)):
        pid, scale = scale, pid
    c = constant_value(scale)
    if not (isinstance(pid, OpResult) and isinstance(pid.op, T.ProgramIdOp)):
        return
    if not isinstance(getattr(c, "value", None), int) or c.value <= 0:
        return
    axis = pid.op.axis
    kernel = loop.parent_op
    while kernel is not None and not isinstance(kernel, FuncOp):
        kernel = kernel.parent_op
    if kernel is None or "tilec.longest_first" in kernel.attributes:
        return
    for op in [o for o in kernel.walk() if isinstance(o, T.ProgramIdOp) and o.axis == axis]:
        b = Builder.after_op(op)
        count = b.create(T.NumProgramsOp, axis=IntegerAttr(axis)).result
        one = b.create(arith.ConstantOp, value=IntegerAttr(1), result_types=[IndexType()]).result
        last = b.create(arith.SubIOp, lhs=count, rhs=one).result
        reversed_id = b.create(arith.SubIOp, lhs=last, rhs=op.result)
        for use in list(op.result.uses):
            if use is not reversed_id:
                for i, v in enumerate(use.operands):
                    if v is op.result:
                        use.set_operand(i, reversed_id.result)
    kernel.attributes["tilec.longest_first"] = IntegerAttr(axis)
    ctx.remark(
        loop,
        f"blocks walk grid axis {axis} backwards: the loop's trip count grows with "
        f"program_id({axis}), so the longest start first and the SMs finish together",
    )
