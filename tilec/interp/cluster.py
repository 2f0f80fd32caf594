"""Thread-block clusters in the interpreter: the blocks of a cluster run together.

A kernel with `tilec.cluster` (passes/pipeline_cluster.py) runs its grid in clusters of
blocks that reach each other's shared memory: a multicast `tile.tma_copy` writes its part of
a tile into every block of the cluster, and `tile.mbarrier_arrive {cluster}` arrives on every
block's barrier (`tilec.interp.tma`). So the interpreter runs the blocks of one cluster
concurrently, as it runs the regions of a `tile.warp_specialize`: each block is an agent of
one `Roles` baton (and so are its regions, started from inside it), and an agent that waits
on a phase another block must complete hands the baton on. Clusters run one after another.

`tile.cluster_barrier` waits until every block of the cluster has reached it (as many times
as this block has); it orders everything before it in every block before everything after
it, makes each block's mbarrier inits visible to the others (a copy or arrival that reaches
another block's barrier before one is an error), and acts as the block's own barrier. A
block that ends while another block of its cluster may still reach it -- the protocol's last
`tile.cluster_barrier` missing -- is reported when the other block does.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tilec.dialects import tma
from tilec.dialects.builtin import CLUSTER_ATTRIBUTE
from tilec.dialects.shared import BarrierOp
from tilec.interp.pipeline import _async
from tilec.interp.semantics import SEMANTICS, semantics
from tilec.ir.core import Operation

if TYPE_CHECKING:
    from tilec.interp.machine import BlockState

__all__ = ["ClusterRun", "cluster_dims", "cluster_of", "clusters"]


def cluster_dims(func: Any) -> tuple[int, ...] | None:
    """The blocks a cluster along each grid axis of kernel `func`, or None (no clusters)."""
    attr = func.attributes.get(CLUSTER_ATTRIBUTE)
    if attr is None:
        return None
    return tuple(int(e.value) for e in attr.elements)


def clusters(grid: tuple[int, ...], dims: tuple[int, ...]) -> Iterator[list[tuple[int, ...]]]:
    """The program ids of each cluster of `grid` (whose axes are multiples of `dims`), axis 0
    slowest between clusters and rank order (axis 0 fastest) within one."""
    padded = tuple(dims) + (1,) * (len(grid) - len(dims))
    outer = itertools.product(*(range(n // c) for n, c in zip(grid, padded)))
    for corner in outer:
        members = []
        for inner in itertools.product(*(range(c) for c in reversed(padded))):
            offset = inner[::-1]
            members.append(tuple(k * c + o for k, c, o in zip(corner, padded, offset)))
        yield members


@dataclass(eq=False)
class ClusterRun:
    """The blocks of one running cluster (by rank), their baton, and their barriers."""

    dims: tuple[int, ...]
    roles: Any  # tilec.interp.warp_specialize.Roles
    members: list[BlockState] = field(default_factory=list)
    finished: set[int] = field(default_factory=set)  # ranks whose blocks have ended
    barriers_reached: dict[int, int] = field(default_factory=dict)  # rank -> cluster barriers

    def rank(self, state: BlockState) -> int:
        return tma.cluster_rank(state.program_id, self.dims)

    def agent_name(self, state: BlockState) -> str:
        return f"block {self.rank(state)}"


def cluster_of(state: BlockState, op: Operation, ctas: int) -> ClusterRun:
    """The cluster `state` runs in, which `op` needs to have `ctas` blocks; every block of it
    must still be running."""
    cluster = _async(state).cluster
    if cluster is None or len(cluster.members) != ctas:
        found = 1 if cluster is None else len(cluster.members)
        raise state.error(
            op,
            f"reaches the {ctas} blocks of a cluster, but the kernel runs in clusters of {found}",
            hint=f"the kernel's '{CLUSTER_ATTRIBUTE}' must give {ctas} blocks a cluster",
        )
    for peer in cluster.members:
        if cluster.rank(peer) in cluster.finished:
            raise state.error(
                op,
                f"reaches block {peer.program_id} of its cluster, which has already ended",
                hint="end the kernel with a tile.cluster_barrier, so that no block leaves "
                "while another may still reach its shared memory",
            )
    return cluster


def run_cluster(launch: Any, program_ids: list[tuple[int, ...]], trace: Any) -> None:
    """Run the blocks `program_ids` of one cluster of `launch` together to their end."""
    from tilec.interp.machine import BlockState
    from tilec.interp.warp_specialize import Roles

    dims = cluster_dims(launch.func)
    assert dims is not None
    cluster = ClusterRun(dims, Roles())
    cluster.members = [BlockState(launch, pid, trace) for pid in program_ids]
    cluster.members.sort(key=cluster.rank)
    body = launch.func.body.block

    def block(state: BlockState) -> Any:
        def work() -> None:
            try:
                state.run_block(body, launch.arguments)
                _check_leaving(state)
            finally:
                cluster.finished.add(cluster.rank(state))

        return work

    for state in cluster.members:
        _async(state).cluster = cluster
    cluster.roles.run([(cluster.agent_name(s), block(s)) for s in cluster.members])


def _check_leaving(state: BlockState) -> None:
    """A block may end only when no other block of its cluster may still reach it."""
    for barriers in _async(state).mbarriers.values():
        op = barriers.reached_remotely
        if op is not None:
            raise state.error(
                op,
                f"reaches the mbarriers of block {state.program_id}, which then ends with no "
                "tile.cluster_barrier since: on the GPU the block may be gone when it arrives",
                hint="end the kernel with a tile.cluster_barrier",
            )


@semantics(tma.ClusterBarrierOp)
def _cluster_barrier(state: BlockState, op: Operation, args: list[Any]) -> Any:
    cluster = _async(state).cluster
    if cluster is None:
        raise state.error(
            op,
            "is a cluster barrier in a kernel that does not run in clusters",
            hint=f"give the kernel '{CLUSTER_ATTRIBUTE}', or use tile.barrier",
        )
    rank = cluster.rank(state)
    reached = cluster.barriers_reached[rank] = cluster.barriers_reached.get(rank, 0) + 1
    everyone = range(len(cluster.members))

    def missing() -> list[int]:
        return [r for r in everyone if cluster.barriers_reached.get(r, 0) < reached]

    if not missing():
        # The last block to arrive: none has gone past, so the inits made so far are those
        # the barrier orders before every block's next copy or arrival.
        for member in cluster.members:
            for barriers in _async(member).mbarriers.values():
                barriers.reached_remotely = None  # every block is past those
                if barriers.init is not None:
                    barriers.cluster_published = True
    cluster.roles.wait_until(lambda: not missing())
    if missing():
        raise state.error(
            op,
            f"waits for block(s) of rank {missing()} of its cluster, which end or wait "
            "elsewhere without reaching it: a deadlock on the GPU",
            hint="every block of a cluster must run the same tile.cluster_barriers",
        )
    SEMANTICS[BarrierOp](state, op, [])  # also the block's own barrier
    return []
