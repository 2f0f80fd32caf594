"""The wgmma path of the compiler (sm_90a), checked on the CPU against a model of the hardware.

`tilec.benchmarks.wgmma_probe` holds the model (which shared address a descriptor's canonical
layout reads for each element, from the PTX ISA) and was checked on the H200. Here the
compiler's own pieces must agree with it: the `#shared` layouts smem-placement gives wgmma
operands (`swizzled_offset`, which the copies write by), the descriptors
`lower_wgmma_dot` builds, and the register order of the accumulator against its `#blocked`
equivalent (`as_blocked`, which every other op reads by).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.benchmarks.wgmma_probe import descriptor, k_major_address, mn_major_address
from tilec.dialects.tile import MmaLayout, SharedLayout
from tilec.ir.types import TileType, f16, i8
from tilec.lowering.layouts import (
    ThreadMap,
    as_blocked,
    layout_error,
    slice_layout,
    wgmma_accumulator_layout,
)
from tilec.lowering.shared_memory import stored_row, swizzled_offset
from tilec.lowering.wgmma import SWIZZLE_ATOM, wgmma_operand_walk, wgmma_step_offset
from tilec.passes.smem_placement import wgmma_swizzle_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# What the jit records for contiguous, aligned tensors: wgmma needs unit last strides.
CONTIGUOUS = f'assume{{all="aligned,unit,divisible"}},{tilec.compiler.DEFAULT_PIPELINE}'
BM, BN, BK, WARPS = 128, 128, 64, 8


def contiguous_matmul(pipeline: str = CONTIGUOUS):
    """examples/matmul.tile's kernel for sm_90a, as the jit compiles it for contiguous tensors
    (through `pipeline`)."""
    return tilec.compile(
        str(EXAMPLES / "matmul.tile"),
        kernels=["matmul"],
        pipeline=pipeline,
        target="ptx",
        arch="sm_90a",
    )


def test_operand_layouts_are_what_the_descriptors_read():
    a_layout, _ = wgmma_swizzle_for(TileType((BM, BK), f16), 0)
    b_layout, _ = wgmma_swizzle_for(TileType((BK, BN), f16), 1)
    assert a_layout == SharedLayout(8, 1, 8, (1, 0), interleave=2)
    assert b_layout == SharedLayout(8, 1, 8, (1, 0), col_block=64)
    a_base, b_base = 0, 3 * BM * BK * 2  # two buffers, 1 KiB aligned like the lowering's
    for kk in range(BK // 16):
        for g in range(BM // 64):
            desc = descriptor(a_base + g * 64 * 128 + kk * 32, 16, SWIZZLE_ATOM)
            for s in range(64):  # the row of the warpgroup's 64 as the hardware counts it
                w = 4 * g + s // 16  # its warp, and which 8-row half
                logical = 8 * w + 8 * WARPS * ((s // 8) % 2) + s % 8
                for kc in range(16):
                    written = a_base + 2 * swizzled_offset(
                        a_layout, (BM, BK), logical, 16 * kk + kc
                    )
                    assert k_major_address(desc, s, kc) == written, (g, s, kk, kc)
        desc = descriptor(b_base + kk * 16 * 128, BK * 128, SWIZZLE_ATOM)
        for kc in range(16):
            for n in range(BN):
                written = b_base + 2 * swizzled_offset(b_layout, (BK, BN), 16 * kk + kc, n)
                assert mn_major_address(desc, kc, n) == written, (kk, kc, n)


def _hardware_row_to_logical(g: int, s: int) -> int:
    """The accumulator row (as `as_blocked` numbers it) that row `s` of warpgroup `g`'s 64
    is, as the hardware counts them."""
    w = 4 * g + s // 16  # its warp, and which 8-row half
    return 8 * w + 8 * WARPS * ((s // 8) % 2) + s % 8


def _descriptor_for(
    base: int, index: int, transposed: bool, g: int, kk: int, depth: int = BK, rows: int = 64
) -> int:
    major, lbo, block, group_bytes = wgmma_operand_walk(index, transposed, depth, rows)
    step = wgmma_step_offset(major, block, kk)
    return descriptor(base + g * group_bytes + step, lbo, SWIZZLE_ATOM)


def test_transposed_b_is_what_the_descriptors_read():
    """`b.T` (B stored [N, K], K-major, tnspB = 0): every element the hardware reads for each
    k-step is the element the copies wrote there."""
    b_layout, _ = wgmma_swizzle_for(TileType((BN, BK), f16), 1, transposed=True)
    assert b_layout == SharedLayout(8, 1, 8, (1, 0))
    b_base = 3 * BM * BK * 2
    for kk in range(BK // 16):
        desc = _descriptor_for(b_base, 1, True, 0, kk)
        for n in range(BN):
            for kc in range(16):
                written = b_base + 2 * swizzled_offset(b_layout, (BN, BK), n, 16 * kk + kc)
                assert k_major_address(desc, n, kc) == written, (kk, n, kc)


@pytest.mark.parametrize("rows, depth", [(128, 128), (64, 128), (128, 256)])
def test_k_major_b_wider_than_an_atom_is_walked_block_by_block(rows, depth):
    """Attention's `k[tn, :].T` at head dimension 128 (B stored [N, K] with K = 128): rows of
    256 bytes are stored as blocks of 64 columns, each holding every row (`col_block`), and
    the descriptor of k-step kk starts in block kk // 4 -- every element the hardware reads is
    the element the copies wrote."""
    b_layout, why = wgmma_swizzle_for(TileType((rows, depth), f16), 1, transposed=True)
    assert b_layout == SharedLayout(8, 1, 8, (1, 0), col_block=64) and "blocks of 64" in why
    b_base = 3 * SWIZZLE_ATOM
    for kk in range(depth // 16):
        desc = _descriptor_for(b_base, 1, True, 0, kk, depth, rows)
        for n in range(rows):
            for kc in range(16):
                written = b_base + 2 * swizzled_offset(b_layout, (rows, depth), n, 16 * kk + kc)
                assert k_major_address(desc, n, kc) == written, (kk, n, kc)


def test_transposed_a_is_read_m_major_by_its_descriptor():
    """`a.T` (A stored [K, M]) is stored as the TMA unit writes it (blocks of 64 columns in the
    128-byte swizzle) and read by wgmma's descriptor M-major (tnspA = 1), the accumulator
    keeping wgmma's own row order (`natural_rows`); no ldmatrix, both operands by TMA, and with
    no register A a wgmma group may stay in flight over the next step."""
    a_layout, why = wgmma_swizzle_for(TileType((BK, BM), f16), 0, True, natural_rows=True)
    assert a_layout == SharedLayout(8, 1, 8, (1, 0), col_block=64) and "M-major" in why
    with pytest.raises(ValueError, match="multiple of 64 columns"):
        wgmma_swizzle_for(TileType((BK, 32), f16), 0, True, natural_rows=True)
    assert wgmma_operand_walk(0, True, BK) == (False, BK * 128, 0, BK * 128)
    result = tilec.compile(
        str(EXAMPLES / "gemm_layouts.tile"),
        kernels=["gemm_tn"],
        pipeline=CONTIGUOUS,
        target="ptx",
        arch="sm_90a",
    )
    ptx = result.ptx
    assert "ldmatrix" not in ptx
    issue = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n256k16\.f32\.f16\.f16 [^;]*;", ptx)
    assert len(issue) == BK // 16
    assert all(re.search(r"%rd\d+, %rd\d+, p, 1, 1, 1, 1;$", i) for i in issue)  # tnspA = 1
    copies = ptx.count("cp.async.bulk.tensor.2d")  # per stage A's 2 boxes of 64x64, B's 4
    assert copies and copies % (2 + 256 // 64) == 0 and "cp.async.cg" not in ptx
    assert "wgmma.wait_group.sync.aligned 1;" in ptx  # a group in flight over the next step
    assert any("natural_rows" in r.message for r in result.remarks)


def test_m_major_a_is_what_the_descriptors_read():
    """For each k-step and warpgroup, every element of A stored [K, M] the hardware reads as
    row s of the warpgroup's 64 (M-major canonical layout) is column 64 g + s of the tile the
    copies wrote: the rows in the tensor's order, which the natural-rows accumulator keeps."""
    a_layout, _ = wgmma_swizzle_for(TileType((BK, BM), f16), 0, True, natural_rows=True)
    a_base = 2 * SWIZZLE_ATOM
    for g in range(BM // 64):
        for kk in range(BK // 16):
            desc = _descriptor_for(a_base, 0, True, g, kk)
            for s in range(64):
                for kc in range(16):
                    written = a_base + 2 * swizzled_offset(
                        a_layout, (BK, BM), 16 * kk + kc, 64 * g + s
                    )
                    assert mn_major_address(desc, kc, s) == written, (g, kk, s, kc)


def test_natural_rows_accumulator_registers_are_the_hardwares():
    """d[4 j + 2 i + c] of warp w, lane l is row 16 w + 8 i + l / 4, column 8 j + 2 (l % 4) + c
    of a natural-rows accumulator's `ThreadMap` (the slot `lower_wgmma_dot` reads it from); it
    has no `#blocked` twin, and its row slices keep it as their parent."""
    layout = wgmma_accumulator_layout(WARPS, BN, natural_rows=True)
    assert layout == MmaLayout(3, (8, 1), (64, 128, 16), natural_rows=True)
    assert "natural_rows = true" in str(layout)
    with pytest.raises(ValueError, match="no #blocked twin"):
        as_blocked(layout)
    assert slice_layout(layout, 1).parent == layout
    for dim, shape in ((1, (BM,)), (0, (BN,))):  # row and column slices hold a whole accumulator
        assert layout_error(slice_layout(layout, dim), shape, WARPS) is None
    assert layout_error(slice_layout(layout, 1), (BM // 2,), WARPS) is not None
    for shape in ((BM, 1), (1, BN)):  # a broadcast's operand in the accumulator's layout
        assert layout_error(layout, shape, WARPS) is None
    column = ThreadMap(layout, (BM, 1)).indices()[0]
    assert all(16 * (t // 32) + (t % 32) // 4 in column[t] for t in range(WARPS * 32))
    m = ThreadMap(layout, (BM, BN))
    for hardware_row, column, row, col in _wgmma_registers(m):
        assert (row, col) == (hardware_row, column)
    assert sorted(m.table().ravel().tolist()) == list(range(BM * BN))


def test_an_epilogue_reads_a_natural_rows_accumulator_where_it_lies():
    """A row scale and a column bias broadcast onto a natural-rows accumulator, and its row
    maxima and column sums, stay in its registers (slices of it, and broadcasts whose operands take its layout
    at a unit dimension): the one conversion left is the store's, as with the `#blocked` twin."""
    from tilec.compiler import target_pipeline

    result = tilec.compile(
        str(EXAMPLES.parent / "tests" / "kernels" / "tn_epilogue.tile"),
        kernels=["tn_epilogue"],
        pipeline=target_pipeline(CONTIGUOUS, "sm_90a").replace(
            "tiling{", 'tiling{extents="M=4096,N=2048,K=1024" '
        ),
        target="tir",
        arch="sm_90a",
    )
    text = result.tir if hasattr(result, "tir") else str(result)
    assert "natural_rows = true" in text
    assert text.count("tile.convert_layout") == 1


def _wgmma_registers(m: ThreadMap):
    """For every accumulator register d[4 j + 2 i + c] of every warp w and lane l: the row
    (16 w + 8 i + l / 4) and column (8 j + 2 (l % 4) + c) the hardware puts in it, and the row
    and column `m` gives the slot `lower_wgmma_dot` reads it from."""
    rows, cols = m.indices()
    per_row = BN // 4
    for thread in range(WARPS * 32):
        w, lane = divmod(thread, 32)
        for j in range(BN // 8):
            for i in range(2):
                for c in range(2):
                    multi = m.slot_multi_index(i * per_row + 2 * j + c)
                    yield (
                        16 * w + 8 * i + lane // 4,
                        8 * j + 2 * (lane % 4) + c,
                        rows[thread, multi[0]],
                        cols[thread, multi[1]],
                    )


def _offsets_on_the_host(layout: SharedLayout, slot: tuple[int, int], limit: int, constants):
    """`_SwizzledAddresses` over a slot of f16 `slot` in `layout`, compiled for this CPU: for
    each (row_c, col_c) of `constants`, a function of the thread's (row_t, col_t) giving the
    byte offset it computes (per-thread part plus constant)."""
    import contextlib
    import ctypes
    from types import SimpleNamespace

    import llvmlite.binding as llvm
    from llvmlite import ir

    from tilec.ir.types import SharedType
    from tilec.lowering.shared_memory import SharedBuffer
    from tilec.lowering.tensorcore import _SwizzledAddresses

    with contextlib.suppress(RuntimeError):  # llvmlite >= 0.44 initializes itself
        llvm.initialize()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module(name="swizzled_addresses_on_the_host")
    i32 = ir.IntType(32)
    buffer = SharedBuffer(0, SharedType((2, *slot), f16, layout))
    for n, (row_c, col_c) in enumerate(constants):
        fn = ir.Function(module, ir.FunctionType(i32, [i32, i32]), f"offset{n}")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        where = _SwizzledAddresses(SimpleNamespace(prologue=b, b=b), buffer, *fn.args, limit)
        part, constant = where.offset(row_c, col_c)
        b.ret(b.add(part, ir.Constant(i32, constant)))
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    signature = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)
    functions = [
        signature(engine.get_function_address(f"offset{n}")) for n in range(len(constants))
    ]
    return engine, functions


@pytest.mark.parametrize("warps", [4, 8])
@pytest.mark.parametrize("col_block", [0, 64])
def test_ldmatrix_trans_addresses_of_a_stored_k_by_m(warps, col_block):
    """The addresses `_fragments` gives `ldmatrix.trans` for an A stored [K, M] (lane rows k
    of 0..15, thread columns m of 8 w + 8 W j below 16 W, k-steps of 16 rows and M repeats of
    16 W columns as constants) are the elements' offsets in the slot's layout -- in blocks of
    64 columns as the TMA unit writes them, and in the plain ldmatrix swizzle."""
    slot = (BK, 16 * warps * 2)
    layout = SharedLayout(8, 1, 8, (1, 0), col_block=col_block)
    constants = [(16 * kk, 16 * warps * mi) for kk in range(BK // 16) for mi in range(2)]
    constants.append((16, 8))  # not a whole block: the general path
    engine, functions = _offsets_on_the_host(layout, slot, 16 * warps, constants)
    for (row_c, col_c), fn in zip(constants, functions):
        for row_t in range(16):
            for col_t in range(0, 16 * warps, 8):
                expected = 2 * swizzled_offset(layout, slot, row_t + row_c, col_t + col_c)
                assert fn(row_t, col_t) == expected, (row_c, col_c, row_t, col_t)
    del engine


def test_operand_walks_of_the_plain_layouts_are_the_probes():
    """The walk of `a @ b`'s operands is the one the H200 probe checked."""
    assert wgmma_operand_walk(0, False, BK, BM) == (True, 16, 0, 64 * 128)
    assert wgmma_operand_walk(1, False, BK, BN) == (False, BK * 128, 0, 0)
    assert [wgmma_step_offset(True, 0, kk) for kk in range(4)] == [0, 32, 64, 96]
    assert [wgmma_step_offset(False, 0, kk) for kk in range(4)] == [0, 2048, 4096, 6144]


def test_stored_rows_are_a_permutation_of_8_row_groups():
    layout = SharedLayout(8, 1, 8, (1, 0), interleave=2)
    rows = [stored_row(layout, BM, r) for r in range(BM)]
    assert sorted(rows) == list(range(BM))
    assert all(rows[r] % 8 == r % 8 for r in range(BM))  # the swizzle phase is kept


def test_accumulator_registers_follow_the_blocked_equivalent():
    """d[4 j + 2 i + c] of warp w, lane l is hardware row 16 w + 8 i + l / 4, column
    8 j + 2 (l % 4) + c; through the A buffer's row order that is the logical row the
    `#blocked` equivalent gives the slot `lower_wgmma_dot` reads the register from."""
    layout = wgmma_accumulator_layout(WARPS, BN)
    assert layout == MmaLayout(3, (8, 1), (64, 128, 16))
    m = ThreadMap(as_blocked(layout), (BM, BN))
    a_layout = SharedLayout(8, 1, 8, (1, 0), interleave=2)
    logical_of_stored = {stored_row(a_layout, BM, r): r for r in range(BM)}
    for hardware_row, column, row, col in _wgmma_registers(m):
        assert (row, col) == (logical_of_stored[hardware_row], column)


def test_matmul_for_sm_90a_takes_wgmma():
    compiled = contiguous_matmul()
    ptx = compiled.ptx
    # The SM model's tile (passes/wgmma_model.py): 128x256 reaches the tensor cores' rate.
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16") == BK // 16
    assert "wgmma.fence.sync.aligned" in ptx and "wgmma.wait_group.sync.aligned 0" in ptx
    assert "fence.proxy.async.shared::cta" in ptx
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    assert re.search(r"\.extern \.shared \.align 1024", ptx)
    remarks = [r.message for r in compiled.remarks if r.pass_name == "tiling"]
    assert any("wgmma m64n256k16 (sm_90a" in r and "1 block per SM" in r for r in remarks)
    assert any("1.00 of the tensor cores" in r for r in remarks)
    assert "tilec.min_blocks_per_sm = 1" in compiled.tir and ".minnctapersm 1" in ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_other_architectures_keep_mma_sync(arch):
    ptx = tilec.compile(
        str(EXAMPLES / "matmul.tile"), kernels=["matmul"], target="ptx", arch=arch
    ).ptx
    assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k16" in ptx


def test_wgmma_can_be_turned_off_and_pins_keep_mma_sync():
    off = tilec.compile(
        str(EXAMPLES / "matmul.tile"),
        kernels=["matmul"],
        pipeline=tilec.compiler.build_pipeline(options={"tiling": {"wgmma": False}}),
        target="ptx",
        arch="sm_90a",
    ).ptx
    assert "wgmma" not in off
    pinned = tilec.compile(
        str(EXAMPLES / "matmul.tile"), kernels=["matmul_pinned"], target="ptx", arch="sm_90a"
    ).ptx
    assert "wgmma" not in pinned  # its tiles are pinned to 128x128x32 on 8 warps


MATMUL = (EXAMPLES / "matmul.tile").read_text().split("\n\n\n")[0]


@pytest.mark.parametrize(
    ("pins", "instruction", "steps", "warps", "blocks"),
    [
        ('tile={"K": 128}', "m64n256k16", 8, 8, 1),  # 192 words a thread
        ('tile={"N": 128}', "m64n128k16", 4, 16, 1),  # BM = 256: B read by 4 warpgroups
        ('tile={"N": 64}', "m64n64k16", 4, 16, 1),  # BM = 256 is the model's best with it
        ("warps=4", "m64n256k16", 4, 4, 2),  # BM = 64: one warpgroup
        ('tile={"M": 256}', "m64n128k16", 4, 16, 1),  # 512 threads of 128
    ],
)
def test_pins_move_one_decision_of_the_wgmma_tiling(
    tmp_path, pins, instruction, steps, warps, blocks
):
    """A pinned size or warp count the wgmma lowering takes keeps the wgmma tiling (the
    others are what the SM model prefers with the pin), rather than sending the kernel to
    mma.sync: the tuner's neighbours of the heuristic's choice, and a user's pin, are wgmma
    tilings."""
    path = tmp_path / "matmul.tile"
    path.write_text(MATMUL.replace("def matmul", f"@kernel({pins})\ndef matmul"))
    compiled = tilec.compile(
        str(path), kernels=["matmul"], pipeline=CONTIGUOUS, target="ptx", arch="sm_90a"
    )
    ptx = compiled.ptx
    assert ptx.count(f"wgmma.mma_async.sync.aligned.{instruction}.f32.f16.f16") == steps
    assert "mma.sync" not in ptx
    assert f"tilec.num_warps = {warps}" in compiled.tir
    assert f"tilec.min_blocks_per_sm = {blocks}" in compiled.tir


def test_bank_layout_model_is_a_bijection_of_each_slot():
    for layout, shape in (
        (SharedLayout(8, 1, 8, (1, 0), interleave=2), (BM, BK)),
        (SharedLayout(8, 1, 8, (1, 0), col_block=64), (BK, BN)),
    ):
        seen = np.zeros(shape[0] * shape[1], dtype=bool)
        for r in range(shape[0]):
            for c in range(shape[1]):
                seen[swizzled_offset(layout, shape, r, c)] = True
        assert seen.all()


def test_wgmma_loop_overlaps_the_copies_with_the_tensor_cores():
    """The pipeline issues a wgmma loop's copies after the dot, and leaves one group in
    flight (`tilec.dots_in_flight`): each iteration's asm waits for the previous iteration's
    group after issuing its own, the barrier does not wait, and the loop's exit waits for the
    last; the race check of the interpreter accepts the order."""
    compiled = contiguous_matmul()
    loop = next(op for op in compiled.module.walk() if op.name == "scf.for")
    assert loop.attributes["tilec.dots_in_flight"].value == 1
    names = [op.name for op in loop.body.block.ops]
    copy = "tile.tma_copy"  # contiguous operands: the TMA unit copies them (pipeline.tma)
    assert names.index("tile.dot") < names.index(copy)
    ptx = compiled.ptx
    issue = ptx[ptx.index("wgmma.fence") : ptx.index("wgmma.commit_group")]
    assert "wgmma.wait_group" not in issue  # the dot only issues...
    after = ptx[ptx.index("wgmma.commit_group") :]
    assert after.split("\n", 2)[1].strip() == "wgmma.wait_group.sync.aligned 1;"  # ...then waits
    assert ptx.count("wgmma.wait_group.sync.aligned 0") == 1  # at the loop's exit
    tir = compiled.tir
    top = tir[tir.index("scf.for") :]
    assert top.index("tile.barrier") < top.index("tile.dot") < top.index(copy)


def test_a_loop_without_dots_in_flight_waits_before_its_barrier():
    """With `pipeline{dots_in_flight=0}` the barrier at the top of each iteration waits for
    the last iteration's group (the slot it read is refilled after the barrier)."""
    ptx = contiguous_matmul(CONTIGUOUS.replace("pipeline,", "pipeline{dots_in_flight=0},")).ptx
    assert "wgmma.wait_group.sync.aligned 1" not in ptx
    assert ptx.count("wgmma.wait_group.sync.aligned 0") == 2


def test_operands_of_unknown_strides_keep_mma_sync():
    """Without unit last strides the operands are copied element by element: the wgmma
    tiling's 128x128x64 tiles would starve, so tiling keeps the smaller mma.sync ones."""
    ptx = tilec.compile(
        str(EXAMPLES / "matmul.tile"), kernels=["matmul"], target="ptx", arch="sm_90a"
    ).ptx
    assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k16" in ptx


# -- 8-bit operands (i8, f8e4m3, f8e5m2): wgmma k32, both operands K-major ---------------------


@pytest.mark.parametrize("depth", [128, 256])
def test_8_bit_operands_are_what_the_descriptors_read(depth):
    """A [128, K] (interleaved rows) and B stored [N, K] of bytes: a k-step of k32 is 32 bytes
    of each row, as k16 of 16-bit elements is, so the hardware's K-major canonical layout of
    16-byte core-matrix rows reads byte k of row r where the copies wrote it -- the f16 model
    at element k // 2, plus the byte within it (the swizzle moves whole 16-byte chunks)."""
    for index, rows in ((0, BM), (1, BN)):
        plane = (rows, depth)
        layout, _ = wgmma_swizzle_for(TileType(plane, i8), index, transposed=index == 1)
        assert layout.vec == 16 and layout.col_block == (128 if depth > 128 else 0)
        base = 2 * SWIZZLE_ATOM
        for kk in range(depth // 32):
            for g in range(rows // 64 if index == 0 else 1):
                major, lbo, block, group_bytes = wgmma_operand_walk(
                    index, index == 1, depth, rows, element_size=1
                )
                assert major
                step = wgmma_step_offset(major, block, kk)
                desc = descriptor(base + g * group_bytes + step, lbo, SWIZZLE_ATOM)
                for s in range(64 if index == 0 else rows):
                    row = _hardware_row_to_logical(g, s) if index == 0 else s
                    for kc in range(32):
                        written = base + swizzled_offset(layout, plane, row, 32 * kk + kc)
                        read = k_major_address(desc, s, kc // 2) + kc % 2
                        assert read == written, (index, g, s, kk, kc)


FP8 = EXAMPLES / "fp8_gemm.tile"
INT8 = EXAMPLES / "int8_gemm.tile"


@pytest.mark.parametrize(
    "path, kernel, instruction",
    [
        (FP8, "fp8_gemm", "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"),
        (FP8, "fp8_gemm_e5m2", "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2"),
        (INT8, "int8_gemm_nt", "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8"),
    ],
)
def test_8_bit_dots_with_both_operands_k_major_take_wgmma_k32(path, kernel, instruction):
    compiled = tilec.compile(
        str(path), kernels=[kernel], pipeline=CONTIGUOUS, target="ptx", arch="sm_90a"
    )
    ptx = compiled.ptx
    # BK = 128 bytes of each row: 4 k-steps of 32, one instruction each
    assert ptx.count(instruction) == 4
    assert "mma.sync" not in ptx and "cp.async.bulk.tensor" in ptx
    remarks = [r.message for r in compiled.remarks if r.pass_name == "tiling"]
    assert any("BK=128" in r and "wgmma m64n256k32 (sm_90a" in r for r in remarks), remarks
    assert "#mma<version = 3, warps_per_cta = [8, 1], instr_shape = [64, 256, 32]>" in compiled.tir


def test_an_int8_b_stored_k_by_n_keeps_mma_sync_and_says_why():
    compiled = tilec.compile(
        str(INT8), kernels=["int8_gemm"], pipeline=CONTIGUOUS, target="ptx", arch="sm_90a"
    )
    assert "wgmma" not in compiled.ptx and "mma.sync.aligned.m16n8k32" in compiled.ptx
    said = [r.message for r in compiled.remarks if r.pass_name == "tiling"]
    assert any(
        "not wgmma: wgmma reads 8-bit operands K-major only, and B is stored [K, N]" in r
        for r in said
    ), said


FP8_NN = """
def fp8_nn(a: f8e4m3[M, K], b: f8e4m3[K, N], c: f32[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], f32)
        for tk in tiles(K):
            acc += a[tm, tk] @ b[tk, tn]
        c[tm, tn] = acc
"""


def test_an_f8_dot_wgmma_cannot_take_is_widened_to_f16_exactly():
    """B stored [K, N]: wgmma has no transposed 8-bit form, so both operands are converted to
    f16 where the dot reads them (every f8 value is an f16) and the dot runs as an f16 one."""
    compiled = tilec.compile(FP8_NN, pipeline=CONTIGUOUS, target="ptx", arch="sm_90a")
    assert "m64n256k16.f32.f16.f16" in compiled.ptx and "e4m3.e4m3" not in compiled.ptx
    said = [r.message for r in compiled.remarks if r.pass_name == "tiling"]
    assert any(
        r.startswith("f8e4m3 operands widened to f16 (exact)") and "B is stored [K, N]" in r
        for r in said
    ), said
