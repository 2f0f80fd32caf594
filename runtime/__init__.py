"""tilec's runtime: PTX in, kernels running on the caller's GPU tensors out.

    from tilec.runtime import Launcher
    launcher = Launcher(ptx, abi, specialization)   # abi: tilec.lowering.KernelABI
    launcher(x, y, out)                               # torch / CuPy / DLPack / numpy arrays

* `device` — cuda-python, the driver, the GPU and its architecture; `NoGPUError` when any is
  missing (it suggests the interpreter);
* `arguments` — turning torch tensors, `__cuda_array_interface__` and DLPack objects, numpy
  arrays and scalars into kernel parameters, with the launcher's checks (`docs/abi.md`);
* `launcher` — loading PTX (the cubin cached on disk), checking resources, packing parameters
  and launching on the caller's stream.

The runtime knows nothing of the IR: it takes PTX, a kernel name and the kernel's ABI (plain
data). `tilec.jit` puts compilation and the runtime together. cuda-python is imported on first
use, so tilec works without it until a kernel runs on the GPU.
"""

from tilec.runtime.arguments import ArgumentChecker, Arguments, DeviceTensor, LaunchError
from tilec.runtime.device import (
    GPUError,
    NoGPUError,
    device_arch,
    get_device,
    gpu_available,
)
from tilec.runtime.launcher import Launcher, stream_handle

__all__ = [
    "ArgumentChecker",
    "Arguments",
    "DeviceTensor",
    "GPUError",
    "LaunchError",
    "Launcher",
    "NoGPUError",
    "device_arch",
    "get_device",
    "gpu_available",
    "stream_handle",
]
