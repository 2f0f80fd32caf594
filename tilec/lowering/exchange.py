"""Data that moves between threads: which ops need it, how, and how much shared memory it takes.

Four kinds of ops read elements that other threads hold:

* **remaps** (`tile.convert_layout`, `tile.broadcast`, `tile.expand_dims`, `tile.reshape`,
  `tile.transpose`): result element `i` is the source element at the row-major flat index
  `sum(i[d] * coefficients[d])`. When every thread already holds the source elements of its
  result elements the remap is a register copy; otherwise the source goes through shared
  memory (written once by its unique owners, then read in the result layout).
* **reductions** (`tile.reduce`): combined within each thread, then across lanes with warp
  shuffles, then across warps (and into the result layout) through shared memory when needed.
* **dots** (`tile.dot`): both operands are staged through shared memory, row-major.

Each such op uses the kernel's one shared scratch buffer between two barriers, so the buffer is
as large as the largest single need (`kernel_scratch_bytes`). The lowering and the kernel ABI
both read the sizes from here, so they cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilec.dialects import tile as T
from tilec.dialects.atomic import ATOMIC_OPS
from tilec.dialects.gather import BincountOp
from tilec.dialects.scan import ArgReduceOp, ScanOp, TopKOp
from tilec.dialects.split import SplitTicketOp
from tilec.ir.core import Operation
from tilec.ir.types import TileType
from tilec.lowering.layouts import (
    ThreadMap,
    element_bytes,
    local_source_slots,
    row_major_strides,
)

__all__ = [
    "REMAP_OPS",
    "ReducePlan",
    "chunk_slots",
    "chunkable",
    "dot_b_offset",
    "kernel_scratch_bytes",
    "op_scratch_bytes",
    "reduce_plan",
    "remap_chunks",
    "remap_coefficients",
    "remap_scratch_coefficients",
    "remap_scratch_strides",
    "remap_source_slots",
    "thread_map",
]

REMAP_OPS = (T.ConvertLayoutOp, T.BroadcastOp, T.ExpandDimsOp, T.ReshapeOp, T.TransposeOp)

SCRATCH_ALIGNMENT = 16


def thread_map(t: TileType) -> ThreadMap:
    """The owner map of a laid-out static tile type."""
    if t.layout is None or not t.is_static:
        raise ValueError(f"{t} needs a static shape and a layout (run specialize, assign-layouts)")
    return ThreadMap(t.layout, t.shape)  # type: ignore[arg-type]


# Bytes of padding after each scratch row of a remap whose rows are a multiple of 128 bytes (the
# cycle of the 32 four-byte banks): without it, lanes that hold one column in different rows
# (an mma accumulator: 8 rows x 4 lanes) all write the same bank. 16 keeps rows 16-byte aligned
# for vector reads.
ROW_PAD_BYTES = 16


def remap_scratch_strides(op: Operation) -> tuple[int, ...]:
    """The source tile's strides (in elements) in a remap's scratch: row-major, each row
    followed by `ROW_PAD_BYTES` when its bytes are a multiple of 128 -- for a transpose, the
    result's row-major order so padded, given per source dimension. A reshape keeps plain
    row-major order (it reads back the flat index in another shape)."""
    src = op.operands[0].type
    shape = list(src.shape)
    size = element_bytes(src.element)
    chunks = remap_chunks(op)
    if chunks > 1:  # one piece of the rows at a time (`chunk_slots`)
        shape[0] //= chunks
    if isinstance(op, T.ReshapeOp) or len(shape) < 2:
        return row_major_strides(shape)
    if isinstance(op, T.TransposeOp):
        # In the result's order: the result's reads run along its rows (vectors, as a
        # conversion's do) and the writes scatter instead. Read in the source's order, a row of
        # the result is a column of the scratch: on the H200, a.T @ b.T's transposed f32
        # accumulator read 8 elements a thread one by one, 16 lanes on one bank (gemm_tt 4096³
        # 1.23x cuBLAS's time, against 1.06x for a @ b; docs/benchmarks.md).
        dst = _padded_row_major(list(op.results[0].type.shape), size)
        strides = [0] * len(shape)
        for i, p in enumerate(op.perm):
            strides[p] = dst[i]
        return tuple(strides)
    return _padded_row_major(shape, size)


def remap_chunks(op: Operation) -> int:
    """The pieces a `tile.convert_layout` is exchanged in (its `chunks`; 1 for other ops)."""
    chunks = op.attributes.get("chunks") if isinstance(op, T.ConvertLayoutOp) else None
    return chunks.value if chunks is not None else 1


def chunk_slots(m: ThreadMap, chunks: int) -> list[int] | None:
    """For a tile in thread map `m` exchanged in `chunks` pieces of its rows (dimension 0):
    per slot, the piece its element is in -- None when for some slot that depends on the
    thread (so that a piece's writes and reads are a fixed subset of the slots)."""
    height = m.shape[0] // chunks
    rows = m.indices()[0] // height  # [threads, count]: the piece of each position
    if not (rows == rows[:1]).all():
        return None
    return [int(rows[0][m.slot_multi_index(s)[0]]) for s in range(m.num_slots)]


def chunkable(op: Operation, chunks: int) -> bool:
    """Whether a `tile.convert_layout` through scratch can be exchanged in `chunks` pieces of
    its rows: a tile of 2 or more dimensions whose rows they divide, and whose slots are in
    the same piece in every thread, in both layouts (`chunk_slots`)."""
    if not isinstance(op, T.ConvertLayoutOp) or op_scratch_bytes(op) == 0:
        return False
    shape = op.input.type.shape
    if len(shape) < 2 or shape[0] % chunks:
        return False
    return all(
        chunk_slots(thread_map(t), chunks) is not None for t in (op.input.type, op.result.type)
    )


def _padded_row_major(shape: list[int], size: int) -> tuple[int, ...]:
    """Row-major strides of `shape`, each row followed by `ROW_PAD_BYTES` when its bytes are a
    multiple of 128."""
    if (shape[-1] * size) % 128:
        return row_major_strides(shape)
    return row_major_strides([*shape[:-1], shape[-1] + ROW_PAD_BYTES // size])


def remap_coefficients(op: Operation) -> tuple[int, ...]:
    """Per result dimension, how far one step along it moves in the source's row-major order."""
    return _coefficients(op, row_major_strides(op.operands[0].type.shape))


def remap_scratch_coefficients(op: Operation) -> tuple[int, ...]:
    """Per result dimension, how far one step along it moves in the remap's scratch
    (`remap_scratch_strides`)."""
    return _coefficients(op, remap_scratch_strides(op))


def _coefficients(op: Operation, strides: tuple[int, ...]) -> tuple[int, ...]:
    src, dst = op.operands[0].type, op.results[0].type
    if isinstance(op, T.ConvertLayoutOp):
        return strides
    if isinstance(op, T.BroadcastOp):
        return tuple(0 if n == 1 else s for n, s in zip(src.shape, strides))
    if isinstance(op, T.ExpandDimsOp):
        return (*strides[: op.axis], 0, *strides[op.axis :])
    if isinstance(op, T.TransposeOp):
        return tuple(strides[p] for p in op.perm)
    if isinstance(op, T.ReshapeOp):
        return row_major_strides(dst.shape)  # the same flat index, read in the new shape
    raise TypeError(f"{op.name} is not a remap")


def remap_source_slots(op: Operation) -> list[int] | None:
    """For a remap: the source slot of each result slot when it stays in registers, else None."""
    return local_source_slots(
        thread_map(op.operands[0].type), thread_map(op.results[0].type), remap_coefficients(op)
    )


@dataclass(frozen=True)
class ReducePlan:
    """How `tile.reduce` combines: across `lanes` lanes (warp shuffles, xor of `lane_bits`),
    then across `warps` warps; `result_slots` (when not None) says the result needs no shared
    memory: result slot i is the thread's combined partial `result_slots[i]`."""

    axis: int
    lane_bits: tuple[int, ...]
    warps: int
    result_slots: list[int] | None
    scratch_elements: int  # shared-memory elements when `result_slots` is None


def reduce_plan(op: T.ReduceOp) -> ReducePlan:
    source = thread_map(op.input.type)
    axis = op.axis
    d = source.dims[axis]
    spt, tpw, wpc = d.lane_mul, d.lane_mask + 1, d.warp_mask + 1
    # Only lanes and warps holding distinct elements are combined: where the dimension is
    # smaller than the layout covers, the others hold copies.
    lanes = min(tpw, max(1, d.size // spt))
    warps = min(wpc, max(1, d.size // (spt * tpw)))
    lane_bits = tuple((1 << d.lane_shift) << i for i in range(lanes.bit_length() - 1))
    natural = source.without_dim(axis)
    result_type = op.result.type
    result_slots: list[int] | None = None
    if warps == 1:
        if isinstance(result_type, TileType):
            result_slots = local_source_slots(
                natural, thread_map(result_type), row_major_strides(result_type.shape)
            )
        else:
            result_slots = [0]  # every thread holds the one combined value
    size = math.prod(result_type.shape) if isinstance(result_type, TileType) else 1
    return ReducePlan(axis, lane_bits, warps, result_slots, warps * size)


def op_scratch_bytes(op: Operation) -> int:
    """Shared-memory bytes `op` uses between its barriers (0: none)."""
    if isinstance(op, (ScanOp, ArgReduceOp, TopKOp)):
        from tilec.lowering.scan import scan_scratch_bytes  # it builds on this module

        return scan_scratch_bytes(op)
    if isinstance(op, REMAP_OPS):
        if isinstance(op.results[0].type.layout, T.DotOperandLayout):
            return 0  # accumulator registers repacked as A fragments (tensorcore)
        if remap_source_slots(op) is not None:
            return 0
        t = op.operands[0].type
        strides = remap_scratch_strides(op)  # the outermost: its rows, each padded
        shape = list(t.shape)
        shape[0] //= remap_chunks(op)  # one piece of the rows at a time
        return max(s * n for s, n in zip(strides, shape)) * element_bytes(t.element)
    if isinstance(op, T.ReduceOp):
        plan = reduce_plan(op)
        if plan.result_slots is not None:
            return 0
        return plan.scratch_elements * element_bytes(op.input.type.element)
    if isinstance(op, T.DotOp):
        if isinstance(op.a.type.layout, T.DotOperandLayout):
            return 0  # a tensor-core dot reads its operands from their own buffers
        b = op.b.type
        return dot_b_offset(op) + math.prod(b.shape) * element_bytes(b.element)
    if isinstance(op, SplitTicketOp):  # thread 0's ticket, to every thread
        return 4
    if isinstance(op, BincountOp):  # the bins, zeroed and counted between barriers
        t = op.result.type
        return math.prod(t.shape) * element_bytes(t.element)
    if isinstance(op, ATOMIC_OPS) and op.result.has_uses:
        # Old values that the copies of a replicating layout get from the owners.
        t = op.value.type
        if t.layout is not None and thread_map(t).replicated:
            return math.prod(t.shape) * element_bytes(t.element)
    return 0


def dot_b_offset(op: T.DotOp) -> int:
    """Where a dot's `b` operand starts in the scratch (its `a` operand starts at 0)."""
    a = op.a.type
    return _aligned(math.prod(a.shape) * element_bytes(a.element))


def _aligned(n: int) -> int:
    return -(-n // SCRATCH_ALIGNMENT) * SCRATCH_ALIGNMENT


def kernel_scratch_bytes(kernel: Operation) -> int:
    """The kernel's shared scratch buffer: the largest need of any one op, 16-byte aligned."""
    return _aligned(max((op_scratch_bytes(op) for op in kernel.walk()), default=0))
