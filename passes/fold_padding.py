"""The `fold-padding` pass: a select that gives a load's padding lanes a constant folds into the
load.

A row kernel over N columns loads `x[tm, :]` into a tile wider than the row, and the frontend
hides the lanes past the row from each reduction with its padding mask, `iota < N`:
`max(row)` reads `select(mask, row, -inf)`, `mean(r)` reads `select(mask, r, 0)`. Those masked
lanes are exactly the ones the load did not read (its bounds check along N), so they hold the
load's padding: where that is already the select's constant (`r = x[tm, :].to(f32)` pads with
0, and `0.to(f32)` is 0), the select changes nothing; where it is not (softmax's -inf), the
load can pad with the constant instead, provided nothing else looks at those lanes. Each
select costs an instruction per element (an `FSEL`) where the load's padding costs none.

**The mask.** `iota(n) < splat(index_cast(E))`, through `expand_dims`, `broadcast` and
`convert_layout` to the load's shape, the iota along dimension d of the load; the load at offset 0 along d, its
bounds checked there and nowhere else, E the extent of the load's tensor along d (`tile.dim`
of it, or of any tensor along a dimension of the same name: the launcher gives a name one
extent), and the load without a mask of its own (or with this one). Then the mask is true
exactly where the load reads (extents are below 2**31, so the i32 compare is exact).

**Fold.** `select(mask, v, c)` becomes `v` when every lane the mask hides holds `c` in `v`:
`v` is such a load whose padding is `c`, or a cast, `addf`, `subf`, `mulf`, `negf` of such
values and constants, computed exactly in the element type (as `canonicalize` folds); a zero
must match its sign.

**Pad.** `select(mask, load, c)` (or of float casts of the load: `c` converted back, where
the casts give `c` again exactly) becomes the load padding with `c` when its other users
never see its hidden lanes: each is a select on the same mask taking the load as its true
value, a store that writes only where the mask holds (at offset 0, bounds along the same
extent, no other mask), or a position-wise float op (arith, math, `tile.cast`,
`convert_layout`) whose results are used only so in turn. Softmax: `row - max` and `exp` of it feed the sum's
select and the store, so `row` may pad with -inf and the max's select goes.

**Sums of `exp(x - max(x))`.** Softmax's sum reads `select(mask, e, 0)`, `e = exp(x -
m)` with `m` the max of `x` along the mask's dimension and `x` -inf on the hidden lanes (the
padding above). The select goes when it only feeds a sum along that dimension: where `m` is
finite or +inf, the hidden lanes of `e` are `exp(-inf) = 0` already; where `m` is -inf, every
lane the row has is -inf, so `e` is NaN on them and the sum NaN either way; where `m` is NaN,
so is every lane of `e`. That takes a row of at least one element; a row of none (an extent
of 0) would sum NaN instead of 0, so the sum must also reach memory only through lanes the
mask shows (through broadcasts and position-wise ops to the masked store: softmax's `e /
sum`), none when the extent is 0. Without the select the mask's predicates need not live from
the load to the sum (odd-width softmax: 40 to 32 registers).

Runs after `vectorize`, which decides the dimensions whose bounds a load checks (`in_bounds`:
a block's rows inside M need no check, and then the columns' mask is all there is).
Exact: the interpreter runs the IR before and after (translation validation). Option `enable`
(false: change nothing; `--disable fold-padding`). Remarks: each select folded, and how.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from tilec.dialects import arith
from tilec.dialects import math as mathd
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import BoolAttr, FloatAttr, IntegerAttr
from tilec.ir.core import Operation, OpResult, Value
from tilec.ir.folding import constant_value, from_numpy_scalar, numpy_dtype, to_numpy_scalar
from tilec.ir.types import FloatType, TensorType, TileType
from tilec.passes.mask_bounds import iota_below
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["FoldPadding"]


@register_pass
class FoldPadding(Pass):
    """Folds a select on a load's padding mask: away where the hidden lanes already hold its
    constant, into the load's padding where nothing else sees them (the module docstring says
    which masks and loads)."""

    name = "fold-padding"
    summary = "Fold selects on a load's padding mask into the load's padding"

    @dataclass
    class Options:
        enable: bool = option(True, "fold selects into padding (false: change nothing)")

    def run(self, module: Operation, ctx: PassContext) -> None:
        if not self.options.enable:
            return
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            selects = [op for op in kernel.walk() if isinstance(op, T.SelectOp)]
            for select in selects:  # first the loads' padding, then what it makes constant
                _pad(select, ctx)
            for select in selects:
                if select.parent is not None:
                    _fold(select, ctx)
            for select in selects:
                if select.parent is not None:
                    _fold_into_sum(select, ctx)


def _pad(select: T.SelectOp, ctx: PassContext) -> None:
    c, mask = constant_value(select.false_value), select.condition
    if c is None:
        return
    chain, v = [], select.true_value  # the float casts between the load and the select
    while isinstance(v, OpResult) and isinstance(v.op, T.CastOp) and _float_cast(v.op):
        chain.append(v.op)
        v = v.op.input
    if not (isinstance(v, OpResult) and isinstance(v.op, T.LoadOp)) or not _reads_where(v.op, mask):
        return
    load = v.op
    padding = _converted(c, select.result.type, load.result.type)
    if padding is None or _same(_padding(load), padding, load.result.type):
        return
    hidden = padding  # what the casts make of it: the select's constant, exactly
    for cast in reversed(chain):
        hidden = _hidden_of(cast, [hidden])
    if hidden is None or not _same(hidden, c, select.result.type):
        return
    steps = [load, *reversed(chain), select]
    for op, then in itertools.pairwise(steps):
        if not all(
            _unseen(user, op.results[0], mask) for user in op.results[0].uses if user is not then
        ):
            return
    load.attributes["padding"] = padding
    select.result.replace_all_uses_with(select.true_value)
    select.erase()
    ctx.remark(load, f"pads with {padding.value} where {_name(mask)} hides, for a select on it")


def _float_cast(cast: T.CastOp) -> bool:
    return isinstance(_element(cast.input.type), FloatType) and isinstance(
        _element(cast.result.type), FloatType
    )


def _element(t):
    """The element type of a tile type, or a scalar type itself."""
    return t.element if isinstance(t, TileType) else t


def _converted(c, source, target):
    """Constant `c` of `source`'s elements as one of `target`'s (rounded), else None."""
    dtype = numpy_dtype(target)
    if dtype is None or numpy_dtype(source) is None:
        return None
    with np.errstate(all="ignore"):
        return from_numpy_scalar(np.asarray(to_numpy_scalar(c, source)).astype(dtype)[()], target)


def _fold(select: T.SelectOp, ctx: PassContext) -> None:
    c = constant_value(select.false_value)
    hidden = _hidden(select.true_value, select.condition)
    if c is None or hidden is None or not _same(hidden, c, select.result.type):
        return
    v = select.true_value
    message = f"a select on {_name(select.condition)} folded: the lanes it hides hold {c.value}"
    ctx.remark(v.op if isinstance(v, OpResult) else None, message)
    select.result.replace_all_uses_with(v)
    select.erase()


def _fold_into_sum(select: T.SelectOp, ctx: PassContext) -> None:
    """`select(mask, exp(x - max(x)), 0)` read only by a sum along the mask's dimension, whose
    result memory sees only where the mask holds: the select goes (module docstring)."""
    mask, e = select.condition, select.true_value
    bound, c = _bound(mask), constant_value(select.false_value)
    if bound is None or c is None or not _same(c, FloatAttr(0.0), select.result.type):
        return
    d = bound[0]
    uses = list(select.result.uses)
    if len(uses) != 1 or not _reduces(uses[0], "sum", d):
        return
    if not (isinstance(e, OpResult) and isinstance(e.op, mathd.ExpOp)):
        return
    difference = e.op.operands[0]
    if not (isinstance(difference, OpResult) and isinstance(difference.op, arith.SubFOp)):
        return
    x, m = difference.op.lhs, difference.op.rhs
    while isinstance(m, OpResult) and isinstance(m.op, (T.BroadcastOp, T.ExpandDimsOp)):
        m = m.op.input
    if not (isinstance(m, OpResult) and _reduces(m.op, "max", d) and m.op.input is x):
        return
    hidden = _hidden(x, mask)
    if hidden is None or not _same(hidden, FloatAttr(float("-inf")), x.type):
        return
    if not _shown_only(uses[0].results[0], mask):
        return
    select.result.replace_all_uses_with(e)
    select.erase()
    ctx.remark(
        uses[0],
        f"sums exp(x - max(x)) without its select on {_name(mask)}: the hidden lanes are 0, "
        "or the row's sum NaN either way",
    )


def _reduces(op: Operation, kind: str, axis: int) -> bool:
    return (
        isinstance(op, T.ReduceOp)
        and str(op.attributes["kind"].value) == kind
        and op.attributes["axis"].value == axis
    )


def _shown_only(v: Value, mask: Value) -> bool:
    """Whether `v` reaches memory only through stores where `mask` holds: through
    broadcasts and position-wise ops (of any shape) to such stores or selects on `mask`."""
    for user in v.uses:
        if isinstance(user, T.StoreOp):
            if not (user.value is v and v not in user.offsets and _reads_where(user, mask)):
                return False
        elif isinstance(user, T.SelectOp):
            if not _unseen(user, v, mask):
                return False
        elif isinstance(user, (T.BroadcastOp, T.ExpandDimsOp, *_POSITIONWISE)):
            if not _shown_only(user.results[0], mask):
                return False
        else:
            return False
    return True


def _hidden(v: Value, mask: Value):
    """The constant (an attribute) that `v` holds wherever `mask` is false, else None."""
    if not isinstance(v, OpResult):
        return None
    op = v.op
    if isinstance(op, T.LoadOp):
        return _padding(op) if _reads_where(op, mask) else None
    if isinstance(op, T.SelectOp) and op.condition is mask:
        return constant_value(op.false_value)
    if type(op) not in _EVALUATORS:
        return None
    args = []
    for x in op.operands:
        a = constant_value(x)
        args.append(_hidden(x, mask) if a is None else a)
    return None if None in args else _hidden_of(op, args)


def _hidden_of(op: Operation, args: list):
    """What float op `op` computes from the constants `args` (attributes), exactly in its
    element type, else None."""
    t = op.results[0].type
    dtype = numpy_dtype(t)
    types = [x.type for x in op.operands]
    if dtype is None or not isinstance(_element(t), FloatType) or None in map(numpy_dtype, types):
        return None
    values = [to_numpy_scalar(a, x) for a, x in zip(args, types)]
    with np.errstate(all="ignore"):
        result = _EVALUATORS[type(op)](*values, dtype)
    return from_numpy_scalar(dtype.type(result), t)


_EVALUATORS = {
    arith.AddFOp: lambda x, y, dtype: x + y,
    arith.SubFOp: lambda x, y, dtype: x - y,
    arith.MulFOp: lambda x, y, dtype: x * y,
    arith.NegFOp: lambda x, dtype: -x,
    T.CastOp: lambda x, dtype: np.asarray(x).astype(dtype)[()],
}


def _same(a, b, t) -> bool:
    """Whether constants `a` and `b` are one value of `t`'s elements, bit for bit."""
    dtype = numpy_dtype(t)
    if dtype is None:
        return False
    x, y = np.asarray(to_numpy_scalar(a, t), dtype), np.asarray(to_numpy_scalar(b, t), dtype)
    return x.tobytes() == y.tobytes()


