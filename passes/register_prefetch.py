"""Prefetching in registers, a decision of the `pipeline` pass: a loop that loads tiles from
global memory straight into registers (no shared memory) issues the next iteration's loads
at the top of each iteration, before this iteration's reductions and scans, and carries the
loaded tiles round the loop.

Before (cumsum's loop over column tiles):

    %total = scf.for %tn = %c0 to %N step %BN iter_args(%carry = %zero) {
      %t = tile.load %x[%row, %tn]
      ... scan, reduce %t, store ...
    }

After:

    %t0 = tile.load %x[%row, %c0]                                  // prologue: iteration 0
    %total, %_ = scf.for %tn = %c0 to %N step %BN iter_args(%carry = %zero, %t = %t0) {
      %tn_next = arith.addi %tn, %BN
      %t_next = tile.load %x[%row, %tn_next]                        // iteration i+1's tile
      ... scan, reduce %t, store ...
      scf.yield %carry2, %t_next
    }

A load qualifies when it is directly in the body of a loop (`tiles()` or `range()`) that moves no tile
through shared memory and has no `tile.dot` (whose FMA path holds its operands in registers), reads a view defined outside the loop that nothing in the loop writes,
and its offsets and mask are computed from the induction variable and loop-invariant values
(`loop_slices.recompute_slice`: no carried value, nothing impure but loads that qualify
themselves -- a paged kernel's read of its block table, whose page number the next page's
load needs). Nothing can read out of
bounds: a `tile.load` reads only elements inside the view's extents (the rest is padding), so
the load past the last iteration reads nothing outside them -- past a `tiles()` loop nothing
at all, past a `range()` loop what no iteration uses --, and its `in_bounds` is not claimed
along a dimension that moves with the loop (vectorize proves it only for constant and
program-id offsets; `_unsafe_ahead` checks). Other arguments are assumed not to
overlap the loaded view, as the copies of `pipeline` assume.

mask-bounds splits a loop into the tiles its masks show entirely and the rest (`visible_end`):
the second loop starts at the first loop's bound, which lies on the first loop's steps or at
the second loop's end (`_continues`), so the first loop's last prefetched tile is the second
loop's first, carried from one to the other instead of loaded twice.

**The model** (`_decide`). Without the prefetch a block has its tile in flight only while it
waits for it, and nothing while it reduces it; with it, two tiles while it waits (this one and
the next) and the next one while it computes. The prefetch holds a second copy of the tiles in
registers (`occupancy.estimate_registers` of the rewritten kernel), which may lower the blocks
an SM holds. It is taken when the bytes in flight per SM while a block waits grow (2 x blocks with
it > blocks without: a block then runs an iteration in about (compute + latency) / 2, not
compute + latency, while latency is the longer; at half the blocks that only breaks even, and
loses when compute is the longer), the registers fit
a thread (and the kernel's `tilec.min_blocks_per_sm`), and the loop may run more than once a
block (where option `extents`, `@tilec.jit`'s size classes, bound its trip count: a loop of one
iteration only gains a prologue).

**Measured** (H200, 2026-12-03, the suite's rows, peers in the same run, the model on): cumsum
over rows 4096x16384 f32 0.229 -> 0.193 ms (55% -> 66% of copy bandwidth), but cross-entropy
4096x32000 0.169 -> 0.191 ms and row sums 8192x8192 0.0645 -> 0.0745 ms; column sums level.
ptxas gives the prefetched loops 8 to 55 more registers than `estimate_registers` says (row
sums: 8 blocks an SM became 2), and even with ptxas's counts the rule above would take
cross-entropy (2 x 2 > 3) and refuse cumsum (2 x 1 = 2): bytes in flight alone do not predict
these loops. So the model is not the default until it (registers from ptxas, and the
iteration's compute against the load's latency) explains all three; -1 runs it, and a kernel
pins it with `stages=2`. ncu on the H100 (2026-12-06) showed what separates
them: the prefetch hides latency in all of them (stall cycles on loads down by a third to two
thirds) and pays only where the loop waited on memory below DRAM's bandwidth -- cumsum (half
its cycles on loads, DRAM at 80%) took 0.94x the time; row sums ran at 93% of DRAM (nothing to
gain) and cross-entropy spent 1.62 of its 4.3 cycles an instruction on loads (its compute
bounds it): both lose the warps the registers cost. The model needs both quantities
(docs/benchmarks.md, "Clusters timed"); the tuner times the prefetch meanwhile.

**The default** (option value 2, `CHAINED`) takes only loops whose loads are read through
another load of the same iteration (`_chained`: a block table's page number, a bag's id).
Without the prefetch such an iteration waits two round trips to memory one after the other,
a latency no other block hides from this one and no compute covers; with the index two
iterations ahead and the rest one, a single round trip an iteration. Paged decode took 0.87x
(B4, a few blocks) and 0.973x (B64) of its time (H100, 2026-12-06); `embedding_bag.tile` is
the second kernel of the kind. It also takes every loop of a kernel whose grid, at the
extents the jit gives (`extents`: size classes, upper bounds), has at most one block an SM
(`_lone_blocks`; not a split kernel, whose launch adds blocks): each block's loads are then
the only ones on its SM, no other block hides their round trip, and DRAM runs far below its
rate -- what ncu showed separates the loops where the prefetch pays (cumsum, above). The
greedy argmax of 64 rows of 128256 logits (64 blocks) ran at 21% of DRAM's rate, 1.40x
torch.argmax's time, without it (H100, 2026-12-06). The registers must still fit
(`_over_registers`).

**Controls.** The kernel's pin `tilec.num_stages` (`@kernel(stages=...)`, `--stages`): 1 turns
it off, 2 or more on wherever a load qualifies; else option `register_prefetch` (-1: the
model; 0: never; 1: wherever a load qualifies; 2, the default: chained loops only). Remarks: on the kernel, "2 stages in
registers: ..." or "1 stage in registers: ..." with the model's figures (`--explain`'s stages
line); on each loop, the loads prefetched or why not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from tilec.diagnostics import TileError, format_bytes
from tilec.dialects import arith, scf, shared
from tilec.dialects import tile as T
from tilec.dialects import tma as TM
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import BoolAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Operation, OpResult, Pure, Value
from tilec.ir.folding import constant_value
from tilec.ir.types import TileType
from tilec.lowering.layouts import WARP_SIZE, element_bytes
from tilec.passes.loop_slices import defined_inside, depends_on_iv, recompute_slice
from tilec.passes.occupancy import (
    MAX_BLOCKS_PER_SM,
    MAX_REGISTERS_PER_THREAD,
    MAX_THREADS_PER_SM,
    REGISTER_GRANULE,
    REGISTERS_PER_SM,
    estimate_registers,
)
from tilec.passes.specialize import grid_blocks
from tilec.passmanager import PassContext

__all__ = ["CHAINED", "REGISTER_PREFETCH_ATTRIBUTE", "check_choice", "prefetch_registers"]

# On a kernel with loads a loop could issue an iteration ahead: whether they are (the
# decision, read back by the tuner as `stages` 2 or 1).
REGISTER_PREFETCH_ATTRIBUTE = "tilec.register_prefetch"
CHAINED = 2  # option register_prefetch: only loops whose loads are read through another load

_SHARED_OPS = (
    shared.StoreSharedOp,
    shared.LoadSharedOp,
    shared.AsyncCopyOp,
    TM.TmaCopyOp,
)


@dataclass
class _Load:
    """A load of a loop that can be issued one iteration ahead."""

    op: T.LoadOp
    recompute: list[Operation]  # body ops its offsets and mask need, in order


@dataclass
class _Walk:
    """Loops that walk one sequence of tiles one after another (one loop, or mask-bounds'
    split), each with the same prefetchable loads in the same order."""

    loops: list[scf.ForOp]
    loads: list[list[_Load]] = field(default_factory=list)

    def step_bytes(self) -> int:
        return sum(_tile_bytes(x.op.result.type) for x in self.loads[0])

    def names(self) -> str:
        return ", ".join(_name(x.op) for x in self.loads[0])


def prefetch_registers(
    kernel: FuncOp,
    choice: int,
    extents: dict[str, int],
    ctx: PassContext,
    sm_count: int = 132,
) -> None:
    """Prefetch the tiles `kernel`'s loops load into registers one iteration ahead where the
    pin, option `choice` (-1 model, 0 never, 1 always, 2 chained loads and lone blocks) and
    the model say so (module doc); `sm_count`: the GPU's SMs."""
    walks = _find_walks(kernel, ctx)
    if not walks:
        return
    kernel.attributes[REGISTER_PREFETCH_ATTRIBUTE] = BoolAttr(False)
    pin = kernel.attributes.get("tilec.num_stages")
    if pin is not None:
        take, why = pin.value >= 2, f"stages={pin.value} pinned by the kernel"
    elif choice == 0:
        take, why = False, "option register_prefetch = 0"
    elif choice == 1:
        take, why = True, "option register_prefetch = 1"
    elif choice == CHAINED:
        lone = _lone_blocks(kernel, extents, sm_count)
        chained = [w for w in walks if lone or (len(w.loops) == 1 and _chained(w.loads[0]))]
        chained, short = _more_than_once(chained, extents)
        for loop, text in short:
            ctx.remark(loop, f"not prefetched: {text}")
        if not chained:
            ctx.remark(
                kernel,
                "1 stage in registers: no loop reads a load's address through another load "
                "and the grid is not known to leave its blocks alone on their SMs (option "
                f"register_prefetch = {CHAINED}: only those)",
            )
            return
        walks = chained
        if lone:
            why = (
                f"{lone}: each block's loads are the only ones on its SM, so nothing hides "
                "their round trip and DRAM runs far below its rate -- where the prefetch "
                f"pays (option register_prefetch = {CHAINED})"
            )
        else:
            why = "; ".join(_through(w) for w in chained) + (
                ": without it each iteration waits two round trips to memory, one after the "
                "other, which no other block hides from this one (option register_prefetch = "
                f"{CHAINED})"
            )
        over = _over_registers(kernel)
        take, why = (False, over) if over else (True, why)
    else:
        walks, short = _more_than_once(walks, extents)
        for loop, text in short:
            ctx.remark(loop, f"not prefetched: {text}")
        if not walks:
            reasons = "; ".join(text for _, text in short)
            ctx.remark(kernel, f"1 stage in registers: {reasons}")
            return
        take, why = _decide(kernel, walks)
    if not take:
        ctx.remark(kernel, f"1 stage in registers: {why}")
        return
    ctx.remark(
        kernel,
        f"2 stages in registers: {'; '.join(w.names() for w in walks)} loaded one iteration "
        f"ahead: {why}",
    )
    kernel.attributes[REGISTER_PREFETCH_ATTRIBUTE] = BoolAttr(True)
    for walk in walks:
        _rewrite(walk, ctx)


