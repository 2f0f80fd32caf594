"""Tensor maps for the TMA unit: the 128-byte descriptors a kernel's `tile.tma_copy` ops read
(hidden "tensormap" parameters, docs/abi.md), encoded per launch from each argument's address,
shape and strides by the driver's `cuTensorMapEncodeTiled`, and cached by address.

A descriptor says: the element type; the tensor's extents and strides (innermost dimension
first, strides in bytes, the last dimension's stride 1); the box the copies move (the kernel
parameter's `box`, innermost first); the 128-byte swizzle the kernel's shared buffers use;
promotion to L2 in 256-byte lines; and zeros for elements outside the tensor. The kernel was
compiled only for arguments whose address is 16-byte aligned and whose strides are multiples
of 16 bytes (`passes/pipeline_tma.py`, the launcher checks the specialization), which is what
the encoding needs; a driver that still refuses one raises `LaunchError` naming the argument.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from tilec.runtime.arguments import ELEMENT_BYTES, LaunchError
from tilec.runtime.device import cuda_modules

__all__ = ["TENSORMAP_BYTES", "TensorMapEncoder"]

TENSORMAP_BYTES = 128
_CACHED = 64  # descriptors a parameter keeps, by address (a training loop reuses a few)


def _data_type(driver: Any, dtype: str) -> Any:
    t = driver.CUtensorMapDataType
    table = {
        "f16": t.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        "bf16": t.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        "f32": t.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        "i8": t.CU_TENSOR_MAP_DATA_TYPE_UINT8,  # bytes: the copy does not interpret them
        "f8e4m3": t.CU_TENSOR_MAP_DATA_TYPE_UINT8,
        "f8e5m2": t.CU_TENSOR_MAP_DATA_TYPE_UINT8,
        "i32": t.CU_TENSOR_MAP_DATA_TYPE_INT32,
    }
    return table[dtype]


def encode_tensormap(
    dtype: str,
    pointer: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    box: tuple[int, ...],
    what: str = "a tensor",
    fold: int = 0,
) -> bytes:
    """The 128 bytes of the tensor map of a tensor of `dtype` at `pointer` with `shape` and
    `strides` (elements, outermost first) whose copies move boxes of `box` (outermost first).
    `fold` > 0: a matrix whose tiles of `fold` rows are seen in 5 dimensions (tile, group q,
    half h, row r, column) with row = fold t + (fold / 2) h + 8 q + r, so that one box writes
    a tile's 8-row groups in the interleaved order (`tilec.lowering.tma.folded_plan`); only
    whole tiles are described."""
    _, driver = cuda_modules()
    size = ELEMENT_BYTES[dtype]
    rank = len(shape)
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    dims = [u64(max(int(d), 1)) for d in reversed(shape)]
    byte_strides = [u64(int(s) * size) for s in reversed(strides)][1:]
    if fold:
        rows, row = int(shape[0]), int(strides[0]) * size
        half = fold // 16
        dims = [u64(int(shape[1])), u64(8), u64(2), u64(half), u64(max(rows // fold, 1))]
        byte_strides = [u64(row), u64(8 * half * row), u64(8 * row), u64(fold * row)]
        rank = 5
    err, tensormap = driver.cuTensorMapEncodeTiled(
        _data_type(driver, dtype),
        rank,
        pointer,
        dims,
        byte_strides,
        [u32(int(b)) for b in reversed(box)],
        [u32(1)] * rank,
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    if err != driver.CUresult.CUDA_SUCCESS:
        raise LaunchError(
            f"cannot encode the tensor map of {what} (address {pointer:#x}, shape "
            f"{tuple(shape)}, strides {tuple(strides)} elements, box {tuple(box)}): "
            f"cuTensorMapEncodeTiled returned {err.name if hasattr(err, 'name') else err}",
            hint="the kernel's TMA copies need 16-byte aligned addresses and strides that are "
            "multiples of 16 bytes; compile with pass option pipeline.tma=0 to use cp.async",
        )
    return ctypes.string_at(tensormap.getPtr(), TENSORMAP_BYTES)


class TensorMapEncoder:
    """Encodes one tensor-map parameter (`dtype`, `box`) for the tensors a launch passes,
    keeping the last descriptors of each layout by address."""

    def __init__(self, dtype: str, box: tuple[int, ...], what: str, fold: int = 0):
        self.dtype = dtype
        self.box = tuple(box)
        self.what = what
        self.fold = fold
        self._layouts: dict[tuple, Callable[[int], bytes]] = {}

    def __call__(self, tensor: Any) -> bytes:
        key = (tensor.shape, tensor.strides)
        by_address = self._layouts.get(key)
        if by_address is None:
            if len(self._layouts) >= _CACHED:
                self._layouts.clear()
            by_address = self._layouts[key] = self.for_layout(tensor.shape, tensor.strides)
        return by_address(tensor.pointer)

    def for_layout(
        self, shape: tuple[int, ...], strides: tuple[int, ...]
    ) -> Callable[[int], bytes]:
        """A function of the address alone, for launches whose tensors all have `shape` and
        `strides` (the jit's fast path calls it directly)."""
        cache: dict[int, bytes] = {}

        def by_address(pointer: int) -> bytes:
            found = cache.get(pointer)
            if found is None:
                if len(cache) >= _CACHED:
                    cache.clear()
                found = cache[pointer] = encode_tensormap(
                    self.dtype, pointer, shape, strides, self.box, self.what, self.fold
                )
            return found

        return by_address
