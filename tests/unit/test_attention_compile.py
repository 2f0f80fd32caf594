"""What the passes make of `examples/attention.tile` (Stage K): the scores and their softmax stay
in the registers the first dot left them in, P is the second dot's A operand without a trip
through shared memory, q is staged once before the loop, and the tiling's register model picks
the key tile by head dimension."""

from __future__ import annotations

import os

import pytest

import tilec
from tilec.dialects import arith, scf, shared
from tilec.dialects import tile as T
from tilec.dialects.builtin import FuncOp
from tilec.ir.parser import parse_module
from tilec.ir.types import TileType
from tilec.lowering.exchange import op_scratch_bytes
from tilec.lowering.layouts import as_blocked, mma_accumulator_layout
from tilec.passmanager import PassContext, parse_pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ATTENTION = os.path.join(ROOT, "examples", "attention.tile")


def _compiled(
    d: int,
    kernel: str = "attention",
    tiles: str = "",
    producer: int = -1,
    copies: str = "",
    heads: str = "B=4,H=16,M=4096",
    keys: int = 4096,
):
    """`kernel` through the passes, tiled for sm_90a (`copies`: pipeline's arch, whose TMA
    copies and producer warpgroup the tests of tiling's choices leave out)."""
    extents = f"D={d},N={keys},S={keys},T={keys},{heads},G=16"
    tiling = {"extents": extents, "exact": "D", "arch": "sm_90a", "tiles": tiles}
    pipeline = tilec.compiler.build_pipeline(
        options={"tiling": {**tiling, "producer": producer}, "pipeline": {"arch": copies}}
    )
    program = tilec.compile(
        ATTENTION, kernels=[kernel], pipeline='assume{all="aligned,unit,divisible"},' + pipeline
    )
    messages = [r.message for stage in program.stages for r in stage.remarks]
    return program.module.lookup(kernel), messages


def _loops(func: FuncOp) -> list[scf.ForOp]:
    """The key loops: the tiles every mask shows (no masks), then the rest (mask-bounds)."""
    loops = [op for op in func.walk() if isinstance(op, scf.ForOp)]
    assert len(loops) == 2, loops
    return loops


def _loop(func: FuncOp) -> scf.ForOp:
    return _loops(func)[0]


def _scratch_conversions(func: FuncOp) -> list:
    """Layout changes the lowering would move through shared memory."""
    return [op for op in func.walk() if isinstance(op, T.ConvertLayoutOp) and op_scratch_bytes(op)]


@pytest.mark.parametrize("d", [64, 128])
def test_softmax_stays_in_the_accumulator_registers(d):
    func, _ = _compiled(d)
    inside = [op for op in _loop(func).walk() if op in _scratch_conversions(func)]
    assert inside == [], [str(op) for op in inside]
    reductions = [op for op in _loop(func).walk() if isinstance(op, T.ReduceOp)]
    assert len(reductions) == 2
    warps = func.attributes["tilec.num_warps"].value
    twin = as_blocked(mma_accumulator_layout((warps, 1)))
    for r in reductions:  # in the accumulator's registers: shuffles within quads of lanes
        assert r.input.type.layout == twin
        assert op_scratch_bytes(r) == 0


@pytest.mark.parametrize("d", [64, 128])
def test_p_is_the_second_dots_a_operand_in_registers(d):
    func, remarks = _compiled(d)
    for loop in _loops(func):
        dots = [op for op in loop.walk() if isinstance(op, T.DotOp)]
        assert len(dots) == 2
        pv = dots[1]
        assert isinstance(pv.a.owner, T.ConvertLayoutOp)  # repacked, not from shared memory
    buffers = [op for op in func.walk() if isinstance(op, shared.AllocSharedOp)]
    staged = {op.result.type.shape[-2:] for op in buffers}
    # q (one slot, read by both loops) and each loop's streamed k and v: nothing of P's shape
    assert len(buffers) == 5, staged
    assert any("A operand kept in registers" in r for r in remarks)


