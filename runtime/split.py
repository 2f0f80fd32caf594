"""Split reductions at launch: how many blocks the split axis gets (`choose_split`), and the
workspace and counters that split blocks share (`Workspaces`).

A kernel that `split-reduction` split has one more grid axis, whose count S is chosen here,
per launch, from the ABI's `SplitAxis` (it knows nothing of the IR):

* **Fill the GPU, no more.** A memory-bound kernel is fast when every SM holds all the blocks
  it can (`cuOccupancyMaxActiveBlocksPerMultiprocessor` for the loaded kernel): S is the
  smallest count that gives `SMs x blocks per SM` blocks with the other axes' blocks, and 1
  when those already fill the GPU (a softmax of many rows pays nothing).
* **Each split streams enough.** A block has fixed costs besides its loop: the first load's
  latency, writing its partial and the fence after it, the ticket's round trip to L2 — about
  three memory latencies, 2 µs on an H200. At its share of an SM's bandwidth (4.8 TB/s over
  132 SMs is 36 B/ns; a quarter of it for one of 4 blocks an SM holds) a block moves
  `MIN_SPLIT_BYTES` = 128 KiB in about 14 µs, so the fixed costs stay under 15% of its time:
  S is at most `trips x trip_bytes / MIN_SPLIT_BYTES`.
* **The combine stays small.** The last block reads the S partials `rows` a round, each
  round one L2 read and a reduction — about one loop iteration's time. Keeping the rounds
  under 1/`COMBINE_SHARE` of a block's `trips / S` iterations gives S² <= rows x trips / 8.

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

import math
import threading
from dataclasses import dataclass
from typing import Any

__all__ = [
    "COMBINE_SHARE",
    "MAX_SPLIT",
    "MIN_SPLIT_BYTES",
    "WORKSPACES",
    "Workspaces",
    "choose_split",
    "split_grid",
]

MIN_SPLIT_BYTES = 128 * 1024
COMBINE_SHARE = 8
MAX_SPLIT = 65535  # the split axis is grid axis y or z: CUDA's limit there
COUNTER_BYTES = 4
_ALIGN = 256  # the slots start 256-byte aligned after the counters


def choose_split(
    *,
    sm_count: int,
    blocks_per_sm: int,
    base_blocks: int,
    trips: int,
    trip_bytes: int,
    rows: int,
) -> int:
    """The split count S for a launch whose other axes have `base_blocks` blocks, on a GPU of
    `sm_count` SMs that each hold `blocks_per_sm` blocks of the kernel, of a loop of `trips`
    iterations loading `trip_bytes` each, whose combine reads `rows` partials a round (the
    module docstring says why each limit)."""
    resident = sm_count * max(blocks_per_sm, 1)
    if base_blocks <= 0 or base_blocks >= resident or trips <= 1:
        return 1
    fill = -(-resident // base_blocks)
    by_bytes = trips * max(trip_bytes, 1) // MIN_SPLIT_BYTES
    by_combine = math.isqrt(max(rows, 1) * trips // COMBINE_SHARE)
    return max(1, min(fill, by_bytes, by_combine, trips, MAX_SPLIT))


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
) -> tuple[tuple[int, int, int], tuple[int, int]]:
    """The grid with its split axis `axis`, and the hidden parameters (slots, counters), for
    one launch of a kernel with `split` (a `SplitAxis`) whose other axes make `grid` (1 along
    `axis`), on GPU `ordinal` whose SMs and blocks per SM are `residency`, on `stream`."""
    base = grid[0] * grid[1] * grid[2]
    if split.pinned:
        count = min(split.pinned, MAX_SPLIT)
    else:
        extent = split.dim if isinstance(split.dim, int) else extents.get(split.dim, 0)
        count = choose_split(
            sm_count=residency[0],
            blocks_per_sm=residency[1],
            base_blocks=base,
            trips=-(-extent // split.step),
            trip_bytes=split.trip_bytes,
            rows=split.rows,
        )
    if count == 1:
        return grid, (0, 0)
    addresses = WORKSPACES.get(ordinal, stream, base * count * split.slot_bytes, base)
    if addresses is None:
        return grid, (0, 0)  # capturing, and no workspace yet: unsplit
    full = list(grid)
    full[axis] = count
    return (full[0], full[1], full[2]), addresses
