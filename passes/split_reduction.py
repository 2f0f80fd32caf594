"""The `split-reduction` pass: a reduction whose grid would leave SMs idle is split across
blocks.

A kernel whose grid body runs one loop over a tensor extent that only reduces (column sums of
a tall matrix: two blocks of 64 columns for N = 128, each walking 100,000 rows) gets one more
grid axis, the split axis, of S blocks: block s runs a contiguous chunk of the loop's
iterations, writes its partial results to a workspace, takes a ticket on its output tile's
counter, and the last block to arrive combines the S partials in slot order and runs the
epilogue. S is chosen at launch (`tilec.runtime.split`), from the SMs and the kernel's
occupancy; S = 1 runs the epilogue directly, touching no workspace. `docs/passes.md` is the
contract. What is recognised: `split_plan.py`; the rewrite: `split_rewrite.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.diagnostics import TileError, format_bytes
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.core import Operation
from tilec.passes.specialize import attribute_pairs, grid_blocks, parse_assignments
from tilec.passes.split_passes import PassesRewrite
from tilec.passes.split_plan import (
    COMBINES,
    Combine,
    NotSplit,
    Plan,
    constant_index,
    identity_attr,
    is_identity,
    split_plan,
    splits_dot_loop,
)
from tilec.passes.split_rewrite import Rewrite
from tilec.passes.split_scan import ScanRewrite
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


@register_pass
class SplitReduction(Pass):
    """Splits a reduction loop across blocks when the grid alone may leave SMs idle.

    Recognises a kernel whose grid body has one top-level `scf.for` from 0 to a tensor extent
    (`tile.dim`) by a constant step, with no stores before it or in it, whose every carried
    value is a tile (or a scalar) updated only as `acc' = acc ⊕ g` (⊕: `arith.addf`, `addi`,
    `maximumf`, `minimumf`, `maxsi`, `minsi`; `g` reads no carried value, and nothing else
    in the loop reads one; a tile of two or more dimensions -- a reduction over the middle axis
    of [B, S, D], a dot's accumulator -- is read back a slot a round in its own layout, and
    only 1-D tiles are rescaled sums); what follows the loop is its epilogue. Such a kernel gets the
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


def _fills_the_gpu(kernel: FuncOp, extents: dict[str, int], sm_count: int) -> str:
    """Why the grid of `kernel` is known to give every SM a block ("" where it is not known
    to): the fewest blocks its extents allow -- a size class n stands for an extent above
    n / 2, the smallest class (`SIZE_CLASS_LIMITS`) for any extent up to it -- at least the
    SMs. The launch then chooses S = 1 at every call
    (`tilec.runtime.split.choose_split`: splits are for idle SMs), and the combine's code
    would only cost registers and time -- 1.9x on EmbeddingBag's 4096 bags of 1000 columns,
    H100, when this rule still asked for 32 blocks an SM."""
    found = grid_blocks(kernel, extents, least=True)
    if found is None:
        return ""
    least, dims = found
    if least < sm_count:
        return ""
    return (
        f"its grid gives every SM a block ({', '.join(dims)}: at least {least} blocks, "
        f"{sm_count} SMs), so S would be 1 at every launch"
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
    except NotSplit as why:
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
    if fixed is not None and plan.apply is not None and 1 < fixed < plan.passes:
        raise TileError(
            f"kernel '{kernel.sym_name}': split={fixed} cannot work: its {plan.passes} passes "
            "need a block each",
            kernel.loc,
            hint=f"split=1 runs the loops in one block; split={plan.passes} or more splits them",
        )
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
    kind = ScanRewrite if plan.scan else PassesRewrite if plan.apply is not None else Rewrite
    rewrite = kind(kernel, plan, options.combine_elements)
    rewrite.run(fixed)
    source = "pinned by the kernel" if pinned else "option split"
    _remark(kernel, plan, rewrite, fixed, source, ctx)


def _remark(
    kernel: FuncOp, plan: Plan, rewrite: Rewrite, pinned: int | None, source: str, ctx
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
    if plan.apply is not None:
        others = [
            f"{c.name} by {c.combine.name} (line {r.loop.loc.line})"
            for r in plan.reductions
            for c in r.carried
        ]
        reductions = f"a reduction ({combines})" + (
            f", then {len(plan.reductions)} more ({', '.join(others)})" if others else ""
        )
        ctx.remark(
            loop,
            f"{plan.passes} passes: {reductions}, and a loop that applies them (line "
            f"{plan.apply.loc.line}): each of the S blocks runs one pass, by its ticket (about "
            f"S/{plan.passes} blocks a pass): a reducing pass's blocks reduce their chunks and "
            "publish their partials; a block of a later pass first waits for each earlier "
            f"pass's partials and combines them in slot order ({rewrite.rows_per_round} a "
            "round); the last pass's blocks apply their chunks of the last loop; effects "
            "outside the loops run in its first block (S = 1: the loops run as written)",
        )
    elif plan.scan:
        ctx.remark(
            loop,
            f"a scan ({combines}; the loop stores as it goes): each block takes the chunk of "
            "its ticket (the order blocks arrive in), reduces it without the stores, publishes "
            "its partials, waits for those of the chunks before it and combines them in slot "
            f"order ({rewrite.rows_per_round} a round), then runs its chunk from there; the "
            "block with the last chunk runs the epilogue (S = 1: the loop runs as written)",
        )
    elif plan.atomic:
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
        flagged = plan.scan or plan.apply is not None
        counters = "2 + S 4-byte counters" if flagged else "one 4-byte counter"
        ctx.remark(
            loop,
            f"workspace: {format_bytes(rewrite.slot_bytes)} per slot x S x {blocks} blocks, and "
            f"{counters} per block (hidden kernel parameters the launcher keeps)",
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
        + (
            "the S updates each element's atomics make"
            if plan.atomic
            else "the combine's rounds"
            + (" (a scan runs each chunk twice)" if plan.scan else "")
            + (" (each pass's chunks after the pass before)" if plan.apply is not None else "")
        )
        + "; 1 when the other axes fill the GPU",
    )
