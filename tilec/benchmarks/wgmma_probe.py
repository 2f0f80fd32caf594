"""Probe what a Hopper `wgmma` GEMM gives, before the compiler learns to emit it.

    python -m tilec.benchmarks.wgmma_probe                    # the default sweep, 4096^3
    python -m tilec.benchmarks.wgmma_probe --size 8192 --config 256,3
    python -m tilec.benchmarks.wgmma_probe --print 128,4      # the PTX, no GPU needed

The kernel is PTX written out here as text (no IR, no LLVM), for sm_90a: C[M, N] (f32) =
A[M, K] (f16, row-major) @ B[K, N] (f16, row-major). A configuration is `BN,STAGES`; the block
tile is 128 x BN with BK = 64, on 8 warps = 2 warpgroups, warpgroup g computing rows
64g .. 64g + 63 with `wgmma.mma_async.m64n{BN}k16` (4 per k-tile) from shared memory.

**Assumptions.** M, N and K are multiples of 128, BN and 64, and the tensors are contiguous
(unit last stride, rows 16-byte aligned): the probe refuses other sizes, and the kernel traps
if launched on anything else. It has no masks.

**Launch.** The kernel takes the parameters, grid and block of the tensor-core lowering's
kernel for the same tiles (`gemm_probe.probe_ir(128, BN, 64, 2, 4, STAGES)`'s `matmul_mma`,
see `tilec.lowering.abi`): A, its 2 extents and 2 strides, then B's, then C's (all i64,
strides in elements); grid axis x over ceil(M / 128), y over ceil(N / BN); 256 threads.
Its ABI is that kernel's, with 1 KiB more dynamic shared memory, so that the kernel can round
its base up to 1024 bytes (the 128-byte swizzle repeats every 1024 bytes, and descriptors
carry base offset 0); `tilec.runtime.Launcher` raises the dynamic shared-memory limit.

**Shared memory**, per stage (STAGES stages of (128 x 64 + 64 x BN) x 2 bytes, each 1024-byte
aligned): the A tile K-major with the 128-byte swizzle -- row m, 16-byte chunk j of its 64
k-elements at `m * 128 + (j ^ m % 8) * 16` (`a_offset`) -- then the B tile N-major with the
128-byte swizzle, in BN / 64 blocks of 64 columns, each holding its 64 k-rows of 128 bytes:
element (k, n) at `(n // 64) * 8192 + k * 128 + ((n % 64 // 8) ^ k % 8) * 16 + n % 8 * 2`
(`b_offset`). Filled with 16-byte `cp.async.cg`, one commit group per k-tile, STAGES - 1
tiles ahead.

**Descriptors** (`descriptor`; PTX ISA "Matrix Descriptor Format"): bits 0-13 the shared
address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset (0), 62-63 the swizzle (1:
128 bytes). A (K-major, `tnspA` = 0): SBO = 1024 (8 rows of 128 bytes), LBO unused (1);
start = A tile + 64g x 128 + kk x 32 for k-step kk. B (N-major, `tnspB` = 1): LBO = 8192
(from one 64-column block to the next: the ISA's "offset from the first (swizzle-byte-size /
16) rows to the next" of the 128-bit-normalized MN-major matrix), SBO = 1024 (from one group
of 8 k-rows to the next: "from the first 8 columns to the next 8 columns"); start = B tile +
kk x 2048. The hardware applies the swizzle (bits 4-6 of the address XOR bits 7-9) to the
address the canonical layout gives; `k_major_address` and `mn_major_address` model that walk,
and the unit tests check it lands on `a_offset` / `b_offset` for every element.

**The k-loop** (a PTX loop): wait for tile i (`cp.async.wait_group STAGES-2`), make the
cp.async writes visible to the async proxy that `wgmma` reads through (`fence.proxy.async`),
`bar.sync`; copy tile i + STAGES - 1 into the stage that tile i - 1 used (its wgmmas completed
before the barrier: every iteration ends with `wgmma.wait_group 0`); `wgmma.fence`, 4 wgmmas,
commit, wait. The epilogue stores the accumulators (thread t of a warpgroup, warp w, lane l:
d[4j + {0,1}] at row 16w + l/4, columns 8j + 2(l%4) + {0,1}; d[4j + {2,3}] 8 rows below) as
f32 pairs.

Each configuration is checked against torch (an f64 product of the same inputs) before and
after it is timed against cuBLAS: a configuration whose error exceeds the tolerance prints
FAIL and no speed.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

__all__ = [
    "DEFAULT_CONFIGS",
    "a_offset",
    "b_offset",
    "decode_descriptor",
    "descriptor",
    "k_major_address",
    "main",
    "mn_major_address",
    "probe_abi",
    "wgmma_ptx",
]

BM, BK = 128, 64
WARPS = 8
THREADS = 32 * WARPS
KERNEL = "matmul_mma"
DEFAULT_CONFIGS = [(128, 4), (128, 3), (256, 3), (256, 4)]  # (BN, STAGES)
# The kernel's parameters in the ABI's order, by the register each is loaded into: A (pointer,
# extents M K, strides), then B (K N), then C (M N).
PARAMETER_REGISTERS = tuple(
    f"{tensor}_{field}"
    for tensor, dims in (("a", "mk"), ("b", "kn"), ("c", "mn"))
    for field in ("ptr", *dims, "s0", "s1")
)

ROW_BYTES = BK * 2  # one 64-element f16 row: the 128-byte swizzle's width
SWIZZLE_ATOM = 8 * ROW_BYTES  # 1024: the swizzle pattern repeats every 8 rows
A_TILE_BYTES = BM * ROW_BYTES
N_BLOCK_BYTES = BK * ROW_BYTES  # one 64-column block of the B tile: 64 k-rows of 128 bytes
SWIZZLE_128B = 1  # the descriptor's swizzle field (bits 62-63)
A_SBO = B_SBO = SWIZZLE_ATOM
A_LBO = 16  # unused by swizzled K-major layouts; the ISA says to encode 1 (in 16-byte units)
B_LBO = N_BLOCK_BYTES
BASE_SLACK = 1024  # extra dynamic shared memory so the kernel can align its base
TOLERANCE_4096 = 0.05  # max |error| allowed at K = 4096 with randn inputs (scaled with K)


def b_tile_bytes(bn: int) -> int:
    return BK * bn * 2


def stage_bytes(bn: int) -> int:
    return A_TILE_BYTES + b_tile_bytes(bn)


def swizzle_128b(address: int) -> int:
    """The 128-byte swizzle on a shared byte address: bits 4-6 XOR bits 7-9."""
    return address ^ (((address >> 7) & 7) << 4)


def a_offset(m: int, k: int) -> int:
    """Byte offset of A-tile element (m, k) from its stage's A base (K-major, swizzled)."""
    return swizzle_128b(m * ROW_BYTES + k * 2)


