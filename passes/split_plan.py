"""What `split-reduction` (passes/split_reduction.py) recognises: a kernel whose grid body runs
one loop that only reduces, each carried value updated by a ⊕ (`COMBINES`), a dot's
accumulate, or as a sum rescaled by a carried maximum (an online softmax's normalizer,
`_rescaled_sums`), to a tensor's extent or to at most one (`_extent_bound`) -- or a scan: a
loop whose carried values are ⊕-reductions and which stores tiles (what the carried values
have reached, `_scan_stores`) -- or a multi-pass kernel: such a reducing loop, up to two more
reductions over the same extent (`_later_reduction`: a variance after a mean), and a last
loop that applies their results as it stores (a column softmax, a normalization over a long
axis, `_apply_loop`). `split_plan` says
what splitting would do, or raises `NotSplit` saying why not (the pass's remark)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from tilec.dialects import arith, scf
from tilec.dialects import gather as G
from tilec.dialects import math as M
from tilec.dialects import split as W
from tilec.dialects import tile as T
from tilec.dialects.atomic import ATOMIC_OPS
from tilec.dialects.builtin import FuncOp, ReturnOp
from tilec.ir.attributes import FloatAttr, IntegerAttr
from tilec.ir.core import Block, BlockArgument, Operation, OpResult, Value
from tilec.ir.types import FloatType, IntegerType, TileType

__all__ = [
    "COMBINES",
    "Carried",
    "Combine",
    "NotSplit",
    "Plan",
    "constant_index",
    "first_effect",
    "identity_attr",
    "is_identity",
    "split_plan",
    "splits_dot_loop",
]


@dataclass(frozen=True)
class Combine:
    """One ⊕: the op that applies it, its name in remarks, the `tile.reduce` kind that
    applies it along a tile, and its identity for floats and for integers."""

    op: type[Operation]
    name: str
    reduce_kind: str
    float_identity: float | None
    integer_identity: str | None  # "zero", "min" (the type's lowest), "max"


COMBINES = {
    arith.AddFOp: Combine(arith.AddFOp, "add", "sum", -0.0, None),
    arith.AddIOp: Combine(arith.AddIOp, "add", "sum", None, "zero"),
    arith.MaximumFOp: Combine(arith.MaximumFOp, "max", "max", -math.inf, None),
    arith.MinimumFOp: Combine(arith.MinimumFOp, "min", "min", math.inf, None),
    arith.MaxSIOp: Combine(arith.MaxSIOp, "max", "max", None, "min"),
    arith.MinSIOp: Combine(arith.MinSIOp, "min", "min", None, "max"),
}


def identity_attr(c: Combine, t: TileType) -> FloatAttr | IntegerAttr:
    if isinstance(t.element, FloatType):
        return FloatAttr(c.float_identity)
    width = t.element.width if isinstance(t.element, IntegerType) else 64
    lowest, highest = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return IntegerAttr({"zero": 0, "min": lowest, "max": highest}[c.integer_identity])


def is_identity(v: Value, c: Combine) -> bool:
    """Whether `v` is a `tile.full` of ⊕'s identity (for add: either zero)."""
    if not (isinstance(v, OpResult) and isinstance(v.op, T.FullOp)):
        return False
    value = v.op.attributes["value"].value
    wanted = identity_attr(c, v.type).value
    return value == wanted or (c.name == "add" and value == 0)


@dataclass
class Carried:
    index: int
    name: str
    update: Operation  # acc' = acc ⊕ g
    combine: Combine
    type: TileType
    offset: int = 0  # bytes into the slot
    scaled_by: int | None = None  # x' = x * exp(m - m') + g: the index of m (`_rescaled_sums`)
    scalar: bool = False  # a scalar carried value, kept in its slot as a 1-element tile (`type`)


@dataclass
class Plan:
    loop: scf.ForOp
    dim: str | int
    step: int
    carried: list[Carried]
    atomic: bool = False  # the epilogue's atomics combine the partials: no workspace
    bounded: bool = False  # the loop runs to at most the extent `dim` (`_extent_bound`)
    scan: bool = False  # the loop stores what its carried values reach (`split_scan.py`)
    # A multi-pass kernel (`split_passes.py`): the reductions after the first loop, each a plan
    # of its own loop and carried values, and the last loop, which applies their results.
    reductions: list[Plan] = dataclasses.field(default_factory=list)
    apply: scf.ForOp | None = None

    @property
    def passes(self) -> int:
        """The kernel's passes over the extent: 1, or its reductions and the applying loop."""
        return 1 if self.apply is None else 2 + len(self.reductions)