def _lone_blocks(kernel: FuncOp, extents: dict[str, int], sm_count: int) -> str:
    """Why each block of `kernel` runs alone on its SM ("" where that is not known): its grid
    at the extents (the jit's size classes, upper bounds) has at most `sm_count` blocks. Not
    for a split kernel, whose launch adds a grid axis."""
    if "tilec.split" in kernel.attributes:
        return ""
    found = grid_blocks(kernel, extents)
    if found is None or found[0] > sm_count:
        return ""
    blocks, dims = found
    return f"a grid of at most {blocks} blocks ({', '.join(dims)}) on {sm_count} SMs"


# ---------------------------------------------------------------------------------------------
# Finding the loads


def _find_walks(kernel: FuncOp, ctx: PassContext | None) -> list[_Walk]:
    walks: list[_Walk] = []
    by_loop: dict[int, _Walk] = {}
    for loop in [op for op in kernel.walk() if isinstance(op, scf.ForOp)]:
        loads = _prefetchable(loop, ctx)
        if not loads:
            continue
        previous = _previous_loop(loop)
        walk = by_loop.get(id(previous)) if previous is not None else None
        if walk is not None and _continues(previous, loop) and _same_loads(walk, loads, loop):
            walk.loops.append(loop)
            walk.loads.append(loads)
        else:
            walk = _Walk([loop], [loads])
            walks.append(walk)
        by_loop[id(loop)] = walk
    return walks


