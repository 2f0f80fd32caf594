"""The wgmma probe (`tilec.benchmarks.wgmma_probe`) without a GPU: its PTX assembles for
sm_90a with no spills and has the pipeline's instructions, its shared-memory layouts are
bijections, its descriptors decode to what was put in, and -- the check that catches a wrong
LBO or SBO before any GPU time is spent -- the canonical-layout walk a wgmma makes from each
descriptor reads exactly the A and B elements the copies put there."""

from __future__ import annotations

import re

import pytest

from tilec.benchmarks.wgmma_probe import (
    A_LBO,
    A_SBO,
    A_TILE_BYTES,
    B_LBO,
    B_SBO,
    BASE_SLACK,
    BK,
    BM,
    DEFAULT_CONFIGS,
    KERNEL,
    PARAMETER_REGISTERS,
    a_descriptor,
    a_offset,
    b_descriptor,
    b_offset,
    b_tile_bytes,
    decode_descriptor,
    descriptor,
    k_major_address,
    main,
    mn_major_address,
    probe_abi,
    stage_bytes,
    wgmma_ptx,
)
from tilec.lowering.ptxas import assemble, find_ptxas

CONFIG_IDS = [f"{bn},{stages}" for bn, stages in DEFAULT_CONFIGS]
BNS = sorted({bn for bn, _ in DEFAULT_CONFIGS})
# A 1024-aligned dynamic shared-memory base that is not 0, as the kernel rounds its base to.
SMEM_BASE = 1024


def _loop(ptx: str) -> str:
    return ptx[ptx.index("$k_loop:") : ptx.index("@%p_loop bra $k_loop;")]


@pytest.mark.skipif(find_ptxas() is None, reason="no ptxas (CUDA on PATH or nvidia-cuda-nvcc)")
@pytest.mark.parametrize(("bn", "stages"), DEFAULT_CONFIGS, ids=CONFIG_IDS)
def test_ptx_assembles_without_spills(bn, stages):
    report = assemble(wgmma_ptx(bn, stages), "sm_90a")
    kernel = report[KERNEL]
    assert not kernel.spills and kernel.stack_frame == 0, kernel
    assert kernel.registers <= 255


