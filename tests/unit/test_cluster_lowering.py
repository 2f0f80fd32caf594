"""Thread-block clusters on the CPU: the PTX of a warp-specialized GEMM whose blocks run in
clusters of two (`tilec.cluster = [2, 1]`) asks for that shape, issues each block's half of
B's tile as multicast copies, releases stages in both blocks (`mapa` and a cluster-scope
arrival) and synchronizes the cluster; ptxas takes it. The ABI carries the shape, and the
launcher rounds the grid up to whole clusters on every path (tilec.lowering.cluster,
tilec.lowering.tma, runtime/launcher.py)."""

from __future__ import annotations

import dataclasses
import functools
import os
import re

import pytest

from tilec.diagnostics import InternalCompilerError
from tilec.ir import parse_module
from tilec.ir.types import SharedType
from tilec.lowering import compile_to_ptx, kernel_abi, lower_to_llvm
from tilec.lowering.abi import KernelABI
from tilec.lowering.tma import box_plan, multicast_plan
from tilec.runtime import Launcher, LaunchError

# `gemm_nn` (4000 x 3000 x 1000) compiled with pipeline.warp_specialize = 1, up to the IR that
# lowering takes, then edited as passes/pipeline_cluster.py will write it: B's tile shared by
# the two blocks of a cluster (which compute vertically adjacent tiles of C), each stage released
# in both blocks, a cluster barrier after the inits and another before the invalidations.
CLUSTERED_GEMM = """
#mma = #mma<version = 3, warps_per_cta = [8, 1], instr_shape = [64, 256, 16]>
#shared = #shared<vec = 8, per_phase = 1, max_phase = 8, order = [1, 0], interleave = 2>
#shared1 = #shared<vec = 8, per_phase = 1, max_phase = 8, order = [1, 0], col_block = 64>
#dot_operand = #dot_operand<index = 0, warps_per_cta = [8, 1], version = 3>
#dot_operand1 = #dot_operand<index = 1, warps_per_cta = [8, 1], version = 3>
#blocked = #blocked<size_per_thread = [1, 8], threads_per_warp = [1, 32], warps_per_cta = [8, 1], order = [1, 0]>
module {
  func @gemm_nn(%a: !tile.tensor<MxKxf16>, %b: !tile.tensor<KxNxf16>, %c: !tile.tensor<MxNxf16>) attributes {tilec.grid = [["M", "BM"], ["N", "BN"]], tilec.aligned = ["a", "b", "c"], tilec.unit = ["a.stride.1", "b.stride.1", "c.stride.1"], tilec.divisible = ["a.extent.0", "c.extent.0"], tilec.multiples = [["a.extent.1", 8], ["a.stride.0", 8], ["b.extent.1", 8], ["b.stride.0", 8], ["c.extent.1", 8], ["c.stride.0", 8]], tilec.tile_sizes = [["BM", 128], ["BN", 256], ["BK", 64]], tilec.num_warps = 8, tilec.min_blocks_per_sm = 1, tilec.group_m = 8, tilec.shared_bytes = 196864, tilec.producer_warps = 4, tilec.cluster = [2, 1]} {
    %0 = arith.constant 8 : index
    %c0 = arith.constant 0 : index
    %BM = arith.constant 128 : index
    %BN = arith.constant 256 : index
    %BK = arith.constant 64 : index
    %num_stages = arith.constant 4 : index
    %1 = arith.constant 2 : index
    %2 = arith.constant 1 : index
    %acc = tile.full 0.0 : tile<128x256xf32, #mma>
    %3 = arith.constant 3 : index
    %empty_barriers = tile.alloc_shared {offset = 196736} : !smem<4x1xi64>
    %stage_barriers = tile.alloc_shared {offset = 196608} : !smem<4x1xi64>
    %a_smem = tile.alloc_shared {offset = 131072} : !smem<4x128x64xf16, #shared>
    %b_smem = tile.alloc_shared {offset = 0} : !smem<4x64x256xf16, #shared1>
    %4 = tile.program_id 0
    %5 = tile.program_id 1
    %6 = tile.num_programs 0
    %7 = tile.num_programs 1
    %8 = arith.muli %5, %6 : index
    %9 = arith.addi %4, %8 : index
    %10 = arith.muli %7, %0 : index
    %11 = arith.index_cast %9 : index -> i32
    %12 = arith.index_cast %10 : index -> i32
    %13 = arith.divsi %11, %12 : i32
    %14 = arith.index_cast %13 : i32 -> index
    %15 = arith.muli %14, %0 : index
    %16 = arith.subi %6, %15 : index
    %17 = arith.minsi %16, %0 : index
    %18 = arith.remsi %11, %12 : i32
    %19 = arith.index_cast %17 : index -> i32
    %20 = arith.remsi %18, %19 : i32
    %21 = arith.index_cast %20 : i32 -> index
    %pid_m = arith.addi %15, %21 : index
    %22 = arith.divsi %18, %19 : i32
    %pid_n = arith.index_cast %22 : i32 -> index
    %K = tile.dim %a, 1
    %tm = arith.muli %pid_m, %BM : index
    %tn = arith.muli %pid_n, %BN : index
    tile.mbarrier_init %stage_barriers {arrivals = 1} : !smem<4x1xi64>
    tile.mbarrier_init %empty_barriers {arrivals = 2, warps = 8} : !smem<4x1xi64>
    tile.cluster_barrier
    tile.warp_specialize {producer_warps = 4, producer_registers = 40, consumer_registers = 232} producer {
      scf.for %tk = %c0 to %K step %BK {
        %step_index = arith.divsi %tk, %BK : index
        %slot = arith.remsi %step_index, %num_stages : index
        %23 = arith.divsi %step_index, %num_stages : index
        %phase = arith.remsi %23, %1 : index
        %released_phase = arith.subi %2, %phase : index
        tile.mbarrier_wait %empty_barriers[%slot], %released_phase : !smem<4x1xi64>
        %24 = arith.cmpi slt, %tk, %K : index
        tile.mbarrier_expect %stage_barriers[%slot], pred %24 {bytes = 49152} : !smem<4x1xi64>
        tile.tma_copy %a[%tm, %tk], %a_smem[%slot], %stage_barriers[%slot], pred %24 {box = [8, 64], folded} : !tile.tensor<MxKxf16>, !smem<4x128x64xf16, #shared>, !smem<4x1xi64>
        tile.tma_copy %b[%tk, %tn], %b_smem[%slot], %stage_barriers[%slot], pred %24 {box = [64, 64], multicast = 2} : !tile.tensor<KxNxf16>, !smem<4x64x256xf16, #shared1>, !smem<4x1xi64>
        scf.yield
      }
      scf.yield
    } consumer {
      %acc_1 = scf.for %tk_1 = %c0 to %K step %BK iter_args(%acc_2 = %acc) {
        %step_index_1 = arith.divsi %tk_1, %BK : index
        %slot_1 = arith.remsi %step_index_1, %num_stages : index
        %25 = arith.divsi %step_index_1, %num_stages : index
        %phase_1 = arith.remsi %25, %1 : index
        tile.mbarrier_wait %stage_barriers[%slot_1], %phase_1 : !smem<4x1xi64>
        %a_op = tile.load_shared %a_smem[%slot_1] : !smem<4x128x64xf16, #shared> -> tile<128x64xf16, #dot_operand>
        %b_op = tile.load_shared %b_smem[%slot_1] : !smem<4x64x256xf16, #shared1> -> tile<64x256xf16, #dot_operand1>
        %acc_3 = tile.dot %a_op, %b_op, %acc_2 : tile<128x64xf16, #dot_operand>, tile<64x256xf16, #dot_operand1>, tile<128x256xf32, #mma> -> tile<128x256xf32, #mma>
        %26 = arith.addi %step_index_1, %3 : index
        %released_slot = arith.remsi %26, %num_stages : index
        %27 = arith.cmpi sgt, %step_index_1, %c0 : index
        tile.mbarrier_arrive %empty_barriers[%released_slot], pred %27 {cluster = 2} : !smem<4x1xi64>
        scf.yield %acc_3 : tile<128x256xf32, #mma>
      } {tilec.dots_in_flight = 1}
      %28 = tile.cast %acc_1 : tile<128x256xf32, #mma> -> tile<128x256xf16, #mma>
      %29 = tile.convert_layout %28 : tile<128x256xf16, #mma> -> tile<128x256xf16, #blocked>
      tile.store %c[%tm, %tn], %29 {vector = 8} : !tile.tensor<MxNxf16>, tile<128x256xf16, #blocked>
      scf.yield
    }
    tile.cluster_barrier
    tile.mbarrier_inval %stage_barriers : !smem<4x1xi64>
    tile.mbarrier_inval %empty_barriers : !smem<4x1xi64>
    return
  }
}
"""
B_COPY = "{box = [64, 64], multicast = 2}"
MULTICAST = re.compile(r"cp\.async\.bulk\.tensor\.2d\..*\.multicast::cluster \[")
PLAIN_2D = re.compile(r"cp\.async\.bulk\.tensor\.2d\.[^ ]*complete_tx::bytes \[")