def _prefetchable(loop: scf.ForOp, ctx: PassContext | None) -> list[_Load]:
    body = loop.body.block
    candidates = [op for op in body.ops if isinstance(op, T.LoadOp)]
    if not candidates:
        return []

    def refuse(text: str) -> list[_Load]:
        if ctx is not None:
            ctx.remark(loop, f"not prefetched: {text}")
        return []

    if any(isinstance(op, _SHARED_OPS) for op in loop.walk()):
        return refuse("the loop moves tiles through shared memory (pipeline's streams)")
    if any(isinstance(op, T.DotOp) for op in loop.walk()):
        # The FMA path of a dot holds its operands and accumulator in registers already
        # (ptxas spilled attention's backward kernels with a second copy of k and v).
        return refuse("the loop multiplies tiles (tile.dot), whose registers tiling budgets")
    found = []
    for load in candidates:
        why = _why_not(load, loop)
        if isinstance(why, str):
            if why and ctx is not None:
                ctx.remark(load, f"not prefetched: {why}")
            continue
        found.append(_Load(load, why))
    return found


def _why_not(load: T.LoadOp, loop: scf.ForOp) -> list[Operation] | str:
    """The ops to compute `load`'s address for another iteration, or why it cannot move a
    step ahead ("" for a loop-invariant load, which is left to be hoisted)."""
    t = load.result.type
    if not (isinstance(t, TileType) and t.is_static):
        return "the tile has no static shape"
    if defined_inside(load.view, loop):
        return "the tensor view is not defined outside the loop"
    roots = list(load.offsets) + ([load.mask] if load.mask is not None else [])
    if not any(depends_on_iv(v, loop) for v in roots):
        return ""
    why = _unsafe_ahead(load, loop)
    if why:
        return why
    return recompute_slice(roots, loop, reads=lambda op: not _unsafe_ahead(op, loop))


