"""The `canonicalize` pass: constant folding and canonicalization patterns, to a fixpoint."""

from __future__ import annotations

from dataclasses import dataclass

from tilec.diagnostics import TileError
from tilec.ir.core import Operation
from tilec.ir.rewrite import apply_patterns_greedily
from tilec.passmanager import Pass, PassContext, option, register_pass


@register_pass
class Canonicalize(Pass):
    """Folds constants and applies each op's canonicalization patterns until nothing changes.

    Every op is folded where its operands allow: constant arithmetic is computed exactly in
    the element type (f16 rounds as f16, integers wrap), and identities that hold for every
    input are applied (x * 1 -> x; for floats x + (-0.0) -> x but not x + 0.0). Then the op
    kind's patterns run (constants move to the right of commutative ops; a comparison of
    `rand` with a scalar becomes integer compares of the random word, `CompareRandWithUniform`
    in tilec/dialects/random.py), and pure ops left without users are erased. Constants are
    hoisted to the start of their kernel, one op per distinct value. Nothing that could
    change a result for some input is folded (integer division by zero, out-of-range
    conversions). A store that writes back what it just loaded on the lanes a select keeps
    stores only the others, under the select's mask (`StoreKeepsLanes`, option
    `store_keeps_lanes`). Assumes verified IR.
    Remarks: each constant made by folding names the op it replaced.
    """

    name = "canonicalize"
    summary = "Fold constants and apply exact simplifications, to a fixpoint"

    @dataclass
    class Options:
        max_iterations: int = option(10, "rewriting sweeps before giving up (an internal error)")
        fold: bool = option(True, "fold ops and hoist/deduplicate constants")
        store_keeps_lanes: bool = option(
            True,
            "store `where(m, v, y[t])` into y[t] as v under the mask m, without reading y "
            "(tilec/dialects/tile_patterns.py; false: keep the read)",
        )

    def run(self, module: Operation, ctx: PassContext) -> None:
        if self.options.max_iterations < 1:
            raise TileError(
                "canonicalize: option 'max_iterations' must be at least 1, "
                f"got {self.options.max_iterations}"
            )
        apply_patterns_greedily(
            module,
            fold=self.options.fold,
            max_iterations=self.options.max_iterations,
            remark=ctx.remark,
            disabled=() if self.options.store_keeps_lanes else ("StoreKeepsLanes",),
        )
