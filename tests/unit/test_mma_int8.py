"""int8 dots on tensor cores: tiling's choice of mma.sync m16n8k32, the PTX it leads to, and
the lowering's fragment reads checked on a model of the warp (no GPU needed).

The model runs the lowering's own code (`tilec.lowering.tensorcore`) with a builder that
computes on numpy arrays, one element per thread, instead of emitting LLVM IR, and an `_asm`
that executes `ldmatrix`, `prmt` and `mma.sync` on a byte image of shared memory as the PTX
ISA specifies them (fragment layouts of m16n8k32 with .s8: A register i holds row g + 8 (i & 1)
at k 4t + 16 (i >> 1) + 0..3; B register i holds k 4t + 16 i + 0..3 of column g; C/D c0..c3
are (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1); g = lane / 4, t = lane % 4). The
result's slots are placed by the accumulator's `#blocked` twin, so the test checks the whole
chain: swizzled addresses, ldmatrix(.trans) row choice, the byte permutes, the instruction's
operand order and the accumulator slots.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from llvmlite import ir

import tilec
import tilec.compiler
from tilec.dialects.tile import DotOperandLayout
from tilec.ir.printer import print_op
from tilec.ir.types import SharedType, TileType, f16, f32, i8, i32
from tilec.lowering import tensorcore
from tilec.lowering.layouts import (
    MMA_I8_INSTR_SHAPE,
    MMA_INSTR_SHAPE,
    ThreadMap,
    mma_accumulator_layout,
)
from tilec.lowering.ptxas import assemble, find_ptxas
from tilec.lowering.shared_memory import SharedBuffer, _i32, _swizzled_bytes
from tilec.passes.smem_placement import swizzle_for

EXAMPLES = Path(__file__).parents[2] / "examples"
MASK = 0xFFFFFFFF


def _lane_value(x):
    return np.int64(x.constant) if isinstance(x, ir.Constant) else x


def _lane_op(f):
    def method(self, a, b, name=""):
        return f(_lane_value(a), _lane_value(b)) & MASK

    return method


class _LaneBuilder:
    """The `ir.IRBuilder` methods the fragment code uses, on per-thread numpy arrays."""

    add = _lane_op(lambda a, b: a + b)
    sub = _lane_op(lambda a, b: a - b)
    mul = _lane_op(lambda a, b: a * b)
    and_ = _lane_op(lambda a, b: a & b)
    or_ = _lane_op(lambda a, b: a | b)
    xor = _lane_op(lambda a, b: a ^ b)
    shl = _lane_op(lambda a, b: a << b)
    lshr = _lane_op(lambda a, b: a >> b)

    def extract_value(self, aggregate, index, name=""):
        return aggregate[index]


class _Warps:
    """Executes the inline PTX of the lowering on all threads of a block."""

    def __init__(self, threads: int, shared: np.ndarray):
        self.threads = threads
        self.shared = shared  # uint8 bytes
        self.ways = []  # per 8x8 matrix read: the most rows in one 16-byte group of banks

    def asm(self, k, ret, args, text, constraints, *, side_effect=True):
        v = [np.broadcast_to(_lane_value(a), (self.threads,)).astype(np.int64) for a in args]
        if text.startswith("ldmatrix"):
            count = int(re.search(r"\.x(\d)", text).group(1))
            return self.ldmatrix(v[0], count, ".trans" in text)
        if text.startswith("prmt.b32"):
            return self.prmt(*v)
        if text.startswith("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"):
            return self.mma(v)
        if text.startswith("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"):
            return self.mma_f16([np.asarray(a) for a in args])
        raise AssertionError(f"unexpected asm {text}")

    def ldmatrix(self, address, count, trans):
        out = [np.zeros(self.threads, np.int64) for _ in range(count)]
        for w in range(self.threads // 32):
            lanes = np.arange(32) + 32 * w
            for j in range(count):
                rows = address[lanes[8 * j : 8 * j + 8]]
                assert all(r % 16 == 0 for r in rows), "ldmatrix rows are 16-byte aligned"
                self.ways.append(int(np.bincount((rows % 128) // 16).max()))
                m = np.stack([self.shared[r : r + 16].view(np.uint16) for r in rows]).astype(
                    np.int64
                )
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    lo, hi = (
                        (m[2 * t, g], m[2 * t + 1, g]) if trans else (m[g, 2 * t], m[g, 2 * t + 1])
                    )
                    out[j][lanes[lane]] = lo | (hi << 16)
        return tuple(out)

    def prmt(self, x, y, select):
        pool = x | (y << 32)
        out = np.zeros_like(x)
        for i in range(4):
            nibble = (select >> (4 * i)) & 0xF
            assert not (nibble & 8).any(), "sign-replicating selectors are not modelled"
            out |= ((pool >> (8 * nibble)) & 0xFF) << (8 * i)
        return out

    def mma(self, v):
        a_regs, b_regs, c_regs = v[0:4], v[4:6], v[6:10]
        out = [np.zeros(self.threads, np.int64) for _ in range(4)]

        def s8(word, byte):
            x = (word >> (8 * byte)) & 0xFF
            return x - 256 if x > 127 else x

        for w in range(self.threads // 32):
            a = np.zeros((16, 32), np.int64)
            b = np.zeros((32, 8), np.int64)
            c = np.zeros((16, 8), np.int64)
            for lane in range(32):
                th = 32 * w + lane
                g, t = lane // 4, lane % 4
                for i in range(4):
                    for e in range(4):
                        a[g + 8 * (i & 1), 4 * t + 16 * (i >> 1) + e] = s8(a_regs[i][th], e)
                for i in range(2):
                    for e in range(4):
                        b[4 * t + 16 * i + e, g] = s8(b_regs[i][th], e)
                for i, (r, col) in enumerate(
                    ((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1))
                ):
                    x = int(c_regs[i][th])
                    c[r, col] = x - (1 << 32) if x >= 1 << 31 else x
            d = (c + a @ b) & MASK
            for lane in range(32):
                g, t = lane // 4, lane % 4
                places = ((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1))
                for i, (r, col) in enumerate(places):
                    out[i][32 * w + lane] = d[r, col]
        return tuple(out)

    def mma_f16(self, v):
        """m16n8k16 f16 (a register holds two f16, the lower column or row in the low half):
        the path GPUs have run, here to check the model's ldmatrix against it."""
        a_regs, b_regs, c_regs = v[0:4], v[4:6], v[6:10]
        out = [np.zeros(self.threads) for _ in range(4)]

        def half(word, i):
            return np.array([(int(word) >> (16 * i)) & 0xFFFF], np.uint16).view(np.float16)[0]

        for w in range(self.threads // 32):
            a, b, c = np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8))
            for lane in range(32):
                th = 32 * w + lane
                g, t = lane // 4, lane % 4
                for i in range(4):
                    for e in range(2):
                        a[g + 8 * (i & 1), 2 * t + 8 * (i >> 1) + e] = half(a_regs[i][th], e)
                for i in range(2):
                    for e in range(2):
                        b[2 * t + 8 * i + e, g] = half(b_regs[i][th], e)
                places = ((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1))
                for i, (r, col) in enumerate(places):
                    c[r, col] = c_regs[i][th]
            d = c + a @ b
            for lane in range(32):
                g, t = lane // 4, lane % 4
                places = ((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1))
                for i, (r, col) in enumerate(places):
                    out[i][32 * w + lane] = d[r, col]
        return tuple(out)


