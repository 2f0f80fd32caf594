"""The runtime and `@tilec.jit` on a GPU: caching, streams, CUDA graphs, the array protocols,
and bad input refused with a clear message before anything is launched."""

# ruff: noqa: F821 - kernel bodies use the tile language's names (f32, tiles, N), not Python's

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
import torch

import tilec
from tilec.compiler import DEFAULT_PIPELINE
from tilec.gpucheck import EXAMPLES
from tilec.lowering import Specialization, compile_to_ptx, module_abi
from tilec.runtime import GPUError, Launcher, LaunchError

pytestmark = pytest.mark.gpu


@tilec.jit
def add(x: f32[N], y: f32[N], out: f32[N]):
    for tn in tiles(N):
        out[tn] = x[tn] + y[tn]


def softmax():
    return tilec.load_kernel(EXAMPLES / "softmax.tile", "softmax")


def test_a_second_call_does_not_recompile():
    x, y, out = (torch.randn(5000, device="cuda") for _ in range(3))
    add(x, y, out)
    compiled = add.compilations
    add(x, y, out)
    add(y, x, out)  # another tensor of the same kind
    assert add.compilations == compiled
    torch.testing.assert_close(out, x + y)
    add(x[1:], y[1:], out[1:])  # 4-byte aligned, extent not a multiple of 16: a new variant
    assert add.compilations == compiled + 1
    torch.testing.assert_close(out[1:], x[1:] + y[1:])


def test_a_whole_dimension_is_specialised_to_its_power_of_two():
    kernel = softmax()
    for n in (100, 1000, 1025, 3000):  # 128, 1024, 2048, 4096
        x = torch.randn(7, n, device="cuda")
        y = torch.empty_like(x)
        kernel(x, y)
        torch.testing.assert_close(y, torch.softmax(x, dim=1))
    assert kernel.compilations == 4
    kernel(torch.randn(3, 900, device="cuda"), torch.empty(3, 900, device="cuda"))  # 1024 again
    assert kernel.compilations == 4


def test_launch_on_torch_current_stream():
    x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    out = torch.zeros_like(x)
    add(x, y, out)  # compile and load outside the side stream
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        out.zero_()
        add(x, y, out)
        result = out.clone()  # ordered after the kernel on the same stream
    side.synchronize()
    torch.testing.assert_close(result, x + y)


def test_explicit_stream():
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    out = torch.zeros_like(x)
    side = torch.cuda.Stream()
    add(x, y, out, stream=side)
    side.synchronize()
    torch.testing.assert_close(out, x + y)


def test_cuda_graph_capture_and_replay():
    x, y = torch.randn(10000, device="cuda"), torch.randn(10000, device="cuda")
    out = torch.zeros_like(x)
    kernel = softmax()
    m = torch.randn(64, 300, device="cuda")
    s = torch.empty_like(m)
    add(x, y, out)  # warm up: compile and load before capture
    kernel(m, s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        add(x, y, out)
        kernel(m, s)
    x.copy_(torch.randn_like(x))
    m.copy_(torch.randn_like(m))
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y)
    torch.testing.assert_close(s, torch.softmax(m, dim=1))


@pytest.mark.filterwarnings("ignore:The CUDA Graph is empty")  # refused: nothing was captured
def test_numpy_arrays_are_refused_during_capture():
    x = np.ones(100, np.float32)
    t = torch.ones(100, device="cuda")
    add(t, t, t)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(LaunchError, match="during CUDA graph capture"), torch.cuda.graph(graph):
        add(x, t, t)


def test_cupy_arrays_through_cuda_array_interface():
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(3000, dtype=cupy.float32)
    y = cupy.ones(3000, dtype=cupy.float32)
    out = cupy.zeros(3000, dtype=cupy.float32)
    add(x, y, out)
    cupy.cuda.get_current_stream().synchronize()
    assert bool((out == x + 1).all())


