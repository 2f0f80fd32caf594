"""`CompiledProgram.explain()` / `tilec compile --explain`: every decision of the optimisation
passes, read back from the IR and the remarks, plus ptxas's report when ptxas is there."""

from __future__ import annotations

from pathlib import Path

import pytest

import tilec
import tilec.explain
from tilec.lowering.ptxas import KernelResources, find_ptxas

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def explained(
    name: str, kernel: str, pipeline: str | None = None, arch: str = "sm_90a", **kw
) -> str:
    compiled = tilec.compile(
        EXAMPLES / f"{name}.tile", kernels=[kernel], target="ptx", arch=arch, pipeline=pipeline
    )
    return compiled.explain(**kw)


def aligned_pipeline(pipeline: str = tilec.compiler.DEFAULT_PIPELINE) -> str:
    return f'assume{{all="aligned,unit,divisible"}},{pipeline}'


def section(text: str, label: str) -> str:
    """The lines of one labelled section (its first line and the indented ones after it)."""
    lines = text.splitlines()
    (start,) = [i for i, ln in enumerate(lines) if ln.startswith(f"  {label} ")]
    end = start + 1
    while end < len(lines) and lines[end].startswith("    "):
        end += 1
    return "\n".join(lines[start:end])


def no_ptxas(monkeypatch) -> None:
    monkeypatch.setattr(tilec.explain, "find_ptxas", lambda: None)


def test_matmul_explains_every_decision(monkeypatch):
    no_ptxas(monkeypatch)
    text = explained("matmul", "matmul", aligned_pipeline(), arch="sm_80")  # mma.sync
    assert text.startswith("kernel matmul  (")
    assert "examples/matmul.tile:3)" in text.splitlines()[0]
    grid = section(text, "grid")
    assert "M/128 x N/128 blocks" in grid and "grouped 8 along M for L2 reuse" in grid
    tiles = section(text, "tiles")
    assert "BM=128 BN=128 BK=32" in tiles and "mma.sync tiling" in tiles
    warps = section(text, "warps")
    assert "4: 2x2 warp tiles of 64x64, mma.sync m16n8k16" in warps
    assert "128 accumulator registers/thread" in warps  # the tiling remark: the reason
    layouts = section(text, "layouts")
    assert "#mma<version = 2, warps_per_cta = [2, 2]" in layouts
    assert "#dot_operand<index = 0" in layouts and "#dot_operand<index = 1" in layouts
    assert "#blocked<" in layouts
    shared = section(text, "shared")
    assert "%a_smem 4x128x32xf16  32 KiB @0  swizzle vec=8 per_phase=2 max_phase=4" in shared
    assert "%b_smem 4x32x128xf16  32 KiB @32768  swizzle vec=8 per_phase=1 max_phase=8" in shared
    assert "total 64 KiB of buffers (tilec.shared_bytes)" in shared
    stages = section(text, "stages")
    assert stages.split()[1] == "4" and "the most steps in flight per SM" in stages
    vectors = section(text, "vectors")
    assert "cp.async a -> %a_smem: 16 B" in vectors
    assert "cp.async b -> %b_smem: 16 B" in vectors
    assert "store c: 16 B" in vectors
    assert "ptxas not found" in section(text, "ptxas")


def test_pinned_kernel_says_the_pins(monkeypatch):
    no_ptxas(monkeypatch)
    text = explained("matmul", "matmul_pinned", aligned_pipeline())
    assert "8: 2x4 warp tiles of 64x32" in section(text, "warps")
    assert "pinned by the kernel" in section(text, "tiles")
    stages = section(text, "stages")
    assert stages.split()[1] == "3" and "pinned by the kernel" in stages


def test_softmax_explains_rows_slices_and_no_shared_memory(monkeypatch):
    no_ptxas(monkeypatch)
    compiled = tilec.compile(
        EXAMPLES / "softmax.tile",
        kernels=["softmax"],
        target="ptx",
        arch="sm_90a",
        pipeline=aligned_pipeline(),
    )
    kernel = compiled.module.lookup("softmax")
    sizes = dict(tuple(p) for p in kernel.attributes["tilec.tile_sizes"].value)
    warps = kernel.attributes["tilec.num_warps"].value
    text = compiled.explain()
    assert f"M/{sizes['BM']} blocks" in section(text, "grid")
    assert f"BM={sizes['BM']} BN=1024" in section(text, "tiles")
    assert f"{warps} warps (tiles of " in section(text, "warps")
    layouts = section(text, "layouts")
    assert "#slice<dim = 1" in layouts and "#blocked<size_per_thread = [1, 4]" in layouts
    assert "no buffers" in section(text, "shared")
    assert "1 (no loop streams a tile into shared memory)" in section(text, "stages")
    vectors = section(text, "vectors")
    assert "load x: 16 B" in vectors and "store y: 16 B" in vectors


def test_narrow_accesses_say_why(monkeypatch):
    no_ptxas(monkeypatch)
    text = explained("vector_add", "vector_add")  # no argument facts: one element per access
    vectors = " ".join(section(text, "vectors").split())  # reasons are wrapped
    assert "load x: 4 B" in vectors
    assert "not 16 B:" in vectors and "x not known to be 16-byte aligned" in vectors
    assert "N/" in section(text, "grid") and "blocks (rounded up)" in section(text, "grid")