class _Value:
    def __init__(self, t):
        self.type = t


class _Kernel:
    def __init__(self, threads):
        self.b = self.prologue = _LaneBuilder()
        tid = np.arange(threads, dtype=np.int64)
        self.lane, self.warp = tid % 32, tid // 32
        self.scratch = None
        self.values = {}


def _stage(k, shared, tile: np.ndarray, offset: int, element) -> SharedBuffer:
    """A one-slot buffer at `offset` holding `tile` with smem-placement's swizzle."""
    t = TileType(tile.shape, element)
    layout, _ = swizzle_for(t)
    buf = SharedBuffer(offset, SharedType((1, *tile.shape), element, layout))
    rows, cols = tile.shape
    raw = tile.view(np.uint8).reshape(rows, cols, -1)
    for r in range(rows):
        for c in range(cols):
            at = offset + int(_swizzled_bytes(k, buf, _i32(r), c))
            shared[at : at + raw.shape[2]] = raw[r, c]
    return buf


def _run_dot(m, n, depth, warps, k_major_b, seed=0, kind="i8"):
    """(what the lowered dot leaves in the accumulator, acc + a @ b, both [m, n]; the most
    rows of one 8x8 shared-memory read in the same 16-byte group of banks)."""
    rng = np.random.default_rng(seed)
    if kind == "i8":
        a = rng.integers(-128, 128, (m, depth)).astype(np.int8)
        b = rng.integers(-128, 128, (depth, n)).astype(np.int8)
        acc0 = rng.integers(-(2**31), 2**31, (m, n)).astype(np.int64)
        element, acc_element, shape = i8, i32, MMA_I8_INSTR_SHAPE
    else:  # small integers: f16 products and f32 sums are exact
        a = rng.integers(-8, 8, (m, depth)).astype(np.float16)
        b = rng.integers(-8, 8, (depth, n)).astype(np.float16)
        acc0 = rng.integers(-100, 100, (m, n)).astype(np.float64)
        element, acc_element, shape = f16, f32, MMA_INSTR_SHAPE
    threads = 32 * warps[0] * warps[1]
    k = _Kernel(threads)
    a_bytes = a.nbytes + 128 - a.nbytes % 128
    shared = np.zeros(a_bytes + b.nbytes, np.uint8)
    warps_model = _Warps(threads, shared)
    a_buf = _stage(k, shared, a, 0, element)
    b_stored = np.ascontiguousarray(b.T) if k_major_b else b
    b_buf = _stage(k, shared, b_stored, a_bytes, element)
    acc_layout = mma_accumulator_layout(warps, shape)
    a_t = TileType((m, depth), element, DotOperandLayout(0, warps))
    b_t = TileType((depth, n), element, DotOperandLayout(1, warps))
    acc_t = TileType((m, n), acc_element, acc_layout)
    table = ThreadMap(acc_layout, (m, n)).table()
    original = tensorcore._asm
    tensorcore._asm = warps_model.asm
    try:
        a_frags = tensorcore._fragments(k, a_buf, _i32(a_buf.offset), a_t, False)
        b_frags = tensorcore._fragments(k, b_buf, _i32(b_buf.offset), b_t, k_major_b)

        class Op:
            pass

        op = Op()
        op.a, op.b, op.acc, op.result = _Value(a_t), _Value(b_t), _Value(acc_t), _Value(acc_t)
        start = [acc0.reshape(-1)[table[:, s]] for s in range(table.shape[1])]
        if kind == "i8":
            start = [x & MASK for x in start]
        k.values = {op.a: a_frags, op.b: b_frags, op.acc: start}
        warps_model.ways = []  # the dot's reads only
        (acc,) = tensorcore.lower_mma_dot(k, op)
        ways = max(warps_model.ways)
    finally:
        tensorcore._asm = original
    expected = acc0 + a.astype(np.int64) @ b.astype(np.int64)
    got = np.zeros(m * n, acc0.dtype)
    for s, values in enumerate(acc):
        got[table[:, s]] = values
    if kind == "i8":
        expected &= MASK
    return got.reshape(m, n), expected, ways


