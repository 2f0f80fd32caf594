"""IR generation for the checked nodes that builtin calls build: math functions (`sema.Math`),
`where` (`Select`), `arange`/`offsets` (`Iota`), reductions (`Reduce`), `dot` and `@` (`Dot`),
`transpose` and `.T` (`Transpose`), `rand`/`randn`/`randint` (`Philox`) and atomics
(`Atomic`); scans are `tilec.frontend.irgen_scan`'s.

Each generator is `generate(gen, e, env) -> Value`, `gen` being the kernel's generator
(`tilec.frontend.irgen._KernelGenerator`), whose helpers it uses. The registry of builtins
(`tilec.frontend.builtins`) names the generator of each builtin, and `irgen` dispatches on the
node's class through it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilec.dialects import arith, atomic, math
from tilec.dialects import tile as T
from tilec.dialects.random import PhiloxOp
from tilec.frontend import checked as sema
from tilec.frontend.irgen_gather import atomic_scatter, is_gathered
from tilec.ir.core import Value
from tilec.ir.types import SCALAR_TYPES, FloatType, TileType, element_type, i1, i32

if TYPE_CHECKING:
    from tilec.frontend.irgen import _KernelGenerator

__all__ = [
    "UNARY_MATH_OPS",
    "atomic_expr",
    "dot_expr",
    "iota_expr",
    "math_expr",
    "philox_expr",
    "reduce_expr",
    "select_expr",
    "transpose_expr",
]

# The math functions that are one op of the `math` dialect; `abs`, `sigmoid` and `gelu` are
# built from several (see `math_expr`).
UNARY_MATH_OPS = {
    "exp": math.ExpOp,
    "exp2": math.Exp2Op,
    "log": math.LogOp,
    "log2": math.Log2Op,
    "sqrt": math.SqrtOp,
    "rsqrt": math.RsqrtOp,
    "tanh": math.TanhOp,
    "erf": math.ErfOp,
    "sin": math.SinOp,
    "cos": math.CosOp,
    "floor": math.FloorOp,
    "ceil": math.CeilOp,
}


def math_expr(gen: _KernelGenerator, e: sema.Math, env: dict[str, Value]) -> Value:
    x = gen.expr(e.operand, env)
    t = gen.ir_type(e.type)
    b = gen.b
    fn = e.fn
    op = UNARY_MATH_OPS.get(fn)
    if op is not None:
        return b.create(op, operand=x).result
    if fn == "abs":
        if isinstance(element_type(t), FloatType):
            return b.create(math.AbsFOp, operand=x).result
        negated = b.create(arith.SubIOp, lhs=gen.constant(0, t), rhs=x).result
        return b.create(arith.MaxSIOp, lhs=x, rhs=negated).result
    if fn == "sigmoid":  # 1 / (1 + exp(-x))
        e_x = b.create(math.ExpOp, operand=b.create(arith.NegFOp, operand=x).result).result
        d = b.create(arith.AddFOp, lhs=gen.constant(1.0, t), rhs=e_x).result
        return b.create(arith.DivFOp, lhs=gen.constant(1.0, t), rhs=d).result
    if fn == "gelu":  # exact: x/2 * (1 + erf(x / sqrt(2)))
        scaled = b.create(arith.MulFOp, lhs=x, rhs=gen.constant(0.7071067811865476, t))
        erf = b.create(math.ErfOp, operand=scaled.result).result
        one_plus = b.create(arith.AddFOp, lhs=gen.constant(1.0, t), rhs=erf).result
        half_x = b.create(arith.MulFOp, lhs=x, rhs=gen.constant(0.5, t)).result
        return b.create(arith.MulFOp, lhs=half_x, rhs=one_plus).result
    raise AssertionError(f"no lowering for math function {fn}")


def select_expr(gen: _KernelGenerator, e: sema.Select, env: dict[str, Value]) -> Value:
    cond = gen.expr(e.cond, env)
    on_true = gen.expr(e.on_true, env)
    on_false = gen.expr(e.on_false, env)
    return gen.b.create(T.SelectOp, condition=cond, true_value=on_true, false_value=on_false).result


def iota_expr(gen: _KernelGenerator, e: sema.Iota, env: dict[str, Value]) -> Value:
    return gen.b.create(T.IotaOp, result_types=[gen.ir_type(e.type)]).result


def transpose_expr(gen: _KernelGenerator, e: sema.Transpose, env: dict[str, Value]) -> Value:
    x = gen.expr(e.operand, env)
    return gen.b.create(T.TransposeOp, input=x, perm=list(e.permutation)).result


def philox_expr(gen: _KernelGenerator, e: sema.Philox, env: dict[str, Value]) -> Value:
    # rand() uses one random word three times (a checked DAG, sema_random.py): the word is
    # computed once, where it is first used.
    if id(e) not in gen.philox_words:
        seed, offsets = gen.expr(e.seed, env), gen.expr(e.offsets, env)
        gen.philox_words[id(e)] = gen.b.create(
            PhiloxOp, seed=seed, offsets=offsets, xor=e.xor, result_types=[gen.ir_type(e.type)]
        ).result
    return gen.philox_words[id(e)]


def reduce_expr(gen: _KernelGenerator, e: sema.Reduce, env: dict[str, Value]) -> Value:
    b = gen.b
    x = gen.expr(e.operand, env)
    result_t = gen.ir_type(e.type)
    result_elem = element_type(result_t)
    # sum/mean of f16/bf16 accumulate in f32; narrow integer sums in the result's type.
    acc_elem = result_elem
    narrow_float = isinstance(result_elem, FloatType) and result_elem.width < 32
    if e.kind in ("sum", "mean") and narrow_float:
        acc_elem = SCALAR_TYPES["f32"]
    booleans = result_elem == i1
    if booleans:
        # max/min of i1 values are any/all (False < True); the IR orders i1 as signed
        # (true is -1), so reduce them as the integers 0 and 1.
        acc_elem = i32
    if element_type(x.type) != acc_elem:
        x = gen.cast(x, TileType(x.type.shape, acc_elem))
    kind = "sum" if e.kind == "mean" else e.kind
    if isinstance(acc_elem, FloatType):
        identity: int | float = {"sum": 0.0, "max": float("-inf"), "min": float("inf")}[kind]
    elif booleans:  # any of nothing is False, all of nothing is True
        identity = {"max": 0, "min": 1}[kind]
    else:
        identity = {"sum": 0, "max": _int_min(acc_elem), "min": _int_max(acc_elem)}[kind]
    for axis, extent in zip(e.axes, e.extents):
        if extent is not None:
            x = gen.mask_padding(x, axis, extent, identity)
    count: Value | None = None
    for axis, extent in sorted(zip(e.axes, e.extents), key=lambda p: -p[0]):
        if e.kind == "mean":
            lanes = gen.real_lanes(x.type.shape[axis], extent)
            count = lanes if count is None else b.create(arith.MulIOp, lhs=count, rhs=lanes).result
        x = b.create(T.ReduceOp, kind=kind, input=x, axis=axis).result
    if e.kind == "mean":
        assert count is not None
        as_float = b.create(arith.SIToFPOp, input=count, result_types=[acc_elem]).result
        x = b.create(arith.DivFOp, lhs=x, rhs=gen.broadcast(as_float, x.type)).result
    if e.keepdims and not isinstance(x.type, TileType):
        # Every axis was reduced: the scalar becomes a tile of ones (expand_dims takes tiles).
        kept = TileType(tuple(1 for _ in e.operand.type.shape), element_type(x.type))
        x = b.create(T.SplatOp, input=x, result_types=[kept]).result
    elif e.keepdims:
        for axis in sorted(e.axes):
            x = b.create(T.ExpandDimsOp, input=x, axis=axis).result
    return gen.cast(x, result_t)


def dot_expr(
    gen: _KernelGenerator, e: sema.Dot, env: dict[str, Value], acc: Value | None = None
) -> Value:
    """`tile.dot`, accumulating into `acc` (`acc + a @ b`) or into zeros."""
    lhs = gen.expr(e.lhs, env)
    rhs = gen.expr(e.rhs, env)
    if e.contraction is not None:
        # Loads already read padding lanes as 0; anything computed may not be 0 there.
        if not _zero_padded(e.lhs):
            lhs = gen.mask_padding(lhs, 1, e.contraction, 0)
        if not _zero_padded(e.rhs):
            rhs = gen.mask_padding(rhs, 0, e.contraction, 0)
    if acc is None:
        acc = gen.constant(0, gen.ir_type(e.type))
    with gen.b.located(e.loc):
        return gen.b.create(T.DotOp, a=lhs, b=rhs, acc=acc).result


def atomic_expr(gen: _KernelGenerator, e: sema.Atomic, env: dict[str, Value]) -> Value:
    """`tile.atomic_rmw`/`tile.atomic_cas` on the region at the view's full rank; the old
    values come back in the region's own shape, as a load's do."""
    b = gen.b
    view, offsets, full_shape = gen.access(e.access, env)

    def at_full_rank(x: Value) -> Value:
        if not isinstance(x.type, TileType):
            full = TileType(full_shape, x.type)
            return b.create(T.SplatOp, input=x, result_types=[full]).result
        if x.type.shape != full_shape:
            return b.create(
                T.ReshapeOp, input=x, result_types=[TileType(full_shape, x.type.element)]
            ).result
        return x

    operands = {"view": view, "offsets": offsets}
    operands["value"] = at_full_rank(gen.expr(e.value, env))
    if e.compare is not None:
        operands["compare"] = at_full_rank(gen.expr(e.compare, env))
    if e.mask is not None:
        operands["mask"] = at_full_rank(gen.expr(e.mask, env))
    sem = None if e.sem == "relaxed" else e.sem
    if is_gathered(e.access):
        old = atomic_scatter(gen, e.access, env, operands, e.kind, sem)
    elif e.kind == "cas":
        old = b.create(atomic.AtomicCasOp, sem=sem, **operands).result
    else:
        old = b.create(atomic.AtomicRMWOp, kind=e.kind, sem=sem, **operands).result
    if not e.type.shape:
        return gen.extract_scalar(old)
    if full_shape != tuple(e.type.shape):
        return b.create(T.ReshapeOp, input=old, result_types=[gen.ir_type(e.type)]).result
    return old


def _zero_padded(e: sema.Expr) -> bool:
    """Whether the lanes of `e` outside its tensor read as 0 (loads, and what keeps zeros)."""
    if isinstance(e, sema.Load):
        return True
    # Not Broadcast: stretching an axis of size 1 repeats a real value into padding lanes.
    if isinstance(e, (sema.Transpose, sema.Cast, sema.ExpandDims)):
        return _zero_padded(e.operand)
    return False


def _int_min(t) -> int:
    return -(1 << (t.width - 1))


def _int_max(t) -> int:
    return (1 << (t.width - 1)) - 1
