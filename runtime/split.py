"""Split reductions at launch: how many blocks the split axis gets (`choose_split`), and the
workspace and counters that split blocks share (`Workspaces`).

A kernel that `split-reduction` split has one more grid axis, whose count S is chosen here,
per launch, from the ABI's `SplitAxis` (it knows nothing of the IR):

S is the count that minimises a time model of the launch, from what the ABI knows (the
blocks of the other axes, the loop's trips and the bytes each loads, the partials a combine
round reads) and what the loaded kernel's occupancy says (SMs, blocks per SM):

* **The loop**: each block runs `ceil(trips / S)` iterations one after another, and, split,
  pays `SPLIT_FIXED_S` besides (its start, its partial, the fence, the ticket); the blocks
  beyond what the SMs hold run in later waves. An iteration takes `ITERATION_S` (a load's
  round trip and the adds), or longer where the blocks on the busiest SM load more than its
  bandwidth (`SM_BYTES_PER_S`, the copy bandwidth over 132 SMs) moves in that time: an SM
  with one block of 16 KiB iterations streams 23 GB/s, with four the SM's whole share, so
  splits that leave some SMs one block and others two are as slow as the SMs with two.
* **A split scan** (`scan`: the loop stores as it goes, `passes/split_scan.py`) runs each
  block's chunk twice, once reduced and once scanned from the chunks before it: twice the
  iterations, at the bytes of the scanning pass (its loads and stores; the reducing pass's
  loads are the same and mostly L2 hits the second time, which the model does not credit).
* **A split multi-pass kernel** (`passes`: reductions over one extent, then a loop that
  applies them, `passes/split_passes.py`; the bytes an iteration of each pass moves) runs its
  k passes one after another, pass p on R_p = (S + k - 1 - p) // k blocks: a chain of
  ceil(trips / R_p) iterations, its R_p x B blocks alone sharing the SMs' bandwidth at its
  bytes; unsplit, the loops one after the other in each block. S is 1 or at least k (a block a
  pass), and every block of a later pass combines the partials of the passes before it.
* **The combine** (S > 1): the last block of each output tile reads the S partials `rows` a
  round, `COMBINE_ROUND_S` each. A kernel whose atomics combine the partials (`atomic`, from
  `accumulate-atomics`: each split block adds its own) has no combine rounds; each element of
  the output then takes S atomic updates, which its L2 slice applies one after another,
  `ATOMIC_UPDATE_S` each.

More splits shorten the chain of iterations until the bandwidth bounds the loop; past that
they only add combine rounds. A grid whose other axes give every SM a block is not split: the
splits' purpose is the idle SMs, and the model was fitted on grids of 1 to 16 blocks; on a busy
SM more blocks only overlap chains the resident ones overlap already (2026-12-06, H100: 512
bags of `embedding_bag`, 3.9 blocks an SM, ran 1.6x slower at the S = 4 the chain model chose,
its iterations L2 hits two steps ahead, about 0.2 us each, not the 0.7 us round trip below). Ties go to the fewer splits (less workspace). Fitted on the H200
(2026-12-02, column sums and sums of squares of 3000 x 1000 to 262144 x 512 after
`defer-reduction`, every split count timed by the tuner: docs/benchmarks.md); the rules it
replaces (at least 128 KiB streamed per split, combine rounds under an eighth of a block's
iterations) chose 45 splits where 132 ran 20% faster for 16384 x 128.

**A split GEMM** (the loop accumulates a dot: `SplitAxis.dot_bm`) is compute-bound, its
operand tiles re-read by other blocks from L2, so the bandwidth model above does not hold
for it: its S comes from the SM model `tiling` ranked its wgmma tiles by
(`tilec.passes.wgmma_model.best_split`: each block's k-steps on the tensor cores, the waves
of blocks, the partial tiles written to the workspace and read back by the last block, and
no faster than its operands' bytes from DRAM), for the launch's tiles, k-steps and extents
(`choose_dot_split`).

A pin (`split=N`, `SplitAxis.pinned`) fixes S whatever the model says.

**The workspace** (`Workspaces`, one per process): per GPU and stream, one allocation holding
the counters (zeroed when it is made: a split kernel leaves them at 0) and the slots. It is
made with `cuMemAllocAsync` and `cuMemsetD32Async` on the launch's stream, so it is ordered
before the kernel that first uses it; one stream's launches run one after another, so they
may share it, kernel after kernel. When a launch needs more, a larger one is made and the
old one is kept (never freed): a CUDA graph that captured it stays valid. Under graph
capture nothing is allocated: a launch that finds no large enough workspace for the
capturing stream runs with S = 1 (correct, unsplit), so warm the kernel up on the capturing
stream first (`torch.cuda.graph(g, stream=s)` after a call on `s`).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_SPLIT",
    "WORKSPACES",
    "Workspaces",
    "choose_dot_split",
    "choose_split",
    "split_grid",
    "split_time",
]

ITERATION_S = 0.7e-6  # one loop iteration of a block: a load's round trip, the adds
SM_BYTES_PER_S = 32e9  # an SM's share of the copy bandwidth (4.2 TB/s over 132 SMs)
# What a split block costs besides its iterations, in every wave: its start, the first load's
# latency, its partial, the fence and the ticket.
SPLIT_FIXED_S = 2.0e-6
COMBINE_ROUND_S = 0.9e-6  # one round of the combine: an L2 read of `rows` partials, a reduction
# One atomic update of an element that others update too, applied in turn at its L2 slice:
# column sums of 262144 x 512 f32 by one atomic per element and row (examples/
# col_sum_atomic.tile before accumulate-atomics) took 1.52 ms on the H200 for 262144
# updates of each element (docs/benchmarks.md, 2026-12-02).
ATOMIC_UPDATE_S = 5.8e-9
MAX_SPLIT = 65535  # the split axis is grid axis y or z: CUDA's limit there
COUNTER_BYTES = 4
_ALIGN = 256  # the slots start 256-byte aligned after the counters


@functools.lru_cache(maxsize=4096)
def choose_split(
    *,
    sm_count: int,
    blocks_per_sm: int,
    base_blocks: int,
    trips: int,
    trip_bytes: int,
    rows: int,
    atomic: bool = False,
    scan: bool = False,
    passes: tuple[int, ...] = (),
) -> int:
    """The split count S for a launch whose other axes have `base_blocks` blocks, on a GPU of
    `sm_count` SMs that each hold `blocks_per_sm` blocks of the kernel, of a loop of `trips`
    iterations loading `trip_bytes` each, whose combine reads `rows` partials a round (or,
    `atomic`, is the atomics of each block; `scan`: a split scan, whose blocks run their chunks
    twice; `passes`: a multi-pass kernel's passes, the bytes an iteration of each moves): the
    count of least `split_time` (the module docstring says why), 1 or at least a block a
    pass."""
    if base_blocks <= 0 or trips <= 1 or base_blocks >= sm_count:
        # Nothing to split, or every SM has a block of the other axes already: splits would
        # only add blocks to busy SMs, whose chains of iterations overlap there already.
        return 1
    resident = sm_count * max(blocks_per_sm, 1)
    k = max(len(passes), 1)
    most = min(k * trips, MAX_SPLIT, max(k, 4 * resident // base_blocks))
    args = (sm_count, blocks_per_sm, base_blocks, trips, trip_bytes, rows, atomic, scan, passes)
    best, best_s = 1, split_time(1, *args)
    for count in range(max(2, k), most + 1):
        t = split_time(count, *args)
        if t < best_s * (1 - 1e-9):
            best, best_s = count, t
    return best


def choose_dot_split(
    split: Any,
    base_blocks: int,
    trips: int,
    residency: tuple[int, int],
    extents: dict[str, int] | None = None,
    dram_rate: float | None = None,
) -> int:
    """S for a split GEMM (`split.dot_bm` set): the model `tiling` ranked its tiles by, for
    the launch's tiles and k-steps (`tilec.passes.wgmma_model.best_split`), with the DRAM
    floor of its operands: (M + N) x K elements, M and N the extents of `split.dot_dims`, at
    the GPU's DRAM rate (`dram_rate`, bytes a model clock: `tilec.runtime.device.
    dram_bytes_per_clock`; None: the H200's, what tiling assumed)."""
    operand_bytes = 0
    dims = [d for d in split.dot_dims.split(",") if d] if split.dot_dims else []
    if dims and extents is not None:
        k = split.dim if isinstance(split.dim, int) else extents.get(split.dim, 0)
        rows = sum(int(d) if d.isdigit() else extents.get(d, 0) for d in dims)
        operand_bytes = rows * k * split.dot_bytes
    return _dot_split(
        split.dot_bm,
        split.dot_bn,
        split.step,
        trips,
        base_blocks,
        split.dot_bytes,
        residency,
        operand_bytes,
        dram_rate,
    )


@functools.lru_cache(maxsize=4096)
def _dot_split(
    bm: int,
    bn: int,
    bk: int,
    trips: int,
    blocks: int,
    element_bytes: int,
    residency: tuple,
    operand_bytes: int = 0,
    dram_rate: float | None = None,
) -> int:
    from tilec.passes.pipeline import MAX_DEFAULT_STAGES
    from tilec.passes.wgmma_model import DRAM_BYTES_PER_CLOCK, best_split

    if blocks <= 0 or trips <= 1:
        return 1
    sm_count, per_sm = residency
    count, _ = best_split(
        bm,
        bn,
        bk,
        trips,
        blocks,
        max(per_sm, 1),
        sm_count,
        MAX_DEFAULT_STAGES,
        element_bytes,
        operand_bytes=operand_bytes,
        dram_rate=dram_rate or DRAM_BYTES_PER_CLOCK,
    )
    return min(count, MAX_SPLIT)


def split_time(
    count: int,
    sm_count: int,
    blocks_per_sm: int,
    base_blocks: int,
    trips: int,
    trip_bytes: int,
    rows: int,
    atomic: bool = False,
    scan: bool = False,
    passes: tuple[int, ...] = (),
) -> float:
    """The modelled seconds of a launch split `count` ways (the module docstring)."""
    blocks = base_blocks * count
    per_sm = max(blocks_per_sm, 1)
    waves = -(-blocks // (sm_count * per_sm))

    def chain_time(active: int, iterations: int, trip: int) -> float:
        # The busiest SM of a wave holds this many of the `active` blocks; their iterations
        # share its bandwidth.
        busiest = min(per_sm, -(-active // sm_count))
        return iterations * max(ITERATION_S, busiest * max(trip, 1) / SM_BYTES_PER_S)

    fixed = SPLIT_FIXED_S if count > 1 else 0.0
    combined = count  # partials the combine reads back
    if passes:
        # Each pass's chunks after the pass before, its blocks alone loading; the last pass's
        # blocks read back the partials of every pass before it.
        k = len(passes)
        counts = [max((count + k - 1 - p) // k, 1) for p in range(k)]
        chains = sum(
            chain_time(base_blocks * r, -(-trips // r), trip) for r, trip in zip(counts, passes)
        )
        combined = sum(counts[:-1]) if count > 1 else 0
    else:
        # A split scan runs its chunk twice: reduced, then scanned from the chunks before it.
        chain = (2 if scan and count > 1 else 1) * -(-trips // count)
        chains = chain_time(blocks, chain, trip_bytes)
    t = waves * (chains + fixed)
    if atomic:
        t += count * ATOMIC_UPDATE_S
    elif count > 1:
        t += -(-combined // max(rows, 1)) * COMBINE_ROUND_S
    return t


@dataclass
class _Workspace:
    address: int  # the counters; the slots start at `slots`
    counters: int  # how many
    slot_bytes: int  # bytes of slots

    @property
    def slots(self) -> int:
        return self.address + _slots_offset(self.counters)


def _slots_offset(counters: int) -> int:
    return -(-counters * COUNTER_BYTES // _ALIGN) * _ALIGN


class Workspaces:
    """The workspace of each (GPU, stream): `get` hands out the addresses of the counters and
    of the slots, growing the allocation when a launch needs more."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, int], _Workspace] = {}
        self._kept: list[int] = []  # outgrown allocations: a captured graph may still use them
        self._lock = threading.Lock()

    def get(
        self, ordinal: int, stream: int, slot_bytes: int, counters: int
    ) -> tuple[int, int] | None:
        """`(slots, counters)` addresses with at least `slot_bytes` of slots and `counters`
        zeroed counters on GPU `ordinal` for launches on `stream`; None during graph capture
        when none is there yet (the caller then launches with S = 1)."""
        entry = self._entries.get((ordinal, stream))
        if entry is not None and entry.slot_bytes >= slot_bytes and entry.counters >= counters:
            return entry.slots, entry.address
        with self._lock:
            return self._grow(ordinal, stream, slot_bytes, counters)

    def _grow(self, ordinal: int, stream: int, slot_bytes: int, counters: int):
        from tilec.runtime.device import check, cuda_modules, get_device

        _, driver = cuda_modules()
        err, status = driver.cuStreamIsCapturing(stream)
        check(driver, err, "cuStreamIsCapturing")
        if status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
            return None
        old = self._entries.get((ordinal, stream))
        if old is not None:  # grow geometrically, so that growing is rare
            slot_bytes = max(slot_bytes, 2 * old.slot_bytes)
            counters = max(counters, 2 * old.counters)
            self._kept.append(old.address)
        get_device(ordinal).set_current()
        total = _slots_offset(counters) + slot_bytes
        err, pointer = driver.cuMemAllocAsync(total, stream)
        check(driver, err, "cuMemAllocAsync (split workspace)")
        (err,) = driver.cuMemsetD32Async(pointer, 0, _slots_offset(counters) // 4, stream)
        check(driver, err, "cuMemsetD32Async (split counters)")
        entry = _Workspace(int(pointer), counters, slot_bytes)
        self._entries[(ordinal, stream)] = entry
        return entry.slots, entry.address


WORKSPACES = Workspaces()


def split_grid(
    split: Any,
    axis: int,
    grid: tuple[int, int, int],
    extents: dict[str, int],
    residency: tuple[int, int],
    ordinal: int,
    stream: int,
    dram_rate: float | None = None,
) -> tuple[tuple[int, int, int], tuple[int, int]]:
    """The grid with its split axis `axis`, and the hidden parameters (slots, counters), for
    one launch of a kernel with `split` (a `SplitAxis`) whose other axes make `grid` (1 along
    `axis`), on GPU `ordinal` whose SMs and blocks per SM are `residency` and whose DRAM
    moves `dram_rate` bytes a model clock (a split GEMM's floor), on `stream`."""
    base = grid[0] * grid[1] * grid[2]
    if split.pinned:
        count = min(split.pinned, MAX_SPLIT)
    elif split.dot_bm:
        extent = split.dim if isinstance(split.dim, int) else extents.get(split.dim, 0)
        trips = -(-extent // split.step)
        count = choose_dot_split(split, base, trips, residency, extents, dram_rate)
    else:
        extent = split.dim if isinstance(split.dim, int) else extents.get(split.dim, 0)
        count = choose_split(
            sm_count=residency[0],
            blocks_per_sm=residency[1],
            base_blocks=base,
            trips=-(-extent // split.step),
            trip_bytes=split.trip_bytes,
            rows=split.rows,
            atomic=bool(split.atomic),
            scan=bool(split.scan),
            passes=tuple(split.passes),
        )
    if count == 1:
        return grid, (0, 0)
    if split.atomic:  # each split block's atomics add its partials: nothing is shared
        full = list(grid)
        full[axis] = count
        return (full[0], full[1], full[2]), (0, 0)
    # A split scan's (or two-pass kernel's) counters: a ticket and a finish counter per block
    # of the other axes, then its S flags (passes/split_scan.py, split_passes.py).
    flagged = split.scan or split.passes
    counters = base * (2 + count) if flagged else base
    addresses = WORKSPACES.get(ordinal, stream, base * count * split.slot_bytes, counters)
    if addresses is None:
        return grid, (0, 0)  # capturing, and no workspace yet: unsplit
    full = list(grid)
    full[axis] = count
    return (full[0], full[1], full[2]), addresses
