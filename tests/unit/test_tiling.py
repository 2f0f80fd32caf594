"""The `tiling` pass: translation validation of every example through the interpreter, the
grouped block order at grid sizes that are not multiples of the group, and its choices."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import tilec
import tilec.passes.tiling  # registers the pass even where tilec.passes does not import it
from tests.validation import kernel_dimensions, run_kernel
from tilec.diagnostics import TileError
from tilec.dialects import tile as T
from tilec.dialects.tile import MmaLayout
from tilec.interp.runner import random_arguments
from tilec.ir.verifier import verify
from tilec.passmanager import PassContext, parse_pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.tile")))
PIPELINE = "canonicalize,cse,tiling,assign-layouts,canonicalize,cse,dce"
SIZE_SETS = [(1, 3, 2), (37, 19, 53)]


def _extents(func, sizes) -> dict[str, int]:
    pins = func.attributes.get("tilec.pinned_tiles")
    pinned = dict(pins.value) if pins is not None else {}
    return {
        d: 2 if pinned.get("B" + d) == 1 else sizes[i % len(sizes)]
        for i, d in enumerate(kernel_dimensions(func))
    }


def _validate(module, name: str, pipeline: str, inputs: list) -> None:
    """Run `pipeline` one pass at a time; after each, the kernel computes what it did before."""
    context = PassContext()
    for p in parse_pipeline(pipeline):
        before = module.clone()
        context.current_pass = p.name
        p.run(module, context)
        verify(module)
        after, tile_sizes = run_kernel(module, name, inputs, None)
        expected, _ = run_kernel(before, name, inputs, tile_sizes)
        for got, want in zip(after, expected):
            np.testing.assert_array_equal(got, want, err_msg=f"pass '{p.name}' changed {name}")


def _cases():
    for path in EXAMPLES:
        for name in tilec.compile(path).kernels:
            for sizes in SIZE_SETS:
                yield pytest.param(path, name, sizes, id=f"{os.path.basename(path)}:{name}:{sizes}")


@pytest.mark.parametrize(("path", "name", "sizes"), list(_cases()))
def test_tiling_pipeline_preserves_results(path, name, sizes):
    module = tilec.compile(path, kernels=[name]).module
    func = module.lookup(name)
    inputs = random_arguments(func, _extents(func, sizes), seed=len(kernel_dimensions(func)))
    _validate(module, name, PIPELINE, inputs)


@pytest.mark.parametrize("name", ["attention", "attention_causal"])
def test_attention_with_mma_layouts_preserves_results(name):
    """With the head dimension known both dots are tiled for mma: the accumulator chains are
    #mma and the interpreter still computes the same thing."""
    path = os.path.join(ROOT, "examples", "attention.tile")
    module = tilec.compile(path, kernels=[name]).module
    func = module.lookup(name)
    extents = {d: {"B": 2, "H": 1, "D": 16}.get(d, 37) for d in kernel_dimensions(func)}
    inputs = random_arguments(func, extents, seed=3)
    pipeline = PIPELINE.replace("tiling", 'tiling{extents="D=16"}')
    _validate(module, name, f'assume{{all="aligned,unit,divisible"}},{pipeline}', inputs)
    dots = [op for op in module.walk() if isinstance(op, T.DotOp)]
    assert len(dots) == 2
    assert {op.result.type.layout for op in dots} == {MmaLayout(2, (4, 1), (16, 8, 16))}


# Grids (blocks along M, blocks along N) at 16x16 tiles: edges where the last group is partial,
# a single row or column, and more rows than a group.
GRIDS = [(7, 5), (9, 2), (1, 4), (5, 1), (17, 3), (3, 3), (8, 8)]