# Buffers of 32-, 64- and 128-byte rows (every swizzle smem-placement gives them), 1 to 4
# warps, the example's 128x128x64 on 2x2 warps.
SHAPES = [
    (16, 16, 32, (1, 1)),
    (32, 32, 64, (2, 1)),
    (64, 64, 64, (2, 2)),
    (32, 64, 64, (1, 2)),
    (64, 64, 32, (4, 1)),
    (128, 128, 64, (2, 2)),
]


@pytest.mark.parametrize("k_major_b", [False, True], ids=["b_KxN", "b_NxK"])
@pytest.mark.parametrize("m, n, depth, warps", SHAPES)
def test_int8_fragments_and_mma_compute_the_product(m, n, depth, warps, k_major_b):
    """Both B layouts, on 1 to 4 warps, through the swizzled buffers smem-placement picks;
    the accumulator starts from random i32 values so that the sums wrap around."""
    got, expected, ways = _run_dot(m, n, depth, warps, k_major_b, seed=m + n + depth)
    np.testing.assert_array_equal(got, expected)
    # Bank conflicts of the 8x8 reads: none for A and an N-major B (the rows picked for
    # ldmatrix.trans keep 8 swizzle phases); a K-major B's rows 2 apart share bank groups.
    assert ways <= (2 if k_major_b else 1)