# The most top-level loops split as passes: each pass needs a block, so a split of n blocks
# needs n >= passes (the launch and the interpreter keep to it).
MAX_PASSES = 4


class NotSplit(Exception):
    """Why a kernel is left alone (the remark's text)."""


def split_plan(kernel: FuncOp, tiled: bool = True) -> Plan:
    """What splitting `kernel` would do; raises `NotSplit` saying why it cannot be split.
    `tiled=False` asks before `tiling` (what `tiling` ranks split GEMM tiles by): the loop's
    step and the carried tiles' sizes may still be symbols."""
    grid = kernel.attributes.get("tilec.grid")
    axes = len(grid.value) if grid is not None else 0
    if axes >= 3:
        raise NotSplit("the grid has 3 axes already, and CUDA has no fourth for the splits")
    body = kernel.body.block
    atomics = [op for op in kernel.walk() if isinstance(op, ATOMIC_OPS)]
    loops = [op for op in body.ops if isinstance(op, scf.ForOp)]
    if not loops:
        raise NotSplit("no loop in the grid body")
    if len(loops) > MAX_PASSES:
        raise NotSplit(
            f"{len(loops)} top-level loops: only a kernel with one, or with up to "
            f"{MAX_PASSES - 1} reductions and a loop that applies them, is split"
        )
    loop = loops[0]
    position = body.ops.index(loop)
    for op in body.ops[:position]:
        if _stores(op):
            raise NotSplit("a store before the loop would run in every split")
    if constant_index(loop.lower) != 0:
        raise NotSplit("the loop does not start at 0")
    step = constant_index(loop.step)
    if tiled and (step is None or step < 1):
        raise NotSplit("the loop's step is not a positive constant")
    extent = _extent_bound(loop.upper, body)
    if extent is None:
        raise NotSplit(
            "the loop does not run to the extent of a tensor argument (or to at most one)"
        )
    dim = extent.view.type.shape[extent.axis]
    if dim is None:
        raise NotSplit("the loop's extent is '?', which the launch cannot name")
    later = loops[1:]
    apply = _apply_loop(later[-1], loop, extent, step) if later else None
    reductions = [_later_reduction(r, loop, extent, step, tiled) for r in later[:-1]]
    if apply is not None:
        for op in body.ops[position + 1 :]:
            if op not in later and _stores(op) and op.results:
                raise NotSplit(f"an effect between or after the loops has results ({op.name})")
    scan = _scan_stores(loop, atomics)
    if apply is not None and (scan or atomics):
        raise NotSplit(
            f"{len(loops)} top-level loops, and the first "
            + ("stores" if scan else "kernel has atomics")
        )
    if not loop.iter_args:
        raise NotSplit("the loop carries no value")
    rescaled = {} if atomics or scan else _rescaled_sums(loop)
    carried = [
        _carried(loop, i, workspace=not atomics, static=tiled, rescaled=rescaled, scan=scan)
        for i in range(len(loop.iter_args))
    ]
    if atomics:
        _check_atomic_epilogue(loop, carried, atomics)
    return Plan(
        loop,
        dim,
        step or 0,
        carried,
        atomic=bool(atomics),
        bounded=extent.bounded,
        scan=scan,
        reductions=reductions,
        apply=apply,
    )


def _same_range(later: scf.ForOp, first: scf.ForOp, extent: _Extent, step: int | None) -> None:
    """Raises `NotSplit` unless `later` runs from 0 over `first`'s extent by its step."""
    if constant_index(later.lower) != 0 or constant_index(later.step) != step:
        raise NotSplit(
            "two top-level loops or more, and a later one does not run from 0 by the first's step"
        )
    other = _extent_bound(later.upper, first.parent)
    if other is None or (other.view.type.shape[other.axis], other.bounded) != (
        extent.view.type.shape[extent.axis],
        extent.bounded,
    ):
        raise NotSplit("two top-level loops or more, over different extents")