def b_offset(k: int, n: int) -> int:
    """Byte offset of B-tile element (k, n) from its stage's B base (N-major, swizzled, in
    64-column blocks of `N_BLOCK_BYTES`)."""
    return (n // 64) * N_BLOCK_BYTES + swizzle_128b(k * ROW_BYTES + (n % 64) * 2)


def descriptor(address: int, lbo: int, sbo: int, swizzle: int = SWIZZLE_128B) -> int:
    """A wgmma shared-memory matrix descriptor (base offset 0)."""
    for name, value in (("address", address), ("LBO", lbo), ("SBO", sbo)):
        if value % 16 or value >> 4 >= 1 << 14:
            raise ValueError(f"{name} {value} is not a 16-byte multiple below 2**18")
    return (address >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | swizzle << 62


def decode_descriptor(desc: int) -> dict[str, int]:
    """The fields of a descriptor, in bytes where they are byte offsets."""
    field = (1 << 14) - 1
    return {
        "address": (desc & field) << 4,
        "lbo": (desc >> 16 & field) << 4,
        "sbo": (desc >> 32 & field) << 4,
        "base_offset": desc >> 49 & 7,
        "swizzle": desc >> 62 & 3,
    }


def _swizzled_fields(desc: int) -> dict[str, int]:
    fields = decode_descriptor(desc)
    if fields["swizzle"] != SWIZZLE_128B or fields["base_offset"]:
        raise ValueError("the models cover the 128-byte swizzle with base offset 0 only")
    return fields


def k_major_address(desc: int, row: int, k: int) -> int:
    """The shared address a wgmma reads for element (row, k) of its 64 x 16 f16 K-major operand
    (A, tnsp 0) given by `desc`: the canonical layout ((8, m), (T, 2)) : ((8T, SBO), (1, T))
    (T = 8 elements = 16 bytes; LBO unused), then the 128-byte swizzle on the address."""
    fields = _swizzled_fields(desc)
    offset = (row % 8) * 128 + (row // 8) * fields["sbo"] + (k % 8) * 2 + (k // 8) * 16
    return swizzle_128b(fields["address"] + offset)


def mn_major_address(desc: int, k: int, n: int) -> int:
    """The shared address a wgmma reads for element (k, n) of its 16 x N f16 N-major operand
    (B, tnsp 1) given by `desc`: the canonical layout ((T, 8, m), (8, k)) : ((1, T, LBO),
    (8T, SBO)) (T = 8 elements = 16 bytes), then the 128-byte swizzle on the address."""
    fields = _swizzled_fields(desc)
    offset = (n % 8) * 2 + (n // 8 % 8) * 16 + (n // 64) * fields["lbo"]
    offset += (k % 8) * 128 + (k // 8) * fields["sbo"]
    return swizzle_128b(fields["address"] + offset)


def a_descriptor(a_base: int, group: int, kk: int) -> int:
    """The descriptor of k-step `kk` of warpgroup `group`'s 64 rows of the A tile at `a_base`."""
    return descriptor(a_base + group * 64 * ROW_BYTES + kk * 32, A_LBO, A_SBO)


def b_descriptor(b_base: int, kk: int) -> int:
    """The descriptor of k-step `kk` of the B tile at `b_base`."""
    return descriptor(b_base + kk * 16 * ROW_BYTES, B_LBO, B_SBO)


def _check_config(bn: int, stages: int) -> None:
    if bn not in (128, 256) or not 2 <= stages <= 8:
        raise ValueError(f"configuration {bn},{stages}: BN must be 128 or 256, STAGES 2..8")


def wgmma_ptx(bn: int, stages: int) -> str:
    """The PTX of the probe kernel for block tile 128 x `bn` and `stages` stages."""
    _check_config(bn, stages)
    stage = stage_bytes(bn)
    acc = bn // 2  # f32 accumulators per thread: 64 x bn over 128 threads
    chunks_per_b_row = bn // 8
    b_rows_per_copy = THREADS // chunks_per_b_row
    a_copies = BM * BK // 8 // THREADS
    b_copies = BK * bn // 8 // THREADS
    lines: list[str] = []

    def emit(*texts: str) -> None:
        lines.extend(f"\t{t}" if not t.endswith(":") else t for t in texts)

    params = [f"param_{reg}" for reg in PARAMETER_REGISTERS]
    header = [
        "// tilec wgmma probe: C (f32) = A (f16, MxK row-major) @ B (f16, KxN row-major)",
        f"// block tile {BM}x{bn}x{BK}, {stages} stages, {WARPS} warps (2 warpgroups)",
        ".version 8.0",
        ".target sm_90a",
        ".address_size 64",
        "",
        ".extern .shared .align 1024 .b8 smem[];",
        "",
        f".visible .entry {KERNEL}(",
        ",\n".join(f"\t.param .u64 {p}" for p in params),
        ")",
        f".reqntid {THREADS}, 1, 1",
        "{",
    ]
    u64 = " ".join(PARAMETER_REGISTERS)
    u64 += " bad row0 col0 a_src a_step b_src b_step b_tile_step ga gb c_addr c_addr8 t64"
    u32 = "thread bx by smem_base woff roff kt i next t0 t1 t2 a_dst b_dst sa sb g_off"
    u32 += " alo blo dhi"
    emit(
        *(f".reg .u64 %{name};" for name in u64.split()),
        *(f".reg .u32 %{name};" for name in u32.split()),
        ".reg .b64 %desc_a, %desc_b;",
        ".reg .pred %p_bad, %p_skip, %p_wrap, %p_loop, %p_one;",
        f".reg .f32 %d<{acc}>;",
    )
    emit(*(f"ld.param.u64 %{reg}, [{param}];" for reg, param in zip(PARAMETER_REGISTERS, params)))
    # The kernel has no masks: trap on sizes that are not whole tiles or strides it cannot take.
    emit(
        f"and.b64 %bad, %a_m, {BM - 1};",
        f"and.b64 %t64, %b_n, {bn - 1};",
        "or.b64 %bad, %bad, %t64;",
        f"and.b64 %t64, %a_k, {BK - 1};",
        "or.b64 %bad, %bad, %t64;",
        *(f"xor.b64 %t64, %{s}, 1;\n\tor.b64 %bad, %bad, %t64;" for s in ("a_s1", "b_s1", "c_s1")),
        # 16-byte copies need rows of A and B 16-byte aligned, f32 pairs rows of C 8-byte.
        *(
            f"and.b64 %t64, %{s}, {m};\n\tor.b64 %bad, %bad, %t64;"
            for s, m in (("a_s0", 7), ("b_s0", 7), ("c_s0", 1))
        ),
        "setp.ne.u64 %p_bad, %bad, 0;",
        "setp.eq.u64 %p_skip, %a_k, 0;",
        "or.pred %p_bad, %p_bad, %p_skip;",
        "@%p_bad trap;",
    )
    emit(
        "mov.u32 %thread, %tid.x;",
        "mov.u32 %bx, %ctaid.x;",
        "mov.u32 %by, %ctaid.y;",
        f"mul.wide.u32 %row0, %bx, {BM};",
        f"mul.wide.u32 %col0, %by, {bn};",
        "cvt.u32.u64 %kt, %a_k;",
        f"shr.u32 %kt, %kt, {BK.bit_length() - 1};",
        # The 128-byte swizzle is a function of address bits 4-9: stages start 1024-aligned.
        "mov.u32 %smem_base, smem;",
        f"add.u32 %smem_base, %smem_base, {SWIZZLE_ATOM - 1};",
        f"and.b32 %smem_base, %smem_base, {-SWIZZLE_ATOM};",
    )
    # This thread's copies of A: row tid/8 + 32c, 16-byte chunk tid%8 (8 threads per row).
    emit(
        "shr.u32 %t0, %thread, 3;",  # row
        "and.b32 %t1, %thread, 7;",  # chunk
        "cvt.u64.u32 %t64, %t0;",
        "add.u64 %t64, %t64, %row0;",
        "mul.lo.u64 %t64, %t64, %a_s0;",
        "shl.b32 %t2, %t1, 3;",
        "cvt.u64.u32 %ga, %t2;",
        "add.u64 %t64, %t64, %ga;",
        "shl.b64 %t64, %t64, 1;",
        "add.u64 %a_src, %a_ptr, %t64;",
        f"mul.lo.u64 %a_step, %a_s0, {(THREADS // 8) * 2};",
        "and.b32 %t2, %t0, 7;",
        "xor.b32 %t2, %t2, %t1;",
        "shl.b32 %t2, %t2, 4;",
        f"mad.lo.u32 %a_dst, %t0, {ROW_BYTES}, %t2;",
    )
    # Of B: k-row tid/(BN/8) + (256/(BN/8))c, column chunk tid%(BN/8) (whole rows per warp).
    emit(
        f"shr.u32 %t0, %thread, {chunks_per_b_row.bit_length() - 1};",  # k-row
        f"and.b32 %t1, %thread, {chunks_per_b_row - 1};",  # chunk of 8 columns
        "cvt.u64.u32 %t64, %t0;",
        "mul.lo.u64 %t64, %t64, %b_s0;",
        "add.u64 %t64, %t64, %col0;",
        "shl.b32 %t2, %t1, 3;",
        "cvt.u64.u32 %gb, %t2;",
        "add.u64 %t64, %t64, %gb;",
        "shl.b64 %t64, %t64, 1;",
        "add.u64 %b_src, %b_ptr, %t64;",
        f"mul.lo.u64 %b_step, %b_s0, {b_rows_per_copy * 2};",
        f"mul.lo.u64 %b_tile_step, %b_s0, {BK * 2};",
        # smem: block chunk/8, row k, swizzled chunk (chunk%8) ^ (k%8)
        "shr.u32 %t2, %t1, 3;",
        f"mul.lo.u32 %b_dst, %t2, {N_BLOCK_BYTES};",
        f"mad.lo.u32 %b_dst, %t0, {ROW_BYTES}, %b_dst;",
        "and.b32 %t2, %t0, 7;",
        "and.b32 %t1, %t1, 7;",
        "xor.b32 %t2, %t2, %t1;",
        "shl.b32 %t2, %t2, 4;",
        "add.u32 %b_dst, %b_dst, %t2;",
        f"add.u32 %b_dst, %b_dst, {A_TILE_BYTES};",
        # The warpgroup's 64 rows of A, and the descriptors' constant high words.
        "shr.u32 %g_off, %thread, 7;",
        f"mul.lo.u32 %g_off, %g_off, {64 * ROW_BYTES};",
        f"mov.u32 %dhi, {(A_SBO >> 4) | SWIZZLE_128B << 30};",
    )
    assert A_SBO == B_SBO  # one high word serves both descriptors

    def copy_tile(label: str) -> None:
        """Issue the copies of the next k-tile into the stage at %woff, unless %p_skip."""
        emit(
            f"@%p_skip bra {label};",
            "add.u32 %sa, %smem_base, %woff;",
            "add.u32 %sb, %sa, %b_dst;",
            "add.u32 %sa, %sa, %a_dst;",
            "mov.u64 %ga, %a_src;",
            "mov.u64 %gb, %b_src;",
        )
        for c in range(a_copies):
            emit(f"cp.async.cg.shared.global [%sa+{c * (THREADS // 8) * ROW_BYTES}], [%ga], 16;")
            if c + 1 < a_copies:
                emit("add.u64 %ga, %ga, %a_step;")
        for c in range(b_copies):
            emit(f"cp.async.cg.shared.global [%sb+{c * b_rows_per_copy * ROW_BYTES}], [%gb], 16;")
            if c + 1 < b_copies:
                emit("add.u64 %gb, %gb, %b_step;")
        emit(
            f"add.u64 %a_src, %a_src, {BK * 2};",
            "add.u64 %b_src, %b_src, %b_tile_step;",
            f"{label}:",
            "cp.async.commit_group;",
            f"add.u32 %woff, %woff, {stage};",
        )

    emit("mov.u32 %woff, 0;")
    for s in range(stages - 1):
        emit(f"setp.le.u32 %p_skip, %kt, {s};")
        copy_tile(f"$prologue_{s}_done")
    emit(
        *(f"mov.f32 %d{r}, 0f00000000;" for r in range(acc)),
        "setp.eq.u32 %p_one, 0, 0;",  # wgmma's scale-d: accumulate
        "mov.u32 %roff, 0;",
        "mov.u32 %i, 0;",
        "$k_loop:",
        f"cp.async.wait_group {stages - 2};",
        "fence.proxy.async.shared::cta;",
        "bar.sync 0;",
        # Tile i + STAGES - 1 goes where tile i - 1 was: its wgmmas ended before the barrier.
        f"add.u32 %next, %i, {stages - 1};",
        "setp.ge.u32 %p_skip, %next, %kt;",
    )
    copy_tile("$refill_done")
    emit(
        f"setp.eq.u32 %p_wrap, %woff, {stages * stage};",
        "selp.u32 %woff, 0, %woff, %p_wrap;",
        "add.u32 %t0, %smem_base, %roff;",
        "add.u32 %t1, %t0, %g_off;",
        "bfe.u32 %alo, %t1, 4, 14;",
        f"or.b32 %alo, %alo, {(A_LBO >> 4) << 16};",
        f"add.u32 %t1, %t0, {A_TILE_BYTES};",
        "bfe.u32 %blo, %t1, 4, 14;",
        f"or.b32 %blo, %blo, {(B_LBO >> 4) << 16};",
        "wgmma.fence.sync.aligned;",
    )
    accumulators = "{" + ", ".join(f"%d{r}" for r in range(acc)) + "}"
    for kk in range(BK // 16):
        if kk:
            emit("add.u32 %alo, %alo, 2;", f"add.u32 %blo, %blo, {16 * ROW_BYTES >> 4};")
        emit(
            "mov.b64 %desc_a, {%alo, %dhi};",
            "mov.b64 %desc_b, {%blo, %dhi};",
            f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.f16.f16 {accumulators}, "
            "%desc_a, %desc_b, %p_one, 1, 1, 0, 1;",
        )
    emit(
        "wgmma.commit_group.sync.aligned;",
        "wgmma.wait_group.sync.aligned 0;",
        f"add.u32 %roff, %roff, {stage};",
        f"setp.eq.u32 %p_wrap, %roff, {stages * stage};",
        "selp.u32 %roff, 0, %roff, %p_wrap;",
        "add.u32 %i, %i, 1;",
        "setp.lt.u32 %p_loop, %i, %kt;",
        "@%p_loop bra $k_loop;",
    )
    # Epilogue: row 16 * (tid / 32) + lane / 4 of the block (= 64g + 16w + l/4), column
    # 2 * (lane % 4) + 8j; the second pair of each n8 block 8 rows below.
    emit(
        "shr.u32 %t0, %thread, 5;",
        "shl.b32 %t0, %t0, 4;",
        "and.b32 %t1, %thread, 31;",
        "shr.u32 %t1, %t1, 2;",
        "add.u32 %t0, %t0, %t1;",
        "cvt.u64.u32 %t64, %t0;",
        "add.u64 %t64, %t64, %row0;",
        "mul.lo.u64 %t64, %t64, %c_s0;",
        "add.u64 %t64, %t64, %col0;",
        "and.b32 %t2, %thread, 3;",
        "shl.b32 %t2, %t2, 1;",
        "cvt.u64.u32 %ga, %t2;",
        "add.u64 %t64, %t64, %ga;",
        "shl.b64 %t64, %t64, 2;",
        "add.u64 %c_addr, %c_ptr, %t64;",
        "mul.lo.u64 %t64, %c_s0, 32;",
        "add.u64 %c_addr8, %c_addr, %t64;",
    )
    for j in range(bn // 8):
        emit(
            f"st.global.v2.f32 [%c_addr+{32 * j}], {{%d{4 * j}, %d{4 * j + 1}}};",
            f"st.global.v2.f32 [%c_addr8+{32 * j}], {{%d{4 * j + 2}, %d{4 * j + 3}}};",
        )
    emit("ret;")
    return "\n".join(header + lines + ["}", ""])


def probe_abi(bn: int, stages: int) -> Any:
    """The `KernelABI` the probe kernel is launched with: the tensor-core lowering's
    `matmul_mma` for the same tiles (see the module docstring), with `BASE_SLACK` more bytes
    of dynamic shared memory."""
    from tilec.benchmarks.gemm_probe import probe_ir
    from tilec.ir import parse_module
    from tilec.lowering import module_abi
    from tilec.lowering.abi import GridAxis

    _check_config(bn, stages)
    abi = module_abi(parse_module(probe_ir(BM, bn, BK, 2, 4, stages)))[KERNEL]
    # What wgmma_ptx hard-codes: refuse rather than launch a mismatched kernel.
    expected = [f"{t}.{k}.{a}" for t in "ABC" for k in ("extent", "stride") for a in (0, 1)]
    names = [p.name for p in abi.parameters if p.kind != "pointer"]
    if (
        sorted(names) != sorted(expected)
        or [p.name for p in abi.parameters if p.kind == "pointer"] != ["A", "B", "C"]
        or len(abi.parameters) != 15
        or abi.grid != (GridAxis("M", BM), GridAxis("N", bn))
        or abi.num_warps != WARPS
        or abi.shared_bytes < stages * stage_bytes(bn)
    ):
        raise RuntimeError(f"gemm_probe's ABI for {bn},{stages} is not what the probe expects")
    return dataclasses.replace(abi, shared_bytes=abi.shared_bytes + BASE_SLACK)


def _parse_config(text: str) -> tuple[int, int]:
    bn, stages = (int(x) for x in text.split(","))
    _check_config(bn, stages)
    return bn, stages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=4096, help="M = N = K (default 4096)")
    parser.add_argument("--config", action="append", help="BN,STAGES (BN 128 or 256)")
    parser.add_argument("--print", metavar="CONFIG", help="print the PTX of one configuration")
    args = parser.parse_args(argv)
    try:
        if args.print:
            print(wgmma_ptx(*_parse_config(args.print)), end="")
            return 0
        configs = [_parse_config(c) for c in args.config or []] or DEFAULT_CONFIGS
    except ValueError as e:
        parser.error(str(e))
    n = args.size
    for bn, _stages in configs:
        if n <= 0 or n % BM or n % bn or n % BK:
            parser.error(
                f"--size {n} is not a multiple of 128, {bn} and {BK}: the kernel has no masks"
            )

    import torch

    from tilec.benchmarks.gpu import time_ms
    from tilec.lowering import Specialization
    from tilec.runtime import Launcher

    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float32)
    expected = (a.double() @ b.double()).float()
    tolerance = TOLERANCE_4096 * max(1.0, n / 4096)
    flops = 2 * n**3
    cublas = time_ms(lambda: torch.matmul(a, b), [()])  # one input set: the same every call
    cublas_error = (torch.matmul(a, b).float() - expected).abs().max().item()
    print(
        f"cuBLAS f16 {n}^3: {flops / cublas / 1e9:.0f} TFLOP/s (f16 output, max error "
        f"{cublas_error:.3g}); tolerance {tolerance:.3g}"
    )
    failed = 0
    for bn, stages in configs:
        name = f"{bn},{stages}"
        launch = Launcher(wgmma_ptx(bn, stages), probe_abi(bn, stages), Specialization())
        c.fill_(float("nan"))
        launch(a, b, c)
        torch.cuda.synchronize()
        error = (c - expected).abs().max().item()  # nan (an unwritten element) stays nan
        if not error <= tolerance:
            print(f"{name:>8}: FAIL: max error {error:.3g} > {tolerance:.3g} (no timing)")
            failed += 1
            continue
        c.fill_(float("nan"))
        ms = time_ms(lambda launch=launch: launch(a, b, c), [()])
        error = max(error, (c - expected).abs().max().item())
        if not error <= tolerance:
            print(f"{name:>8}: FAIL: max error {error:.3g} > {tolerance:.3g} after the timed runs")
            failed += 1
            continue
        print(
            f"{name:>8}: {flops / ms / 1e9:6.0f} TFLOP/s, {cublas / ms:.2f} of cuBLAS, "
            f"max error {error:.3g}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