@pytest.mark.parametrize("group_m", [2, 3, 8])
@pytest.mark.parametrize(("rows", "cols"), GRIDS)
def test_grouped_block_order_is_a_permutation(rows, cols, group_m):
    """Every block still computes exactly one tile: grouped and ungrouped results are equal,
    including grids whose extents are not multiples of the tile or of the group."""
    path = os.path.join(ROOT, "examples", "matmul.tile")
    extents = {"M": rows * 16 - 5, "N": cols * 16 - 3, "K": 20}
    tiles = 'tiles="BM=16,BN=16,BK=16"'
    results = {}
    for g in (1, group_m):
        program = tilec.compile(
            path, kernels=["matmul"], pipeline=f"canonicalize,cse,tiling{{{tiles} group_m={g}}}"
        )
        func = program.module.lookup("matmul")
        assert ("tilec.group_m" in func.attributes) == (g > 1)
        inputs = random_arguments(func, extents, seed=7)
        results[g], _ = run_kernel(program.module, "matmul", inputs, None)
    np.testing.assert_array_equal(results[group_m][2], results[1][2])
    a, b = (x.astype(np.float32) for x in inputs[:2])
    np.testing.assert_allclose(results[group_m][2].astype(np.float32), a @ b, rtol=2e-2, atol=0.1)


FACTS = 'assume{all="aligned,unit,divisible"}'  # what @tilec.jit finds for contiguous tensors


def _tiled(source_path: str, kernel: str, options: str = "", facts: str = FACTS) -> tuple:
    tiling = f"tiling{{{options}}}" if options else "tiling"
    pipeline = ",".join(p for p in (facts, "canonicalize,cse", tiling) if p)
    program = tilec.compile(source_path, kernels=[kernel], pipeline=pipeline)
    func = program.module.lookup(kernel)
    sizes = {str(s): int(n) for s, n in func.attributes["tilec.tile_sizes"].value}
    dots = [op for op in func.walk() if isinstance(op, T.DotOp)]
    return func, sizes, dots, [r.message for r in program.remarks]


def test_default_matmul_is_128x128x32_on_2x2_warps():
    func, sizes, dots, remarks = _tiled(os.path.join(ROOT, "examples", "matmul.tile"), "matmul")
    assert sizes == {"BM": 128, "BN": 128, "BK": 32}
    assert func.attributes["tilec.num_warps"].value == 4
    assert dots[0].result.type.layout == MmaLayout(2, (2, 2), (16, 8, 16))
    assert any(
        "64 KiB shared (4 stages" in r and "128 accumulator registers/thread" in r for r in remarks
    )


def test_without_facts_on_the_operands_a_smaller_accumulator_is_preferred():
    """Operand rows not known contiguous are copied element by element (a 64-bit address
    each): a 128x128 accumulator would spill, so 64x64 wins and the remark says why."""
    path = os.path.join(ROOT, "examples", "matmul.tile")
    _, sizes, _, remarks = _tiled(path, "matmul", facts="")
    assert (sizes["BM"], sizes["BN"]) == (64, 64)
    assert any("a.stride.1, b.stride.1 not known to be 1" in r for r in remarks)


def test_known_small_extents_give_more_blocks():
    path = os.path.join(ROOT, "examples", "matmul.tile")
    _, sizes, _, _ = _tiled(path, "matmul", 'extents="M=1024,N=1024,K=1024"')
    assert (sizes["BM"], sizes["BN"]) == (64, 64)  # 256 blocks for 132 SMs, not 64
    _, sizes, _, _ = _tiled(path, "matmul", 'extents="M=4096,N=4096,K=4096"')
    assert (sizes["BM"], sizes["BN"]) == (128, 128)


def test_mma_false_keeps_the_fma_path():
    _, sizes, dots, remarks = _tiled(
        os.path.join(ROOT, "examples", "matmul.tile"), "matmul", "mma=false"
    )
    assert dots[0].result.type.layout is None
    assert sizes == {"BM": 64, "BN": 64, "BK": 32}  # specialize's heuristic
    assert any("option mma=false" in r for r in remarks)