def _later_reduction(
    loop: scf.ForOp, first: scf.ForOp, extent: _Extent, step: int | None, tiled: bool
) -> Plan:
    """A loop between the first and the last of a multi-pass kernel: a reduction like the
    first (its addends may read what the loops before it found), over the same range, without
    effects; raises `NotSplit` saying why not."""
    _same_range(loop, first, extent, step)
    effect = next((op for op in loop.body.walk() if _effect_of(op) is not None), None)
    if effect is not None:
        raise NotSplit(f"a loop between the first and the last has an effect ({effect.name})")
    if not loop.iter_args:
        raise NotSplit("a loop between the first and the last carries no value")
    rescaled = _rescaled_sums(loop)
    carried = [
        _carried(loop, i, static=tiled, rescaled=rescaled) for i in range(len(loop.iter_args))
    ]
    dim = extent.view.type.shape[extent.axis]
    return Plan(loop, dim, step or 0, carried, bounded=extent.bounded)


def _apply_loop(last: scf.ForOp, first: scf.ForOp, extent: _Extent, step: int | None) -> scf.ForOp:
    """`last` where it is a loop that applies the results of the loops before it (a
    multi-pass kernel, `split_passes.py`): over `first`'s extent by its step, carrying nothing,
    its only effects stores at its own variable, reading no tensor it stores; raises
    `NotSplit` saying why not. Its chunks then run in other blocks than the reductions', in
    no order, each after every chunk of the reductions has been reduced."""
    _same_range(last, first, extent, step)
    if last.iter_args:
        raise NotSplit(
            "two top-level loops or more, and the last carries values: only a loop that applies "
            "the results before it as it stores is split with them"
        )
    stores = []
    for op in last.body.walk():
        if _effect_of(op) is None:
            continue
        if not isinstance(op, T.StoreOp):
            raise NotSplit(f"the last top-level loop has an effect ({op.name})")
        stores.append(op)
    if not stores:
        raise NotSplit("two top-level loops or more, and the last stores nothing")
    variable = last.body.block.args[0]
    if any(not any(_uncast(v) is variable for v in op.offsets) for op in stores):
        raise NotSplit(
            "a store in the last loop is not indexed by its variable: its chunks, run in "
            "other blocks, may write the same tiles"
        )
    stored = {op.view for op in stores}
    if any(isinstance(op, (T.LoadOp, G.GatherOp)) and op.view in stored for op in last.body.walk()):
        raise NotSplit("the last loop reads a tensor it stores")
    return last


def _scan_stores(loop: scf.ForOp, atomics: list) -> bool:
    """Whether `loop` is a scan (it stores tiles, what its carried values have reached as it
    goes: a cumulative sum); raises `NotSplit` for any other effect. Each store must be at the
    loop's variable (iterations write apart: chunks run in other blocks, in no order), and,
    since a scan's chunks are run twice, the first time without its stores
    (`split_scan.py`), nothing in the loop may read what the loop stores."""
    stores = []
    for op in loop.body.walk():
        if op is loop or _effect_of(op) is None:
            continue
        if not isinstance(op, T.StoreOp):
            raise NotSplit(f"the loop has an effect ({op.name})")
        stores.append(op)
    if not stores:
        return False
    if atomics:
        raise NotSplit("the loop stores (a scan) and the kernel has atomics")
    step = loop.body.block.args[0]
    for op in stores:
        if not any(_uncast(v) is step for v in op.offsets):
            # Another chunk's block would write the same tiles, in no defined order.
            raise NotSplit(
                "a store in the loop is not indexed by the loop's variable: every iteration "
                "may write the same tiles"
            )
    stored = {op.view for op in stores}
    for op in loop.body.walk():
        if isinstance(op, (T.LoadOp, G.GatherOp)) and op.view in stored:
            raise NotSplit(
                f"the loop reads a tensor it stores ({op.name}): its chunks could not be "
                "reduced before they are stored"
            )
    return True


