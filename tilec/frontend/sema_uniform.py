"""Block uniformity: which scalars are the same for every thread of a block, as the bounds of
a `range()` loop and the condition of an `if` must be (docs/language.md, "Scalar control
flow").

A scalar is *block-uniform* when it is computed, by element-wise operators, conversions,
math functions and `where`, from

* constants, scalar arguments, dimension extents,
* loop indices: element variables of `tiles()` (program ids among them) and `range()` loop
  variables,
* names bound to uniform scalars,
* tensor elements read at uniform scalar indices (`lens[b]`, `table[b, i]`).

Anything computed from a tile is not, even a reduction to a scalar (`sum(x[tm, :])`): how a
reduction spreads over threads is the compiler's choice, and the language does not promise
that every thread gets the same bits. Neither is an atomic's old value.

The check runs once the kernel is typed, over the checked tree, in program order. A name
carried around a loop is uniform only when every assignment to it in the loop is: each loop
is evaluated to a fixpoint before its conditions are checked. After an `if`, a name it
carries is uniform only when both branches leave it uniform.
"""

from __future__ import annotations

from tilec.diagnostics import TileError
from tilec.frontend.checked import (
    ArgReduce,
    Assign,
    Atomic,
    Binary,
    Cast,
    Constant,
    DimSize,
    Dot,
    Effect,
    Expr,
    GridLoop,
    If,
    Load,
    LoopIndex,
    Math,
    ParamRef,
    Philox,
    RangeIndex,
    RangeLoop,
    Reduce,
    Scan,
    Select,
    SeqLoop,
    Stmt,
    Store,
    TopK,
    Unary,
    VarRef,
)

__all__ = ["check_uniformity", "uniformity_culprit"]

_HINT = (
    "uniform values are constants, scalar arguments, dimensions, loop indices, and tensor "
    "elements read at such indices; choose element by element with where(cond, a, b)"
)

# name -> None when the name holds a uniform scalar, else why it does not
_Env = dict[str, "str | None"]


def check_uniformity(grid: GridLoop) -> None:
    """Raise a located `TileError` at the first `if` condition or `range()` bound of the
    kernel that is not block-uniform."""
    _block(grid.body, {}, check=True)


def uniformity_culprit(e: Expr, env: _Env) -> tuple[Expr, str] | None:
    """The part of scalar `e` that keeps it from being uniform, and why; None if it is."""
    if not e.type.is_scalar:
        return e, f"it depends on a tile ({e.type})"
    if isinstance(e, (Constant, ParamRef, DimSize, LoopIndex, RangeIndex)):
        return None
    if isinstance(e, VarRef):
        why = env.get(e.name)
        return None if why is None else (e, f"'{e.name}' {why}")
    if isinstance(e, Load):
        for index in e.access.indices:
            if index.value is not None:
                found = uniformity_culprit(index.value, env)
                if found is not None:
                    return found
        return None
    if isinstance(e, (Reduce, ArgReduce, TopK, Scan, Dot)):
        return e, "it is computed from a tile by a reduction"
    if isinstance(e, Atomic):
        return e, "it is the old value an atomic returned"
    operands: tuple[Expr, ...]
    if isinstance(e, Binary):
        operands = (e.lhs, e.rhs)
    elif isinstance(e, (Unary, Cast, Math)):
        operands = (e.operand,)
    elif isinstance(e, Select):
        operands = (e.cond, e.on_true, e.on_false)
    elif isinstance(e, Philox):
        operands = (e.seed, e.offsets)
    else:
        return e, "it depends on a tile"
    for operand in operands:
        found = uniformity_culprit(operand, env)
        if found is not None:
            return found
    return None


def _require(e: Expr, env: _Env, what: str) -> None:
    found = uniformity_culprit(e, env)
    if found is not None:
        culprit, why = found
        raise TileError(f"{what} must be block-uniform, but {why}", culprit.loc, hint=_HINT)


def _block(body: tuple[Stmt, ...], env: _Env, check: bool) -> None:
    for stmt in body:
        if isinstance(stmt, Assign):
            found = uniformity_culprit(stmt.value, env)
            env[stmt.name] = (
                None
                if found is None
                else f"holds a value computed from a tile (line {stmt.loc.line})"
            )
        elif isinstance(stmt, (Store, Effect)):
            continue
        elif isinstance(stmt, If):
            if check:
                _require(stmt.cond, env, "the condition of an 'if'")
            then_env, else_env = dict(env), dict(env)
            _block(stmt.then, then_env, check)
            _block(stmt.otherwise, else_env, check)
            for c in stmt.carried:
                env[c.name] = then_env.get(c.name) or else_env.get(c.name)
        elif isinstance(stmt, (SeqLoop, RangeLoop)):
            if check and isinstance(stmt, RangeLoop):
                _require(stmt.start, env, "the bounds of range()")
                _require(stmt.stop, env, "the bounds of range()")
            _loop(stmt, env, check)
        else:  # pragma: no cover
            raise AssertionError(f"unexpected statement {type(stmt).__name__}")


def _loop(loop: SeqLoop | RangeLoop, env: _Env, check: bool) -> None:
    names = [c.name for c in loop.carried]
    state = {name: env.get(name) for name in names}
    while True:  # uniformity only degrades, so this ends within len(names) + 1 rounds
        inner = dict(env)
        inner.update(state)
        _block(loop.body, inner, check=False)
        after = {name: state[name] or inner.get(name) for name in names}
        if after == state:
            break
        state = after
    inner = dict(env)
    inner.update(state)
    if check:
        _block(loop.body, inner, check=True)
    env.update(state)