def _unsafe_ahead(load: Operation, loop: scf.ForOp) -> str:
    """Why `load` may not be issued for the iteration after the last ("" when it may): a view
    the loop writes (the load would pass the write), or an offset that moves with the
    iteration along a dimension the load claims in bounds (`in_bounds`: unchecked). A load
    past the last iteration -- a `range()` loop's index past its count, a page number read
    from a block table's column past the context -- must read only inside the view's extents,
    which the unclaimed dimensions' bounds checks ensure: what it reads is never used."""
    if not isinstance(load, T.LoadOp):
        return f"'{load.name}' is not a load"
    if defined_inside(load.view, loop):
        return "the tensor view is not defined outside the loop"
    for op in loop.walk():
        if op is not load and load.view in op.operands and not _reads(op):
            view = getattr(load.view, "name_hint", None) or "the view"
            return f"the loop writes {view} ({op.name}), which a load ahead would pass"
    claimed = load.attributes.get("in_bounds")
    if claimed is not None:
        for d, (v, inside) in enumerate(zip(load.offsets, claimed.elements)):
            if inside.value and depends_on_iv(v, loop):
                return (
                    f"its offset along dimension {d} moves with the loop and is claimed in "
                    "bounds: a load past the last iteration would go unchecked"
                )
    return ""


def _reads(op: Operation) -> bool:
    return isinstance(op, T.LoadOp) or op.has_trait(Pure)


def _previous_loop(loop: scf.ForOp) -> scf.ForOp | None:
    ops = loop.parent.ops  # type: ignore[union-attr]
    for op in reversed(ops[: ops.index(loop)]):
        if isinstance(op, scf.ForOp):
            return op
    return None


def _continues(first: scf.ForOp, second: scf.ForOp) -> bool:
    """Whether `second` runs the tiles right after `first`'s, so that the tile `first`
    prefetched past its last iteration is `second`'s first: what mask-bounds' split leaves,
    `second` from `first`'s bound `min(max(lower, lower + k * step), upper)` (`upper`:
    `second`'s) carrying on from `first`'s results. The bound is on `first`'s steps (the tile
    after its last is the bound), or its `lower` (`first` runs no iteration: the prologue's
    tile is at the bound), or `upper` (`second` runs none)."""
    if second.lower is not first.upper or second.step is not first.step:
        return False
    if list(second.inits) != list(first.results):
        return False
    bound = first.upper
    if not (isinstance(bound, OpResult) and isinstance(bound.op, arith.MinSIOp)):
        return False
    low, high = bound.op.lhs, bound.op.rhs
    if high is not second.upper or not isinstance(low, OpResult):
        return False
    if not isinstance(low.op, arith.MaxSIOp) or low.op.lhs is not first.lower:
        return False
    past = low.op.rhs
    if not (isinstance(past, OpResult) and isinstance(past.op, arith.AddIOp)):
        return False
    if past.op.lhs is not first.lower or not isinstance(past.op.rhs, OpResult):
        return False
    times = past.op.rhs.op
    return isinstance(times, arith.MulIOp) and first.step in (times.lhs, times.rhs)