def test_q_is_staged_once_before_the_loops():
    func, remarks = _compiled(128)
    stores = [op for op in func.walk() if isinstance(op, shared.StoreSharedOp)]
    assert len(stores) == 1
    assert all(not loop.is_ancestor_of(op) for op in stores for loop in _loops(func))
    assert any("read from where an earlier loop's dot staged it" in r for r in remarks)


@pytest.mark.parametrize(("d", "bn"), [(128, 64), (64, 128)])
def test_key_tile_follows_the_register_model(d, bn):
    """On wgmma with A in registers (sm_90a, no producer warpgroup), d128 at BN=128 would hold
    192 words a thread (ptxas spilled 496 bytes); BN=64 holds 144. At d64 BN=128 holds 144
    words and is chosen."""
    func, remarks = _compiled(d, producer=0)
    sizes = dict(func.attributes["tilec.tile_sizes"].value)
    assert sizes["BN"] == bn and sizes["BM"] == 64
    assert any("144 words a thread holds at its busiest (at most 160" in r for r in remarks)
    assert any("wgmma m64n" in r and "with A in registers" in r for r in remarks)
    dots = [op for op in func.walk() if isinstance(op, T.DotOp)]
    assert all(op.result.type.layout.version == 3 for op in dots)


def test_both_dots_run_on_wgmma_with_a_in_registers():
    """q (staged once) and P (repacked from the first dot's accumulator) are A fragments in
    registers (`#dot_operand` version 2); k and v are read by descriptors (version 3), k as
    stored [N, K] in two 64-column blocks at d128 (tiled without a producer warpgroup)."""
    func, _ = _compiled(128, producer=0)
    for dot in (op for op in _loop(func).walk() if isinstance(op, T.DotOp)):
        assert dot.a.type.layout.version == 2 and dot.b.type.layout.version == 3
    layouts = [
        op.result.type.layout
        for op in func.walk()
        if isinstance(op, shared.AllocSharedOp) and op.result.type.shape[-1] == 128
    ]
    assert any(getattr(layout, "col_block", 0) == 64 for layout in layouts), layouts


@pytest.mark.parametrize("kernel", ["attention", "attention_causal", "attention_gqa"])
def test_d128_is_tiled_for_a_producer_warpgroup(kernel):
    """At d128 the dots bound the loop (0.125 clocks a score against the softmax's 0.102): 128
    query rows a block on two consumer warpgroups, q read by descriptor (its registers go to
    the larger tile), and the pipeline, following, gives the block a producer warpgroup whose
    two consumers take turns."""
    from tilec.dialects.builtin import PRODUCER_ATTRIBUTE, STAGED_A_ATTRIBUTE
    from tilec.dialects.warp_specialize import PINGPONG_ATTRIBUTE, WarpSpecializeOp

    func, remarks = _compiled(128, kernel=kernel, copies="sm_90a")
    sizes = dict(func.attributes["tilec.tile_sizes"].value)
    m, n = ("BS", "BT") if kernel == "attention_causal" else ("BM", "BN")
    assert (sizes[m], sizes[n], func.attributes["tilec.num_warps"].value) == (128, 128, 8)
    assert PRODUCER_ATTRIBUTE in func.attributes
    assert func.attributes[STAGED_A_ATTRIBUTE].value == "shared"
    assert any(
        r.startswith("tiled for a producer warpgroup: per score the dots take 0.125 clocks")
        for r in remarks
    ), remarks
    assert len([op for op in func.walk() if isinstance(op, WarpSpecializeOp)]) == 1
    loops = [op for op in func.walk() if isinstance(op, scf.ForOp)]
    assert any(PINGPONG_ATTRIBUTE in loop.attributes for loop in loops)


