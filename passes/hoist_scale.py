"""The `hoist-scale` pass: the max of values multiplied by a positive scalar is the max of the
values, multiplied once per row; the product is then left to the exponent alone.

Attention computes `s = (q @ k.T) * scale`, `m = max(s, axis=1)` and `exp(s - m)`: a multiply
per element for the max, then the exponent's FMA per element (`precision`:
`ex2.approx(fma(s, log2 e, -m·log2 e))`). FlashAttention-3 and Triton take the max of the raw
dot products and fold the scale into the exponent, `ex2(fma(x, scale·log2 e, -m·log2 e))`:
one FFMA per element, no FMUL. That rests on max(c·x) = c·max(x), which holds for c > 0 only.
This pass makes the max read the raw values where c is known positive; the lowering then
folds the product, whose only remaining use is the exponent's argument, into the exponent's
FMA (`tilec.lowering.elementwise.folded_scale`).

**Rewrites**, for a factor `c` known positive:

* `tile.reduce max|min (x * c)` becomes `tile.reduce max|min (x) * c` (c splat to the
  reduction's shape: a multiply per row);
* `tile.select(m, x * c, f)` becomes `tile.select(m, x, f) * c` where the fill `f` is a
  constant that multiplying by c leaves as it is, ±inf or ±0 (the causal mask's `where(visible,
  s, -inf)`, the padding masks' -inf), so that a max behind it reads raw values too. Made only
  where it adds no multiply: the product has no other use, or every use of the select is a
  max/min reduction or such a select in turn.

**Known positive** means finite and above zero: `tile.splat(p)` of a float parameter `p` that
the kernel's specialization lists in `tilec.positive` (`@tilec.jit` compiles for a call whose
`p` is, the `assume` pass's `positive="p"`, `tilec compile --assume positive=p`), a constant
so, or a widening conversion of either (`arith.extf`, a `tile.cast` of an f16 scalar to f32).

**Why nothing weaker.** Rounding `c·x` is nondecreasing in x for c > 0 (±inf stay ±inf, NaN
stays NaN), and max and min commute with a nondecreasing function (tilec's float max/min are
NaN when any element is: both sides are), so each rewrite is exact -- up to the sign of a
zero maximum where products underflow, max(-0, +0). c = 0 or -0.0 breaks both: `0·-inf` is
NaN where the select's fill was -inf, and max(0·x) with an x of +inf is NaN where 0·max(x)
is 0; c = +inf too (`inf·0` is NaN: max(inf·[0, 1]) is NaN, inf·1 is inf); a negative c
turns max into min; NaN is nothing. So the fact is *positive*, not *nonnegative*, and the
launcher refuses a call that breaks it.

Runs late (after `fold-padding`, before `precision`): after `mask-bounds`, whose proofs read
the masked max as the frontend wrote it, and on the selects it leaves in a loop's last tiles.
Assumes verified IR, any level; the new values take the types (and layouts) of those they
replace. Exact (translation validation). Option `enable` (false: change nothing;
`--disable hoist-scale`). Remarks: each reduction that reads raw values, naming the factor
and the fact that allowed it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilec.dialects import arith
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.builder import Builder
from tilec.ir.core import BlockArgument, Operation, OpResult, Value
from tilec.ir.folding import constant_value
from tilec.ir.types import FloatType, TileType, element_type
from tilec.lowering.abi import FLOAT_SCALARS, argument_name, kernel_specialization
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["HoistScale", "scalars_worth_a_sign"]

_EXTREMES = ("max", "min")


@register_pass
class HoistScale(Pass):
    """Takes `max(x * c)` as `max(x) * c` (and `min`), and moves `* c` past selects with an
    infinite or zero fill, for a scalar `c` known finite and above zero; the module docstring
    says what is recognised and why the fact is needed. Remarks: each reduction changed."""

    name = "hoist-scale"
    summary = "Take max(x * c) as max(x) * c for a scalar c known positive"

    @dataclass
    class Options:
        enable: bool = option(True, "rewrite where the factor is known positive (false: off)")

    def run(self, module: Operation, ctx: PassContext) -> None:
        if not self.options.enable:
            return
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            factors = _Factors(kernel, kernel_specialization(kernel).positive)
            # Program order: a select before the selects and reductions that read it.
            for op in [op for op in kernel.walk() if isinstance(op, T.SelectOp)]:
                if op.parent is not None:
                    _move_past_select(op, factors)
            for op in [op for op in kernel.walk() if isinstance(op, T.ReduceOp)]:
                if op.parent is not None and op.kind in _EXTREMES:
                    _hoist_out_of(op, factors, ctx)


def scalars_worth_a_sign(kernel: FuncOp) -> frozenset[str]:
    """The float scalar parameters of `kernel` whose being positive would let this pass
    rewrite a max or min reduction (of the IR as it is: the frontend's will do): those
    `@tilec.jit` specializes on. Changes nothing."""
    params = {
        arg: argument_name(kernel, i)
        for i, arg in enumerate(kernel.arguments)
        if str(arg.type) in FLOAT_SCALARS
    }
    factors = _Factors(kernel, frozenset(params.values()))
    found = set()
    for op in kernel.walk():
        if isinstance(op, T.ReduceOp) and op.kind in _EXTREMES:
            product = _scaled(op.input, factors)
            if product is not None and isinstance(factors.root(product.factor), BlockArgument):
                found.add(params[factors.root(product.factor)])
    return frozenset(found)


@dataclass(frozen=True)
class _Product:
    """`value` is `raw * factor` (`factor` a splat of a positive scalar, or a positive
    constant tile), through selects with an invariant fill when `raw` is None."""

    value: Value
    raw: Value | None
    factor: Value


class _Factors:
    """Which values of `kernel` are known positive: its parameters named in `positive`,
    positive constants, their widening conversions and splats."""

    def __init__(self, kernel: FuncOp, positive: frozenset[str]):
        self.kernel = kernel
        self.positive = {
            arg
            for i, arg in enumerate(kernel.arguments)
            if argument_name(kernel, i) in positive and str(arg.type) in FLOAT_SCALARS
        }

    def root(self, v: Value) -> Value | None:
        """The positive parameter or constant `v` (a splat, a widening conversion, or itself)
        stands for, else None."""
        if isinstance(v, OpResult) and (isinstance(v.op, T.SplatOp) or _widens(v.op)):
            return self.root(v.op.operands[0])
        if v in self.positive:
            return v
        constant = constant_value(v)
        value = getattr(constant, "value", None)
        if isinstance(value, float) and 0.0 < value < math.inf:
            return v
        return None

    def describe(self, v: Value) -> tuple[str, str]:
        """`(name, why)`: how a remark names the factor `v` stands for, and why it is
        positive."""
        root = self.root(v)
        if root in self.positive:
            name = argument_name(self.kernel, root.index)
            return name, "positive by the kernel's specialization (tilec.positive)"
        return repr(constant_value(root).value), "a positive constant"


def _widens(op: Operation) -> bool:
    """An exact conversion to a wider float (`arith.extf`, a `tile.cast` f16 -> f32): it
    keeps a value positive and finite."""
    if isinstance(op, arith.ExtFOp):
        return True
    if not isinstance(op, T.CastOp):
        return False
    src, dst = element_type(op.input.type), element_type(op.result.type)
    if not (isinstance(src, FloatType) and isinstance(dst, FloatType)):
        return False
    return not (src.is_f8 or dst.is_f8) and src.width < dst.width


def _scaled(v: Value, factors: _Factors) -> _Product | None:
    """`v` as a product by a positive factor: a `mulf` by one, or a select of such a product
    and an invariant fill (the product as a select then returns `raw` None)."""
    if not isinstance(v, OpResult) or not isinstance(v.type, TileType):
        return None
    op = v.op
    if isinstance(op, arith.MulFOp):
        for raw, factor in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            uniform = isinstance(factor, OpResult) and isinstance(factor.op, (T.SplatOp, T.FullOp))
            if uniform and factors.root(factor) is not None:
                return _Product(v, raw, factor)
        return None
    if isinstance(op, T.SelectOp):
        scaled = _select_of_product(op, factors)
        if scaled is not None:
            return _Product(v, None, scaled[0].factor)
    return None


def _select_of_product(op: T.SelectOp, factors: _Factors) -> tuple[_Product, int] | None:
    """(the product, its operand index) when `op` chooses between a product by a positive
    factor (or a select of one) and a fill that multiplying leaves as it is."""
    for index, other in ((1, 2), (2, 1)):
        if _invariant_fill(op.operands[other]):
            product = _scaled(op.operands[index], factors)
            if product is not None:
                return product, index
    return None


def _invariant_fill(v: Value) -> bool:
    """A constant that multiplying by any finite c > 0 leaves as it is: ±inf, ±0."""
    value = getattr(constant_value(v), "value", None)
    return isinstance(value, float) and (math.isinf(value) or value == 0.0)


def _extremes_only(v: Value) -> bool:
    """Whether every use of `v` is a max/min reduction, or a select with an invariant fill
    whose uses are so in turn: a multiply moved past such a select ends there, per row."""
    for user in v.uses:
        if isinstance(user, T.ReduceOp) and user.kind in _EXTREMES:
            continue
        if isinstance(user, T.SelectOp) and user.condition is not v:
            fill = user.operands[2] if user.operands[1] is v else user.operands[1]
            if _invariant_fill(fill) and _extremes_only(user.result):
                continue
        return False
    return True


def _move_past_select(op: T.SelectOp, factors: _Factors) -> None:
    """`select(m, x * c, f)` as `select(m, x, f) * c` (module docstring)."""
    found = _select_of_product(op, factors)
    if found is None or found[0].raw is None:
        return  # a select of a select: that one is moved first (program order) or stays
    product, index = found
    alone = set(product.value.uses) == {op}
    if not (alone or _extremes_only(op.result)):
        return  # the product stays for its other uses, and a second multiply would follow
    b = Builder.before_op(op)
    operands = list(op.operands)
    operands[index] = product.raw
    chosen = b.create(
        T.SelectOp,
        condition=operands[0],
        true_value=operands[1],
        false_value=operands[2],
        result_types=[op.result.type],
    )
    scaled = b.create(
        arith.MulFOp, lhs=chosen.result, rhs=product.factor, result_types=[op.result.type]
    )
    op.replace_with([scaled.result])
    _erase_if_unused(product.value)


def _hoist_out_of(op: T.ReduceOp, factors: _Factors, ctx: PassContext) -> None:
    """`reduce max|min (x * c)` as `reduce max|min (x) * c`."""
    product = _scaled(op.input, factors)
    if product is None or product.raw is None:
        return
    b = Builder.before_op(op)
    reduced = b.create(
        T.ReduceOp,
        kind=op.kind,
        input=product.raw,
        axis=op.axis,
        result_types=[op.result.type],
    )
    factor = _factor_of_type(b, product.factor, op.result.type)
    scaled = b.create(arith.MulFOp, lhs=reduced.result, rhs=factor, result_types=[op.result.type])
    op.replace_with([scaled.result])
    _erase_if_unused(product.value)
    name, why = factors.describe(product.factor)
    kind = op.kind
    ctx.remark(
        reduced,
        f"{kind}(x * {name}) taken as {kind}(x) * {name}, a multiply per result: {name} is "
        f"{why}, and {kind}(c·x) = c·{kind}(x) for c finite and above zero",
    )


def _factor_of_type(b: Builder, factor: Value, t) -> Value:
    """The factor `factor` (a splat or a constant tile, or an `extf` of a scalar behind it)
    as a value of type `t` (the reduction's: a smaller tile, or a scalar)."""
    op = factor.op
    if isinstance(op, T.SplatOp):
        if not isinstance(t, TileType):
            return op.input
        return b.create(T.SplatOp, input=op.input, result_types=[t]).result
    attr = op.attributes["value"]  # a constant tile
    if isinstance(t, TileType):
        return b.create(T.FullOp, value=attr, result_types=[t]).result
    return b.create(arith.ConstantOp, value=attr, result_types=[t]).result


def _erase_if_unused(v: Value) -> None:
    if isinstance(v, OpResult) and not v.uses and v.op.parent is not None:
        v.op.erase()