def test_pinned_tile_that_cannot_use_mma_is_an_error():
    path = os.path.join(ROOT, "examples", "matmul.tile")
    with pytest.raises(TileError, match=r"M tile BM=8 \(option tiles\) is not a multiple of 16"):
        _tiled(path, "matmul", 'tiles="BM=8"')


def test_every_example_reaches_ptx_with_tiling():
    for path in EXAMPLES:
        program = tilec.compile(path, pipeline=PIPELINE, target="ptx", arch="sm_90a")
        assert ".entry" in program.ptx


def test_a_pinned_tile_larger_than_any_block_is_a_located_error(tmp_path):
    # Found by the mutation fuzzer (tilec.fuzz, seed 5469): a pin of 4096 x 4096 made
    # smem-placement try to build a 128 GiB array (an internal compiler error).
    import tilec
    from tilec.diagnostics import TileError

    path = tmp_path / "big.tile"
    path.write_text(
        '@kernel(tile={"M": 4096, "N": 4096})\n'
        "def big(x: f32[M, N], y: f32[M, N]):\n"
        "    for tm, tn in tiles(M, N):\n"
        "        y[tm, tn] = x[tm, tn] * 2.0\n"
    )
    with pytest.raises(TileError, match=r"a tile of 4096x4096 \(16777216 elements\) is larger"):
        tilec.compile(path, target="ptx")


def test_a_sequential_tile_no_moved_tile_has_stops_growing():
    """A mutated fuzz kernel (tilec.fuzz.mutate seed 5958): the K loop's tile size grew while
    nothing was in flight, since the largest moved tile does not have it, until its size had
    thousands of digits. It stops at the largest tile now."""
    source = (
        '@kernel(tile={"M": 128}, stages=1)\n'
        "def k1(x1003: i64[E, K, 4], x1011: f32[M, 4], x1012: bf16[M, 4], x1013: i64[4, M, 4],\n"
        "       y1025: i64[M, D], s1005: i32, s1026: f32):\n"
        "    for tm in tiles(M):\n"
        "        for tk in tiles(K):\n"
        "            for e in tiles(E, tile={E: 1}):\n"
        "                t1004 = (x1003[e, tk, 3])[:, None]\n"
        "            t1014 = (-where((rand(s1005, arange(4)) <= 0), (x1011[tm, :] // "
        "x1012[tm, :]), (x1013[:, tm, 2].T).to(f16)))\n"
        "        y1025[tm, :] = (full([1, D], s1026, f16)).to(i64)\n"
    )
    module = tilec.compile(source, pipeline="canonicalize,cse,tiling").module
    sizes = dict(module.lookup("k1").attributes["tilec.tile_sizes"].value)
    assert 1 <= sizes["BK"] <= 4096


@pytest.mark.parametrize("depth", [13, 32])
def test_a_dot_over_a_short_whole_dimension_takes_mma_sync_on_sm_90a(tmp_path, depth):
    """Found by the fuzzer (seed 308 of a 4-kernel program): a dot outside any loop whose K
    is a whole dimension of 13 f16 (a tile of 16: rows of 32 bytes) was planned for wgmma with
    A in registers, and the lowering, whose k-steps walk whole 128-byte rows, refused it (an
    internal error). It takes mma.sync now."""
    path = tmp_path / "short.tile"
    path.write_text(
        "def short(a: f16[M, D], b: f16[D, N], c: f32[M, N]):\n"
        "    for tm, tn in tiles(M, N):\n"
        "        c[tm, tn] = a[tm, :] @ b[:, tn]\n"
    )
    pipeline = 'assume{all="aligned,unit,divisible"},' + tilec.compiler.DEFAULT_PIPELINE.replace(
        ",tiling,", f',tiling{{arch=sm_90a extents="M=72,N=40,D={depth}"}},'
    )
    program = tilec.compile(path, target="ptx", arch="sm_90a", pipeline=pipeline)
    assert "mma.sync" in program.ptx and "wgmma" not in program.ptx
