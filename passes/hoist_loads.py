"""The `hoist-loads` pass: a load is issued before the reductions that precede it, so that its
bytes are in flight while the block reduces.

A loop of paged decode attention loads a page's keys, reduces their scores (a max and a sum
across the page's rows, which the block's warps share), and only then loads the same page's
values: the frontend writes the ops in the kernel's order. A reduction across warps goes
through shared memory between block barriers (`bar.sync`), and neither LLVM nor ptxas moves a
global load across a barrier, so each iteration waits for two memory round trips one after
the other, with the block's barriers between -- where a CUDA author issues both loads first.
This pass moves each `tile.load` (and `tile.gather`) of a block of ops up to the first point
where its operands exist, past the ops that cannot change what it reads: pure ops (the
reductions, scans, layout conversions, elementwise math). A store, an atomic, a random-number
op, a loop or a branch stops it (the pass does not reason about which tensors they write), and
so does another load (loads keep their written order); a load never leaves its block (loop
body or branch).

Only *streamed* loads move (`occupancy.Streamed`: offsets that depend on every grid axis, so
no other block has brought the bytes into L2): their latency is DRAM's, worth a tile's
registers across the ops passed. A tile every block reads (a norm's weights `w[:]`) comes from
L2 and is cheap to load late; hoisted, layer norm's w and b held 35 more registers across its
reductions (ptxas: 133 -> 168 at 8192 columns; RMSNorm's w 56 -> 79), blocks an SM lost for
nothing. A tile that reaches a dot's operand stays too: `smem-placement` and `pipeline` stage
it through shared memory and schedule its copies (attention's keys and values). And a load
moves only where that takes it past one of the kernel's reductions or scans (sums, maxima,
cumulative sums, arg-reductions, top-k): the ops whose warps may meet in shared memory behind
block barriers. Past elementwise ops alone ptxas schedules the load itself.

Runs after `defer-reduction` and `align-rows` (the loops and accesses settled) and before
`assign-layouts` and `pipeline` (whose prefetch in registers moves a load into the previous
iteration: independent of this). Exact: a moved load reads what it read (translation
validation). Option `enable` (false: keep the written order; `--disable hoist-loads`).
Remarks: per load moved, the tensor and the synchronizing ops it now precedes. Writes
`tilec.hoisted_loads = n` on a kernel whose loads it moved (the fuzzers' coverage reads it).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.dialects import gather as G
from tilec.dialects import scan as S
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.attributes import IntegerAttr
from tilec.ir.core import Operation, Pure
from tilec.lowering.abi import argument_name
from tilec.passes.occupancy import Streamed
from tilec.passes.scan_layouts import SCAN_OPS
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["MOVED_ATTR", "HoistLoads"]

MOVED_ATTR = "tilec.hoisted_loads"  # on a kernel: how many of its loads this pass moved

_LOADS = (T.LoadOp, G.GatherOp)
# The kernel's own reductions across a tile, which its warps may share through shared memory
# behind block barriers: a load placed after one waits for them.
_SYNCHRONIZING = (T.ReduceOp, *SCAN_OPS)
_NOUNS = {
    T.ReduceOp: "reduction",
    S.ScanOp: "scan",
    S.ArgReduceOp: "arg-reduction",
    S.TopKOp: "top-k",
}


@register_pass
class HoistLoads(Pass):
    """Issues each load before the reductions (and other pure ops) that precede it in its
    block, as far up as its operands allow; the module docstring says what it may pass and
    why. Remarks: each load moved."""

    name = "hoist-loads"
    summary = "Issue loads before the reductions that precede them, as their operands allow"

    @dataclass
    class Options:
        enable: bool = option(True, "move loads up past pure ops (false: keep the written order)")

    def run(self, module: Operation, ctx: PassContext) -> None:
        if not self.options.enable:
            return
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            streamed = Streamed(kernel)
            moved = 0
            for op in [op for op in kernel.walk() if isinstance(op, _LOADS)]:
                if streamed(op) and not _feeds_dot(op):
                    moved += _hoist(kernel, op, ctx)
            if moved:  # what the fuzzers count as reached (`tilec.fuzz.differential`)
                kernel.attributes[MOVED_ATTR] = IntegerAttr(moved)


# Ops that pass a tile's elements on unchanged in value (a dot operand's way from its load).
_CARRIERS = (T.CastOp, T.ReshapeOp, T.ConvertLayoutOp, T.BroadcastOp, T.ExpandDimsOp, T.TransposeOp)


def _feeds_dot(load: Operation) -> bool:
    """Whether `load`'s tile reaches a `tile.dot` operand (through casts, reshapes, layout
    conversions, transposes): `smem-placement` and `pipeline` stage such a tile through shared
    memory and schedule its copies themselves."""
    work = list(load.results)
    while work:
        value = work.pop()
        for user in value.uses:
            if isinstance(user, T.DotOp):
                return True
            if isinstance(user, _CARRIERS):
                work.extend(user.results)
    return False


def _passable(op: Operation) -> bool:
    """Whether a load may move above `op`: `op` is pure and holds no region (loads keep
    their written order among themselves)."""
    return not op.regions and not isinstance(op, _LOADS) and op.has_trait(Pure)


def _hoist(kernel: FuncOp, load: Operation, ctx: PassContext) -> bool:
    block = load.parent
    if block is None:
        return False
    ops = list(block.ops)
    at = ops.index(load)
    operands = {id(v) for v in load.operands}
    stop = at
    while stop > 0:
        before = ops[stop - 1]
        if not _passable(before) or any(id(r) in operands for r in before.results):
            break
        stop -= 1
    passed = ops[stop:at]
    synchronizing = [op for op in passed if isinstance(op, _SYNCHRONIZING)]
    if not synchronizing:
        return False
    load.move_before(passed[0])
    kinds: dict[str, int] = {}
    for op in synchronizing:
        word = _NOUNS[type(op)]
        kinds[word] = kinds.get(word, 0) + 1
    what = ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in kinds.items())
    ctx.remark(
        load,
        f"load of {_tensor(kernel, load)} issued before {len(passed)} ops ({what}) that need "
        "none of its values: its bytes are in flight while they run, not after them "
        "(no barrier of theirs delays it)",
    )
    return True


def _tensor(kernel: FuncOp, load: Operation) -> str:
    view = load.operands[0]
    for i, arg in enumerate(kernel.arguments):
        if arg is view:
            return argument_name(kernel, i)
    return "a view"