class DLPackOnly:
    """An array that offers nothing but DLPack (as JAX's do)."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None):
        return self.tensor.__dlpack__()

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_dlpack_arguments():
    x, y = torch.randn(777, device="cuda"), torch.randn(777, device="cuda")
    out = torch.zeros_like(x)
    add(DLPackOnly(x), DLPackOnly(y), DLPackOnly(out))
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y)


def test_scalars_and_keyword_arguments():
    kernel = tilec.load_kernel(EXAMPLES / "vector_add.tile", "saxpy")
    x, y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    out = torch.empty_like(x)
    kernel(np.float32(0.5), x, y, out)
    kernel(alpha=0.5, x=x, y=y, out=out)
    torch.testing.assert_close(out, 0.5 * x + y)


def test_a_launch_from_another_thread():
    x, y = torch.randn(100, device="cuda"), torch.randn(100, device="cuda")
    out = torch.zeros_like(x)
    add(x, y, out)
    errors = []

    def work():
        try:
            add(y, y, out)
            torch.cuda.synchronize()
        except Exception as e:  # reported below
            errors.append(e)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors
    torch.testing.assert_close(out, y + y)


# -- bad input: a clear message, nothing launched, outputs untouched ------------------------------


def refused(call, *match):
    with pytest.raises(LaunchError) as info:
        call()
    text = str(info.value)
    for m in match:
        assert m in text, text
    assert "cuda" not in type(info.value).__module__
    return text


def test_bad_arguments_are_refused_before_launch():
    x, y = torch.randn(100, device="cuda"), torch.randn(100, device="cuda")
    out = torch.full((100,), 7.0, device="cuda")
    refused(lambda: add(x.cpu(), y, out), "argument 'x'", "tensor on cpu", "TILEC_INTERPRET=1")
    refused(lambda: add(x.half(), y, out), "argument 'x'", "expected dtype f32, got f16")
    refused(lambda: add(x.view(10, 10), y, out), "expected 1 dimension(s) [N], got 2")
    refused(lambda: add(x, y[:50], out), "dimension N is 100 in 'x' (axis 0) but 50 in 'y'")
    refused(lambda: add(x, y), "takes 3 argument(s), got 2")
    with pytest.raises(tilec.TileError, match="no parameter 'z'"):
        add(x, y, z=out)
    assert bool((out == 7).all())  # nothing ran


def test_a_stride_the_kernel_was_not_compiled_for():
    program = tilec.compile(EXAMPLES / "softmax.tile", pipeline=DEFAULT_PIPELINE)
    unit = Specialization(unit=frozenset({"x.stride.1", "y.stride.1"}))
    ptx = compile_to_ptx(program.module, "sm_90a", {"softmax": unit})
    launcher = Launcher(ptx, module_abi(program.module)["softmax"], unit)
    x = torch.randn(300, 64, device="cuda")
    y = torch.full((64, 300), 7.0, device="cuda")
    refused(lambda: launcher(x.t(), y), "compiled for unit stride in dimension 1", "contiguous")
    assert bool((y == 7).all())
    launcher(x.t().contiguous(), y)
    torch.testing.assert_close(y, torch.softmax(x.t(), dim=1))


def test_a_whole_dimension_above_the_compiled_maximum():
    program = tilec.compile(EXAMPLES / "softmax.tile", pipeline=DEFAULT_PIPELINE)
    ptx = compile_to_ptx(program.module, "sm_90a")  # N up to 1024 (specialize's default)
    launcher = Launcher(ptx, module_abi(program.module)["softmax"])
    x = torch.randn(4, 2000, device="cuda")
    y = torch.full_like(x, 7.0)
    refused(lambda: launcher(x, y), "dimension N=2000 is larger than its tile BN=1024")
    assert bool((y == 7).all())


def test_too_much_shared_memory_is_refused_at_load():
    program = tilec.compile(EXAMPLES / "vector_add.tile", pipeline=DEFAULT_PIPELINE)
    abi = module_abi(program.module)["vector_add"]
    greedy = dataclasses.replace(abi, shared_bytes=10 << 20)
    launcher = Launcher(compile_to_ptx(program.module, "sm_90a"), greedy)
    x = torch.ones(10, device="cuda")
    refused(lambda: launcher(x, x, x), "needs 10485760 bytes of shared memory")


def test_a_read_only_numpy_output_is_refused():
    x = np.ones(10, np.float32)
    out = np.zeros(10, np.float32)
    out.flags.writeable = False
    refused(lambda: add(x, x, out), "read-only")


def test_ptx_for_another_architecture():
    program = tilec.compile(EXAMPLES / "vector_add.tile", pipeline=DEFAULT_PIPELINE)
    ptx = compile_to_ptx(program.module, "sm_90a").replace(".target sm_90a", ".target sm_100a")
    launcher = Launcher(ptx, module_abi(program.module)["vector_add"])
    x = torch.ones(10, device="cuda")
    with pytest.raises(GPUError, match="compiled for sm_100a"):
        launcher(x, x, x)