def splits_dot_loop(kernel: FuncOp) -> bool:
    """Whether `split-reduction` would split `kernel`'s loop and that loop accumulates a dot
    (a split-K GEMM), asked before `tiling`; a kernel that pins `split=1` is not split."""
    pinned = kernel.attributes.get("tilec.pinned_split")
    if pinned is not None and pinned.value == 1:
        return False
    try:
        plan = split_plan(kernel, tiled=False)
    except NotSplit:
        return False
    return not plan.atomic and any(isinstance(c.update, T.DotOp) for c in plan.carried)


def _check_atomic_epilogue(loop: scf.ForOp, carried: list[Carried], atomics: list) -> None:
    """Raises `NotSplit` unless the atomics of the kernel are an epilogue that combines
    the loop's results into memory by their own ⊕: each split block may then add its
    partials itself (no workspace, no ticket)."""
    from tilec.dialects.atomic import AtomicRMWOp
    from tilec.passes.accumulate_atomics import atomic_combine

    body = loop.parent
    after = body.ops[body.ops.index(loop) + 1 :]
    for op in atomics:
        if loop.is_ancestor_of(op):
            # Each iteration runs once in one of the splits: its atomics too.
            if op.sem not in (None, "relaxed") or op.result.uses:
                raise NotSplit(f"an atomic in the loop ({op.name}) orders or reads memory")
            continue
        if op not in after:
            # It would run in every split block.
            raise NotSplit("the kernel has atomics before the loop")
        combine = atomic_combine(op) if isinstance(op, AtomicRMWOp) else None
        if combine is None or op.sem not in (None, "relaxed") or op.result.uses:
            raise NotSplit(f"the kernel has atomics ({op.name}) that do not combine partials")
        value = op.value
        index = loop.results.index(value) if value in loop.results else None
        if index is None or carried[index].combine.op is not combine.op:
            raise NotSplit(
                f"an atomic {op.kind} adds a value other than a loop result of the same ⊕"
            )
    for op in after:
        if isinstance(op, (ReturnOp, *ATOMIC_OPS)):
            continue
        if _stores(op):
            raise NotSplit(f"the epilogue has an effect ({first_effect(op).name}) besides atomics")
    for result in loop.results:
        if any(not isinstance(u, ATOMIC_OPS) for u in result.uses):
            raise NotSplit("a loop result is used other than by an atomic that combines it")
    if not any(op in after for op in atomics):
        raise NotSplit("atomics only in the loop, and the loop's results are not combined")


def _carried(
    loop: scf.ForOp,
    i: int,
    workspace: bool = True,
    static: bool = True,
    rescaled: dict[int, int] | None = None,
    scan: bool = False,
) -> Carried:
    rescaled = rescaled or {}
    arg = loop.iter_args[i]
    name = _name(arg, loop.inits[i])
    users = arg.uses
    scale = rescaled.get(i)
    through: set[Value] = set()  # values an addend may read carried values through
    yielded_value = loop.yield_op.operands[i]
    if scan:
        # A scan's carried values may be read by what it stores; its update is the op that
        # makes the yielded value, from the carried value itself.
        update = yielded_value.op if isinstance(yielded_value, OpResult) else None
        if update is None or arg not in update.operands:
            raise NotSplit(f"carried value {name} is not updated from itself: not a scan")
    elif scale is not None:  # x' = x * exp(m - m') + g: the add is the update, g the addend
        update = users[0].results[0].uses[0]
        through.add(loop.yield_op.operands[scale])  # g may read m'
    elif i in rescaled.values():  # m' = maximum(m, h), m also read by the rescalings
        update = next(u for u in users if isinstance(u, arith.MaximumFOp))
    elif len(users) != 1:
        names = ", ".join(sorted({u.name for u in users})) or "nothing"
        raise NotSplit(
            f"carried value {name} is read by {len(users)} ops ({names}): not a ⊕-reduction"
        )
    else:
        update = users[0]
    combine = (None if scan else _dot_combine(update, arg)) or COMBINES.get(type(update))
    if combine is None or update.parent is not loop.body.block:
        raise NotSplit(
            f"carried value {name} is updated by {update.name}"
            + _rescaled(update, arg)
            + ": not a ⊕-reduction (add, max, min, or a sum rescaled by exp(m - m') of a "
            "carried maximum m)"
        )
    if isinstance(update, T.DotOp):
        others = [update.a, update.b]  # acc' = acc + a @ b
    elif scale is not None:
        others = [v for v in update.operands if v is not users[0].results[0]]
    else:
        others = [update.operands[1] if update.operands[0] is arg else update.operands[0]]
    if arg in others:
        raise NotSplit(f"carried value {name} is combined with itself: not a ⊕-reduction")
    reader = next((r for r in map(lambda v: _reads_carried(v, loop, through), others) if r), None)
    if reader is not None:
        raise NotSplit(
            f"carried value {name} is combined with a value that reads carried value "
            f"{_name(reader, None)}: not a ⊕-reduction"
        )
    result = update.results[0]
    yielded = loop.yield_op.operands
    # (A scan may store its updated values too.)
    used_inside = len(result.uses) != 1 and i not in rescaled.values() and not scan
    if yielded[i] is not result or used_inside:
        raise NotSplit(f"carried value {name}'s update is used in the loop: not a ⊕-reduction")
    t = arg.type
    if not isinstance(t, TileType):
        if not workspace or not isinstance(t, (FloatType, IntegerType)):
            raise NotSplit(f"carried value {name} is a scalar: only tiles are combined here")
        slot = TileType((1,), t)  # a scalar's slot: a 1-element tile
        return Carried(i, name, update, combine, slot, scaled_by=scale, scalar=True)
    if workspace and static and not t.is_static:
        raise NotSplit(f"carried value {name} is {t}: only tiles of static size are combined")
    return Carried(i, name, update, combine, t, scaled_by=scale)