@pytest.mark.parametrize("k_major_b", [False, True], ids=["b_KxN", "b_NxK"])
def test_the_warp_model_agrees_with_the_f16_path(k_major_b):
    """The model's ldmatrix and mma, run on the m16n8k16 f16 path (proven on the H200 by
    tests/gpu/test_tensorcore.py), give the product: the model reads the ISA as the GPU does."""
    got, expected, ways = _run_dot(64, 64, 32, (2, 2), k_major_b, seed=3, kind="f16")
    np.testing.assert_array_equal(got, expected)
    assert ways == 1


# ---------------------------------------------------------------------------------------------
# What the compiler makes of examples/int8_gemm.tile

INT8_GEMM = EXAMPLES / "int8_gemm.tile"
MMA_S8 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"


def _compile(kernel: str, arch: str, source=INT8_GEMM, extents="M=4096,N=4096,K=4096"):
    pipeline = tilec.compiler.build_pipeline(
        options={"tiling": {"extents": extents}} if extents else None
    )
    program = tilec.compile(
        source,
        kernels=[kernel],
        pipeline='assume{all="aligned,unit,divisible"},' + pipeline,
        target="ptx",
        arch=arch,
    )
    remarks = [(r.pass_name, r.message) for stage in program.stages for r in stage.remarks]
    return program, remarks


@pytest.mark.parametrize("kernel", ["int8_gemm", "int8_gemm_nt"])
def test_tiling_puts_int8_dots_on_mma_m16n8k32(kernel):
    """i8 x i8 -> i32 takes mma.sync m16n8k32 (not the FMA path) with the 128x128 tile, 2x2
    warps and a K tile of 64 bytes; the remark names the instruction and how B is read. B
    stored [K, N] keeps it on sm_90a too (wgmma reads 8-bit operands K-major only); B stored
    [N, K] takes wgmma there (tests/unit/test_wgmma_lowering.py), so it is checked on sm_80."""
    program, remarks = _compile(kernel, "sm_90a" if kernel == "int8_gemm" else "sm_80")
    tiling = [m for p, m in remarks if p == "tiling"]
    assert not any("FMA path" in m for m in tiling), tiling
    (mma,) = [m for m in tiling if MMA_S8 in m]
    assert mma.startswith("BM=128, BN=128, BK=64, 4 warps (2x2 warp tiles of 64x64; 4x8 ")
    how = (
        "B (stored [K, N], N-major) by ldmatrix.x4.trans"
        if kernel == "int8_gemm"
        else ("B (stored [N, K], K-major) by ldmatrix.x4")
    )
    assert how in mma
    text = print_op(program.module)
    assert "#mma<version = 2, warps_per_cta = [2, 2], instr_shape = [16, 8, 32]>" in text
    assert "wgmma" not in program.ptx