def _padding(load: T.LoadOp):
    padding = load.attributes.get("padding")
    if padding is not None:
        return padding
    element = load.result.type.element
    if isinstance(element, FloatType):
        return FloatAttr(0.0)
    return BoolAttr(False) if getattr(element, "width", 0) == 1 else IntegerAttr(0)


def _reads_where(access: Operation, mask: Value) -> bool:
    """Whether `access` (a load or store) touches exactly the lanes where `mask` holds."""
    if access.mask is not None and access.mask is not mask:
        return False
    promised = access.attributes.get("in_bounds")
    rank = access.view.type.rank
    checked = [d for d in range(rank) if promised is None or not promised.value[d]]
    if not checked:
        return access.mask is mask
    if len(checked) != 1:
        return False
    (d,) = checked
    bound = _bound(mask)
    if bound is None or bound[0] != d:
        return False
    offset = constant_value(access.offsets[d])
    return offset is not None and offset.value == 0 and _extent_of(bound[1], access.view, d)


def _bound(mask: Value) -> tuple[int, Value] | None:
    """(d, E) for `mask` = `iota < splat(index_cast(E))` along dimension d of its shape."""
    path = []
    moves = (T.ExpandDimsOp, T.BroadcastOp, T.ConvertLayoutOp)
    while isinstance(mask, OpResult) and isinstance(mask.op, moves):
        path.append(mask.op)
        mask = mask.op.input
    if not (isinstance(mask, OpResult) and isinstance(mask.op, arith.CmpIOp)):
        return None
    found = iota_below(mask.op)
    if found is None:
        return None
    _, extent = found
    d = 0
    for op in reversed(path):  # from the compare out to the mask
        if isinstance(op, T.ExpandDimsOp) and op.axis <= d:
            d += 1
    return d, extent