def _rescaled_sums(loop: scf.ForOp) -> dict[int, int]:
    """The carried sums of `loop` rescaled by a carried maximum, as an online softmax keeps
    them: `{x: m}` (indices into the carried values) for each x updated only as
    `x' = x * exp(m - m') + g`, where `m' = maximum(m, h)` is m's update and every other read
    of m is such a rescaling. Partial results (m_j, x_j) of chunks of the loop then combine as
    M = max m_j, X = sum x_j exp(m_j - M) -- a ⊕ like the others, which `Rewrite.combine`
    applies (a chunk that saw nothing is (-inf, 0), its identity). The addend g may read m'
    (`_carried` checks that it reads no other carried value)."""
    args = list(loop.iter_args)
    yielded = loop.yield_op.operands
    found: dict[int, int] = {}
    for mi, m in enumerate(args):
        ups = [u for u in m.uses if isinstance(u, arith.MaximumFOp)]
        if len(ups) != 1 or yielded[mi] is not ups[0].result:
            continue
        new = ups[0].result
        scaled: dict[int, int] = {}
        for use in m.uses:
            if use is ups[0]:
                continue
            xs = _rescalings(use, m, new, args, yielded)
            if not xs:
                scaled = {}
                break
            scaled.update((x, mi) for x in xs)
        found.update(scaled)
    return found


def _rescalings(sub: Operation, m: Value, new: Value, args: list, yielded: list) -> list[int]:
    """The indices of the carried values x that `sub` (a read of the carried maximum m)
    rescales, each as `x * exp(m - new) + g` -- one exp may rescale several (attention's
    `alpha`), through a splat where m is a scalar and x a 1-D tile -- or [] where `sub` or a
    use of its exp is anything else."""
    if not (isinstance(sub, arith.SubFOp) and sub.lhs is m and sub.rhs is new):
        return []
    exps = sub.result.uses
    if len(exps) != 1 or not isinstance(exps[0], M.ExpOp):
        return []
    found = []
    for use in exps[0].result.uses:
        factor = exps[0].result
        if isinstance(use, T.SplatOp) and len(use.result.uses) == 1:
            factor, use = use.result, use.result.uses[0]
        if not isinstance(use, arith.MulFOp):
            return []
        x = use.lhs if use.rhs is factor else use.rhs
        spread = factor is not exps[0].result  # a scalar's factor over a 1-D tile
        fits = x.type.rank == 1 if spread else x.type == m.type  # type: ignore[union-attr]
        if x not in args or not fits or len(x.uses) != 1:
            return []
        adds = use.result.uses
        if len(adds) != 1 or not isinstance(adds[0], arith.AddFOp):
            return []
        xi = args.index(x)
        result = adds[0].result
        if yielded[xi] is not result or len(result.uses) != 1:
            return []
        found.append(xi)
    return found