@pytest.mark.parametrize(
    "kernel, arch", [("int8_gemm", "sm_80"), ("int8_gemm", "sm_90a"), ("int8_gemm_nt", "sm_80")]
)
def test_int8_gemm_ptx_uses_mma_m16n8k32_and_assembles_without_spills(kernel, arch):
    program, _ = _compile(kernel, arch)
    ptx = program.ptx
    # 4 m-tiles x 8 n-tiles per k-step of 32, two k-steps per BK=64
    assert ptx.count(MMA_S8) >= 64
    assert "cp.async.cg.shared.global" in ptx
    if kernel == "int8_gemm":
        assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
        assert "prmt.b32" in ptx
    else:
        assert ".trans" not in ptx and "prmt.b32" not in ptx
        assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    if find_ptxas() is None:
        pytest.skip("no ptxas")
    resources = assemble(ptx, arch)[kernel]
    assert resources.spill_stores == 0 and resources.spill_loads == 0, resources
    assert resources.registers <= 255


TRANSPOSED_A = """
def int8_tn(a: i8[K, M], b: i8[K, N], c: i32[M, N]):
    for tm, tn in tiles(M, N):
        acc = zeros([tm, tn], i32)
        for tk in tiles(K):
            acc += a[tk, tm].T @ b[tk, tn]
        c[tm, tn] = acc
"""


def test_an_int8_a_stored_k_by_m_keeps_the_fma_path_and_says_why():
    program, remarks = _compile("int8_tn", "sm_90a", source=TRANSPOSED_A, extents="")
    (why,) = [m for p, m in remarks if p == "tiling" and "FMA path" in m]
    assert "needs an i8 A stored K-major" in why
    assert "mma.sync" not in program.ptx


def test_the_f16_tiling_is_unchanged():
    """A neighbour of the int8 path: the f16 matmul still takes m16n8k16 (on sm_80)."""
    program, _ = _compile("gemm_nn", "sm_80", source=EXAMPLES / "gemm_layouts.tile")
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in program.ptx
    assert MMA_S8 not in program.ptx
    assert "instr_shape = [16, 8, 16]" in print_op(program.module)


@pytest.mark.parametrize("multiple", [1, 4])
def test_int8_operands_copied_in_short_runs_keep_a_smaller_tile(multiple):
    """Rows whose stride is not a known multiple of 8 bytes are copied in runs of 1 or 4
    bytes: each a load and a store (or a cp.async) with its own address, so the tiling keeps
    32 accumulators a thread and 32-byte K rows (at 128x128x64, ptxas spilled 17 KiB and 384
    bytes), and says why."""
    facts = 'unit="a.stride.1,b.stride.1,c.stride.1" aligned="a,b,row_scale,col_scale,c"'
    if multiple > 1:
        facts += f' multiples="a.stride.0={multiple},b.stride.0={multiple}"'
    pipeline = f"assume{{{facts}}}," + tilec.compiler.build_pipeline(
        options={"tiling": {"extents": "M=1000,N=3000,K=1000"}}
    )
    program = tilec.compile(
        INT8_GEMM, kernels=["int8_gemm"], pipeline=pipeline, target="ptx", arch="sm_90a"
    )
    remarks = [r.message for stage in program.stages for r in stage.remarks]
    (mma,) = [m for m in remarks if MMA_S8 in m]
    assert mma.startswith("BM=64, BN=64, BK=32, 4 warps")
    assert "int8 operands are copied in runs of fewer than 8 bytes" in mma
    assert "a.stride.0 not known to be a multiple of 8" in mma
    if find_ptxas() is not None:
        resources = assemble(program.ptx, "sm_90a")["int8_gemm"]
        assert resources.spill_stores == 0, resources
