"""The `scf` dialect: structured control flow.

    %sum = scf.for %k = %c0 to %K step %BK iter_args(%acc = %zero) {
      ...
      scf.yield %next
    }
    %r = scf.if %cond -> (f32) {
      scf.yield %a
    } else {
      scf.yield %b
    }

A loop's results are its iteration arguments after the last iteration; their types are those
of the initial values. A loop the frontend made from `for i in range(...)` carries
`{tilec.loop = "range"}` (`is_range_loop`): its induction variable is a number, not the offset
of a tile, and passes that reason about loops over tiles may leave it alone.
"""

from __future__ import annotations

from tilec.ir.attributes import StringAttr
from tilec.ir.constraints import BOOL_LIKE, INT_OR_INDEX
from tilec.ir.core import (
    ANY_TYPE,
    Operand,
    Operation,
    Region,
    RegionDef,
    Result,
    Terminator,
    register_op,
)
from tilec.ir.types import IntegerType

RANGE_LOOP_ATTRIBUTE = "tilec.loop"
# Tensor-core dot groups a loop leaves running across its back edge (`pipeline`'s option
# dots_in_flight): read by the interpreter's race check, the lowering and the tuner.
DOTS_IN_FLIGHT_ATTRIBUTE = "tilec.dots_in_flight"
# A range loop that walks a kernel's output tiles (`walk-tiles`): its induction variable is a
# tile index, and the tiles' loads are masked by their views' extents at any index, so a load
# may be issued for the next index before this one is done (`register_prefetch`).
TILE_WALK_ATTRIBUTE = "tilec.tile_walk"


def is_range_loop(op: Operation) -> bool:
    """Whether `op` is an `scf.for` made from a `range()` loop."""
    attr = op.attributes.get(RANGE_LOOP_ATTRIBUTE)
    return isinstance(op, ForOp) and isinstance(attr, StringAttr) and attr.value == "range"


def is_tile_walk(op: Operation) -> bool:
    """Whether `op` is a range loop over a kernel's output tiles (`TILE_WALK_ATTRIBUTE`)."""
    return is_range_loop(op) and TILE_WALK_ATTRIBUTE in op.attributes


def dots_in_flight(op: Operation) -> int:
    """The tensor-core dot groups `op` (an `scf.for`) leaves in flight; 0 for any other op."""
    attr = op.attributes.get(DOTS_IN_FLIGHT_ATTRIBUTE)
    return int(attr.value) if isinstance(op, ForOp) and attr is not None else 0


@register_op
class ForOp(Operation):
    name = "scf.for"
    summary = (
        "Counted loop from `lower` to `upper` (exclusive) by `step`, with loop-carried values."
    )
    lower = Operand(INT_OR_INDEX)
    upper = Operand(INT_OR_INDEX)
    step = Operand(INT_OR_INDEX)
    inits = Operand(variadic=True)
    outs = Result(variadic=True)
    body = RegionDef()

    @classmethod
    def infer_result_types(cls, operands, attributes):
        return [v.type for v in operands[3:]]

    @property
    def induction_var(self):
        return self.body.block.args[0]

    @property
    def iter_args(self):
        return self.body.block.args[1:]

    @property
    def yield_op(self) -> YieldOp:
        return self.body.block.ops[-1]  # type: ignore[return-value]

    def print_custom(self, p) -> None:
        block = self.body.block
        p.token(p.define(block.args[0]))
        p.token("=")
        p.operand(self.lower)
        p.token("to")
        p.operand(self.upper)
        p.token("step")
        p.operand(self.step)
        if self.inits:
            p.token("iter_args")
            p.raw("(")
            for i, (arg, init) in enumerate(zip(block.args[1:], self.inits)):
                if i:
                    p.token(",")
                p.token(p.define(arg))
                p.token("=")
                p.operand(init)
            p.token(")")
        p.region(self.body, print_entry_args=False)
        p.attr_dict(self.attributes)

    @classmethod
    def parse_custom(cls, p) -> Operation:
        iv_name, iv_at = p.parse_new_value()
        p.expect("=")
        lower = p.parse_operand()
        p.expect("to")
        upper = p.parse_operand()
        p.expect("step")
        step = p.parse_operand()
        args = [(iv_name, lower.type, iv_at)]
        inits = []
        if p.optional("iter_args"):
            p.expect("(")

            def one():
                name, at = p.parse_new_value()
                p.expect("=")
                init = p.parse_operand()
                inits.append(init)
                args.append((name, init.type, at))

            p.comma_list(one, close=")")
            p.expect(")")
        region = p.parse_region(args)
        attrs = p.parse_attr_dict()
        return cls([lower, upper, step, *inits], [v.type for v in inits], attrs, [region])

    def verify_(self) -> None:
        if not (self.lower.type == self.upper.type == self.step.type):
            raise self.error(
                "lower bound, upper bound and step must have the same type, got "
                f"{self.lower.type}, {self.upper.type}, {self.step.type}"
            )
        if len(self.body.blocks) != 1:
            raise self.error("body must be a single block")
        block = self.body.block
        expected = [self.lower.type] + [v.type for v in self.inits]
        if [a.type for a in block.args] != expected:
            raise self.error(
                "body arguments must be the induction variable and one per iter_arg, typed "
                + ", ".join(map(str, expected))
            )
        term = block.terminator
        if not isinstance(term, YieldOp):
            raise self.error("body must end with 'scf.yield'")
        yielded = [v.type for v in term.operands]
        if yielded != [v.type for v in self.inits]:
            raise term.error(
                f"yields ({', '.join(map(str, yielded))}) but the loop carries "
                f"({', '.join(str(v.type) for v in self.inits)})"
            )