@functools.cache
def _ptx(text: str = CLUSTERED_GEMM) -> str:
    return compile_to_ptx(parse_module(text), "sm_90a", line_info=False)


def _count(pattern: re.Pattern[str], ptx: str) -> int:
    return sum(1 for line in ptx.splitlines() if pattern.search(line))


def test_the_ptx_requires_clusters_of_two_blocks_along_x():
    ptx = _ptx()
    assert ".explicitcluster" in ptx
    assert ".reqnctapercluster 2, 1, 1" in ptx
    unclustered = CLUSTERED_GEMM.replace(", tilec.cluster = [2, 1]", "")
    unclustered = unclustered.replace(" {cluster = 2}", "").replace(B_COPY, "{box = [64, 64]}")
    assert "cluster" not in kernel_abi(parse_module(unclustered).functions[0]).to_json()
    assert ".reqnctapercluster" not in _ptx(unclustered)


def test_each_block_multicasts_its_half_of_b():
    """B's slot of 64 x 256 is four 64 x 64 boxes; the two blocks of a cluster each issue two,
    to both blocks (the mask 0b11), at the rank's shift: 128 columns and 16 KiB."""
    ptx = _ptx()
    assert _count(MULTICAST, ptx) == 2
    assert "mov.u32 %r" in ptx and "%cluster_ctarank;" in ptx
    # A's copies are untouched: its 8-row boxes (16), plain, and its folded 5-D box.
    assert _count(PLAIN_2D, ptx) == 16
    unshared = _ptx(CLUSTERED_GEMM.replace(B_COPY, "{box = [64, 64]}"))
    assert _count(MULTICAST, unshared) == 0
    assert _count(PLAIN_2D, unshared) == 16 + 4
    llvm = str(lower_to_llvm(parse_module(CLUSTERED_GEMM), "sm_90a", line_info=False))
    calls = [line for line in llvm.splitlines() if "multicast::cluster" in line]
    assert len(calls) == 2
    assert all('"r,l,r,r,r,h,~{memory}"' in c and "i16 3)" in c for c in calls)