def _same_loads(walk: _Walk, loads: list[_Load], loop: scf.ForOp) -> bool:
    earlier, earlier_loop = walk.loads[-1], walk.loops[-1]
    if len(earlier) != len(loads):
        return False
    return all(
        a.op.view is b.op.view
        and a.op.result.type == b.op.result.type
        and a.op.attributes == b.op.attributes
        and _same_value(
            _address(a.op),
            earlier_loop,
            _address(b.op),
            loop,
            {earlier_loop.induction_var: loop.induction_var},
        )
        for a, b in zip(earlier, loads)
    )


def _address(load: T.LoadOp) -> list[Value]:
    return list(load.offsets) + ([load.mask] if load.mask is not None else [])


def _same_value(a: list[Value], loop_a: scf.ForOp, b: list[Value], loop_b: scf.ForOp, seen) -> bool:
    """Whether values `a` of `loop_a` are computed as `b` of `loop_b`, the induction variables
    corresponding (`seen`): the same ops on the same loop-invariant values."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if seen.get(x) is y or x is y:
            continue
        if not (defined_inside(x, loop_a) and defined_inside(y, loop_b)):
            return False
        if not (isinstance(x, OpResult) and isinstance(y, OpResult)):
            return False
        if type(x.op) is not type(y.op) or x.op.attributes != y.op.attributes or x.type != y.type:
            return False
        if x.index != y.index or not _same_value(
            x.op.operands, loop_a, y.op.operands, loop_b, seen
        ):
            return False
        seen[x] = y
    return True


def _more_than_once(
    walks: list[_Walk], extents: dict[str, int]
) -> tuple[list[_Walk], list[tuple[scf.ForOp, str]]]:
    """The walks that may run more than one iteration a block, and why the others do not: a
    walk from a constant start to `tile.dim` of a dimension whose extent (option `extents`:
    `@tilec.jit`'s size class, at least the extent below 16384) is at most one step on."""
    kept, short = [], []
    for walk in walks:
        first, last = walk.loops[0], walk.loops[-1]
        start, step = constant_value(first.lower), constant_value(first.step)
        end = last.upper
        extent, name = None, None
        if isinstance(end, OpResult) and isinstance(end.op, T.DimOp):
            dim = end.op.view.type.shape[end.op.attributes["axis"].value]
            extent = dim if isinstance(dim, int) else extents.get(dim)
            name = str(dim)
        known = extent is not None and start is not None and step is not None
        if known and step.value > 0 and extent - start.value <= step.value:
            short.append(
                (
                    last,
                    f"the loop runs at most once a block ({name} <= {extent}, "
                    f"within one step of {step.value}: option extents)",
                )
            )
            continue
        kept.append(walk)
    return kept, short


# ---------------------------------------------------------------------------------------------
# The model


def _registers(kernel: FuncOp) -> tuple[int, int, int]:
    """(registers a thread estimated without the prefetch, with it, the most a thread may
    have: 255, or the share `tilec.min_blocks_per_sm` leaves)."""
    warps = kernel.attributes["tilec.num_warps"].value
    threads = warps * WARP_SIZE
    without = estimate_registers(kernel, warps)
    trial = kernel.clone()
    for walk in _find_walks(trial, None):
        _rewrite(walk, None)
    with_ = estimate_registers(trial, warps)
    pinned = kernel.attributes.get("tilec.min_blocks_per_sm")
    cap = MAX_REGISTERS_PER_THREAD
    if pinned is not None:
        share = REGISTERS_PER_SM // (pinned.value * threads)
        cap = min(cap, share // REGISTER_GRANULE * REGISTER_GRANULE)
    return without, with_, cap


def _over_registers(kernel: FuncOp) -> str:
    """Why a second copy of the tiles does not fit a thread ("" when it does)."""
    without, with_, cap = _registers(kernel)
    if with_ <= cap:
        return ""
    return (
        f"a second copy of the tiles would need ~{with_} registers a thread estimated, "
        f"{without} without, over {cap}"
    )


def _decide(kernel: FuncOp, walks: list[_Walk]) -> tuple[bool, str]:
    threads = kernel.attributes["tilec.num_warps"].value * WARP_SIZE
    without, with_, cap = _registers(kernel)
    step = max(w.step_bytes() for w in walks)
    registers = f"~{with_} registers a thread estimated, {without} without"
    if with_ > cap:
        return False, f"a second copy of the tiles would need {registers}, over {cap}"
    before, after = _blocks(without, threads), _blocks(with_, threads)
    waiting_before, waiting_after = before * step, after * 2 * step
    figures = (
        f"in flight per SM while a block waits for its tile {_count(after, 'block')} x 2 "
        f"steps of {format_bytes(step)} = {format_bytes(waiting_after)} against "
        f"{_count(before, 'block')} x 1 = {format_bytes(waiting_before)} without, and while it "
        f"computes {format_bytes(after * step)} against none ({registers})"
    )
    if waiting_after <= waiting_before:
        return False, f"prefetching would not raise the bytes {figures}"
    return True, figures


def _blocks(registers: int, threads: int) -> int:
    return max(
        1,
        min(
            MAX_THREADS_PER_SM // threads,
            REGISTERS_PER_SM // (registers * threads),
            MAX_BLOCKS_PER_SM,
        ),
    )


# ---------------------------------------------------------------------------------------------
# Rewriting


def _rewrite(walk: _Walk, ctx: PassContext | None) -> None:
    if len(walk.loops) == 1 and _chained(walk.loads[0]):
        _rewrite_chained(walk.loops[0], walk.loads[0], ctx)
        return
    names = walk.names()
    carried: list[Value] = []
    for k, (loop, loads) in enumerate(zip(walk.loops, walk.loads)):
        if k == 0:
            before = Builder.before_op(loop)
            carried = [_load_at(before, x, loop, loop.lower) for x in loads]
        top = Builder.at_start(loop.body.block, loop.loc)
        iv = loop.induction_var
        next_iv = top.create(arith.AddIOp, lhs=iv, rhs=loop.step).result
        next_iv.name_hint = f"{iv.name_hint or 'iv'}_next"
        aheads = []
        for x in loads:  # all before any load is erased: the first may be the builder's anchor
            aheads.append(_load_at(top, x, loop, next_iv))
            aheads[-1].name_hint = f"{_name(x.op)}_next"
        results = []
        for x, init, ahead in zip(loads, carried, aheads):
            arg = _carry(loop, init)
            x.op.result.replace_all_uses_with(arg)
            x.op.erase()
            yield_op = loop.yield_op
            yield_op.operands.append(ahead)
            ahead.uses.append(yield_op)
            results.append(loop.results[-1])
        if ctx is not None:
            start = "the prologue" if k == 0 else "the previous loop, which loaded it ahead"
            ctx.remark(
                loop,
                f"{names} loaded one iteration ahead, at the top of the body, and "
                f"carried round the loop (the first tile from {start})",
            )
        carried = results


def _through(walk: _Walk) -> str:
    """`k_cache, v_cache read through block_table`: a chained walk's loads, named."""
    heads = _chained(walk.loads[0])
    rest = [x for x in walk.loads[0] if x not in heads]
    return (
        f"{', '.join(_name(x.op) for x in rest)} read through "
        f"{', '.join(_name(x.op) for x in heads)}"
    )


def _chained(loads: list[_Load]) -> list[_Load]:
    """The loads of `loads` that another's address is read through (a block table's page
    number, which the page's load needs)."""
    return [y for y in loads if any(y.op in x.recompute for x in loads if x is not y)]


def _rewrite_chained(loop: scf.ForOp, loads: list[_Load], ctx: PassContext | None) -> None:
    """Prefetch where some loads' addresses are read through others (`_chained`): those
    index loads go two iterations ahead, so that the next iteration's index is in registers
    when the top of this one issues the next loads through it -- one latency a step, not
    two (the index's, then the page's). The loop carries each index load's values for this
    iteration and the next, and each other load's for the next."""
    heads = _chained(loads)
    said = (
        f"{', '.join(_name(y.op) for y in heads)} loaded two iterations ahead and "
        f"{', '.join(_name(x.op) for x in loads if x not in heads)} one, through it: the "
        "next tiles' addresses are in registers when the top of the body issues them"
    )
    lower, step, iv = loop.lower, loop.step, loop.induction_var
    before = Builder.before_op(loop)
    second = before.create(arith.AddIOp, lhs=lower, rhs=step).result
    # The prologue: index loads for iterations 0 and 1, the others for 0 through them.
    now = {id(y): _load_at(before, y, loop, lower) for y in heads}
    soon = {id(y): _load_at(before, y, loop, second) for y in heads}
    first = {
        id(x): _load_at(before, x, loop, lower, {y.op.result: now[id(y)] for y in heads})
        for x in loads
        if x not in heads
    }
    top = Builder.at_start(loop.body.block, loop.loc)
    next_iv = top.create(arith.AddIOp, lhs=iv, rhs=step).result
    next_iv.name_hint = f"{iv.name_hint or 'iv'}_next"
    after = top.create(arith.AddIOp, lhs=next_iv, rhs=step).result
    # Carried: each index load's value now and next, each other load's value now.
    args_now = {id(y): _carry(loop, now[id(y)]) for y in heads}
    args_soon = {id(y): _carry(loop, soon[id(y)]) for y in heads}
    args_first = {id(x): _carry(loop, v) for x in loads if x not in heads for v in [first[id(x)]]}
    aheads: dict[int, Value] = {}
    for y in heads:  # all issued before any load is erased (the first may be the anchor)
        aheads[id(y)] = _load_at(top, y, loop, after)
        aheads[id(y)].name_hint = f"{_name(y.op)}_after_next"
    through = {y.op.result: args_soon[id(y)] for y in heads}
    for x in loads:
        if x not in heads:
            aheads[id(x)] = _load_at(top, x, loop, next_iv, through)
            aheads[id(x)].name_hint = f"{_name(x.op)}_next"
    yield_op = loop.yield_op
    for y in heads:
        y.op.result.replace_all_uses_with(args_now[id(y)])
    for x in loads:
        if x not in heads:
            x.op.result.replace_all_uses_with(args_first[id(x)])
    for x in loads:
        x.op.erase()
    for y in heads:  # now <- next, next <- after next
        yield_op.operands += [args_soon[id(y)], aheads[id(y)]]
        args_soon[id(y)].uses.append(yield_op)
        aheads[id(y)].uses.append(yield_op)
    for x in loads:
        if x not in heads:
            yield_op.operands.append(aheads[id(x)])
            aheads[id(x)].uses.append(yield_op)
    if ctx is not None:
        ctx.remark(loop, said)


def _carry(loop: scf.ForOp, init: Value) -> Value:
    """A new value carried by `loop` from `init`: its block argument (the loop's new result
    is `loop.results[-1]`; the caller yields the next value)."""
    loop.operands.append(init)
    init.uses.append(loop)
    loop.results.append(OpResult(init.type, loop, len(loop.results)))
    loop.results[-1].name_hint = f"{init.name_hint}_last" if init.name_hint else None
    return loop.body.block.add_arg(init.type, init.name_hint)


def _load_at(
    b: Builder, x: _Load, loop: scf.ForOp, iv: Value, known: dict[Value, Value] | None = None
) -> Value:
    """`x`'s load for the iteration whose induction variable is `iv`, built at `b`; `known`:
    values of that iteration already at hand (an index load's, carried), not computed again."""
    mapping: dict[Value, Value] = {loop.induction_var: iv, **(known or {})}
    for op in x.recompute:
        if all(r in mapping for r in op.results):
            continue
        b.insert(op.clone(mapping))
    load = x.op.clone(mapping)
    b.insert(load)
    return load.result


# ---------------------------------------------------------------------------------------------


def _name(load: T.LoadOp) -> str:
    return load.result.name_hint or getattr(load.view, "name_hint", None) or "a load"


def _tile_bytes(t: TileType) -> int:
    return prod(t.shape) * element_bytes(t.element)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def check_choice(choice: int) -> None:
    if choice not in (-1, 0, 1, CHAINED):
        raise TileError(
            f"pipeline: option register_prefetch must be -1 (the model), 0, 1 or {CHAINED} "
            f"(chained loads only), got {choice}"
        )