def _uncast(v: Value) -> Value:
    while isinstance(v, OpResult) and isinstance(v.op, arith.IndexCastOp):
        v = v.op.input
    return v


@dataclass(frozen=True)
class _Extent:
    view: BlockArgument  # a tensor argument
    axis: int
    bounded: bool = False  # the loop runs to at most this extent (a minimum with it)


def _extent_bound(upper: Value, body: Block) -> _Extent | None:
    """The extent of a tensor argument that a loop's `upper` bound is, or is at most: the
    extent itself (`tile.dim`), or a minimum with it (`minimum(pages, MAXP)`, through index
    casts). The launch chooses S for that extent; each block chunks its own trips."""
    upper = _uncast(upper)
    if not isinstance(upper, OpResult):
        return None
    op = upper.op
    if isinstance(op, T.DimOp):
        view = op.view
        if isinstance(view, BlockArgument) and view.owner is body:
            return _Extent(view, op.axis)
        return None
    if isinstance(op, arith.MinSIOp):
        for side in op.operands:
            found = _extent_bound(side, body)
            if found is not None:
                return dataclasses.replace(found, bounded=True)
    return None


def _dot_combine(update: Operation, arg: Value) -> Combine | None:
    """The ⊕ of `acc' = a @ b + acc` (a `tile.dot` accumulating into the carried value):
    the add of the accumulator's element type."""
    if not isinstance(update, T.DotOp) or update.acc is not arg:
        return None
    add = arith.AddFOp if isinstance(arg.type.element, FloatType) else arith.AddIOp
    return COMBINES[add]


def _rescaled(update: Operation, arg: Value) -> str:
    """`" (rescaled by exp(...))"` for an online-softmax-like update, else ''."""
    if isinstance(update, (arith.MulFOp, arith.DivFOp)):
        other = update.operands[1] if update.operands[0] is arg else update.operands[0]
        if isinstance(other, OpResult):
            return f" (rescaled by the result of {other.op.name})"
        return " (rescaled)"
    return ""


def _reads_carried(v: Value, loop: scf.ForOp, through: set[Value] | None = None) -> Value | None:
    """A carried value of `loop` that `v` depends on (within one iteration), if any, other
    than through the values `through`."""
    carried = set(loop.iter_args)
    seen: set[Value] = set(through or ())
    stack = [v]
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        if x in carried:
            return x
        if isinstance(x, OpResult) and loop.is_ancestor_of(x.op):
            for op in [x.op, *x.op.walk()]:
                stack.extend(op.operands)
    return None


def _stores(op: Operation) -> bool:
    return first_effect(op) is not None


def first_effect(op: Operation) -> Operation | None:
    for inner in [op, *op.walk()]:
        if _effect_of(inner) is not None:
            return inner
    return None


def _effect_of(op: Operation) -> Operation | None:
    """`op` itself where it writes memory (or takes a ticket), else None."""
    if isinstance(op, (T.StoreOp, *_SPLIT_EFFECTS)):
        return op
    if op.name.startswith("tile.") and op.name in _SHARED_EFFECTS:
        return op
    return None


_SPLIT_EFFECTS = (
    W.WorkspaceStoreOp,
    W.LastArrivalOp,
    W.SplitTicketOp,
    W.PublishOp,
    W.WaitPublishedOp,
    W.ClearCountersOp,
)


_SHARED_EFFECTS = {"tile.async_copy", "tile.store_shared", "tile.barrier", "tile.scatter"}


def constant_index(v: Value) -> int | None:
    """The integer `v` is when an `arith.constant` defines it, else None."""
    if isinstance(v, OpResult) and isinstance(v.op, arith.ConstantOp):
        attr = v.op.attributes["value"]
        if isinstance(attr, IntegerAttr):
            return attr.value
    return None


def _name(v: Value, init: Value | None) -> str:
    # The initial value's name (the source's), unless it starts other carried values too
    # (`zeros` shared by l_i and picked after cse): then the carried value's own.
    shared = init is not None and sum(1 for u in init.uses if isinstance(u, scf.ForOp)) > 1
    for x in (v, init) if shared else (init, v):
        hint = getattr(x, "name_hint", None)
        if hint:
            return hint
    return "%" + str(getattr(v, "index", "?"))
