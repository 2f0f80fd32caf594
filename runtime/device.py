"""The GPU: finding cuda-python, the driver and a device, and which architecture to compile for.

Everything that touches CUDA goes through `cuda_modules()`, which imports cuda-python on first
use, so that tilec imports (and the interpreter runs) on machines without it. A machine with no
cuda-python, no driver or no GPU gets a `NoGPUError` that says which, and suggests the
interpreter; a failing driver call gets a `GPUError` naming the call and CUDA's error, never a
traceback from inside cuda-python.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from tilec.diagnostics import TileError

__all__ = [
    "GPUError",
    "NoGPUError",
    "check",
    "cuda_modules",
    "device_arch",
    "dram_bytes_per_clock",
    "get_device",
    "gpu_available",
]

INTERPRETER_HINT = (
    "to run the kernel in tilec's reference interpreter on the CPU instead, set "
    "TILEC_INTERPRET=1 (or use @tilec.jit(interpret=True))"
)


class GPUError(TileError):
    """A CUDA driver call failed (the message names the call and CUDA's error)."""


class NoGPUError(GPUError):
    """No GPU can be used: cuda-python is missing, or the driver, or a device."""

    def __init__(self, message: str):
        super().__init__(message, hint=INTERPRETER_HINT)


@functools.cache
def cuda_modules() -> tuple[ModuleType, ModuleType]:
    """`(cuda.core, cuda.bindings.driver)`, with the driver initialised."""
    try:
        import cuda.core as core
        from cuda.bindings import driver
    except ImportError as e:
        raise NoGPUError(
            f"cuda-python is not installed ({e}); install it with: pip install 'tilec[gpu]'"
        ) from None
    try:
        (err,) = driver.cuInit(0)
    except RuntimeError as e:  # cuda-bindings raises this when libcuda cannot be loaded
        raise NoGPUError(f"no CUDA driver: {e}") from None
    if err == driver.CUresult.CUDA_ERROR_NO_DEVICE:
        raise NoGPUError("no CUDA GPU: the driver is installed but found no device")
    check(driver, err, "cuInit")
    return core, driver


def check(driver: ModuleType, err: Any, call: str) -> None:
    """Raise `GPUError` when a driver call returned an error. A device-side assert is what a
    kernel compiled with `TILEC_CHECK_BOUNDS=1` raises for an index out of range: the error
    says so (the kernel printed the index, its position and the block on stdout)."""
    if err != driver.CUresult.CUDA_SUCCESS:
        hint = None
        if err == getattr(driver.CUresult, "CUDA_ERROR_ASSERT", None):
            hint = (
                "a kernel compiled with TILEC_CHECK_BOUNDS=1 found an index out of range: its "
                "message on stdout names the kernel, the tensor, the index and the block; the "
                "CUDA context cannot be used any more (restart the process)"
            )
        raise GPUError(f"{call} failed: {error_text(driver, err)}", hint=hint)


def error_text(driver: ModuleType, err: Any) -> str:
    name_err, name = driver.cuGetErrorName(err)
    text_err, text = driver.cuGetErrorString(err)
    name = name.decode() if name_err == driver.CUresult.CUDA_SUCCESS else str(err)
    text = text.decode() if text_err == driver.CUresult.CUDA_SUCCESS else ""
    return f"{name} ({text})" if text else name


def gpu_available() -> bool:
    """Whether cuda-python, a driver and at least one GPU are present."""
    try:
        get_device()
    except GPUError:
        return False
    return True


@functools.cache
def get_device(ordinal: int | None = None) -> Any:
    """The `cuda.core.Device` numbered `ordinal` (default 0), its primary context current on
    this thread. Raises `NoGPUError` when there is none."""
    core, driver = cuda_modules()
    err, count = driver.cuDeviceGetCount()
    check(driver, err, "cuDeviceGetCount")
    index = 0 if ordinal is None else ordinal
    if not 0 <= index < count:
        if count == 0:
            raise NoGPUError("no CUDA GPU: the driver found no device")
        raise GPUError(f"there is no GPU {index}: this machine has {count}")
    device = core.Device(index)
    device.set_current()
    return device


def device_arch(device: Any) -> str:
    """The architecture to compile for on `device` ("sm_90a" on an H100 or H200)."""
    from tilec.lowering.ptx import arch_for_capability

    capability = tuple(device.compute_capability)
    arch = arch_for_capability(capability)  # type: ignore[arg-type]
    if arch is not None:
        return arch
    raise GPUError(
        f"{device.name} has compute capability {capability[0]}.{capability[1]}; tilec needs "
        "8.0 or newer (sm_80 ... sm_90a)"
    )


# What a copy reaches of the DRAM's peak (memory clock x bus width x 2, from the driver):
# 4235 of 4800 GB/s on the H200 (0.88), 3022 of 3352 on the H100 (0.90), torch's copy_ of
# 1 GiB in the suite's runs (docs/benchmarks.md).
COPY_OF_PEAK = 0.89


@functools.cache
def dram_bytes_per_clock(ordinal: int) -> float:
    """The bytes GPU `ordinal`'s DRAM moves a clock of the SM model (`tilec.passes.
    wgmma_model`, whose clocks are the H200's sustained 1.83 GHz: the same ratio to the
    device's top clock, which the driver reports), at a copy's share of its peak."""
    from tilec.passes.wgmma_model import DRAM_BYTES_PER_CLOCK, MODEL_CLOCK_OF_PEAK

    _, driver = cuda_modules()
    err, device = driver.cuDeviceGet(ordinal)
    check(driver, err, "cuDeviceGet")
    values = []
    for name in ("MEMORY_CLOCK_RATE", "GLOBAL_MEMORY_BUS_WIDTH", "CLOCK_RATE"):
        attribute = getattr(driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        err, value = driver.cuDeviceGetAttribute(attribute, device)
        check(driver, err, f"cuDeviceGetAttribute({name})")
        values.append(int(value))
    memory_khz, bus_bits, sm_khz = values
    if not (memory_khz and bus_bits and sm_khz):  # a driver that does not say: the H200's
        return DRAM_BYTES_PER_CLOCK
    peak = 2 * memory_khz * 1e3 * bus_bits / 8
    return COPY_OF_PEAK * peak / (sm_khz * 1e3 * MODEL_CLOCK_OF_PEAK)
