"""The `precision` pass: f32 divisions and exponentials whose results only reach memory as
f16 or bf16 run on the hardware's approximate instructions.

A correctly rounded f32 division (`div.rn.f32`) is a reciprocal estimate, two Newton steps and
a slow path for awkward operands — about ten instructions and a call; tilec's `exp` (2.5 ulp)
corrects `ex2.approx` for the rounding of x·log2 e. Where the quotient or the exponential is
rounded to bf16 (8 significant bits) or f16 (11) before anything else can see it, that care is
invisible: `div.approx.f32` is within 2 ulp of f32 (relative 2^-22) and `ex2.approx(x·log2 e)`
within 2 ulp plus abs(x)·2^-24 (below 2^-17 wherever the result is finite), both far under the
2^-9 and 2^-12 that rounding to bf16 and f16 already gives up. SwiGLU's `sigmoid`
(`1 / (1 + exp(-x))`) is the kernel that taught it: a quarter of its 43 instructions an
element were the exact reciprocal (docs/benchmarks.md).

**Which values.** An f32 value is *narrow-bound* when every use keeps its relative error
where it is and ends in a conversion to f16/bf16 that is only stored:

* a `tile.cast` or `arith.truncf` to f16/bf16 whose every reader sees only the rounded
  value: stores, tensor-core dot operands (attention's P), and moves and selects of those;
* `arith.mulf`, `arith.divf` (either operand), `arith.negf`, whose result is narrow-bound
  (relative errors add: products and quotients do not amplify them);
* `arith.addf` of two operands known non-negative (exponentials, squares, non-negative
  constants, and sums, products and quotients of those), whose result is narrow-bound: a sum
  of non-negatives keeps the larger relative error, no cancellation;
* a `sum` reduction of non-negative values and a `max` reduction, whose result is
  narrow-bound (a sum of non-negatives keeps the largest relative error; a max picks one);
* a value yielded round an `scf.for` whose iter_arg and result are narrow-bound: round the
  loop the answer is assumed (a running sum `l = l * alpha + sum(p)` repeats ops that keep
  relative errors where they are), so what decides is every other use; likewise the start
  value of a loop (a loop split in two: the second carries on from the first's results);
* moves that do not compute (`tile.broadcast`, `tile.expand_dims`, `tile.reshape`,
  `tile.transpose`, `tile.convert_layout`) and the chosen operands of `tile.select`, whose
  result is narrow-bound.

Anything else — a comparison, a product reduction, a subtraction, an f32 store — needs the
exact value, and a value any of whose uses needs it stays exact. The pass sets
`approx = true` on every narrow-bound `arith.divf` and `math.exp` of f32 and remarks each, with
the store it reaches, and for an exp of `x * c - m` whose product nothing else uses (after
`hoist-scale`: attention's scale) that the lowering folds `c` into the exponent's FMA
(`tilec.lowering.elementwise.folded_scale`); `enable=false` (or `--disable precision`) leaves
every op exact. The
interpreter ignores `approx` (it computes exactly), so translation validation is unchanged;
the GPU's results differ from it by less than the final rounding's half ulp, within the
interpreter's tolerances for f16/bf16 outputs.

Assumes tile IR after `vectorize` (the last pass before the lowering): any layouts, any sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects import arith, scf
from tilec.dialects import math as mathd
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import BoolAttr
from tilec.ir.core import BlockArgument, Operation, OpResult, Value
from tilec.ir.folding import constant_value
from tilec.ir.types import FloatType
from tilec.lowering.elementwise import folded_scale
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["Precision"]

NARROW = ("f16", "bf16")
_MOVES = (T.BroadcastOp, T.ExpandDimsOp, T.ReshapeOp, T.TransposeOp, T.ConvertLayoutOp)


@register_pass
class Precision(Pass):
    """Marks f32 `arith.divf` and `math.exp` whose results reach memory only as f16/bf16
    `approx = true` (the lowering then uses `div.approx.f32` and `ex2.approx`); the module
    docstring says which values qualify and why the error is invisible. Remarks: each op made
    approximate and the narrow store its result reaches."""

    name = "precision"
    summary = "Approximate f32 division and exp where results reach memory only as f16/bf16"

    @dataclass
    class Options:
        enable: bool = option(True, "approximate where invisible (false: every op exact)")

    def run(self, module: Operation, ctx: PassContext) -> None:
        for kernel in module.walk():
            if not isinstance(kernel, FuncOp):
                continue
            analysis = _NarrowBound()
            made: list[tuple[Operation, T.StoreOp]] = []
            for op in kernel.walk():
                if not isinstance(op, (arith.DivFOp, mathd.ExpOp)):
                    continue
                op.attributes.pop("approx", None)
                if not self.options.enable or _element(op.result) != "f32":
                    continue
                store = analysis.store_reached(op.result)
                if store is None:
                    continue
                op.attributes["approx"] = BoolAttr(True)
                made.append((op, store))
            # Once every op is marked: whether an exp folds a scale depends on its product's
            # other exps (`folded_scale`).
            for op, store in made:
                what = "division" if isinstance(op, arith.DivFOp) else "exp"
                text = (
                    f"approximate f32 {what}: the result reaches memory only as "
                    f"{_element(store.value)} (line {store.loc.line}), whose rounding hides "
                    "the approximation's error"
                )
                folded = folded_scale(op) if what == "exp" else None
                if folded is not None:
                    text += (
                        f"; exp(x * {_factor_text(folded[1])} - m) as one FMA, "
                        f"ex2(fma(x, {_factor_text(folded[1])}·log2 e, -m·log2 e)): the product "
                        "has no other use (hoist-scale)"
                    )
                ctx.remark(op, text)


def _factor_text(c: Value) -> str:
    """A splat's scalar by name (`scale`), a constant tile by value."""
    if isinstance(c, OpResult) and isinstance(c.op, T.SplatOp):
        scalar = c.op.input
        return scalar.name_hint or "c"
    value = constant_value(c)
    return repr(value.value) if value is not None else "c"


