"""TMA copies on the CPU: the boxes that fill a wgmma operand's slot put every element where
the cp.async path puts it (the unit's 128-byte swizzle, modelled from the PTX ISA, against
`swizzled_offset`); layouts the unit cannot write are refused with a reason; the kernel ABI
carries one tensor-map parameter per (argument, box), through JSON; the launcher packs each
map's 128 bytes, 64-byte aligned, after every other parameter; the lowering's PTX."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import tilec
from tilec.compiler import DEFAULT_PIPELINE
from tilec.dialects.tile import SharedLayout
from tilec.ir.types import SharedType, bf16, f16, f32
from tilec.lowering import compile_to_ptx, module_abi
from tilec.lowering.abi import KernelABI, Specialization
from tilec.lowering.shared_memory import swizzled_offset
from tilec.lowering.tma import box_plan, folded_plan
from tilec.runtime import DeviceTensor, Launcher

EXAMPLES = "examples"


def _tma_byte(row: int, col: int, element: int) -> int:
    """Where the TMA unit's 128-byte swizzle puts element (row, col) of a box whose rows are
    128 bytes, relative to its 1024-byte aligned start: the 16-byte chunk index (address bits
    4-6) XOR the row within the 1 KiB atom (bits 7-9)."""
    linear = row * 128 + col * element
    return linear ^ (((linear >> 7) & 7) << 4)


def _layout(interleave: int = 1, col_block: int = 0, rank: int = 2) -> SharedLayout:
    return SharedLayout(8, 1, 8, tuple(range(rank - 1, -1, -1)), interleave, col_block)


CASES = [
    ("A [M, K] 128x64, interleaved", (4, 128, 64), _layout(2), f16),
    ("A [M, K] 64x64, interleaved", (3, 64, 64), _layout(2), bf16),
    ("A 64x128 in blocks of 64, interleaved", (1, 64, 128), _layout(2, 64), f16),
    ("B [K, N] 64x256 in blocks of 64", (4, 64, 256), _layout(1, 64), f16),
    ("B [N, K] 256x64", (4, 256, 64), _layout(), f16),
    ("B [N, K] of a batch 1x1x64x128", (3, 1, 1, 64, 128), _layout(1, 64, 4), f16),
]


@pytest.mark.parametrize("what, shape, layout, element", CASES, ids=[c[0] for c in CASES])
def test_the_boxes_put_every_element_where_the_copies_do(what, shape, layout, element):
    buffer = SharedType(shape, element, layout)
    plan = box_plan(buffer)
    assert not isinstance(plan, str), plan
    box, boxes = plan
    slot = shape[1:]
    size = element.width // 8
    rows, cols = slot[-2], slot[-1]
    assert box[-1] * size == 128 and all(b <= 256 for b in box)
    seen = {}
    for piece in boxes:
        assert piece.smem_offset % 1024 == 0
        r0, c0 = piece.start[-2], piece.start[-1]
        for r in range(box[-2]):
            for c in range(box[-1]):
                at = piece.smem_offset + _tma_byte(r, c, size)
                assert (r0 + r, c0 + c) not in seen
                seen[(r0 + r, c0 + c)] = at
    assert len(seen) == rows * cols  # every element once
    for (r, c), at in seen.items():
        assert at == swizzled_offset(layout, slot, r, c) * size, (r, c)


@pytest.mark.parametrize("rows, cols", [(128, 64), (64, 64), (64, 128), (256, 64)])
def test_a_folded_box_puts_an_interleaved_tile_where_the_copies_do(rows, cols):
    """The 5-D box (1, G/2, 2, 8, 64) of a whole tile: the unit writes it innermost dimension
    first, so element (q, h, r, c) -- tile row 8 (G/2) h + 8 q + r -- lands on row
    (2 q + h) 8 + r of its column block, swizzled; the copies put that row there too."""
    layout = _layout(2, 64 if cols > 64 else 0)
    buffer = SharedType((2, rows, cols), f16, layout)
    box, pieces = folded_plan(buffer)
    half = rows // 16
    assert box == (1, half, 2, 8, 64) and len(pieces) == cols // 64
    for piece in pieces:
        for q in range(half):
            for h in range(2):
                for r in range(8):
                    for c in range(64):
                        smem_row = (2 * q + h) * 8 + r
                        at = piece.smem_offset + _tma_byte(smem_row, c, 2)
                        row, col = 8 * half * h + 8 * q + r, piece.start[1] + c
                        assert at == swizzled_offset(layout, (rows, cols), row, col) * 2
    plain = SharedType((2, rows, cols), f16, _layout(1, 64 if cols > 64 else 0))
    assert folded_plan(plain) is None


def test_layouts_the_unit_does_not_write_are_refused_with_a_reason():
    mma_sync = SharedType((4, 128, 32), f16, SharedLayout(8, 2, 4, (1, 0)))
    assert "not the 128-byte swizzle" in box_plan(mma_sync)
    assert "not a swizzled" in box_plan(SharedType((4, 128, 64), f16))
    wide = SharedType((4, 64, 128), f16, _layout())
    assert "not the swizzle's 128" in box_plan(wide)
    f32_rows = SharedType((2, 64, 64), f32, SharedLayout(4, 1, 8, (1, 0)))
    assert "256 bytes" in box_plan(f32_rows)


def _compiled(kernel: str, extents: str = "M=4096,N=4096,K=4096"):
    pipeline = DEFAULT_PIPELINE.replace("tiling,", f'tiling{{arch="sm_90a",extents="{extents}"}},')
    pipeline = pipeline.replace("pipeline,", 'pipeline{arch="sm_90a"},')
    pipeline = 'assume{all="aligned,unit,divisible"},' + pipeline
    return tilec.compile(f"{EXAMPLES}/gemm_layouts.tile", kernels=[kernel], pipeline=pipeline)


def test_the_abi_has_a_tensor_map_per_argument_and_box_through_json():
    abi = module_abi(_compiled("gemm_nt").module)["gemm_nt"]
    maps = [p for p in abi.parameters if p.kind == "tensormap"]
    assert [(p.name, p.argument, p.dtype, p.box, p.fold) for p in maps] == [
        ("a.tensormap.8x64", "a", "f16", (8, 64), 0),
        ("a.tensormap.1x8x2x8x64.fold128", "a", "f16", (1, 8, 2, 8, 64), 128),
        ("b.tensormap.256x64", "b", "f16", (256, 64), 0),
    ]
    assert abi.parameters[-3:] == tuple(maps)  # hidden, after every argument's
    again = KernelABI.from_json(abi.to_json())
    assert again == abi and again.parameters[-1].box == (256, 64)


def test_the_launcher_packs_each_map_after_the_other_parameters(monkeypatch):
    program = _compiled("gemm_nn")
    module = program.module
    spec = Specialization.from_json(
        {
            "aligned": ["a", "b", "c"],
            "unit": ["a.stride.1", "b.stride.1", "c.stride.1"],
            "divisible": [
                f"{t}.{k}.{i}"
                for t in "abc"
                for k in ("extent", "stride")
                for i in (0, 1)
                if not (k == "stride" and i == 1)
            ],
        }
    )
    ptx = compile_to_ptx(module, "sm_90a", {"gemm_nn": spec})
    assert ".param .align 64 .b8 gemm_nn_param_17[128]" in ptx
    assert "cp.async.bulk.tensor.2d" in ptx and "cp.async.cg" not in ptx
    assert "cp.async.bulk.tensor.5d" in ptx  # A's whole tiles
    launcher = Launcher(ptx, module_abi(module)["gemm_nn"], spec)
    calls = []

    def fake_encode(dtype, pointer, shape, strides, box, what, fold=0):
        calls.append((dtype, pointer, shape, strides, box, fold))
        return bytes([len(calls)]) * 128

    monkeypatch.setattr("tilec.runtime.tensormap.encode_tensormap", fake_encode)
    a = DeviceTensor(1 << 20, (512, 256), (256, 1), "f16", 0)
    b = DeviceTensor(1 << 21, (256, 1024), (1024, 1), "f16", 0)
    c = DeviceTensor(1 << 22, (512, 1024), (1024, 1), "f16", 0)
    values = launcher.checker.convert([a, b, c]).values
    packed = launcher.parameters(values)
    assert packed[-3:] == (b"\x01" * 128, b"\x02" * 128, b"\x03" * 128)
    assert calls == [
        ("f16", 1 << 20, (512, 256), (256, 1), (8, 64), 0),
        ("f16", 1 << 20, (512, 256), (256, 1), (1, 8, 2, 8, 64), 128),
        ("f16", 1 << 21, (256, 1024), (1024, 1), (64, 64), 0),
    ]
    launcher.parameters(values)
    assert len(calls) == 3  # encoded once per address, shape and strides
    layout = launcher._struct.format
    assert layout.endswith("128s128s128s")
    offset = struct.calcsize(layout[: layout.index("128s")])
    assert offset % 64 == 0


# -- translation validation of the TMA form ------------------------------------------------------

TMA_KERNELS = [
    ("gemm_layouts.tile", "gemm_nn", {"M": 208, "N": 320, "K": 80}),
    ("gemm_layouts.tile", "gemm_nt_bf16", {"M": 144, "N": 272, "K": 208}),
    # A stored [K, M] by TMA in column blocks, read M-major by wgmma's descriptor
    ("gemm_layouts.tile", "gemm_tn", {"M": 208, "N": 144, "K": 80}),
    ("bmm.tile", "bmm", {"Z": 2, "M": 96, "N": 160, "K": 48}),
    ("matmul_bias_gelu.tile", "matmul_bias_gelu", {"M": 176, "N": 256, "K": 96}),
    ("attention.tile", "attention", {"B": 1, "H": 2, "M": 80, "N": 112, "D": 64}),
    # 8-bit operands on wgmma k32: K tiles of 128, the last one partial
    ("fp8_gemm.tile", "fp8_gemm", {"M": 144, "N": 272, "K": 208}),
    ("fp8_gemm.tile", "fp8_gemm_e5m2", {"M": 80, "N": 48, "K": 400}),
    ("int8_gemm.tile", "int8_gemm_nt", {"M": 208, "N": 80, "K": 272}),
]


def _before_pipeline(
    example: str, kernel: str, extents: dict, pipeline_options: str = "", tiling_options: str = ""
):
    """sm_90a's pipeline for contiguous tensors of `extents` (with `pipeline_options` given to
    its pass `pipeline`, `tiling_options` -- ", name=value" -- to `tiling`), and `kernel` of
    `example` run through the passes before `pipeline`: (the passes, the module, their
    context)."""
    from tilec.compiler import target_pipeline
    from tilec.passmanager import PassContext, parse_pipeline

    text = ",".join(f"{d}={n}" for d, n in extents.items())
    pipeline = target_pipeline(
        DEFAULT_PIPELINE.replace("tiling,", f'tiling{{extents="{text}"{tiling_options}}},'),
        "sm_90a",
    ).replace("pipeline{", "pipeline{" + pipeline_options, 1)
    passes = parse_pipeline('assume{all="aligned,unit,divisible"},' + pipeline)
    module = tilec.compile(f"{EXAMPLES}/{example}", kernels=[kernel]).module
    context = PassContext()
    for p in passes[: [p.name for p in passes].index("pipeline")]:
        p.run(module, context)
    return passes, module, context


@pytest.mark.parametrize(
    "example, kernel, extents", TMA_KERNELS, ids=[f"{k}:{e}" for _, k, e in TMA_KERNELS]
)
def test_the_pipeline_with_the_tma_unit_computes_what_the_loop_did(example, kernel, extents):
    """sm_90a's pipeline on kernels nobody wrote it for, at extents that leave partial tiles
    along every tiled dimension (multiples of 16, as the specialization says): the TMA form's
    results equal, bit for bit, the loop's before pipelining and the cp.async form's, in the
    interpreter, whose race check follows every mbarrier phase."""
    from tests.validation import run_kernel
    from tilec.interp.runner import random_arguments
    from tilec.passmanager import parse_pipeline

    passes, module, context = _before_pipeline(example, kernel, extents)
    at = [p.name for p in passes].index("pipeline")
    before, plain = module.clone(), module.clone()
    passes[at].run(module, context)
    parse_pipeline('pipeline{arch="sm_90a" tma=0}')[0].run(plain, context)
    assert any(op.name == "tile.tma_copy" for op in module.walk())
    assert not any(op.name == "tile.tma_copy" for op in plain.walk())
    func = module.lookup(kernel)
    inputs = random_arguments(func, extents, seed=7)
    got, sizes = run_kernel(module, kernel, inputs, None)
    for other in (before, plain):
        expected, _ = run_kernel(other, kernel, inputs, sizes)
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)


PERSISTENT_KERNELS = [k for k in TMA_KERNELS if k[1] != "attention"]  # attention: two loops


@pytest.mark.parametrize(
    "example, kernel, extents",
    PERSISTENT_KERNELS,
    ids=[f"{k}:{e}" for _, k, e in PERSISTENT_KERNELS],
)
def test_persistent_blocks_compute_what_one_block_a_tile_did(example, kernel, extents):
    """pipeline's option persistent (passes/pipeline_persistent.py) at extents with partial
    tiles everywhere: three blocks (the interpreter's launch) walk every tile, the step index
    and the mbarrier phases running on across tiles, each block issuing the next tile's copies
    before this tile's epilogue -- bit for bit the loop before pipelining, the race check
    following every phase. A 3-D grid (bmm) walks its batch too."""
    func = _walked_matches_before(example, kernel, extents, "persistent=1 ", seed=11)
    loops = [op for op in func.body.block.ops if op.name == "scf.for"]
    assert len(loops) == 1 and loops[0].attributes["tilec.loop"].value == "range"


def _walked_matches_before(example: str, kernel: str, extents: dict, options: str, seed: int):
    """`kernel` through sm_90a's pipeline from `pipeline{options}` on, which must make it
    persistent, run in the interpreter against the loop before pipelining: bit for bit. The
    pipelined kernel."""
    from tests.validation import run_kernel
    from tilec.interp.runner import random_arguments

    passes, module, context = _before_pipeline(example, kernel, extents, options)
    at = [p.name for p in passes].index("pipeline")
    before = module.clone()
    for p in passes[at:]:
        p.run(module, context)
    func = module.lookup(kernel)
    assert "tilec.persistent" in func.attributes
    inputs = random_arguments(func, extents, seed=seed)
    got, sizes = run_kernel(module, kernel, inputs, None)
    expected, _ = run_kernel(before, kernel, inputs, sizes)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    return func


def _sm90a_ptx(example: str, kernel: str, extents: str, tiling: str = "", pipeline: str = ""):
    """`kernel` of `example` compiled to PTX for sm_90a on contiguous tensors of `extents`,
    with `tiling` and `pipeline` options (e.g. "group_m=1", "persistent=1")."""
    passes = DEFAULT_PIPELINE.replace(
        "tiling,", f'tiling{{extents="{extents}" {tiling}}},'
    ).replace("pipeline,", f"pipeline{{{pipeline}}},")
    return tilec.compile(
        f"{EXAMPLES}/{example}",
        kernels=[kernel],
        target="ptx",
        arch="sm_90a",
        pipeline='assume{all="aligned,unit,divisible"},' + passes,
    )


def test_a_persistent_epilogue_exchanges_its_tile_in_row_pieces_that_keep_the_stages():
    """At 4000x3000x1000 the 128x256 f16 tile's exchange needs 66 KiB of scratch, which with
    persistent blocks may not share the four 48 KiB stages' bytes: pipeline splits it in two
    pieces of 64 rows (33 KiB), keeping 4 stages; for both layouts every thread holds the same
    slots in each piece (`chunk_slots`). ptxas takes the result without spills."""
    from tilec.lowering.exchange import chunk_slots, op_scratch_bytes, thread_map
    from tilec.lowering.ptxas import assemble, find_ptxas

    program = _sm90a_ptx("matmul.tile", "matmul", "M=4000,N=3000,K=1000", pipeline="persistent=-1")
    func = program.module.lookup("matmul")
    assert "tilec.persistent" in func.attributes
    (convert,) = [op for op in func.walk() if op.name == "tile.convert_layout"]
    assert convert.attributes["chunks"].value == 2
    assert op_scratch_bytes(convert) == 64 * (256 * 2 + 16)
    buffers = [op for op in func.walk() if op.name == "tile.alloc_shared"]
    assert max(op.result.type.shape[0] for op in buffers) == 4  # stages kept
    src = chunk_slots(thread_map(convert.input.type), 2)
    dst = chunk_slots(thread_map(convert.result.type), 2)
    for pieces in (src, dst):
        assert sorted(set(pieces)) == [0, 1] and pieces.count(0) == pieces.count(1)
    # The main loop inside the walk is still the pipeline's: one wgmma group left in flight
    # across its iterations (`wgmma.pipelined_loop`), all waited for at its exit. (Not
    # recognized, each group was waited for right after its issue: the persistent kernel ran
    # 1.17-1.45x the time of a block a tile on the H200, 2026-12-03.)
    assert "wgmma.wait_group.sync.aligned 1;" in program.ptx
    if find_ptxas() is not None:
        resources = assemble(program.ptx, "sm_90a")["matmul"]
        assert resources.spill_stores == 0 and resources.spill_loads == 0


def test_an_epilogue_converting_in_registers_first_still_exchanges_in_pieces():
    """fp8_gemm's epilogue converts its accumulator in registers (no scratch), scales it, then
    exchanges the bf16 tile through 66 KiB of scratch: only the exchange is split (two pieces
    of 33 KiB), so a walk (option producer = 1: 8-bit GEMMs are not walked by default, which
    measured slower) keeps its four stages. Before, the conversion without scratch counted as
    one that could not split, and the kernel could not be walked."""
    from tilec.lowering.exchange import op_scratch_bytes

    program = _sm90a_ptx("fp8_gemm.tile", "fp8_gemm", "M=4096,N=8192,K=2048", "producer=1")
    func = program.module.lookup("fp8_gemm")
    assert "tilec.persistent" in func.attributes
    converts = [op for op in func.walk() if op.name == "tile.convert_layout"]
    exchanged = [op for op in converts if op_scratch_bytes(op) > 0]
    assert len(converts) > len(exchanged) == 1
    assert exchanged[0].attributes["chunks"].value == 2
    buffers = [op for op in func.walk() if op.name == "tile.alloc_shared"]
    assert max(op.result.type.shape[0] for op in buffers) == 4


@pytest.mark.parametrize(
    "example, kernel, extents",
    [k for k in PERSISTENT_KERNELS if k[1] in ("fp8_gemm", "int8_gemm_nt")],
    ids=["fp8_gemm", "int8_gemm_nt"],
)
def test_8_bit_gemms_walked_with_a_producer_compute_what_they_did(example, kernel, extents):
    """The walk tiling plans for 8-bit GEMMs (persistent blocks and a producer warpgroup):
    bit for bit the loop before pipelining, in the interpreter (regions as coroutines, the
    mbarrier protocol checked)."""
    _walked_matches_before(example, kernel, extents, "persistent=1 warp_specialize=1 ", seed=13)


@pytest.mark.parametrize("walk", ["persistent", "grouped", "persistent grouped"])
def test_block_index_arithmetic_is_32_bit(walk):
    """The tile walk of persistent blocks and the grouped block order divide block indices by
    block counts known only at run time. In 64 bits that division is a subroutine call in
    SASS, and nvJitLink -- what cuda.core compiles PTX with -- then serializes every wgmma of
    the kernel ("... serialized due to the presence of Extern calls"): on the H200 (2026-12-03)
    the persistent GEMM ran 1.17-1.45x the time of a block a tile, ptxas alone did not show it.
    Block indices and counts are below 2**31, so the passes divide them in i32."""
    grouped, persistent = "grouped" in walk, "persistent" in walk
    program = _sm90a_ptx(
        "matmul.tile",
        "matmul",
        "M=4000,N=3000,K=1000",
        tiling=f"group_m={8 if grouped else 1}",
        # 4000x3000x1000 is walked by default (tiling's walk plan): pinned either way here
        pipeline="persistent=1" if persistent else "persistent=0 warp_specialize=0",
    )
    func = program.module.lookup("matmul")
    assert ("tilec.persistent" in func.attributes) == persistent
    assert ("tilec.group_m" in func.attributes) == grouped
    assert "wgmma.mma_async" in program.ptx
    for wide in ("div.s64", "rem.s64", "div.u64", "rem.u64"):
        assert wide not in program.ptx, wide


def test_a_batched_epilogue_exchanges_in_row_pieces_and_walks_its_tiles():
    """bmm stores its 2-D accumulator into a 3-D view (`c[z, tm, tn]`): assign-layouts makes
    the move a `tile.convert_layout` to the store's layout less its unit dimension and the
    reshape a register copy, so the epilogue exchanges in row pieces that keep the 4 stages
    and persistent blocks walk the batch's tiles. (Before, the exchange was the reshape's own,
    which no split shrinks, and bmm stayed a block a tile.)"""
    from tilec.lowering.exchange import remap_source_slots

    program = _sm90a_ptx("bmm.tile", "bmm", "Z=8,M=1024,N=1024,K=1024", pipeline="persistent=-1")
    func = program.module.lookup("bmm")
    assert "tilec.persistent" in func.attributes
    (convert,) = [op for op in func.walk() if op.name == "tile.convert_layout"]
    assert convert.attributes["chunks"].value > 1
    (reshape,) = [op for op in func.walk() if op.name == "tile.reshape"]
    assert remap_source_slots(reshape) is not None  # a register copy
    buffers = [op for op in func.walk() if op.name == "tile.alloc_shared"]
    assert max(op.result.type.shape[0] for op in buffers) == 4  # stages kept


def test_an_epilogue_that_no_split_shrinks_stays_a_block_a_tile(monkeypatch):
    """An epilogue scratch that would cost a stage with persistent blocks, and that no split
    into row pieces shrinks: pipeline says so and keeps a block a tile. (Before, the search for
    a split looped forever when there was nothing to split.)"""
    import tilec.passes.pipeline_persistent as persistent

    monkeypatch.setattr(persistent, "chunkable", lambda op, chunks: False)
    program = _sm90a_ptx("bmm.tile", "bmm", "Z=8,M=1024,N=1024,K=1024", pipeline="persistent=-1")
    func = program.module.lookup("bmm")
    assert "tilec.persistent" not in func.attributes
    assert any("not persistent: its epilogue's scratch" in r.message for r in program.remarks), [
        r.message for r in program.remarks
    ]


def test_a_wide_division_in_a_wgmma_kernel_is_remarked_and_explained(monkeypatch):
    """What makes nvJitLink serialize wgmma is found in the PTX (`wgmma_serializers`), remarked
    by the "ptx" stage and shown on `--explain`'s ptxas line -- standalone ptxas, which
    `--explain` asks for registers, does not report it. The walks tilec writes have none."""
    from tilec.lowering.ptxas import wgmma_serializers

    wide = (
        ".visible .entry k(\n) {\n\twgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 x;\n"
        "\t@%p5 div.s64 \t%rd1, %rd2, %rd3;\n\trem.u64 %rd4, %rd5, %rd6;\n}\n"
        ".visible .entry plain(\n) {\n\tdiv.s64 %rd1, %rd2, %rd3;\n}\n"
    )
    found = wgmma_serializers(wide)
    assert list(found) == ["k"] and "div.s64, rem.u64" in found["k"][0]

    def compile_persistent():
        return _sm90a_ptx(
            "gemm_layouts.tile", "gemm_nn", "M=4000,N=3000,K=1000", pipeline="persistent=1"
        )

    program = compile_persistent()
    assert wgmma_serializers(program.ptx) == {}
    assert not [r for r in program.remarks if r.pass_name == "ptx"]
    # The walk's divisions in 64 bits, as they were: remarked.
    import tilec.passes.pipeline_persistent as persistent_pass
    from tilec.dialects import arith

    def divmod64(b, lhs, rhs, *, quotient=True):
        cls = arith.DivSIOp if quotient else arith.RemSIOp
        return b.create(cls, lhs=lhs, rhs=rhs).result

    monkeypatch.setattr(persistent_pass, "block_divmod", divmod64)
    program = compile_persistent()
    (remark,) = [r for r in program.remarks if r.pass_name == "ptx"]
    assert "wgmma serialized by nvJitLink" in remark.message and ".s64" in remark.message
    assert remark.op is program.module.lookup("gemm_nn")
    from tilec.explain import explain

    text = " ".join(explain(program, ptxas=False).split())  # wrapped: one line of words
    assert "performance loss: wgmma serialized by nvJitLink (the runtime's PTX compiler): " in text
    assert "div.s64" in text or "rem.s64" in text


@pytest.mark.parametrize("n, straddles", [(3000, True), (3008, False), (3056, False)])
def test_rows_that_straddle_128_byte_lines_are_remarked(n, straddles):
    """b [K, N] with N = 3000 has 6000-byte rows, 16-byte aligned only: each 128-byte box row
    straddles two lines (measured 1.22x cuBLAS's time against 1.08x at N = 3008 on the H200);
    pipeline says so, and --explain shows it under the stages."""
    from tilec.jit import load_kernel

    fn = load_kernel(f"{EXAMPLES}/gemm_layouts.tile", "gemm_nn")
    a = np.zeros((512, 1024), np.float16)
    b = np.zeros((1024, n), np.float16)
    c = np.zeros((512, n), np.float16)
    kernel = fn.compile_for(a, b, c, arch="sm_90a")
    program = tilec.compile(
        f"{EXAMPLES}/gemm_layouts.tile", kernels=["gemm_nn"], target="tir", pipeline=kernel.pipeline
    )
    said = [r.message for r in program.remarks if r.message.startswith("performance:")]
    assert any("b's rows (b.stride.0)" in m for m in said) == straddles
    assert not any("a's rows" in m for m in said)  # K = 1024: 2048-byte rows
    assert ("straddles two 128-byte lines" in program.explain(ptxas=False)) == straddles