def test_a_stage_is_released_in_both_blocks_and_the_cluster_synchronizes():
    ptx = _ptx()
    assert re.findall(r"mapa\.shared::cluster\.u32 remote, %r\d+, (\d);", ptx) == ["0", "1"]
    arrivals = ptx.count("mbarrier.arrive.shared::cluster.b64 _, [remote];")
    assert arrivals == 2
    assert "mbarrier.arrive.shared::cta.b64" not in ptx  # no local-only arrival left
    assert ptx.count("barrier.cluster.arrive.release.aligned;") == 2
    assert ptx.count("barrier.cluster.wait.acquire.aligned;") == 2
    inits = ptx.index("fence.mbarrier_init.release.cluster;")
    assert inits < ptx.index("barrier.cluster.arrive.release.aligned;")
    assert ptx.rindex("barrier.cluster.wait.acquire.aligned;") < ptx.index("mbarrier.inval")


def _ptxas() -> str | None:
    from tilec.lowering.ptxas import find_ptxas

    found = find_ptxas()
    if found is None:
        try:
            import triton
        except ImportError:
            return None
        bundled = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/ptxas")
        found = bundled if os.access(bundled, os.X_OK) else None
    return found


def test_ptxas_assembles_the_clustered_kernel():
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("no ptxas")
    from tilec.lowering.ptxas import assemble

    resources = assemble(_ptx(), "sm_90a", ptxas)["gemm_nn"]
    assert resources.spill_stores == 0 and resources.spill_loads == 0