# An answer still being worked out (a value round a loop): assumed yes meanwhile.
_OPEN = object()


def _narrow_consumed(v: Value) -> T.StoreOp | object | None:
    """For an f16/bf16 value: a store it reaches when everything that reads it sees only the
    rounded value -- stores, tensor-core dot operands (attention's P), and moves and selects
    of those -- else None. What rounded it then hides the approximation's error whatever is
    done with it after."""
    found: T.StoreOp | object | None = None
    for user in dict.fromkeys(v.uses):
        if isinstance(user, T.StoreOp) and user.value is v:
            found = found if isinstance(found, T.StoreOp) else user
        elif isinstance(user, T.DotOp) and v is not user.acc:
            found = found or _OPEN
        elif isinstance(user, _MOVES) or (isinstance(user, T.SelectOp) and user.condition is not v):
            inner = _narrow_consumed(user.results[0])
            if inner is None:
                return None
            found = inner if isinstance(inner, T.StoreOp) else (found or inner)
        else:
            return None
    return found


def _element(v: Value) -> str | None:
    t = getattr(v.type, "element", v.type)
    return t.name if isinstance(t, FloatType) else None


class _NarrowBound:
    """Memoized: whether an f32 value is narrow-bound, and a store it reaches."""

    def __init__(self) -> None:
        self._bound: dict[int, T.StoreOp | object | None] = {}
        self._nonnegative: dict[int, bool | object] = {}
        self._relied: set[int] = set()  # open assumptions an answer in progress used
        self._relied_sign: set[int] = set()

    def store_reached(self, v: Value) -> T.StoreOp | None:
        """A narrow store `v` reaches when `v` is narrow-bound, else None."""
        found = self._reached_or_assumed(v)
        return found if isinstance(found, T.StoreOp) else None

    def _reached_or_assumed(self, v: Value) -> T.StoreOp | object | None:
        """Round a loop (a carried value's uses lead back to itself) the answer is assumed
        yes: the ops that qualify keep relative errors where they are however often they
        repeat (a running sum of non-negatives keeps the larger one), so what decides is
        every other use. Answers that relied on an assumption still open are not kept."""
        key = id(v)
        if key in self._bound:
            found = self._bound[key]
            if found is _OPEN:
                self._relied.add(key)
            return found
        self._bound[key] = _OPEN
        found = self._reached(v)
        self._relied.discard(key)
        if found is None or not self._relied:
            self._bound[key] = found
        else:
            del self._bound[key]
        return found

    def _reached(self, v: Value) -> T.StoreOp | object | None:
        if not v.uses:
            return None
        reached = None
        for user in dict.fromkeys(v.uses):
            store = self._through(user, v)
            if store is None:
                return None
            if reached is None or reached is _OPEN:
                reached = store
        return reached

    def _through(self, user: Operation, v: Value) -> T.StoreOp | object | None:
        if isinstance(user, (T.CastOp, arith.TruncFOp)):
            if _element(user.result) not in NARROW:
                return None
            return _narrow_consumed(user.result)
        if isinstance(user, (arith.MulFOp, arith.DivFOp, arith.NegFOp)):
            return self._reached_or_assumed(user.result)
        if isinstance(user, arith.AddFOp):
            if self.nonnegative(user.lhs) and self.nonnegative(user.rhs):
                return self._reached_or_assumed(user.result)
            return None
        if isinstance(user, T.ReduceOp) and user.kind in ("sum", "max"):
            # a sum of non-negatives keeps the largest relative error; a max picks one
            if user.kind == "max" or self.nonnegative(v):
                return self._reached_or_assumed(user.result)
            return None
        if isinstance(user, _MOVES):
            return self._reached_or_assumed(user.result)
        if isinstance(user, T.SelectOp) and user.condition is not v:
            return self._reached_or_assumed(user.result)
        if isinstance(user, scf.YieldOp) and isinstance(user.parent_op, scf.ForOp):
            loop = user.parent_op
            return self._carried(v, user.operands, loop)
        if isinstance(user, scf.ForOp) and v in user.inits:
            # the start of a later loop's carried value (`mask-bounds` splits a loop in two):
            # as narrow-bound as what that loop makes of it
            return self._carried(v, user.inits, user)
        return None

    def _carried(self, v: Value, slots, loop: scf.ForOp) -> T.StoreOp | object | None:
        """What `v`, carried in `loop`'s slots where it appears among `slots` (the yield's
        operands or the loop's inits), reaches through the iter_arg and the result."""
        found = None
        for i, x in enumerate(slots):
            if x is not v:
                continue
            for carried in (loop.iter_args[i], loop.results[i]):
                got = self._reached_or_assumed(carried) if carried.uses else _OPEN
                if got is None:
                    return None
                if found is None or found is _OPEN:
                    found = got
        return found

    def nonnegative(self, v: Value) -> bool:
        """Whether `v` is never negative (round a loop: assumed, as `store_reached` does)."""
        key = id(v)
        if key in self._nonnegative:
            known = self._nonnegative[key]
            if known is _OPEN:
                self._relied_sign.add(key)
                return True
            return bool(known)
        self._nonnegative[key] = _OPEN
        known = self._is_nonnegative(v)
        self._relied_sign.discard(key)
        if not known or not self._relied_sign:
            self._nonnegative[key] = known
        else:
            del self._nonnegative[key]
        return known

    def _is_nonnegative(self, v: Value) -> bool:
        constant = constant_value(v)
        if constant is not None:
            value = getattr(constant, "value", None)
            return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
        if isinstance(v, BlockArgument):  # a loop-carried value: its start and each update
            loop = v.owner.parent_op
            if isinstance(loop, scf.ForOp) and v.index >= 1:
                i = v.index - 1
                return self.nonnegative(loop.inits[i]) and self.nonnegative(
                    loop.yield_op.operands[i]
                )
            return False
        if not isinstance(v, OpResult):
            return False
        op = v.op
        if isinstance(op, scf.ForOp):
            return self.nonnegative(op.iter_args[v.index])
        if isinstance(op, T.ReduceOp) and op.kind in ("sum", "max"):
            return self.nonnegative(op.input)
        if isinstance(op, T.SelectOp):
            return self.nonnegative(op.operands[1]) and self.nonnegative(op.operands[2])
        if isinstance(op, (mathd.ExpOp, mathd.Exp2Op, mathd.SqrtOp, mathd.AbsFOp)):
            return True
        if isinstance(op, arith.MulFOp) and op.lhs is op.rhs:
            return True  # a square
        if isinstance(op, (arith.AddFOp, arith.MulFOp, arith.DivFOp, arith.MaximumFOp)):
            return self.nonnegative(op.lhs) and self.nonnegative(op.rhs)
        if isinstance(op, _MOVES):
            return self.nonnegative(op.operands[0])
        if isinstance(op, T.SplatOp):
            return self.nonnegative(op.input)
        return False
