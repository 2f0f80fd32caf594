"""The `split-reduction` pass: a reduction whose grid would leave SMs idle is split across
blocks.

A kernel whose grid body runs one loop over a tensor extent that only reduces (column sums of
a tall matrix: two blocks of 64 columns for N = 128, each walking 100,000 rows) gets one more
grid axis, the split axis, of S blocks: block s runs a contiguous chunk of the loop's
iterations, writes its partial results to a workspace, takes a ticket on its output tile's
counter, and the last block to arrive combines the S partials in slot order and runs the
epilogue. S is chosen at launch (`tilec.runtime.split`), from the SMs and the kernel's
occupancy; S = 1 runs the epilogue directly, touching no workspace. `docs/passes.md` is the
contract.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tilec.diagnostics import TileError, format_bytes
from tilec.dialects import arith, scf
from tilec.dialects import math as M
from tilec.dialects import split as W
from tilec.dialects import tile as T
from tilec.dialects.atomic import ATOMIC_OPS
from tilec.dialects.builtin import FuncOp, ReturnOp
from tilec.ir.attributes import FloatAttr, IntegerAttr, to_attribute
from tilec.ir.builder import Builder
from tilec.ir.core import Block, BlockArgument, Operation, OpResult, Region, Value
from tilec.ir.types import FloatType, IntegerType, TileType, i1, i32, index
from tilec.passes.occupancy import MAX_BLOCKS_PER_SM
from tilec.passes.specialize import attribute_pairs, parse_assignments
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = [
    "COMBINES",
    "Combine",
    "SplitReduction",
    "constant_index",
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

SLOT_ALIGNMENT = 16  # a slot starts 16-byte aligned: its tiles may be read 16 bytes at a time


@register_pass
class SplitReduction(Pass):
    """Splits a reduction loop across blocks when the grid alone may leave SMs idle.

    Recognises a kernel whose grid body has one top-level `scf.for` from 0 to a tensor extent
    (`tile.dim`) by a constant step, with no stores before it or in it, whose every carried
    value is a 1-D tile updated only as `acc' = acc ⊕ g` (⊕: `arith.addf`, `addi`,
    `maximumf`, `minimumf`, `maxsi`, `minsi`; `g` reads no carried value, and nothing else
    in the loop reads one); what follows the loop is its epilogue. Such a kernel gets the
    split axis (grid axis `len(tilec.grid)`, of S blocks chosen at launch): block s runs
    iterations [s·c, min((s+1)·c, trips)) with c = ceil(trips / S), from the identity of ⊕
    (block 0 from the loop's own initial value). After the loop, S = 1 runs the epilogue as
    before; otherwise the block writes its partials to workspace slot b·S + s (b: its block of
    the other axes), takes a ticket on counter b (`tile.last_arrival`), and the last block reads
    the S partials back in slot order, `combine_elements` elements a round (`tile.reduce` of
    the rows of one `tile.workspace_load`), and runs the epilogue on the result.
    `tilec.split` on the kernel records what the launch needs: the loop's dimension and step,
    the bytes of a slot, the bytes each iteration loads, the partials a combine round reads,
    and a pinned S (0: none).

    A loop that accumulates a `tile.dot` (`acc' = a @ b + acc`: ⊕ is add) is a split-K GEMM:
    its carried tile may be 2-D, and the last block reads the partials back one slot a round
    (`tile.workspace_read`, in the accumulator's own layout: nothing to reduce along slots,
    no layout conversion). It is split only where `tiling`'s SM model found splitting faster
    at the extents it was told (`tilec.split_k`, `wgmma_model.best_split`) or S is pinned;
    the launch then chooses S with the same model (`SplitAxis.dot_bm`, `dot_bn`, `dot_bytes`).

    Pins: `@kernel(split=N)` / `@tilec.jit(split=N)` fix S (1: the kernel is left alone), and a
    pin that cannot work is an error; else the option `split` (0: chosen at launch; 1: leave
    kernels alone). Reorders float sums (checked with a tolerance). Remarks: per kernel, the
    loop split and its dimension, each carried value's ⊕, the workspace's size and how S is
    chosen — or why the kernel is not split.
    """

    name = "split-reduction"
    summary = "Split a reduction loop across blocks when the grid would leave SMs idle"
    exact = False  # partial sums are added in another order

    @dataclass
    class Options:
        split: int = option(
            0,
            "blocks along the split axis unless the kernel pins them (0: chosen at launch "
            "from the SMs and the occupancy; 1: split nothing)",
        )
        combine_elements: int = option(
            4096, "elements of partial results the last block reads and reduces a round"
        )
        extents: str = option(
            "",
            "known extents (or size classes, each above half its value) of dimensions, e.g. "
            "B=16384, as tiling's option: a kernel whose grid they show filling the GPU at "
            "the most blocks an SM holds is not split (S would be 1 at every launch, and the "
            "combine's code would cost registers for nothing)",
        )
        sm_count: int = option(132, "SMs of the GPU (132 on the H100 and H200)")

    def run(self, module: Operation, ctx: PassContext) -> None:
        if self.options.split < 0:
            raise TileError(
                f"split-reduction: option split must be 0 (chosen at launch) or more, got "
                f"{self.options.split}"
            )
        if self.options.combine_elements < 1:
            raise TileError(
                "split-reduction: option combine_elements must be at least 1, got "
                f"{self.options.combine_elements}"
            )
        extents = parse_assignments(self.options.extents, "extents", self.name)
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            _split_kernel(kernel, self.options, extents, ctx)


# ---------------------------------------------------------------------------------------------
# Recognising a splittable kernel


@dataclass
class _Carried:
    index: int
    name: str
    update: Operation  # acc' = acc ⊕ g
    combine: Combine
    type: TileType
    offset: int = 0  # bytes into the slot
    scaled_by: int | None = None  # x' = x * exp(m - m') + g: the index of m (`_rescaled_sums`)
    scalar: bool = False  # a scalar carried value, kept in its slot as a 1-element tile (`type`)


@dataclass
class _Plan:
    loop: scf.ForOp
    dim: str | int
    step: int
    carried: list[_Carried]
    atomic: bool = False  # the epilogue's atomics combine the partials: no workspace
    bounded: bool = False  # the loop runs to at most the extent `dim` (`_extent_bound`)


class _NotSplit(Exception):
    """Why a kernel is left alone (the remark's text)."""


def split_plan(kernel: FuncOp, tiled: bool = True) -> _Plan:
    """What splitting `kernel` would do; raises `_NotSplit` saying why it cannot be split.
    `tiled=False` asks before `tiling` (what `tiling` ranks split GEMM tiles by): the loop's
    step and the carried tiles' sizes may still be symbols."""
    grid = kernel.attributes.get("tilec.grid")
    axes = len(grid.value) if grid is not None else 0
    if axes >= 3:
        raise _NotSplit("the grid has 3 axes already, and CUDA has no fourth for the splits")
    body = kernel.body.block
    atomics = [op for op in kernel.walk() if isinstance(op, ATOMIC_OPS)]
    loops = [op for op in body.ops if isinstance(op, scf.ForOp)]
    if not loops:
        raise _NotSplit("no loop in the grid body")
    if len(loops) > 1:
        raise _NotSplit(f"{len(loops)} top-level loops: only a kernel with one is split")
    loop = loops[0]
    position = body.ops.index(loop)
    for op in body.ops[:position]:
        if _stores(op):
            raise _NotSplit("a store before the loop would run in every split")
    if constant_index(loop.lower) != 0:
        raise _NotSplit("the loop does not start at 0")
    step = constant_index(loop.step)
    if tiled and (step is None or step < 1):
        raise _NotSplit("the loop's step is not a positive constant")
    extent = _extent_bound(loop.upper, body)
    if extent is None:
        raise _NotSplit(
            "the loop does not run to the extent of a tensor argument (or to at most one)"
        )
    dim = extent.view.type.shape[extent.axis]
    if dim is None:
        raise _NotSplit("the loop's extent is '?', which the launch cannot name")
    for op in loop.body.block.ops:
        if _stores(op):
            raise _NotSplit(f"the loop has an effect ({_effect(op).name})")
    if not loop.iter_args:
        raise _NotSplit("the loop carries no value")
    rescaled = {} if atomics else _rescaled_sums(loop)
    carried = [
        _carried(loop, i, workspace=not atomics, static=tiled, rescaled=rescaled)
        for i in range(len(loop.iter_args))
    ]
    if atomics:
        _check_atomic_epilogue(loop, carried, atomics)
    bounded = not isinstance(_uncast(loop.upper), OpResult) or not isinstance(
        _uncast(loop.upper).op,
        T.DimOp,  # type: ignore[union-attr]
    )
    return _Plan(loop, dim, step or 0, carried, atomic=bool(atomics), bounded=bounded)


def splits_dot_loop(kernel: FuncOp) -> bool:
    """Whether `split-reduction` would split `kernel`'s loop and that loop accumulates a dot
    (a split-K GEMM), asked before `tiling`; a kernel that pins `split=1` is not split."""
    pinned = kernel.attributes.get("tilec.pinned_split")
    if pinned is not None and pinned.value == 1:
        return False
    try:
        plan = split_plan(kernel, tiled=False)
    except _NotSplit:
        return False
    return not plan.atomic and any(isinstance(c.update, T.DotOp) for c in plan.carried)


def _check_atomic_epilogue(loop: scf.ForOp, carried: list[_Carried], atomics: list) -> None:
    """Raises `_NotSplit` unless the atomics of the kernel are an epilogue that combines
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
                raise _NotSplit(f"an atomic in the loop ({op.name}) orders or reads memory")
            continue
        if op not in after:
            # It would run in every split block.
            raise _NotSplit("the kernel has atomics before the loop")
        combine = atomic_combine(op) if isinstance(op, AtomicRMWOp) else None
        if combine is None or op.sem not in (None, "relaxed") or op.result.uses:
            raise _NotSplit(f"the kernel has atomics ({op.name}) that do not combine partials")
        value = op.value
        index = loop.results.index(value) if value in loop.results else None
        if index is None or carried[index].combine.op is not combine.op:
            raise _NotSplit(
                f"an atomic {op.kind} adds a value other than a loop result of the same ⊕"
            )
    for op in after:
        if isinstance(op, (ReturnOp, *ATOMIC_OPS)):
            continue
        if _stores(op):
            raise _NotSplit(f"the epilogue has an effect ({_effect(op).name}) besides atomics")
    for result in loop.results:
        if any(not isinstance(u, ATOMIC_OPS) for u in result.uses):
            raise _NotSplit("a loop result is used other than by an atomic that combines it")
    if not any(op in after for op in atomics):
        raise _NotSplit("atomics only in the loop, and the loop's results are not combined")


def _carried(
    loop: scf.ForOp,
    i: int,
    workspace: bool = True,
    static: bool = True,
    rescaled: dict[int, int] | None = None,
) -> _Carried:
    rescaled = rescaled or {}
    arg = loop.iter_args[i]
    name = _name(arg, loop.inits[i])
    users = arg.uses
    scale = rescaled.get(i)
    through: set[Value] = set()  # values an addend may read carried values through
    if scale is not None:  # x' = x * exp(m - m') + g: the add is the update, g the addend
        update = users[0].results[0].uses[0]
        through.add(loop.yield_op.operands[scale])  # g may read m'
    elif i in rescaled.values():  # m' = maximum(m, h), m also read by the rescalings
        update = next(u for u in users if isinstance(u, arith.MaximumFOp))
    elif len(users) != 1:
        names = ", ".join(sorted({u.name for u in users})) or "nothing"
        raise _NotSplit(
            f"carried value {name} is read by {len(users)} ops ({names}): not a ⊕-reduction"
        )
    else:
        update = users[0]
    combine = _dot_combine(update, arg) or COMBINES.get(type(update))
    if combine is None or update.parent is not loop.body.block:
        raise _NotSplit(
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
        raise _NotSplit(f"carried value {name} is combined with itself: not a ⊕-reduction")
    reader = next((r for r in map(lambda v: _reads_carried(v, loop, through), others) if r), None)
    if reader is not None:
        raise _NotSplit(
            f"carried value {name} is combined with a value that reads carried value "
            f"{_name(reader, None)}: not a ⊕-reduction"
        )
    result = update.results[0]
    yielded = loop.yield_op.operands
    used_inside = len(result.uses) != 1 and i not in rescaled.values()
    if yielded[i] is not result or used_inside:
        raise _NotSplit(f"carried value {name}'s update is used in the loop: not a ⊕-reduction")
    t = arg.type
    if not isinstance(t, TileType):
        if not workspace or not isinstance(t, (FloatType, IntegerType)):
            raise _NotSplit(f"carried value {name} is a scalar: only tiles are combined here")
        slot = TileType((1,), t)  # a scalar's slot: a 1-element tile
        return _Carried(i, name, update, combine, slot, scaled_by=scale, scalar=True)
    if workspace and static and not t.is_static:
        raise _NotSplit(f"carried value {name} is {t}: only tiles of static size are combined")
    if workspace and t.rank != 1 and not isinstance(update, T.DotOp):
        raise _NotSplit(
            f"carried value {name} is {t}: only 1-D tiles (or a dot's accumulator) are combined"
        )
    return _Carried(i, name, update, combine, t, scaled_by=scale)


def _rescaled_sums(loop: scf.ForOp) -> dict[int, int]:
    """The carried sums of `loop` rescaled by a carried maximum, as an online softmax keeps
    them: `{x: m}` (indices into the carried values) for each x updated only as
    `x' = x * exp(m - m') + g`, where `m' = maximum(m, h)` is m's update and every other read
    of m is such a rescaling. Partial results (m_j, x_j) of chunks of the loop then combine as
    M = max m_j, X = sum x_j exp(m_j - M) -- a ⊕ like the others, which `_Rewrite.combine`
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
                return found
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
    return _effect(op) is not None


def _effect(op: Operation) -> Operation | None:
    for inner in [op, *op.walk()]:
        if isinstance(inner, (T.StoreOp, W.WorkspaceStoreOp, W.LastArrivalOp)):
            return inner
        if inner.name.startswith("tile.") and inner.name in _SHARED_EFFECTS:
            return inner
    return None


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


# ---------------------------------------------------------------------------------------------
# The rewrite


def _fills_the_gpu(kernel: FuncOp, extents: dict[str, int], sm_count: int) -> str:
    """Why the grid of `kernel` is known to fill the GPU at any occupancy ("" where it is not
    known to): the fewest blocks its extents allow -- a size class n stands for an extent
    above n / 2 -- at least the SMs times the most blocks an SM holds."""
    least, dims = 1, []
    for dim, tile in attribute_pairs(kernel, "tilec.grid"):
        extent = extents.get(str(dim))
        size = dict(attribute_pairs(kernel, "tilec.tile_sizes")).get(str(tile), tile)
        if extent is None or not isinstance(size, int):
            return ""
        least *= -(-(extent // 2 + 1) // size)
        dims.append(f"{dim}={extent}")
    if least < sm_count * MAX_BLOCKS_PER_SM:
        return ""
    return (
        f"its grid fills the GPU at any occupancy ({', '.join(dims)}: at least {least} blocks, "
        f"{sm_count} SMs x {MAX_BLOCKS_PER_SM}), so S would be 1 at every launch"
    )


def _split_kernel(
    kernel: FuncOp, options: SplitReduction.Options, extents: dict[str, int], ctx: PassContext
) -> None:
    pinned_attr = kernel.attributes.get("tilec.pinned_split")
    pinned = pinned_attr.value if pinned_attr is not None else None
    if pinned == 1:
        ctx.remark(kernel, "not split: split=1 (pinned by the kernel)")
        return
    if pinned is None and options.split == 1:
        ctx.remark(kernel, "not split: option split=1")
        return
    try:
        plan = split_plan(kernel)
    except _NotSplit as why:
        if pinned is not None:
            raise TileError(
                f"kernel '{kernel.sym_name}': split={pinned} (pinned by the kernel) cannot work: "
                f"{why}",
                kernel.loc,
                hint="only a loop that reduces with add, max or min can be split (split=1 "
                "leaves the kernel alone)",
            ) from None
        ctx.remark(kernel, f"not split: {why}")
        return
    fixed = pinned if pinned is not None else (options.split or None)
    full = "" if fixed is not None else _fills_the_gpu(kernel, extents, options.sm_count)
    if full:
        ctx.remark(kernel, f"not split: {full}")
        return
    dot_loop = any(isinstance(c.update, T.DotOp) for c in plan.carried)
    if dot_loop and fixed is None and "tilec.split_k" not in kernel.attributes:
        ctx.remark(
            kernel,
            "not split: the loop accumulates a dot, and tiling's SM model keeps it whole (the "
            "tiles fill the SMs, or the extents are unknown; tilec.split_k is not set)",
        )
        return
    rewrite = _Rewrite(kernel, plan, options.combine_elements)
    rewrite.run(fixed)
    source = "pinned by the kernel" if pinned else "option split"
    _remark(kernel, plan, rewrite, fixed, source, ctx)


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


class _Rewrite:
    def __init__(self, kernel: FuncOp, plan: _Plan, combine_elements: int):
        self.kernel = kernel
        self.plan = plan
        self.combine_elements = combine_elements
        grid = kernel.attributes.get("tilec.grid")
        self.base_axes = len(grid.value) if grid is not None else 0
        offset = 0
        for c in plan.carried:
            bytes_each = max(getattr(c.type.element, "width", 64) // 8, 1)
            offset = -(-offset // bytes_each) * bytes_each
            c.offset = offset
            offset += W.tile_bytes(c.type)
        self.slot_bytes = -(-offset // SLOT_ALIGNMENT) * SLOT_ALIGNMENT
        self.trip_bytes = _trip_bytes(plan.loop)
        if plan.atomic:
            self.rows_per_round = 0
        elif any(c.type.rank > 1 for c in plan.carried):
            # A dot's accumulator is read back a slot a round, in its own layout.
            self.rows_per_round = 1
        else:
            self.rows_per_round = min(self.rows(c) for c in plan.carried)

    def constant(self, b: Builder, value: int | bool) -> Value:
        t = i1 if isinstance(value, bool) else index
        return b.create(arith.ConstantOp, value=value, result_types=[t]).result

    def run(self, pinned: int | None) -> None:
        loop = self.plan.loop
        b = Builder.before_op(loop)
        axis = self.base_axes
        splits = b.create(T.NumProgramsOp, axis=axis).result
        split = b.create(T.ProgramIdOp, axis=axis).result
        splits.name_hint, split.name_hint = "splits", "split"
        # The chunk of iterations [k0, k1) of this block.
        step = loop.step
        trips = b.create(arith.CeilDivSIOp, lhs=loop.upper, rhs=step).result
        chunk = _ceil_div_i32(b, trips, splits)
        first = b.create(arith.MulIOp, lhs=split, rhs=chunk).result
        end = b.create(arith.AddIOp, lhs=first, rhs=chunk).result
        end = b.create(arith.MinSIOp, lhs=end, rhs=trips).result
        lower = b.create(arith.MulIOp, lhs=first, rhs=step).result
        upper = b.create(arith.MulIOp, lhs=end, rhs=step).result
        loop.set_operand(0, lower)
        loop.set_operand(1, upper)
        self.start_from_identity(b, split)
        if not self.plan.atomic:
            self.after_loop(splits, split)
        attrs = [
            ["dim", self.plan.dim],
            ["step", self.plan.step],
            ["slot_bytes", 0 if self.plan.atomic else self.slot_bytes],
            ["trip_bytes", self.trip_bytes],
            ["rows", 0 if self.plan.atomic else self.rows_per_round],
            ["pinned", pinned or 0],
        ]
        if self.plan.atomic:
            attrs.append(["atomic", 1])
        dot = self.dot()
        if dot is not None:
            bm, bn = dot.acc.type.shape
            attrs += [["dot_bm", bm], ["dot_bn", bn], ["dot_bytes", _element_bytes(dot.a.type)]]
            grid = attribute_pairs(self.kernel, "tilec.grid")
            attrs.append(["dot_dims", ",".join(str(d) for d, _ in grid)])
        self.kernel.attributes["tilec.split"] = to_attribute(attrs)

    def dot(self) -> T.DotOp | None:
        """The dot whose accumulator the loop carries (a split-K GEMM), if any."""
        for c in self.plan.carried:
            if isinstance(c.update, T.DotOp):
                return c.update
        return None

    def start_from_identity(self, b: Builder, split: Value) -> None:
        """Blocks other than split 0 start each carried value from ⊕'s identity (split 0
        from the loop's own initial value, which the result must count once)."""
        loop = self.plan.loop
        changed = [c for c in self.plan.carried if not is_identity(loop.inits[c.index], c.combine)]
        if not changed:
            return
        zero = self.constant(b, 0)
        is_first = b.create(arith.CmpIOp, predicate="eq", lhs=split, rhs=zero).result
        choose = b.create(
            scf.IfOp,
            condition=is_first,
            result_types=[self.carried_type(c) for c in changed],
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        then_b = Builder.at_end(choose.then.block, loc=loop.loc)
        then_b.create(scf.YieldOp, values=[loop.inits[c.index] for c in changed])
        else_b = Builder.at_end(choose.otherwise.block, loc=loop.loc)
        else_b.create(scf.YieldOp, values=[self.identity(else_b, c) for c in changed])
        for c, v in zip(changed, choose.results):
            loop.set_operand(3 + c.index, v)

    def after_loop(self, splits: Value, split: Value) -> None:
        loop = self.plan.loop
        body = self.kernel.body.block
        position = body.ops.index(loop)
        epilogue = [op for op in body.ops[position + 1 :] if not isinstance(op, ReturnOp)]
        b = Builder.after_op(loop)
        types = [self.carried_type(c) for c in self.plan.carried]
        one = self.constant(b, 1)
        alone = b.create(arith.CmpIOp, predicate="eq", lhs=splits, rhs=one).result
        route = b.create(
            scf.IfOp,
            condition=alone,
            result_types=[i1, *types],
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        # S = 1: the epilogue runs on the loop's results, as before.
        then_b = Builder.at_end(route.then.block, loc=loop.loc)
        then_b.create(scf.YieldOp, values=[self.constant(then_b, True), *loop.results])
        # S > 1: partials to the workspace, a ticket, and the combine in the last block.
        e = Builder.at_end(route.otherwise.block, loc=loop.loc)
        tile_index = self.base_block(e)
        slot_base = e.create(arith.MulIOp, lhs=tile_index, rhs=splits).result
        slot = e.create(arith.AddIOp, lhs=slot_base, rhs=split).result
        for c in self.plan.carried:
            value = loop.results[c.index]
            if c.scalar:
                value = e.create(T.SplatOp, input=value, result_types=[c.type]).result
            e.create(
                W.WorkspaceStoreOp,
                value=value,
                slot=slot,
                offset=c.offset,
                slot_bytes=self.slot_bytes,
            )
        last = e.create(W.LastArrivalOp, counter=tile_index, count=splits).result
        last.name_hint = "last"
        gather = e.create(
            scf.IfOp,
            condition=last,
            result_types=types,
            then=Region([Block()]),
            otherwise=Region([Block()]),
        )
        g = Builder.at_end(gather.then.block, loc=loop.loc)
        combined = self.combine(g, slot_base, splits)
        combined = [  # a scalar's 1-element tile, read back as the scalar
            g.create(T.ReduceOp, kind="max", input=v, axis=0).result if c.scalar else v
            for c, v in zip(self.plan.carried, combined)
        ]
        g.create(scf.YieldOp, values=combined)
        # A block that is not the last has no result: it yields ⊕'s identity, so that its
        # partials' registers are free once they are in the workspace.
        idle = Builder.at_end(gather.otherwise.block, loc=loop.loc)
        idle.create(scf.YieldOp, values=[self.identity(idle, c) for c in self.plan.carried])
        e.create(scf.YieldOp, values=[last, *gather.results])
        run, *finals = route.results
        # The epilogue, once per output tile: in the block that has the whole result.
        guard = Builder.after_op(route).create(
            scf.IfOp, condition=run, result_types=[], then=Region([Block()])
        )
        block = guard.then.block
        for op in epilogue:
            op.detach()
            block.append(op)
        Builder.at_end(block, loc=loop.loc).create(scf.YieldOp, values=[])
        for c, final in zip(self.plan.carried, finals):
            loop.results[c.index].replace_uses_if(final, guard.is_ancestor_of)
        # Carried values that are not partial results (none: every one is) keep their uses.

    def carried_type(self, c: _Carried) -> Any:
        """The type the loop carries `c` in (its slot holds a scalar as a 1-element tile)."""
        return c.type.element if c.scalar else c.type

    def identity(self, b: Builder, c: _Carried) -> Value:
        """⊕'s identity as the loop carries `c`."""
        value = identity_attr(c.combine, c.type)
        if c.scalar:
            return b.create(arith.ConstantOp, value=value, result_types=[c.type.element]).result
        return b.create(T.FullOp, value=value, result_types=[c.type]).result

    def base_block(self, b: Builder) -> Value:
        """This block's linear index over the grid's other axes (axis 0 fastest)."""
        linear: Value | None = None
        for axis in reversed(range(self.base_axes)):
            pid = b.create(T.ProgramIdOp, axis=axis).result
            if linear is None:
                linear = pid
                continue
            count = b.create(T.NumProgramsOp, axis=axis).result
            linear = b.create(arith.MulIOp, lhs=linear, rhs=count).result
            linear = b.create(arith.AddIOp, lhs=linear, rhs=pid).result
        return linear if linear is not None else self.constant(b, 0)

    def rows(self, c: _Carried) -> int:
        """Partials of `c` the combine reads a round: a power of two, about
        `combine_elements` elements in all."""
        per_row = math.prod(c.type.shape)
        rows = max(self.combine_elements // per_row, 1)
        return 1 << (rows.bit_length() - 1)

    def combine(self, b: Builder, slot_base: Value, splits: Value) -> list[Value]:
        """The S partials, read back in slot order and combined: one loop, whose rounds read
        `rows` consecutive slots of each carried value and reduce them along the slots."""
        loop = self.plan.loop
        rows = self.rows_per_round
        zero = self.constant(b, 0)
        step = self.constant(b, rows)
        inits = [
            b.create(T.FullOp, value=identity_attr(c.combine, c.type), result_types=[c.type]).result
            for c in self.plan.carried
        ]
        block = Block([index, *(c.type for c in self.plan.carried)])
        gather = b.create(
            scf.ForOp, lower=zero, upper=splits, step=step, inits=inits, body=Region([block])
        )
        r = Builder.at_end(block, loc=loop.loc)
        j, *partials = block.args
        j.name_hint = "round"
        first = r.create(arith.AddIOp, lhs=slot_base, rhs=j).result
        left = r.create(arith.SubIOp, lhs=splits, rhs=j).result
        updated: list[Value] = []
        rows_read: dict[int, Value] = {}  # each carried value's slots of this round
        for c, acc in zip(self.plan.carried, partials):
            if c.scaled_by is not None:
                updated.append(acc)  # below, once its maximum's round is combined
                continue
            if c.type.rank > 1:
                # A slot a round, read back in the partial's own layout (a GEMM's
                # accumulator): nothing to reduce along the slots.
                read = r.create(
                    W.WorkspaceReadOp,
                    slot=first,
                    offset=c.offset,
                    slot_bytes=self.slot_bytes,
                    result_types=[c.type],
                ).result
                updated.append(r.create(c.combine.op, lhs=acc, rhs=read).result)
                continue
            read = self.read_round(r, c, first, left)
            rows_read[c.index] = read
            reduced = r.create(T.ReduceOp, kind=c.combine.reduce_kind, input=read, axis=0).result
            updated.append(r.create(c.combine.op, lhs=acc, rhs=reduced).result)
        position = {c.index: k for k, c in enumerate(self.plan.carried)}
        for k, c in enumerate(self.plan.carried):
            if c.scaled_by is not None:
                m = position[c.scaled_by]
                updated[k] = self.rescaled_round(
                    r, c, partials[k], first, left, rows_read[c.scaled_by], partials[m], updated[m]
                )
        r.create(scf.YieldOp, values=updated)
        return list(gather.results)

    def read_round(self, r: Builder, c: _Carried, first: Value, left: Value) -> Value:
        """The `rows` partials of `c` in slots first .. first + rows - 1, the slots past the
        last (`left` of them remain) read as ⊕'s identity."""
        return r.create(
            W.WorkspaceLoadOp,
            first=first,
            count=left,
            offset=c.offset,
            slot_bytes=self.slot_bytes,
            padding=identity_attr(c.combine, c.type),
            result_types=[TileType((self.rows_per_round, *c.type.shape), c.type.element)],
        ).result

    def rescaled_round(
        self,
        r: Builder,
        c: _Carried,
        acc: Value,
        first: Value,
        left: Value,
        maxima: Value,
        old: Value,
        new: Value,
    ) -> Value:
        """One round of a rescaled sum's combine (`_rescaled_sums`): the sum so far, at the
        maximum `old`, and this round's partials x_j, each at its own maximum m_j (`maxima`),
        brought to the combined maximum `new`: acc * exp(old - new) + sum_j x_j exp(m_j - new).
        A factor whose maximum is -inf (a chunk that saw nothing, a padding slot) is 0, not
        exp(-inf + inf)."""
        read = self.read_round(r, c, first, left)
        spread = r.create(T.ExpandDimsOp, input=new, axis=0).result
        spread = r.create(T.BroadcastOp, input=spread, result_types=[maxima.type]).result
        weights = _spread(r, _rescale_factor(r, maxima, spread), read.type)
        terms = r.create(arith.MulFOp, lhs=read, rhs=weights).result
        reduced = r.create(T.ReduceOp, kind="sum", input=terms, axis=0).result
        kept = _spread(r, _rescale_factor(r, old, new), c.type)
        kept = r.create(arith.MulFOp, lhs=acc, rhs=kept).result
        return r.create(arith.AddFOp, lhs=kept, rhs=reduced).result


def _spread(b: Builder, factor: Value, t: TileType) -> Value:
    """`factor` of a maximum's slot shape over a rescaled sum's type `t` (a scalar maximum's
    1-element slot over a 1-D tile: a unit dimension broadcast)."""
    if factor.type == t:
        return factor
    return b.create(T.BroadcastOp, input=factor, result_types=[t]).result


def _rescale_factor(b: Builder, m: Value, new: Value) -> Value:
    """exp(m - new), and 0 where m is -inf (exp(-inf + inf) would be NaN)."""
    t = m.type
    shifted = b.create(arith.SubFOp, lhs=m, rhs=new).result
    factor = b.create(M.ExpOp, operand=shifted).result
    lowest = b.create(T.FullOp, value=FloatAttr(-math.inf), result_types=[t]).result
    zero = b.create(T.FullOp, value=FloatAttr(0.0), result_types=[t]).result
    empty = b.create(arith.CmpFOp, predicate="oeq", lhs=m, rhs=lowest).result
    return b.create(T.SelectOp, condition=empty, true_value=zero, false_value=factor).result


def _element_bytes(t: TileType) -> int:
    return max(getattr(t.element, "width", 16) // 8, 1)


def _ceil_div_i32(b: Builder, lhs: Value, rhs: Value) -> Value:
    """`ceil(lhs / rhs)` of a trip count and a block count, computed in i32: both are below
    2**31 (extents are), and a 64-bit division by a run-time value is a subroutine call in
    SASS, which makes nvJitLink serialize every `wgmma` of a split GEMM
    (`tiling_rewrites.block_divmod` says more)."""
    narrow = [b.create(arith.IndexCastOp, input=v, result_types=[i32]).result for v in (lhs, rhs)]
    result = b.create(arith.CeilDivSIOp, lhs=narrow[0], rhs=narrow[1]).result
    return b.create(arith.IndexCastOp, input=result, result_types=[index]).result


def _trip_bytes(loop: scf.ForOp) -> int:
    """Bytes the loads of one iteration of `loop` read from memory: a region loaded twice
    (`x[tn] * x[tn]` is two loads of one tile) counts once, its second read hitting L1."""
    regions = {
        (op.view, tuple(op.offsets), str(op.result.type)): W.tile_bytes(op.result.type)
        for op in loop.body.walk()
        if isinstance(op, T.LoadOp) and op.result.type.is_static
    }
    return sum(regions.values())


def _remark(
    kernel: FuncOp, plan: _Plan, rewrite: _Rewrite, pinned: int | None, source: str, ctx
) -> None:
    loop = plan.loop
    axis = rewrite.base_axes
    ctx.remark(
        loop,
        f"split the loop over {plan.dim} (step {plan.step}) across blocks: grid axis {axis} "
        f"({'xyz'[axis]}) has S blocks, each running a contiguous chunk of the "
        + ("at most " if plan.bounded else "")
        + f"ceil({plan.dim}/{plan.step}) iterations"
        + (
            " (the launch chooses S for that many; each block chunks its own)"
            if plan.bounded
            else ""
        ),
    )
    names = {c.index: c.name for c in plan.carried}
    combines = ", ".join(
        f"{c.name} by {c.combine.name}"
        + (
            f" of terms rescaled by exp({names[c.scaled_by]} - the combined maximum)"
            if c.scaled_by is not None
            else ""
        )
        for c in plan.carried
    )
    if plan.atomic:
        ctx.remark(
            loop,
            f"combine: {combines}, by the epilogue's atomics: each of the S blocks adds its "
            "partials itself (no workspace, no ticket)",
        )
    else:
        ctx.remark(
            loop,
            f"combine: {combines}; the last of the S blocks to take its ticket reads the S "
            f"partials in slot order ({rewrite.rows_per_round} a round) and runs the epilogue "
            "(S = 1: the epilogue runs directly)",
        )
    sizes = dict(attribute_pairs(kernel, "tilec.tile_sizes"))
    grid = attribute_pairs(kernel, "tilec.grid")
    blocks = " x ".join(f"ceil({d}/{sizes.get(t, t)})" for d, t in grid) or "1"
    if not plan.atomic:
        ctx.remark(
            loop,
            f"workspace: {format_bytes(rewrite.slot_bytes)} per slot x S x {blocks} blocks, and "
            "one 4-byte counter per block (hidden kernel parameters the launcher keeps)",
        )
    if pinned:
        ctx.remark(loop, f"S = {pinned} ({source})")
        return
    if rewrite.dot() is not None:
        ctx.remark(
            loop,
            "S chosen at launch, the count of least modelled time of the SM model that "
            "tiling ranks wgmma tiles by (passes/wgmma_model.py, best_split): the k-steps "
            "each block runs and the waves of blocks, against the partials written and read "
            "back, and no faster than the operands' bytes from DRAM; 1 when the tiles fill "
            "the GPU",
        )
        return
    ctx.remark(
        loop,
        "S chosen at launch, the count of least modelled time (tilec.runtime.split): each "
        f"block's chain of iterations ({format_bytes(rewrite.trip_bytes)} each) and the "
        "bandwidth of the SMs its blocks occupy, against "
        + ("the S updates each element's atomics make" if plan.atomic else "the combine's rounds")
        + "; 1 when the other axes fill the GPU",
    )
