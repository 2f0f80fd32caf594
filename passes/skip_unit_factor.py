"""The `skip-unit-factor` pass: a tile multiplied by a row's running-max correction is left as
it is, per warp, where every factor the warp holds is exactly 1.

Attention's online softmax rescales its accumulator every key step, `acc * alpha` with
`alpha = exp(m_i - m_new)` and `m_new = maximum(m_i, max(s))`: at d128, 64 FMULs a thread a
step. Where a row's max did not grow, `m_new == m_i`, the difference is +0 and `alpha` is
exactly 1 (tilec's exact `exp(0)` is `ex2.approx(0) = 1` corrected by a zero remainder);
the later a key tile, the likelier every row a warp holds keeps its max (docs/attention.md). FlashAttention-4 skips the rescale
when the max has not grown by enough; this pass skips it only where it changes nothing.

**Rewrite.** An f32 `arith.mulf` one operand of which is a *unit-likely factor* gets
`tilec.skip_unit_factor = i`, `i` the index of that operand. The lowering
(`tilec.lowering.elementwise`) then tests, in each thread, whether any factor it holds is not
1.0 (`fcmp une`: NaN counts as not 1), takes `vote.sync.any` over the warp, and branches
(uniformly) round the multiplies where no lane has one: the result is then `x` itself. That
is exact whatever the values -- `x * 1.0 == x` for every f32 x, NaN, infinities and -0.0
included -- so the op's meaning does not change and the interpreter ignores the attribute
(translation validation holds trivially). Where a factor is not 1, the warp pays the test,
the vote and the branch on top of the multiplies.

**Unit-likely factor** (the model of where the test pays): a value that, through layout moves
(`tile.broadcast`, `tile.expand_dims`, `tile.convert_layout`, `tile.reshape`) of which at
least one is a broadcast (so each thread holds few distinct factors: a row's), is
`math.exp(u - maximum(u, r))` (either operand order of the max; `u` and the max possibly
through layout conversions) with `exp` exact -- not
`approx`. The approximate exp of a difference is `ex2(fma(u, log2 e, -(m·log2 e)))`, which
for `u == m` is 2 to the rounding error of `m·log2 e`, not 0, and so not exactly 1: such a
factor is left unmarked, with a remark (`precision` leaves attention's `alpha` exact: it
reaches memory through the running sum's division, not only as f16).

Runs last (after `precision`, whose `approx` it reads). Assumes verified IR after
`assign-layouts` (any level works; the lowering reads the attribute). Option `enable` (false:
mark nothing; `--disable skip-unit-factor`). Remarks: each multiply marked, and each
unit-likely factor's multiply left unmarked, with why.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects import arith
from tilec.dialects import math as mathd
from tilec.dialects import tile as T
from tilec.ir.attributes import IntegerAttr
from tilec.ir.core import Operation, OpResult, Value
from tilec.ir.types import FloatType, TileType, element_type
from tilec.lowering.elementwise import SKIP_UNIT_FACTOR
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["SkipUnitFactor"]

_MOVES = (T.BroadcastOp, T.ExpandDimsOp, T.ConvertLayoutOp, T.ReshapeOp)


@register_pass
class SkipUnitFactor(Pass):
    """Marks f32 multiplies by a broadcast `exp(u - maximum(u, r))` so that the lowering skips
    them in warps whose every factor is exactly 1 (module docstring). Remarks: each multiply
    marked or, for an approximate exp, left."""

    name = "skip-unit-factor"
    summary = "Skip, per warp, a multiply by a running max's correction that is exactly 1"

    @dataclass
    class Options:
        enable: bool = option(True, "mark multiplies by a likely-1 factor (false: off)")

    def run(self, module: Operation, ctx: PassContext) -> None:
        if not self.options.enable:
            return
        for op in [op for op in module.walk() if isinstance(op, arith.MulFOp)]:
            if not isinstance(op.result.type, TileType):
                continue
            if element_type(op.result.type) != FloatType("f32"):
                continue
            for index in (1, 0):
                exp = _running_max_correction(op.operands[index])
                if exp is None:
                    continue
                if exp.attributes.get("approx") is not None and exp.attributes["approx"].value:
                    ctx.remark(
                        op,
                        "multiply by exp(u - max(u, r)) kept: that exp is approximate, "
                        "ex2(fma(u, log2 e, -max·log2 e)), not exactly 1 where the max did "
                        "not grow",
                    )
                    break
                op.attributes[SKIP_UNIT_FACTOR] = IntegerAttr(index)
                ctx.remark(
                    op,
                    "skipped in a warp whose factors are all exactly 1: exp(u - max(u, r)) "
                    "is 1 where the running max did not grow, and x * 1 = x for every x; "
                    "else a vote and a branch before the multiplies",
                )
                break


def _running_max_correction(v: Value) -> Operation | None:
    """The `math.exp` of `u - maximum(u, r)` that `v` broadcasts (through layout moves, one
    at least a broadcast), else None."""
    broadcast = False
    while isinstance(v, OpResult) and isinstance(v.op, _MOVES):
        broadcast = broadcast or isinstance(v.op, T.BroadcastOp)
        v = v.op.operands[0]
    if not (broadcast and isinstance(v, OpResult) and isinstance(v.op, mathd.ExpOp)):
        return None
    difference = v.op.operands[0]
    if not (isinstance(difference, OpResult) and isinstance(difference.op, arith.SubFOp)):
        return None
    u, maximum = _unconverted(difference.op.lhs), _unconverted(difference.op.rhs)
    if not (isinstance(maximum, OpResult) and isinstance(maximum.op, arith.MaximumFOp)):
        return None
    if u not in (_unconverted(maximum.op.lhs), _unconverted(maximum.op.rhs)):
        return None
    return v.op


def _unconverted(v: Value) -> Value:
    """`v` before layout conversions (which move elements between threads, not change them)."""
    while isinstance(v, OpResult) and isinstance(v.op, T.ConvertLayoutOp):
        v = v.op.operands[0]
    return v
