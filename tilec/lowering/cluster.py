"""Thread-block clusters on sm_90a: the kernel's cluster shape, the PTX annotations that ask
for it, and the lowering of the ops by which the blocks of a cluster reach each other.

A kernel with `tilec.cluster = [c0, c1, ...]` (blocks a cluster along each grid axis,
`tilec.dialects.builtin.CLUSTER_ATTRIBUTE`) gets the NVVM annotations `cluster_dim_x/y/z`, from
which LLVM's NVPTX backend prints `.explicitcluster` and `.reqnctapercluster cx, cy, cz`: the
cluster shape is part of the kernel, and a plain launch whose grid is a multiple of it runs
in clusters (`tilec.runtime.launcher`, docs/abi.md).

* `tile.cluster_barrier`: every thread `barrier.cluster.arrive.release` then
  `barrier.cluster.wait.acquire` -- the release/acquire pair makes the `mbarrier.init`s before
  it (each followed by `fence.mbarrier_init.release.cluster`) visible to the other blocks,
  whose copies and arrivals may reach this block's barriers only after it.
* `tile.mbarrier_arrive {cluster = C}` (`arrive_in_cluster`): the arriving thread maps its
  barrier's address into each block q < C of the cluster (`mapa`) and arrives there at the
  default semantics (release, the block's scope), as CUTLASS's cluster barriers do. The
  arrival publishes no data: it says that the block's reads of the released slot are over,
  and they are (the consumers arrive after `wgmma.wait_group`, their operands read). A
  `.release.cluster` arrival would order the thread's earlier memory operations at cluster
  scope, a MEMBAR each time: ncu measured 15.9 cycles of `membar` stall an issued instruction
  and the 4096^3 GEMM 2.4x slower with it (2026-12-06, H100).
* A multicast `tile.tma_copy` (`tilec.lowering.tma`) reads the block's rank here
  (`cluster_rank`).

Ranks run 0 .. C-1 with grid axis x fastest (`tilec.dialects.tma.cluster_rank`), and the
lowering of both cluster ops assumes the cluster is exactly the C blocks they name: it checks
that C is the kernel's cluster size.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from tilec.dialects import tma as M
from tilec.dialects.builtin import CLUSTER_ATTRIBUTE, FuncOp
from tilec.ir.core import Operation
from tilec.lowering.shared_memory import I32, _asm

if TYPE_CHECKING:
    from tilec.lowering.llvm import _KernelLowering

__all__ = [
    "LOWERINGS",
    "annotate_cluster",
    "arrive_in_cluster",
    "check_cluster_size",
    "cluster_rank",
    "kernel_cluster",
    "lower_cluster_barrier",
]

MAX_CLUSTER_BLOCKS = 16  # sm_90's largest (non-portable) cluster; 8 is the portable one


def kernel_cluster(kernel: FuncOp) -> tuple[int, int, int]:
    """The blocks a cluster along grid axes x, y, z of `kernel` (`tilec.cluster`, padded with
    1s; (1, 1, 1) without it). A shape that is not 1 to 3 positive counts of at most
    `MAX_CLUSTER_BLOCKS` blocks in all is a ValueError."""
    attr = kernel.attributes.get(CLUSTER_ATTRIBUTE)
    if attr is None:
        return (1, 1, 1)
    dims = [int(e.value) for e in attr.elements]
    if not 1 <= len(dims) <= 3 or min(dims) < 1 or math.prod(dims) > MAX_CLUSTER_BLOCKS:
        raise ValueError(
            f"kernel '{kernel.sym_name}': {CLUSTER_ATTRIBUTE} = {dims} is not a cluster shape "
            f"(1 to 3 axes, at most {MAX_CLUSTER_BLOCKS} blocks in all)"
        )
    dims += [1] * (3 - len(dims))
    return dims[0], dims[1], dims[2]


def annotate_cluster(llmod: ir.Module, fn: ir.Function, cluster: tuple[int, int, int]) -> None:
    """Ask for `cluster` in the PTX of kernel `fn` (`.explicitcluster`, `.reqnctapercluster`);
    nothing for a kernel without clusters, whose PTX stays as it was."""
    if math.prod(cluster) == 1:
        return
    for axis, blocks in zip("xyz", cluster):
        llmod.add_named_metadata(
            "nvvm.annotations",
            [fn, ir.MetaDataString(llmod, f"cluster_dim_{axis}"), ir.Constant(I32, blocks)],
        )


def check_cluster_size(k: _KernelLowering, op: Operation, blocks: int) -> None:
    """`op` shares with `blocks` blocks: the kernel's clusters must be that size, since the
    lowering reaches ranks 0 .. blocks-1 (a multicast's mask, an arrival's targets)."""
    size = math.prod(k.abi.cluster)
    if size != blocks:
        raise ValueError(
            f"{op.name} shares among {blocks} blocks, but kernel '{k.func.sym_name}' runs in "
            f"clusters of {size} ({CLUSTER_ATTRIBUTE} = {list(k.abi.cluster)})"
        )


def cluster_rank(k: _KernelLowering) -> ir.Value:
    """i32: this block's rank in its cluster (`%cluster_ctarank`)."""
    read = ir.InlineAsm(ir.FunctionType(I32, []), "mov.u32 $0, %cluster_ctarank;", "=r")
    return k.b.call(read, [])


def arrive_in_cluster(k: _KernelLowering, address: ir.Value, blocks: int) -> None:
    """One arrival on the mbarrier at shared address `address` of each of ranks 0 ..
    `blocks`-1 of the cluster (this block's among them), by the calling thread."""
    lines = ["{", ".reg .b32 remote;"]
    for q in range(blocks):
        lines.append(f"mapa.shared::cluster.u32 remote, $0, {q};")
        lines.append("mbarrier.arrive.shared::cluster.b64 _, [remote];")
    lines.append("}")
    _asm(k, ir.VoidType(), [address], "\n\t".join(lines), "r,~{memory}")


def lower_cluster_barrier(k: _KernelLowering, op: Operation) -> None:
    _asm(k, ir.VoidType(), [], "barrier.cluster.arrive.release.aligned;", "~{memory}")
    _asm(k, ir.VoidType(), [], "barrier.cluster.wait.acquire.aligned;", "~{memory}")
    # Every thread of the block waited here too: scratch read before it may be overwritten.
    k.unfenced_reads = []


LOWERINGS: dict[type, Any] = {M.ClusterBarrierOp: lower_cluster_barrier}