def _slot(layout: str, shape: str) -> SharedType:
    module = parse_module(
        f"#s = {layout}\nfunc @f() {{\n  %x = tile.alloc_shared : !smem<{shape}xf16, #s>\n"
        "  return\n}\n"
    )
    (alloc,) = [op for op in module.functions[0].walk() if op.name == "tile.alloc_shared"]
    return alloc.result.type


def test_a_part_is_part_zero_moved_by_the_rank_or_the_copy_is_refused():
    b = _slot(
        "#shared<vec = 8, per_phase = 1, max_phase = 8, order = [1, 0], col_block = 64>", "4x64x256"
    )
    box, boxes = box_plan(b)
    plan = multicast_plan((64, 256), box, boxes, 2)
    assert (plan.dim, plan.step, plan.smem_step) == (1, 128, 2 * 64 * 64 * 2)
    assert [p.start for p in plan.boxes] == [(0, 0), (0, 64)]
    # Interleaved 8-row groups (group L of 16 at 2 (L mod 8) + L div 8): rows 64.. of part 1
    # sit one atom after part 0's, but in four parts, part 2's groups are not part 1's moved.
    a = _slot(
        "#shared<vec = 8, per_phase = 1, max_phase = 8, order = [1, 0], interleave = 2>", "4x128x64"
    )
    box, boxes = box_plan(a)
    plan = multicast_plan((128, 64), box, boxes, 2)
    assert (plan.dim, plan.step, plan.smem_step) == (0, 64, 1024)
    assert "is not part 0 moved" in multicast_plan((128, 64), box, boxes, 4)
    assert "split" in multicast_plan((64, 256), (64, 64), boxes, 3)


def test_sharing_among_other_than_the_whole_cluster_is_refused():
    """The mask and the arrivals reach ranks 0 .. C-1: C must be the cluster's size."""
    with pytest.raises(InternalCompilerError, match=r"shares among 2 blocks.*clusters of 4") as e:
        _ptx(CLUSTERED_GEMM.replace("tilec.cluster = [2, 1]", "tilec.cluster = [2, 2]"))
    saved = re.search(r"saved in (\S+\.tir)", str(e.value))
    if saved:  # the IR an internal error saves: not needed here
        os.remove(saved.group(1))


def test_the_abi_carries_the_cluster_shape_through_json():
    abi = kernel_abi(parse_module(CLUSTERED_GEMM).functions[0])
    assert abi.cluster == (2, 1, 1) and abi.clustered
    data = abi.to_json()
    assert data["cluster"] == [2, 1, 1]
    assert KernelABI.from_json(data) == abi
    del data["cluster"]  # the JSON of a kernel without clusters (and of older caches)
    assert KernelABI.from_json(data).cluster == (1, 1, 1)


