"""The tuner's search space (tilec/tune/space.py): which decisions a kernel has, read off the
heuristic's own compilation; what a compiled kernel shows of each; and the pins that
reproduce a config. Real compiles, no GPU."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tilec.frontend.sema_common import _MAX_STAGES, _WARP_COUNTS
from tilec.jit import load_kernel
from tilec.passes.tiling import Tiling
from tilec.tune import problem_for
from tilec.tune.space import applicable, current_value, kernel_line, read_back, split_config
from tilec.tune.worker import build_candidate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _heuristic(example: str, kernel: str, sizes: dict[str, int], **options):
    from tilec.ir.parser import parse_module

    problem = problem_for(load_kernel(EXAMPLES / example, kernel, **options), sizes, arch="sm_90a")
    build = build_candidate(problem, {})
    assert build.status == "built", build.reason
    return problem, build, parse_module(build.ir, "x").functions[0]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))


def test_a_matmul_searches_tiles_warps_stages_block_order_and_tensor_core_path():
    problem, build, kernel = _heuristic("matmul.tile", "matmul", {"M": 256, "N": 256, "K": 128})
    names = {d.name: d for d in applicable(kernel, problem.extents, "sm_90a")}
    assert {"tile.M", "tile.N", "tile.K", "warps", "stages"} <= set(names)
    assert {"tiling.group_m", "tiling.wgmma", "tiling.mma"} <= set(names)
    # The values are the frontend's own ranges of `@kernel(warps=..., stages=...)`.
    assert names["warps"].values == tuple(_WARP_COUNTS)
    assert names["stages"].values == tuple(range(1, _MAX_STAGES + 1))
    # Tile sizes stop at the extent (K=128) and at 256.
    assert max(names["tile.K"].values) == 128 and max(names["tile.M"].values) == 256
    # The heuristic on sm_90a (read back from the compiled kernel): wgmma, in 64x64 tiles on
    # 4 warps (16 blocks; 128x128 tiles would be 4).
    assert build.decisions["path"] == "wgmma" and build.decisions["warps"] == 4
    assert (build.decisions["tile.M"], build.decisions["tile.N"]) == (64, 64)
    assert current_value(names["tiling.wgmma"], {}, build.decisions) is True


def test_pass_option_decisions_exist_only_where_the_pass_declares_the_option():
    declared = {f.name for f in dataclasses.fields(Tiling.Options)}
    assert {"group_m", "wgmma", "mma"} <= declared
    _problem, _build, kernel = _heuristic("matmul.tile", "matmul", {"M": 64, "N": 64, "K": 64})
    for decision in applicable(kernel, {"M": 64, "N": 64, "K": 64}, "sm_80"):
        if not decision.pin:
            pass_name, _, option = decision.name.partition(".")
            assert pass_name in ("tiling", "assign-layouts") and option
    # wgmma is a decision on sm_90a only.
    names = [d.name for d in applicable(kernel, {"M": 64, "N": 64, "K": 64}, "sm_80")]
    assert "tiling.wgmma" not in names and "tiling.mma" in names


def test_a_rowwise_kernel_has_rows_per_block_and_a_walk_but_no_dot_decisions():
    """softmax: rows a block and warps; its blocks could walk the rows, loading the next one
    a row ahead (walk-tiles with stages 2: nothing every row shares, but a reduction); no
    tensor-core or block-order decisions."""
    problem, build, kernel = _heuristic("softmax.tile", "softmax", {"M": 64, "N": 300})
    decisions = {d.name: d for d in applicable(kernel, problem.extents, "sm_90a", fixed=["tile.N"])}
    assert "tile.M" in decisions and "warps" in decisions
    assert decisions["walk-tiles.enable"].values == (True, False)
    assert decisions["stages"].values == (1, 2)
    assert not {"tiling.group_m", "tiling.wgmma", "tile.N"} & set(decisions)
    assert "path" not in build.decisions


def test_author_pins_are_fixed_and_read_back():
    _problem, build, kernel = _heuristic(
        "matmul.tile", "matmul_pinned", {"M": 256, "N": 256, "K": 128}
    )
    assert build.decisions["tile.M"] == 128 and build.decisions["tile.K"] == 32
    assert build.decisions["warps"] == 8 and build.decisions["stages"] == 3
    assert read_back(kernel)["path"] == "mma"  # pinned tiles: no wgmma


def test_nearest_values_are_tried_first():
    _problem, _build, kernel = _heuristic("matmul.tile", "matmul", {"M": 256, "N": 256, "K": 64})
    warps = next(d for d in applicable(kernel, {"M": 256, "N": 256, "K": 64}, "sm_90a"))
    assert warps.nearest_first(warps.values[2])[:2] == [warps.values[1], warps.values[3]]


def test_a_config_splits_into_pins_and_pass_options_and_prints_as_a_kernel_line():
    config = {"tile.M": 64, "tile.N": 128, "warps": 4, "stages": 3, "tiling.group_m": 4}
    options, pass_options = split_config(config)
    assert options == {"tile": {"M": 64, "N": 128}, "warps": 4, "stages": 3}
    assert pass_options == {"tiling": {"group_m": 4}}
    lines = kernel_line(config)
    assert lines[0] == '@kernel(tile={"M": 64, "N": 128}, warps=4, stages=3)'
    assert lines[-1] == "# --pass-option tiling.group_m=4"
    assert kernel_line({}) == ["# the heuristics' own choice: nothing to pin"]


def test_the_pins_reproduce_the_candidate():
    """The printed `@kernel(...)` line, pasted into the source, compiles to the same code."""
    problem, _build, _kernel = _heuristic("matmul.tile", "matmul", {"M": 256, "N": 256, "K": 64})
    config = {"tile.M": 64, "warps": 4, "stages": 2}
    tuned = build_candidate(problem, config)
    text = problem.text.replace("def matmul(a:", kernel_line(config)[0] + "\ndef matmul(a:", 1)
    pasted = dataclasses.replace(problem, text=text)

    def code(ptx: str) -> list[str]:  # the line info moved down a line with the decorator
        return [ln for ln in ptx.splitlines() if not ln.strip().startswith((".loc", ".file"))]

    assert code(build_candidate(pasted, {}).ptx) == code(tuned.ptx)


def test_a_candidate_the_passes_refuse_is_pruned_with_their_reason_before_any_ptx():
    problem, _build, _kernel = _heuristic("matmul.tile", "matmul", {"M": 256, "N": 256, "K": 64})
    build = build_candidate(problem, {"tile.K": 8})
    assert build.status == "pruned" and not build.ptx
    assert "not a multiple of 16" in build.reason and "mma.sync" in build.reason
    # Shared memory past the limit: the operand buffers of 256x256x64 tiles in 8 stages.
    big = build_candidate(problem, {"tile.M": 256, "tile.N": 256, "tile.K": 64, "stages": 8})
    assert big.status == "pruned" and not big.ptx
    assert "512 KiB of shared memory" in big.reason and "over the limit" in big.reason


def test_a_tma_gemm_searches_persistent_blocks_and_warp_specialization():
    """Both off by default, both searched wherever the TMA unit fills the main loop; a
    candidate that turns them on reads back as such."""
    problem, build, kernel = _heuristic(
        "gemm_layouts.tile", "gemm_nn", {"M": 2048, "N": 2048, "K": 1024}
    )
    names = {d.name: d for d in applicable(kernel, problem.extents, "sm_90a")}
    assert build.decisions["pipeline.tma"] == 1
    assert build.decisions["pipeline.persistent"] == 0
    assert build.decisions["pipeline.warp_specialize"] == 0
    assert names["pipeline.persistent"].values == (0, 1)
    assert names["pipeline.warp_specialize"].values == (0, 1)
    built = build_candidate(problem, {"pipeline.warp_specialize": 1, "pipeline.persistent": 1})
    assert built.status == "built", built.reason
    assert built.decisions["pipeline.warp_specialize"] == 1
    assert built.decisions["pipeline.persistent"] == 1


def test_a_tma_gemm_searches_clusters_of_two_blocks():
    """On by default where b's rows straddle lines (N = 3000: cluster_motive), off where
    pinned; a candidate with clusters is warp-specialized and reads back its blocks a
    cluster; a layout the clusters refuse is pruned with the reason."""
    problem, build, kernel = _heuristic(
        "gemm_layouts.tile", "gemm_nn", {"M": 4000, "N": 3000, "K": 1000}
    )
    names = {d.name: d for d in applicable(kernel, problem.extents, "sm_90a")}
    assert build.decisions["pipeline.cluster"] == 2
    assert names["pipeline.cluster"].values == (1, 2)
    plain = build_candidate(problem, {"pipeline.cluster": 1})
    assert plain.decisions["pipeline.cluster"] == 1 and ".reqnctapercluster" not in plain.ptx
    built = build_candidate(problem, {"pipeline.cluster": 2})
    assert built.status == "built", built.reason
    assert built.decisions["pipeline.cluster"] == 2
    assert built.decisions["pipeline.warp_specialize"] == 1
    assert ".reqnctapercluster 2, 1, 1" in built.ptx
    refused = build_candidate(problem, {"pipeline.cluster": 2, "pipeline.warp_specialize": 0})
    assert refused.status == "pruned" and "not warp-specialized" in refused.reason


def test_a_grid_put_in_memory_order_searches_the_declared_order_too():
    """head_gate's grid is declared S, H; tiling puts H first (it walks the innermost
    dimension the blocks move): the tuner reads that back and also tries the declared order."""
    problem, build, kernel = _heuristic(
        "head_gate.tile", "head_gate", {"S": 1024, "H": 8, "D": 128}
    )
    assert build.decisions["tiling.inner_first"] is True
    names = {d.name: d for d in applicable(kernel, problem.extents, "sm_90a")}
    assert names["tiling.inner_first"].values == (True, False)
    declared = build_candidate(problem, {"tiling.inner_first": False})
    assert declared.status == "built" and "tiling.inner_first" not in declared.decisions
    assert declared.ptx != build.ptx
    _p, gemm, _k = _heuristic("gemm_layouts.tile", "gemm_nn", {"M": 256, "N": 256, "K": 64})
    assert "tiling.inner_first" not in gemm.decisions  # a kernel with dots keeps its order


def test_a_sliding_window_searches_whether_its_shown_tiles_run_unmasked():
    _problem, build, kernel = _heuristic(
        "attention_window.tile", "attention_window", {"B": 1, "H": 2, "S": 512, "T": 512, "D": 64}
    )
    assert build.decisions["mask-bounds.middle"] is True
    names = {d.name: d for d in applicable(kernel, {"S": 512, "T": 512}, "sm_90a")}
    assert names["mask-bounds.middle"].values == (True, False)
    off = build_candidate(_problem, {"mask-bounds.middle": False})
    assert off.status == "built" and "mask-bounds.middle" not in off.decisions
    # Plain attention has no middle range: no such decision.
    _p, plain, _kernel = _heuristic(
        "attention.tile", "attention", {"B": 1, "H": 2, "M": 512, "N": 512, "D": 64}
    )
    assert "mask-bounds.middle" not in plain.decisions


def test_a_row_kernel_that_could_walk_its_rows_searches_the_walk_and_the_prefetch():
    # layer norm at an odd width: w and b are read by every row, so walk-tiles could make the
    # blocks walk rows (off by default), and the walk's row load could be issued a row ahead
    sizes = {"M": 6000, "N": 3001}
    problem, build, kernel = _heuristic("layernorm.tile", "layernorm", sizes)
    names = {d.name: d for d in applicable(kernel, problem.extents, "sm_90a")}
    assert names["walk-tiles.enable"].values == (True, False)
    assert build.decisions["walk-tiles.enable"] is False
    # the walk's loop could load a row ahead: stages 1 or 2 (the same code without the walk)
    assert names["stages"].values == (1, 2)
    walked = build_candidate(problem, {"walk-tiles.enable": True})
    assert walked.decisions["walk-tiles.enable"] is True and walked.decisions["stages"] == 1
    ahead = build_candidate(problem, {"walk-tiles.enable": True, "stages": 2})
    assert ahead.decisions["stages"] == 2  # read back from the kernel, not the config
    assert ahead.ptx != walked.ptx
    # a scan over a row's tiles: its loads could go an iteration ahead; stages is 1 or 2
    problem, build, kernel = _heuristic("cumsum.tile", "cumsum_rows", {"M": 3000, "N": 10007})
    names = {d.name: d for d in applicable(kernel, problem.extents, "sm_90a")}
    assert names["stages"].values == (1, 2) and build.decisions["stages"] == 1
    assert build_candidate(problem, {"stages": 2}).decisions["stages"] == 2


def test_a_flattened_kernel_searches_its_own_grid_too():
    # SwiGLU over [M, N] of dense tensors: flatten runs it as one dimension (M_N); the tuner
    # also tries the kernel's own 2-D grid, whose tiles are then decisions of their own
    problem, build, kernel = _heuristic("swiglu.tile", "swiglu", {"M": 3000, "N": 7001})
    names = {d.name: d for d in applicable(kernel, problem.extents, "sm_90a")}
    assert names["flatten.enable"].values == (True, False)
    assert build.decisions["flatten.enable"] is True and "tile.M_N" in build.decisions
    grid = build_candidate(problem, {"flatten.enable": False})
    assert grid.status == "built" and "flatten.enable" not in grid.decisions
    assert "tile.N" in grid.decisions and "tile.M_N" not in grid.decisions