def _extent_of(extent: Value, view: Value, d: int) -> bool:
    """Whether index `extent` is the extent of `view` along `d`."""
    if not (isinstance(extent, OpResult) and isinstance(extent.op, T.DimOp)):
        return False
    other, axis = extent.op.view, extent.op.axis
    if other is view and axis == d:
        return True
    name = view.type.shape[d]
    return (
        isinstance(name, str)
        and isinstance(other.type, TensorType)
        and other.type.shape[axis] == name
    )


_POSITIONWISE = (
    arith.AddFOp,
    arith.SubFOp,
    arith.MulFOp,
    arith.DivFOp,
    arith.MaximumFOp,
    arith.MinimumFOp,
    arith.NegFOp,
    arith.ExtFOp,
    arith.TruncFOp,
    arith.CmpFOp,
    mathd.ExpOp,
    mathd.Exp2Op,
    mathd.LogOp,
    mathd.Log2Op,
    mathd.SqrtOp,
    mathd.RsqrtOp,
    mathd.TanhOp,
    mathd.ErfOp,
    mathd.AbsFOp,
    T.CastOp,
    T.ConvertLayoutOp,
)


def _unseen(user: Operation, v: Value, mask: Value) -> bool:
    """Whether `user` of `v` never lets its lanes where `mask` is false be seen."""
    if isinstance(user, T.SelectOp):
        return user.condition is mask and user.false_value is not v and user.true_value is v
    if isinstance(user, T.StoreOp):
        return user.value is v and v not in user.offsets and _reads_where(user, mask)
    if not isinstance(user, _POSITIONWISE):
        return False
    result = user.results[0]
    if result.type.shape != v.type.shape:
        return False
    return all(_unseen(u, result, mask) for u in result.uses)


def _name(mask: Value) -> str:
    return f"%{mask.name_hint}" if mask.name_hint else "the padding mask"