def test_the_grid_is_whole_clusters_on_every_launch_path(monkeypatch):
    from tests.unit.test_runtime import gpu, launcher
    from tilec.runtime import launcher as launcher_module

    saxpy = launcher("vector_add", "saxpy")
    x, y = gpu((1000,), address=0x1000), gpu((1000,), address=0x2000)
    out = gpu((1000,), (3,), "f32", 0x3000)
    arguments = saxpy.checker.convert([1.5, x, y, out])
    blocks = saxpy.grid(arguments)[0]
    assert blocks % 2 == 1, "the test needs an odd number of tiles"
    clustered = Launcher(saxpy.ptx, dataclasses.replace(saxpy.abi, cluster=(2, 1, 1)))
    assert clustered.grid(arguments) == (blocks + 1, 1, 1)

    grids = []

    def launch_kernel(*args):
        grids.append(args[1:4])
        return (0,)

    driver = type("Driver", (), {"cuLaunchKernel": staticmethod(launch_kernel), "CUstream": int})
    monkeypatch.setattr(launcher_module, "cuda_modules", lambda: (None, driver))
    clustered._functions[0] = object()
    clustered.launch(arguments, stream=5)
    clustered.fast_launch(arguments.values, {}, clustered.grid(arguments), 0)(
        1.5, 0x1000, 0x2000, 0x3000, 77
    )
    # A grid made elsewhere (not by `grid`) is rounded too.
    clustered.fast_launch(arguments.values, {}, (blocks, 1, 1), 0)(1.5, 0x1000, 0x2000, 0x3000, 7)
    assert grids == [(blocks + 1, 1, 1)] * 3


def test_the_grid_limits_hold_after_rounding_and_persistent_clusters_lie_along_x():
    from tests.unit.test_runtime import gpu, launcher

    matmul = launcher("matmul", "matmul")
    tile = {axis.dim: axis.tile for axis in matmul.abi.grid}
    n = 65535 * tile["N"]  # exactly CUDA's most blocks along y: 65536 in pairs
    args = matmul.checker.convert(
        [gpu((64, 5), dtype="f16"), gpu((5, n), dtype="f16"), gpu((64, n), dtype="f16")]
    )
    assert matmul.grid(args)[1] == 65535
    paired = Launcher(matmul.ptx, dataclasses.replace(matmul.abi, cluster=(1, 2, 1)))
    with pytest.raises(LaunchError, match=r"65536 blocks of .* \(in clusters of 2\)"):
        paired.grid(args)
    with pytest.raises(LaunchError, match="persistent and runs in clusters"):
        Launcher(matmul.ptx, dataclasses.replace(matmul.abi, cluster=(1, 2, 1), persistent=True))
    # along x a persistent grid is whole clusters of the blocks the GPU holds
    walking = Launcher(
        matmul.ptx, dataclasses.replace(matmul.abi, cluster=(2, 1, 1), persistent=True)
    )
    walking._residency[0] = (7, 1)  # 7 SMs, one block each: 3 clusters of 2
    assert walking.persistent_grid((8, 1, 1), 0) == (6, 1, 1)
    assert walking.persistent_grid((2, 1, 1), 0) == (2, 1, 1)
    with pytest.raises(LaunchError, match="its grid tiles 2 of them"):
        Launcher(matmul.ptx, dataclasses.replace(matmul.abi, cluster=(1, 1, 2)))


def test_the_stage_barriers_stay_at_the_blocks_scope_in_a_cluster():
    """The waits and the cross-block arrivals of a clustered kernel keep the default
    semantics (acquire/release at the block's scope), as an unclustered kernel's do: the
    phases publish TMA writes counted by the barrier itself, and an arrival publishes no data.
    Cluster scope made each one a MEMBAR (2.4x slower on the H100, 2026-12-06)."""
    ptx = _ptx()
    waits = [line for line in ptx.splitlines() if "mbarrier.try_wait.parity" in line]
    arrivals = [line for line in ptx.splitlines() if "mbarrier.arrive" in line]
    assert waits and arrivals
    assert not any(".acquire." in line or ".release." in line for line in waits + arrivals)
    unclustered = CLUSTERED_GEMM.replace(", tilec.cluster = [2, 1]", "")
    unclustered = unclustered.replace(" {cluster = 2}", "").replace(B_COPY, "{box = [64, 64]}")
    unclustered = unclustered.replace("tile.cluster_barrier", "tile.barrier")
    plain = [line for line in _ptx(unclustered).splitlines() if "mbarrier.try_wait" in line]
    assert [line.strip() for line in plain] == [line.strip() for line in waits]