@register_op
class IfOp(Operation):
    name = "scf.if"
    summary = (
        "Runs `then` when `condition` holds, else `otherwise`; yields the taken branch's values."
    )
    condition = Operand(BOOL_LIKE)
    outs = Result(variadic=True)
    then = RegionDef()
    otherwise = RegionDef(may_be_empty=True)

    def print_custom(self, p) -> None:
        p.operand(self.condition)
        if self.results:
            p.token("->")
            p.token("(")
            p.types(r.type for r in self.results)
            p.token(")")
        p.region(self.then)
        if not self.otherwise.empty:
            p.token("else")
            p.region(self.otherwise)
        p.attr_dict(self.attributes)

    @classmethod
    def parse_custom(cls, p) -> Operation:
        condition = p.parse_operand()
        types = []
        if p.optional("->"):
            p.expect("(")
            types = p.comma_list(p.parse_type, close=")")
            p.expect(")")
        then = p.parse_region()
        otherwise = p.parse_region() if p.optional("else") else Region()
        attrs = p.parse_attr_dict()
        return cls([condition], types, attrs, [then, otherwise])

    def verify_(self) -> None:
        if self.condition.type != IntegerType(1):
            raise self.error(f"condition must be i1, got {self.condition.type}")
        types = [r.type for r in self.results]
        if self.otherwise.empty and types:
            raise self.error("has results, so it needs an 'else' region")
        for label, region in (("then", self.then), ("else", self.otherwise)):
            if region.empty:
                continue
            if len(region.blocks) != 1 or region.block.args:
                raise self.error(f"'{label}' region must be one block without arguments")
            term = region.block.terminator
            if not isinstance(term, YieldOp):
                raise self.error(f"'{label}' region must end with 'scf.yield'")
            yielded = [v.type for v in term.operands]
            if yielded != types:
                raise term.error(
                    f"yields ({', '.join(map(str, yielded))}) but the 'scf.if' results are "
                    f"({', '.join(map(str, types))})"
                )


@register_op
class YieldOp(Operation):
    name = "scf.yield"
    summary = (
        "Ends an `scf.for` body, an `scf.if` branch or a `tile.warp_specialize` region, giving "
        "its values."
    )
    values = Operand(ANY_TYPE, variadic=True)
    traits = (Terminator,)
    assembly_format = "($values `:` type($values))? attr-dict"

    def verify_(self) -> None:
        from tilec.dialects.warp_specialize import WarpSpecializeOp

        if not isinstance(self.parent_op, (ForOp, IfOp, WarpSpecializeOp)):
            raise self.error("must be inside 'scf.for', 'scf.if' or 'tile.warp_specialize'")