@pytest.mark.parametrize(("bn", "stages"), DEFAULT_CONFIGS, ids=CONFIG_IDS)
def test_ptx_pipeline_instructions(bn, stages):
    ptx = wgmma_ptx(bn, stages)
    assert ".target sm_90a" in ptx and ".reqntid 256, 1, 1" in ptx
    assert ".extern .shared .align 1024 .b8 smem[];" in ptx
    loop = _loop(ptx)
    wgmmas = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(\S+) \{([^}]*)\}, [^;]*, (\S+);", loop)
    assert len(wgmmas) == BK // 16 == 4
    for shape, accumulators, last in wgmmas:
        assert shape == f"m64n{bn}k16.f32.f16.f16"
        assert len(accumulators.split(",")) == bn // 2
        assert last == "1"  # tnspB: B is N-major
    assert re.search(r", %p_one, 1, 1, 0, 1;", loop)
    order = [
        f"cp.async.wait_group {stages - 2};",
        "fence.proxy.async.shared::cta;",
        "bar.sync 0;",
        "cp.async.commit_group;",
        "wgmma.fence.sync.aligned;",
        "wgmma.mma_async",
        "wgmma.commit_group.sync.aligned;",
        "wgmma.wait_group.sync.aligned 0;",
    ]
    positions = [loop.index(s) for s in order]
    assert positions == sorted(positions), "the loop's steps are out of order"
    copies_per_tile = (BM * BK + BK * bn) // 8 // 256
    assert loop.count("cp.async.cg.shared.global") == copies_per_tile
    prologue = ptx[: ptx.index("$k_loop:")]
    assert prologue.count("cp.async.commit_group;") == stages - 1
    assert prologue.count("cp.async.cg.shared.global") == copies_per_tile * (stages - 1)
    assert ptx.count("st.global.v2.f32") == 2 * (bn // 8)


@pytest.mark.parametrize(("bn", "stages"), DEFAULT_CONFIGS, ids=CONFIG_IDS)
def test_abi_matches_the_tensor_core_kernel(bn, stages):
    abi = probe_abi(bn, stages)
    assert abi.name == KERNEL and abi.num_threads == 256
    assert [g.tile for g in abi.grid] == [BM, bn]
    assert abi.shared_bytes >= stages * stage_bytes(bn) + BASE_SLACK
    assert abi.shared_bytes <= 227 * 1024  # an H100/H200 block's opt-in limit
    ptx = wgmma_ptx(bn, stages)
    params = re.findall(r"\.param \.u64 (\w+)", ptx)
    assert len(params) == len(abi.parameters) == len(PARAMETER_REGISTERS)
    # The registers name each parameter: tensor letter and which extent/stride it is.
    for p, reg in zip(abi.parameters, PARAMETER_REGISTERS):
        assert reg[0] == p.argument.lower()
        if p.kind == "stride":
            assert reg.endswith(f"s{p.axis}")
        elif p.kind == "extent":
            assert reg[2:] == p.dim.lower()
        else:
            assert reg.endswith("ptr")


@pytest.mark.parametrize("bn", BNS)
def test_stage_layout_is_a_bijection(bn):
    a = {a_offset(m, k) // 2 for m in range(BM) for k in range(BK)}
    assert a == set(range(A_TILE_BYTES // 2))
    b = {b_offset(k, n) // 2 for k in range(BK) for n in range(bn)}
    assert b == set(range(b_tile_bytes(bn) // 2))
    assert stage_bytes(bn) % 1024 == 0 and A_TILE_BYTES % 1024 == 0


def test_descriptor_fields_round_trip():
    for address, lbo, sbo in ((0x400, 16, 1024), (0x3FFF0, 8192, 1024), (0x12340, 256, 512)):
        desc = descriptor(address, lbo, sbo)
        assert decode_descriptor(desc) == {
            "address": address,
            "lbo": lbo,
            "sbo": sbo,
            "base_offset": 0,
            "swizzle": 1,
        }
        reserved = 3 << 14 | 3 << 30 | 0xFFFF << 46  # and base offset 0 (bits 49-51)
        assert desc >> 62 == 1 and desc & reserved == 0
    with pytest.raises(ValueError):
        descriptor(0x40000, 16, 1024)  # past the 18-bit shared window the field holds
    with pytest.raises(ValueError):
        descriptor(0x408, 16, 1024)  # not 16-byte aligned


def test_descriptors_match_the_kernel_constants():
    """The PTX builds descriptors from a low word ((address >> 4) | LBO field) and one high
    word: the Python descriptors, split the same way, give those words."""
    ptx = wgmma_ptx(128, 3)
    high = int(re.search(r"mov\.u32 %dhi, (\d+);", ptx).group(1))
    for desc in (a_descriptor(SMEM_BASE, 1, 2), b_descriptor(SMEM_BASE + A_TILE_BYTES, 3)):
        assert desc >> 32 == high
    assert f"or.b32 %alo, %alo, {(A_LBO >> 4) << 16};" in ptx
    assert f"or.b32 %blo, %blo, {(B_LBO >> 4) << 16};" in ptx
    assert "add.u32 %alo, %alo, 2;" in ptx  # kk * 32 bytes along A's rows
    assert "add.u32 %blo, %blo, 128;" in ptx  # kk * 16 rows of 128 bytes of B
    assert decode_descriptor(a_descriptor(0, 0, 0))["lbo"] == A_LBO == 16
    assert (A_SBO, B_LBO, B_SBO) == (1024, 8192, 1024)


@pytest.mark.parametrize("stage", [0, 1, 3])
def test_wgmma_reads_the_a_elements_the_copies_wrote(stage):
    """Warpgroup g's k-step kk reads A rows 64g .. 64g + 63, columns 16kk .. 16kk + 15."""
    a_base = SMEM_BASE + stage * stage_bytes(256)
    for group in range(2):
        for kk in range(BK // 16):
            desc = a_descriptor(a_base, group, kk)
            for row in range(64):
                for k in range(16):
                    got = k_major_address(desc, row, k)
                    want = a_base + a_offset(64 * group + row, 16 * kk + k)
                    assert got == want, (group, kk, row, k)


@pytest.mark.parametrize("bn", BNS)
@pytest.mark.parametrize("stage", [0, 2])
def test_wgmma_reads_the_b_elements_the_copies_wrote(bn, stage):
    """k-step kk reads B rows 16kk .. 16kk + 15, all BN columns."""
    b_base = SMEM_BASE + stage * stage_bytes(bn) + A_TILE_BYTES
    for kk in range(BK // 16):
        desc = b_descriptor(b_base, kk)
        for k in range(16):
            for n in range(bn):
                got = mn_major_address(desc, k, n)
                assert got == b_base + b_offset(16 * kk + k, n), (kk, k, n)


def test_a_wrong_stride_offset_is_caught():
    """The walk is sensitive to the fields: swapping B's LBO and SBO reads other elements."""
    b_base = SMEM_BASE + A_TILE_BYTES
    swapped = descriptor(b_base, B_SBO, B_LBO)
    assert any(
        mn_major_address(swapped, k, n) != b_base + b_offset(k, n)
        for k in range(16)
        for n in range(128)
    )


def test_print_writes_the_ptx(capsys):
    assert main(["--print", "256,3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("// tilec wgmma probe") and "m64n256k16" in out
    assert "cp.async.wait_group 1;" in out


def test_refuses_sizes_that_are_not_whole_tiles():
    with pytest.raises(SystemExit):
        main(["--size", "4000"])
    with pytest.raises(SystemExit):
        main(["--size", "4096", "--config", "192,3"])