def test_precision_says_which_ops_are_approximate_and_why(monkeypatch):
    no_ptxas(monkeypatch)
    text = " ".join(section(explained("swiglu", "swiglu"), "precision").split())
    assert text.startswith("precision 1 exp, 1 division on the approximate instructions")
    assert "reaches memory only as bf16" in text
    softmax = section(explained("softmax", "softmax"), "precision")  # f32 rows: all exact
    assert "exact: no f32 division or exp reaches memory only as f16/bf16" in softmax
    off = explained("swiglu", "swiglu", tilec.compiler.build_pipeline(disable=["precision"]))
    assert "exact" in section(off, "precision")


def test_rescale_says_which_multiplies_a_warp_skips(monkeypatch):
    no_ptxas(monkeypatch)
    text = " ".join(section(explained("attention", "attention"), "rescale").split())
    assert text.startswith("rescale 2 multiplies skipped in warps whose factors are all 1")
    assert "exp(u - max(u, r)) is 1 where the running max did not grow" in text
    off = explained(
        "attention", "attention", tilec.compiler.build_pipeline(disable=["skip-unit-factor"])
    )
    assert "  rescale " not in off


def test_disabled_passes_show(monkeypatch):
    no_ptxas(monkeypatch)
    pipeline = tilec.compiler.build_pipeline(disable=["tiling", "pipeline", "vectorize"])
    text = explained("matmul", "matmul", aligned_pipeline(pipeline))
    assert "mma.sync" not in section(text, "warps")
    assert "FMA path" in section(text, "warps")
    assert "grouped" not in section(text, "grid")
    assert "no buffers" in section(text, "shared")
    assert "pipeline did not run" in section(text, "stages")
    vectors = section(text, "vectors")
    assert "load a: 2 B" in vectors and "vectorize disabled" in vectors


def test_ptxas_report_is_shown(monkeypatch):
    monkeypatch.setattr(tilec.explain, "find_ptxas", lambda: "/bin/ptxas")

    def report(ptx: str, arch: str) -> dict[str, KernelResources]:
        assert ".entry vector_add" in ptx and arch == "sm_90a"
        return {"vector_add": KernelResources("vector_add", 40, 8, 4, 16, 0, 1)}

    monkeypatch.setattr(tilec.explain, "assemble", report)
    text = explained("vector_add", "vector_add", aligned_pipeline())
    ptxas = section(text, "ptxas")
    assert "sm_90a: 40 registers, SPILLS 8 B stored / 4 B loaded, 16 B stack" in ptxas
    assert "0 B dynamic shared" in ptxas
    assert "performance loss" not in text


def test_ptxas_performance_losses_are_shown(monkeypatch):
    monkeypatch.setattr(tilec.explain, "find_ptxas", lambda: "/bin/ptxas")
    loss = "C7515: wgmma.mma_async instructions are serialized due to ..."

    def report(ptx: str, arch: str) -> dict[str, KernelResources]:
        resources = KernelResources("vector_add", 40, 0, 0, 0, 0, 1, performance_warnings=(loss,))
        return {"vector_add": resources}

    monkeypatch.setattr(tilec.explain, "assemble", report)
    text = explained("vector_add", "vector_add", aligned_pipeline())
    ptxas = section(text, "ptxas")  # one section: the note is a reason under the figures
    assert "- performance loss C7515: wgmma.mma_async instructions are serialized" in ptxas


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
def test_real_ptxas_reports_registers_and_shared_memory():
    text = explained("matmul", "matmul", aligned_pipeline())
    ptxas = section(text, "ptxas")
    assert ptxas.split()[1] == "sm_90a:" and "registers" in ptxas
    # wgmma 128x256x64: 4 stages of 48 KiB, and their 4 mbarriers (the TMA unit's copies)
    assert "196736 B dynamic shared" in ptxas


def test_matmul_on_sm_90a_explains_the_wgmma_tiling(monkeypatch):
    no_ptxas(monkeypatch)
    text = explained("matmul", "matmul", aligned_pipeline())
    assert "BM=128 BN=256 BK=64" in section(text, "tiles")
    warps = " ".join(section(text, "warps").split())
    assert "8: 2 warpgroups of 64x256, wgmma m64n256k16" in warps
    assert "1 block per SM" in warps and "SM model" in warps
    assert "#mma<version = 3, warps_per_cta = [8, 1], instr_shape = [64, 256, 16]>" in section(
        text, "layouts"
    )
    shared = section(text, "shared")
    assert "interleave = 2" in shared and "col_block = 64" in shared
    stages = " ".join(section(text, "stages").split())
    assert stages.split()[1] == "4" and "1 wgmma group left in flight" in stages


def test_tile_ir_only_says_there_is_no_ptx():
    compiled = tilec.compile(EXAMPLES / "vector_add.tile", kernels=["vector_add"], pipeline="")
    text = compiled.explain()
    assert "not chosen" in section(text, "tiles")
    assert "no PTX" in section(text, "ptxas")
    assert "pipeline did not run" in section(text, "stages")


def test_a_clustered_gemm_says_its_clusters_and_why(monkeypatch):
    no_ptxas(monkeypatch)
    from tilec.compiler import target_pipeline

    pipeline = target_pipeline(aligned_pipeline(), "sm_90a").replace(
        "pipeline{", "pipeline{cluster=2 ", 1
    )
    grid = section(explained("gemm_layouts", "gemm_nn", pipeline), "grid")
    assert "in clusters of 2x1" in grid
    assert "clusters of 2 blocks along M (grid axis 0)" in grid and "multicasts" in grid
