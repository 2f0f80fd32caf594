"""IR generation for scalar control flow (`tilec.frontend.irgen`'s part for it).

* `for i in range(start, stop, step)` is an `scf.for` over `index` values marked
  `{tilec.loop = "range"}` (`scf.is_range_loop`: passes that reason about loops over tiles
  may leave it alone, since its induction variable is a number, not a tile offset). A positive step loops from `start` to
  `stop` directly (an `scf.for` whose lower bound is not below its upper bound runs zero
  times, as Python's range). A negative step `-s` counts iterations
  `k = 0 .. ceil(max(start - stop, 0) / s)` and computes `i = start - k * s` at the top of
  the body, since `scf.for` steps up.
* `if` is an `scf.if` whose results are the names the `If` carries; a branch that does not
  assign one yields the value from before the `if`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilec.dialects import arith, scf
from tilec.dialects.scf import RANGE_LOOP_ATTRIBUTE
from tilec.frontend.checked import Constant, If, RangeLoop
from tilec.ir.attributes import StringAttr
from tilec.ir.core import Block, Region, Value
from tilec.ir.types import index

if TYPE_CHECKING:
    from tilec.frontend.irgen import _KernelGenerator

__all__ = ["if_statement", "range_loop"]


def range_loop(gen: _KernelGenerator, stmt: RangeLoop, env: dict[str, Value]) -> None:
    b = gen.b
    start, stop = (
        gen.index_constant(int(bound.value))
        if isinstance(bound, Constant)
        else gen.as_index(gen.expr(bound, env))
        for bound in (stmt.start, stmt.stop)
    )
    if stmt.step > 0:
        lower, upper, step = start, stop, gen.index_constant(stmt.step)
    else:
        stride = gen.index_constant(-stmt.step)
        span = b.create(arith.SubIOp, lhs=start, rhs=stop).result
        span = b.create(arith.MaxSIOp, lhs=span, rhs=gen.index_constant(0)).result
        rounded = b.create(arith.AddIOp, lhs=span, rhs=gen.index_constant(-stmt.step - 1))
        upper = b.create(arith.DivSIOp, lhs=rounded.result, rhs=stride).result
        upper.name_hint = "trips"
        lower, step = gen.index_constant(0), gen.index_constant(1)
    carried = [c.name for c in stmt.carried]
    inits = [env[name] for name in carried]
    body = Block([index, *(v.type for v in inits)])
    body.args[0].name_hint = stmt.var.name if stmt.step > 0 else "k"
    for arg, name in zip(body.args[1:], carried):
        arg.name_hint = name
    loop = b.create(
        scf.ForOp, lower=lower, upper=upper, step=step, inits=inits, body=Region([body])
    )
    loop.attributes[RANGE_LOOP_ATTRIBUTE] = StringAttr("range")
    inner_env = dict(env)
    inner_env.update(zip(carried, body.args[1:]))
    saved = (b.block, b.anchor)
    b.block, b.anchor = body, None
    if stmt.step > 0:
        gen.offsets[id(stmt.var)] = body.args[0]
    else:
        back = b.create(arith.MulIOp, lhs=body.args[0], rhs=gen.index_constant(-stmt.step))
        value = b.create(arith.SubIOp, lhs=start, rhs=back.result).result
        value.name_hint = stmt.var.name
        gen.offsets[id(stmt.var)] = value
    gen.statements(stmt.body, inner_env)
    b.create(scf.YieldOp, values=[inner_env[name] for name in carried])
    b.block, b.anchor = saved
    for name, result in zip(carried, loop.results):
        result.name_hint = name
        env[name] = result


def if_statement(gen: _KernelGenerator, stmt: If, env: dict[str, Value]) -> None:
    from tilec.frontend.irgen import ir_type

    b = gen.b
    cond = gen.expr(stmt.cond, env)
    names = [c.name for c in stmt.carried]
    types = [env[c.name].type if c.name in env else ir_type(c.type) for c in stmt.carried]
    has_else = bool(stmt.otherwise) or bool(names)
    op = b.create(
        scf.IfOp,
        condition=cond,
        result_types=types,
        then=Region([Block()]),
        otherwise=Region([Block()]) if has_else else Region(),
    )
    saved = (b.block, b.anchor)
    branches = [(op.then, stmt.then)] + ([(op.otherwise, stmt.otherwise)] if has_else else [])
    for region, stmts in branches:
        branch_env = dict(env)
        b.block, b.anchor = region.block, None
        gen.statements(stmts, branch_env)
        b.create(scf.YieldOp, values=[branch_env[name] for name in names])
    b.block, b.anchor = saved
    for name, result in zip(names, op.results):
        result.name_hint = name
        env[name] = result
