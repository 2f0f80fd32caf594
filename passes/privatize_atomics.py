"""The `privatize-atomics` pass: a scatter-add into a small 1-D tensor (a histogram) counts
in the block first, and adds the block's counts to memory once.

`atomic_add(counts[values[tn]], 1)` makes one `red.global.add` per element, and with few bins
they queue at the same few addresses: 2^26 values into 256 bins took 17.3 ms on the H200
(2026-12-02, docs/benchmarks.md), 30x `torch.compile`'s 0.57 ms. What a CUDA author writes
instead: counts in shared memory, where the adds of one block meet only each other, then one
add per bin into memory. Here that is

    in_range = 0 <= values[tn] < min(B, P)
    private = bincount(values[tn], 1, mask in_range)        # tile<P>, tile.bincount
    atomic_add(counts[0:P], private)                         # clipped to the extent B
    atomic_add(counts[values[tn]], 1, mask not in_range)     # what the bins do not hold

with P a static number of bins: exact for every B (a lane whose value P cannot hold takes the
old path, and an out-of-range value is still out of range there, reported by the interpreter
as before). The dense add of the counts no longer depends on the tile of values, so
`accumulate-atomics` then turns the grid into a loop that carries the counts in registers, and
`split-reduction` splits it across blocks: each block adds its counts once, S additions per
bin instead of one per value.

Recognises `tile.atomic_scatter add` (relaxed, old values unread) of i32 into a 1-D
tensor at offset 0, indexed by a tile of the value's shape. P: the next power of two at least
the tensor's extent where known (the option `extents`, which `@tilec.jit` fills with the
arguments' size classes as it does for `tiling`; a fixed extent in the signature), else
`max_bins`; a tensor known to be larger than `max_bins` is left alone. The bins live in the
kernel's shared scratch (P x 4 bytes, `tilec.lowering.atomic.lower_bincount`). Exact: integer
sums (which wrap, as the atomics did) in any order; f32 scatters are left alone.
Options: `enable` (false: leave every scatter; `--disable privatize-atomics` does the same),
`max_bins`, `extents`. Remarks: per scatter privatized, P and why; per scatter left alone, why.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.diagnostics import TileError
from tilec.dialects import arith
from tilec.dialects import tile as T
from tilec.dialects.atomic import AtomicRMWOp, AtomicScatterOp
from tilec.dialects.builtin import FuncOp
from tilec.dialects.gather import BincountOp
from tilec.ir.attributes import BoolAttr, IntegerAttr
from tilec.ir.builder import Builder
from tilec.ir.core import Operation, Value
from tilec.ir.types import IntegerType, TileType, i1, index
from tilec.passes.specialize import next_power_of_two, parse_assignments
from tilec.passes.split_reduction import constant_index
from tilec.passmanager import Pass, PassContext, option, register_pass

__all__ = ["PrivatizeAtomics"]


@register_pass
class PrivatizeAtomics(Pass):
    """Counts a histogram's scatter-add in the block (`tile.bincount`), then adds the counts.

    See the module docstring for what is recognised and why. Runs before
    `accumulate-atomics` and `tiling`.
    """

    name = "privatize-atomics"
    summary = "Count a scatter-add into a small 1-D tensor per block, then add the counts once"

    @dataclass
    class Options:
        enable: bool = option(True, "privatize histogram scatter-adds (false: leave them)")
        max_bins: int = option(4096, "the most bins a block counts in shared memory (4 bytes each)")
        extents: str = option("", 'known extents by dimension, e.g. "B=256" (the bins)')

    def run(self, module: Operation, ctx: PassContext) -> None:
        opts = self.options
        if opts.max_bins < 1 or opts.max_bins & (opts.max_bins - 1):
            raise TileError(
                f"privatize-atomics: option max_bins must be a power of two, got {opts.max_bins}"
            )
        extents = parse_assignments(opts.extents, "extents", self.name)
        for kernel in [op for op in module.walk() if isinstance(op, FuncOp)]:
            for op in [o for o in kernel.walk() if isinstance(o, AtomicScatterOp)]:
                if not opts.enable:
                    ctx.remark(op, "scatter left as written: option enable=false")
                    continue
                why = _unsuitable(op)
                if why is not None:
                    ctx.remark(op, f"scatter left as written: {why}")
                    continue
                bins, reason = _bins(op, extents, opts.max_bins)
                if bins is None:
                    ctx.remark(op, f"scatter left as written: {reason}")
                    continue
                counted = _privatize(op, bins)
                ctx.remark(
                    counted,
                    f"counted in the block first: {bins} bins in shared memory ({reason}), added "
                    "to memory once per block; lanes whose index the bins do not hold keep the "
                    "scatter",
                )


def _unsuitable(op: AtomicScatterOp) -> str | None:
    view = op.view.type
    if op.kind != "add":
        return f"atomic {op.kind} (only adds are counted)"
    if view.rank != 1:
        return f"a {view.rank}-D tensor (only 1-D ones are counted)"
    if view.element != IntegerType(32):
        # f32 counts would be summed in another order than the atomics', which the
        # differential fuzzer's bit-for-bit check of every pass does not allow (and with few
        # bins f32 shared adds contend: 1.53x torch.bincount at 100 bins, docs/benchmarks.md).
        return f"{view.element} (integer counts only: i32 sums are exact in any order)"
    if op.sem not in (None, "relaxed"):
        return f"memory order {op.sem}"
    if op.result.uses:
        return "its old values are read"
    if constant_index(op.offsets[0]) != 0:
        return "the region does not start at 0"
    if op.indices.type.shape != op.value.type.shape:
        return "the indices are not one per element"
    return None


def _bins(op: AtomicScatterOp, extents: dict[str, int], most: int) -> tuple[int | None, str]:
    dim = op.view.type.shape[0]
    known = dim if isinstance(dim, int) else extents.get(str(dim))
    if known is None:
        return most, f"{dim} unknown: option max_bins"
    bins = next_power_of_two(max(int(known), 1))
    what = f"a fixed extent of {dim}" if isinstance(dim, int) else f"{dim} = {known}"
    if bins > most:
        return None, f"{what} needs {bins} bins, more than max_bins={most}"
    return bins, f"{what}: the next power of two"


def _privatize(op: AtomicScatterOp, bins: int) -> Operation:
    """Rewrites `op` as the module docstring says; returns the `tile.bincount`."""
    b = Builder.before_op(op)
    indices, value, mask = op.indices, op.value, op.mask
    it: TileType = indices.type
    flags = TileType(it.shape, i1)

    def constant(n: int) -> Value:
        return b.create(arith.ConstantOp, value=n, result_types=[index]).result

    extent = b.create(T.DimOp, view=op.view, axis=0).result
    limit = b.create(arith.MinSIOp, lhs=extent, rhs=constant(bins)).result
    limit = b.create(arith.IndexCastOp, input=limit, result_types=[it.element]).result
    limits = b.create(T.SplatOp, input=limit, result_types=[it]).result
    zeros = b.create(T.FullOp, value=IntegerAttr(0), result_types=[it]).result
    low = b.create(arith.CmpIOp, predicate="slt", lhs=indices, rhs=zeros).result
    high = b.create(arith.CmpIOp, predicate="sge", lhs=indices, rhs=limits).result
    outside = b.create(arith.OrIOp, lhs=low, rhs=high).result
    inside = b.create(arith.XOrIOp, lhs=outside, rhs=_true(b, flags)).result
    counted = inside if mask is None else b.create(arith.AndIOp, lhs=inside, rhs=mask).result
    bincount = b.create(
        BincountOp,
        indices=indices,
        values=value,
        mask=counted,
        result_types=[TileType((bins,), value.type.element)],
    )
    counts = bincount.result
    counts.name_hint = "block_counts"
    b.create(AtomicRMWOp, kind="add", view=op.view, offsets=list(op.offsets), value=counts)
    left = outside if mask is None else b.create(arith.AndIOp, lhs=outside, rhs=mask).result
    b.create(
        AtomicScatterOp,
        kind="add",
        view=op.view,
        offsets=list(op.offsets),
        indices=indices,
        value=value,
        mask=left,
        axis=op.axis,
    )
    op.erase()
    return bincount


def _true(b: Builder, t: TileType) -> Value:
    return b.create(T.FullOp, value=BoolAttr(True), result_types=[t]).result
