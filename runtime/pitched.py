"""Pitched copies at launch: a matrix operand whose rows do not start 16 bytes apart is copied,
before the kernel, into a buffer whose rows do (`PitchedCopies`), and the kernel reads the copy.

Why: every fast way to move a GEMM's operand tiles into shared memory moves 16-byte pieces --
the tensor memory accelerator (TMA) needs every stride a multiple of 16 bytes, `cp.async` moves
4, 8 or 16 aligned bytes. An f16 matrix of K = 1999 columns has rows 3998 bytes apart: its
tiles can only be copied an element at a time, through registers, each copy waited for before
the next (`tilec.lowering.shared_memory.lower_async_copy`), and 128 x 256 tiles of such copies
also spill registers. A copy of the matrix with its rows padded to 16 bytes costs one read and
one write of it, which a GEMM that reads each operand tile from many blocks repays many times:
the kernel compiled for the copy (its specialization says 16-byte rows) takes TMA.

What is copied (`JitFunction._pitched`, from `tilec.passes.tiling_operands.pitched_operands`):
a tensor argument that the kernel only reads, and reads as an operand of a matrix product
(`tile.dot`), whose last stride is 1 and whose row stride (in bytes) is not a multiple of 16
or whose address is not 16-byte aligned (`needs_pitch`). A batched operand (`bmm`'s
`[Z, M, K]`) is copied as the rows of all its matrices when its dimensions before the last
flatten into rows of one stride (each batch right after the one before, as a contiguous
tensor's are: `flat_rows`); one whose batches are scattered is read where it is. The copy is
`cuMemcpy2DAsync` on the launch's stream, into a buffer per (GPU, stream, argument) kept for
later calls and grown (never freed: a CUDA graph that captured a launch keeps using its buffer).
Under graph capture nothing is allocated: a launch whose buffer is missing or too small reads
the argument where it is (correct, on the element-copy path). `@tilec.jit(pitch_operands=False)`
turns it off.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tilec.runtime.arguments import ELEMENT_BYTES, DeviceTensor

__all__ = [
    "PITCH_BYTES",
    "PITCH_REUSE",
    "PitchedCopies",
    "flat_rows",
    "needs_pitch",
    "pitch_arguments",
    "pitched_row_bytes",
    "pitched_strides",
]

PITCH_BYTES = 16  # rows of the copy start this many bytes apart (TMA's stride granule)
# An operand is copied only where the product reads it more than once: across more than this
# many rows (or columns) of the other operand -- the largest tile of them a block takes
# (`tiling.WGMMA_SIZES`). A weight read once by a batch of 16 tokens (16 x 11007 x 4095) is
# left where it is: its copy, a read and a write of it more, took 1.69x cuBLAS's time.
PITCH_REUSE = 256


def flat_rows(tensor: DeviceTensor) -> tuple[int, int] | None:
    """`(rows, row stride)` of `tensor` seen as one matrix of its last dimension's rows: its
    dimensions before the last flatten into rows one stride apart (each stride the next
    one's times its extent, as in a contiguous tensor; size-1 dimensions fit any stride);
    None when they do not, or for fewer than two dimensions."""
    if len(tensor.shape) < 2:
        return None
    row = tensor.strides[-2]
    rows = tensor.shape[-2]
    for d in range(len(tensor.shape) - 3, -1, -1):
        if tensor.shape[d] != 1 and tensor.strides[d] != rows * row:
            return None
        rows *= tensor.shape[d]
    return rows, row


def needs_pitch(tensor: DeviceTensor) -> bool:
    """Whether `tensor` (on the GPU) is a matrix, or a batch of matrices that `flat_rows`
    makes one, with unit last stride, whose rows a 16-byte copy cannot reach: its row stride
    in bytes, or its address, not a multiple of 16."""
    if tensor.host is not None or len(tensor.shape) < 2 or tensor.strides[-1] != 1:
        return False
    flat = flat_rows(tensor)
    if flat is None:
        return False  # batches apart from each other: not one 2-D copy
    rows, stride = flat
    cols = tensor.shape[-1]
    if rows == 0 or cols == 0 or 0 < stride < cols:
        return False  # nothing to copy, or rows that overlap (no copy would be the same)
    size = ELEMENT_BYTES[tensor.dtype]
    if rows == 1:
        return bool(tensor.pointer % PITCH_BYTES)
    return bool((stride * size) % PITCH_BYTES or tensor.pointer % PITCH_BYTES)


def pitched_row_bytes(tensor: DeviceTensor) -> int:
    """The bytes between rows of `tensor`'s pitched copy: its row, rounded up to 16."""
    row = tensor.shape[-1] * ELEMENT_BYTES[tensor.dtype]
    return -(-row // PITCH_BYTES) * PITCH_BYTES


def pitched_strides(tensor: DeviceTensor) -> tuple[int, ...]:
    """The strides (in elements) of `tensor`'s pitched copy: rows `pitched_row_bytes` apart,
    each matrix of a batch right after the one before."""
    shape = tensor.shape
    strides = [1, pitched_row_bytes(tensor) // ELEMENT_BYTES[tensor.dtype]]
    for d in range(len(shape) - 3, -1, -1):  # each matrix (or batch) after the one before
        strides.append(strides[-1] * shape[d + 1])
    return tuple(reversed(strides))


def pitch_arguments(
    arguments: Any,
    pitched: Sequence[tuple[int, tuple[str, ...]]],
    stream: Any,
    names: Sequence[str],
    record: dict[str, str],
) -> bool:
    """Replace in checked `arguments` each of `pitched` -- `(index, reuse)`, from
    `tilec.passes.tiling_operands.pitched_operands` -- whose rows a 16-byte copy cannot reach
    (`needs_pitch`) and which the product reads again across more than `PITCH_REUSE` of its
    `reuse` extents, by its copy (`PITCHED`), queued on the launch's stream; whether any was.
    `record` gets, per argument copied (`names`: the parameters'), what was done and why."""
    from tilec.runtime.launcher import stream_handle

    values, extents = arguments.values, arguments.extents
    todo = [
        i
        for i, reuse in pitched
        if needs_pitch(values[i]) and math.prod(extents.get(d, 1) for d in reuse) > PITCH_REUSE
    ]
    if not todo:
        return False
    if stream is not None:
        handle = stream_handle(stream)
    elif arguments.framework_stream is not None:
        handle = arguments.framework_stream(values[todo[0]].device)
    else:
        handle = 0
    copied = False
    for i in todo:
        tensor = values[i]
        copy = PITCHED.copy(tensor, i, handle)
        if copy is None:
            continue  # graph capture without a buffer: read it where it is
        record[names[i]] = (
            f"rows {tensor.strides[-2]} elements apart at address 0x{tensor.pointer:x}: copied "
            f"to rows of {copy.strides[-2]} (16-byte multiples) before the kernel, so that its "
            "tiles move in 16-byte pieces (TMA, cp.async) instead of an element at a time"
        )
        values[i] = copy
        copied = True
    return copied


@dataclass
class _Buffer:
    address: int
    size: int


class PitchedCopies:
    """The pitched buffers of a process: `copy` queues a tensor's copy and returns the tensor
    the kernel should read instead (None: read the original)."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[int, int, int], _Buffer] = {}
        self._kept: list[int] = []  # outgrown buffers: a captured graph may still use them
        self._lock = threading.Lock()

    def copy(self, tensor: DeviceTensor, slot: int, stream: int) -> DeviceTensor | None:
        """Queue on `stream` the copy of `tensor` into the buffer of argument `slot`, and the
        `DeviceTensor` of the copy; None during graph capture without a large enough buffer."""
        from tilec.runtime.device import check, cuda_modules, get_device

        _, driver = cuda_modules()
        pitch = pitched_row_bytes(tensor)
        rows, row_stride = flat_rows(tensor)  # type: ignore[misc]  (needs_pitch said so)
        cols = tensor.shape[-1]
        size = ELEMENT_BYTES[tensor.dtype]
        buffer = self._buffer(tensor.device, stream, slot, pitch * rows)
        if buffer is None:
            return None
        get_device(tensor.device).set_current()
        params = driver.CUDA_MEMCPY2D()
        params.srcMemoryType = driver.CUmemorytype.CU_MEMORYTYPE_DEVICE
        params.srcDevice = tensor.pointer
        params.srcPitch = max(row_stride, cols) * size
        params.dstMemoryType = driver.CUmemorytype.CU_MEMORYTYPE_DEVICE
        params.dstDevice = buffer.address
        params.dstPitch = pitch
        params.WidthInBytes = cols * size
        params.Height = rows
        (err,) = driver.cuMemcpy2DAsync(params, stream)
        check(driver, err, "cuMemcpy2DAsync (pitched copy of an operand)")
        return DeviceTensor(
            buffer.address, tensor.shape, pitched_strides(tensor), tensor.dtype, tensor.device
        )

    def _buffer(self, ordinal: int, stream: int, slot: int, size: int) -> _Buffer | None:
        key = (ordinal, stream, slot)
        buffer = self._buffers.get(key)
        if buffer is not None and buffer.size >= size:
            return buffer
        with self._lock:
            return self._grow(key, size)

    def _grow(self, key: tuple[int, int, int], size: int) -> _Buffer | None:
        from tilec.runtime.device import check, cuda_modules, get_device

        _, driver = cuda_modules()
        ordinal, stream, _slot = key
        err, status = driver.cuStreamIsCapturing(stream)
        check(driver, err, "cuStreamIsCapturing")
        if status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
            return None
        old = self._buffers.get(key)
        if old is not None:  # grow geometrically, so that growing is rare
            size = max(size, 2 * old.size)
            self._kept.append(old.address)
        get_device(ordinal).set_current()
        err, pointer = driver.cuMemAllocAsync(size, stream)
        check(driver, err, "cuMemAllocAsync (pitched copy of an operand)")
        buffer = _Buffer(int(pointer), size)
        self._buffers[key] = buffer
        return buffer


PITCHED = PitchedCopies()  # the process's buffers