@pytest.mark.parametrize(
    "kernel,keys,planned,ratio",
    [
        ("attention", 512, False, "0.95"),
        ("attention", 1024, True, "1.05"),
        ("attention_causal", 1024, False, "0.92"),
        ("attention_causal", 2048, True, "1.02"),
        ("attention_causal", 4096, True, "1.09"),
    ],
)
def test_the_key_tiles_a_block_walks_decide_the_producer(kernel, keys, planned, ratio):
    """A 128-row block with a producer holds its SM alone and waits for its first copies and
    last stores unhidden: over few key tiles 64-row blocks two to an SM are faster
    (wgmma_model.producer_ratio; measured on the H100: causal 1024 keys 0.95-0.97, 2048
    1.03; full 512 keys 1.00, 1024 1.05-1.07). A causal block walks the tiles up to its
    diagonal (mask_walk: a triangle)."""
    from tilec.dialects.builtin import PRODUCER_ATTRIBUTE

    func, remarks = _compiled(128, kernel=kernel, keys=keys, copies="sm_90a")
    assert (PRODUCER_ATTRIBUTE in func.attributes) == planned
    tiles = -(-keys // 128)
    said = [r for r in remarks if f"over {tiles} key tiles of 128" in r]
    assert said and ratio in said[0], remarks
    assert ("query block i walking i + 1" in said[0]) == (kernel == "attention_causal")


def test_a_window_of_runtime_width_keeps_the_producer_and_says_why():
    """The window's width W is a kernel argument: how many key tiles a block walks is unknown
    at compile time, so the model keeps the producer and names the option for short windows
    (at 1024 of 4096 keys it loses 8%, docs/benchmarks.md)."""
    from tilec.dialects.builtin import PRODUCER_ATTRIBUTE

    program = tilec.compile(
        os.path.join(ROOT, "examples", "attention_window.tile"),
        pipeline='assume{all="aligned,unit,divisible"},'
        + tilec.compiler.build_pipeline(
            options={
                "tiling": {
                    "extents": "B=4,H=16,S=4096,T=4096,D=128",
                    "exact": "D",
                    "arch": "sm_90a",
                },
                "pipeline": {"arch": "sm_90a"},
            }
        ),
    )
    remarks = [r.message for stage in program.stages for r in stage.remarks]
    assert PRODUCER_ATTRIBUTE in program.module.lookup("attention_window").attributes
    assert any("window whose width is a runtime value" in r for r in remarks), remarks


def test_d64_and_pins_keep_blocks_of_one_warpgroup():
    """At d64 the softmax bounds the loop (0.0625 clocks a score for the dots, 0.102 for it):
    the larger block would save nothing; option producer = 0 says the same at d128."""
    from tilec.dialects.builtin import PRODUCER_ATTRIBUTE
    from tilec.dialects.warp_specialize import WarpSpecializeOp

    for func, _remarks in (
        _compiled(64, copies="sm_90a"),
        _compiled(128, producer=0, copies="sm_90a"),
    ):
        assert PRODUCER_ATTRIBUTE not in func.attributes
        assert func.attributes["tilec.num_warps"].value == 4
        assert not [op for op in func.walk() if isinstance(op, WarpSpecializeOp)]
    _, remarks = _compiled(64)
    assert any(
        r.startswith("not tiled for a producer warpgroup: per score the dots take 0.062")
        and "so the softmax bounds the loop" in r
        for r in remarks
    ), remarks


def test_a_grid_of_fewer_128_row_blocks_than_sms_keeps_64_row_blocks():
    """B1 H8: 256 blocks of 64 query rows fill the 132 SMs, 128 blocks of 128 rows would not;
    tiling prefers the fuller grid, and a single warpgroup a block gets no producer."""
    from tilec.dialects.builtin import PRODUCER_ATTRIBUTE

    func, remarks = _compiled(128, heads="B=1,H=8,M=2048", copies="sm_90a")
    assert func.attributes["tilec.num_warps"].value == 4
    assert PRODUCER_ATTRIBUTE not in func.attributes
    assert any("a single warpgroup a block (its 256 blocks" in r for r in remarks), remarks


def test_the_tiles_every_mask_shows_run_without_the_masks():
    """mask-bounds splits the key loop at the first tile a mask hides part of: the first loop
    has no selects left, the second keeps the padding mask (and causal's)."""
    for kernel in ("attention", "attention_causal"):
        func, remarks = _compiled(128, kernel=kernel)
        shown, rest = _loops(func)
        assert not [op for op in shown.walk() if isinstance(op, T.SelectOp)], kernel
        assert [op for op in rest.walk() if isinstance(op, T.SelectOp)], kernel
        assert rest.inits == shown.results or list(rest.inits) == list(shown.results)
        assert any(r.startswith("the tiles before visible_end") for r in remarks), remarks


def test_square_transpose_does_not_fold_away():
    """A transpose of a square tile has its input's type and still transposes."""
    module = parse_module(
        """
        func @t(%x: !tile.tensor<4x4xf32>, %y: !tile.tensor<4x4xf32>) {
          %c0 = arith.constant 0 : index
          %a = tile.load %x[%c0, %c0] : !tile.tensor<4x4xf32> -> tile<4x4xf32>
          %b = tile.transpose %a perm [1, 0] : tile<4x4xf32> -> tile<4x4xf32>
          tile.store %y[%c0, %c0], %b : !tile.tensor<4x4xf32>, tile<4x4xf32>
          return
        }
        """
    )
    for p in parse_pipeline("canonicalize"):
        p.run(module, PassContext())
    ops = [op for op in module.walk() if isinstance(op, T.TransposeOp)]
    assert len(ops) == 1 and isinstance(ops[0].result.type, TileType)


def test_causal_loop_stops_at_the_diagonal_and_plain_attention_is_left_whole():
    func, remarks = _compiled(128, kernel="attention_causal")
    upper = _loops(func)[1].upper.owner
    assert isinstance(upper, arith.MinSIOp) and upper.lhs.name_hint != "visible_end", upper
    assert any(r.startswith("stops at min(upper, ts + ") for r in remarks), remarks
    plain, remarks = _compiled(128)
    assert not any(r.startswith("stops at") for r in remarks)
    assert _loops(plain)[1].upper.owner is None or not isinstance(
        _loops(plain)[1].upper.owner, arith.MinSIOp
    )


def test_disabled_mask_bounds_keeps_the_causal_loop_whole():
    program = tilec.compile(
        ATTENTION,
        kernels=["attention_causal"],
        pipeline="canonicalize,cse,tiling,canonicalize,mask-bounds{enable=false}",
    )
    loops = [
        op for op in program.module.lookup("attention_causal").walk() if isinstance(op, scf.ForOp)
    ]
    assert len(loops) == 1 and not isinstance(loops[0].upper.owner, arith.MinSIOp)


def test_explain_says_where_the_causal_loop_stops():
    program = tilec.compile(ATTENTION, kernels=["attention_causal", "attention"], target="llvm")
    text = program.explain(ptxas=False)
    causal, plain = text.split("kernel attention ")[0], text.split("kernel attention ")[1]
    assert "masks       the tiles before visible_end" in causal
    assert "- stops at min(upper, ts + " in causal
    assert "stops at" not in plain and "the tiles before visible_end" in plain


def test_query_tiles_are_launched_first():
    """k and v do not depend on the query tile: M becomes grid axis 0 (x), so the blocks that
    run together share one head's keys and values in L2; program ids follow the new order."""
    func, remarks = _compiled(128)
    grid = [str(dim) for dim, _ in func.attributes["tilec.grid"].value]
    assert grid == ["M", "B", "H"]
    assert any(r.startswith("block order: M first (grid axis 0, x)") for r in remarks)
    axes = {op.axis for op in func.walk() if isinstance(op, T.ProgramIdOp)}
    assert axes <= {0, 1, 2}
