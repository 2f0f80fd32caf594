"""The runtime's checks and parameter packing, on the CPU: everything a launch does before it
reaches the driver (so that bad input is refused with a clear message, and nothing is queued).
The launches themselves are tests/gpu's."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest
import torch

import tilec
from tilec.compiler import DEFAULT_PIPELINE
from tilec.lowering import Specialization, compile_to_ptx, module_abi
from tilec.runtime import (
    ArgumentChecker,
    DeviceTensor,
    Launcher,
    LaunchError,
    NoGPUError,
    gpu_available,
)

EXAMPLES = "examples"


def launcher(example: str, kernel: str, specialization=None, **extents) -> Launcher:
    pipeline = DEFAULT_PIPELINE
    if extents:
        text = ",".join(f"{k}={v}" for k, v in extents.items())
        pipeline = pipeline.replace("specialize", f'specialize{{extents="{text}"}}')
    program = tilec.compile(f"{EXAMPLES}/{example}.tile", kernels=[kernel], pipeline=pipeline)
    spec = {kernel: specialization} if specialization else None
    ptx = compile_to_ptx(program.module, "sm_90a", spec)
    return Launcher(ptx, module_abi(program.module)[kernel], specialization)


def gpu(shape, strides=None, dtype="f32", address=1 << 20):
    """GPU memory described by hand: the checks never touch it."""
    if strides is None:
        strides = tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))
    return DeviceTensor(address, tuple(shape), tuple(strides), dtype, 0)


def message(call) -> str:
    with pytest.raises(LaunchError) as info:
        call()
    return str(info.value)


def test_argument_checks_name_the_parameter_and_what_was_expected():
    check = launcher("matmul", "matmul").checker
    a, b, c = gpu((100, 70), dtype="f16"), gpu((70, 90), dtype="f16"), gpu((100, 90), dtype="f16")
    assert check.convert([a, b, c]).extents == {"M": 100, "K": 70, "N": 90}
    text = message(lambda: check.convert([a, gpu((70, 90)), c]))
    assert "argument 'b' of kernel 'matmul' (b: f16[K, N]): expected dtype f16, got f32" in text
    assert "x.to(torch.float16)" in text
    text = message(lambda: check.convert([np.zeros((100, 70), np.float32), b, c]))
    assert "x.astype(numpy.float16)" in text
    text = message(lambda: check.convert([a, gpu((70,), dtype="f16"), c]))
    assert "expected 2 dimension(s) [K, N], got 1 (shape (70,))" in text
    text = message(lambda: check.convert([a, gpu((71, 90), dtype="f16"), c]))
    assert "dimension K is 70 in 'a' (axis 1) but 71 in 'b' (axis 0)" in text
    assert "takes 3 argument(s), got 2" in message(lambda: check.convert([a, b]))
    text = message(lambda: check.convert([a, "b", c]))
    assert "expected a tensor, got str" in text
    text = message(lambda: check.convert([gpu((100, 70), dtype="f16", address=3), b, c]))
    assert "not a multiple of its element size (2 bytes)" in text
    text = message(lambda: check.convert([gpu((100, 70), (-70, 1), "f16"), b, c]))
    assert "negative" in text


def test_a_cpu_torch_tensor_is_refused_with_the_interpreter_as_hint():
    check = launcher("vector_add", "vector_add").checker
    x = torch.zeros(10)
    text = message(lambda: check.convert([x, x, x]))
    assert "argument 'x' of kernel 'vector_add' (x: f32[N]): a torch tensor on cpu" in text
    assert "tensor.cuda()" in text and "TILEC_INTERPRET=1" in text


def test_scalars_are_checked_and_converted():
    check = launcher("vector_add", "saxpy").checker
    x = gpu((10,))
    assert check.convert([2, x, x, x]).values[0] == 2.0
    assert check.convert([np.float64(0.5), x, x, x]).values[0] == 0.5
    assert "expected a number for f32, got str" in message(lambda: check.convert(["2", x, x, x]))
    assert "got bool" in message(lambda: check.convert([True, x, x, x]))


def test_extents_above_int32_are_refused():
    check = launcher("vector_add", "vector_add").checker
    huge = gpu((2**31,))
    assert "extents must be below 2**31" in message(lambda: check.convert([huge, huge, huge]))


def test_a_whole_dimension_above_the_compiled_maximum_is_refused():
    softmax = launcher("softmax", "softmax", N=1000)  # compiled for N up to 1024
    fits = softmax.checker.convert([gpu((4, 1024)), gpu((4, 1024))])
    softmax.check(fits)
    wide = softmax.checker.convert([gpu((4, 1025)), gpu((4, 1025))])
    text = message(lambda: softmax.check(wide))
    assert "dimension N=1025 is larger than its tile BN=1024" in text
    assert "uses N whole" in text


def test_arguments_must_keep_the_promises_of_the_specialization():
    promises = Specialization(
        aligned=frozenset({"x"}),
        unit=frozenset({"x.stride.1", "y.stride.1"}),
        divisible=frozenset({"x.extent.1"}),
    )
    softmax = launcher("softmax", "softmax", promises)
    good = softmax.checker.convert([gpu((4, 32)), gpu((4, 32))])
    softmax.check(good)
    transposed = softmax.checker.convert([gpu((4, 32), (1, 4)), gpu((4, 32))])
    text = message(lambda: softmax.check(transposed))
    assert "argument 'x' of kernel 'softmax' (x: f32[M, N])" in text
    assert "compiled for unit stride in dimension 1, got stride 4" in text
    assert "x.contiguous()" in text
    misaligned = softmax.checker.convert([gpu((4, 32), address=(1 << 20) + 4), gpu((4, 32))])
    assert "16-byte aligned addresses, got 0x100004" in message(lambda: softmax.check(misaligned))
    ragged = softmax.checker.convert([gpu((4, 33)), gpu((4, 33))])
    assert "extent 1 divisible by 16" in message(lambda: softmax.check(ragged))
    # A smaller multiple is a promise too: rows of 8 elements, 4 is not one.
    eights = Specialization(multiples=frozenset({("x.stride.0", 8)}))
    rows = launcher("softmax", "softmax", eights)
    rows.check(rows.checker.convert([gpu((4, 40)), gpu((4, 40))]))
    odd = rows.checker.convert([gpu((4, 36)), gpu((4, 36))])
    assert "stride 0 divisible by 8 (x.stride.0), got 36" in message(lambda: rows.check(odd))


def test_a_positive_scalar_is_a_promise_too():
    positive = Specialization(positive=frozenset({"alpha"}))
    saxpy = launcher("vector_add", "saxpy", positive)
    x = gpu((10,))
    saxpy.check(saxpy.checker.convert([0.5, x, x, x]))
    for alpha, shown in [(-0.5, "-0.5"), (0.0, "0.0"), (-0.0, "-0.0"), (float("nan"), "nan")]:
        args = saxpy.checker.convert([alpha, x, x, x])
        text = message(lambda args=args: saxpy.check(args))
        assert (
            "argument 'alpha' of kernel 'saxpy' (alpha: f32): the kernel was compiled for a "
            in (text)
        )
        assert f"value finite and above zero, got {shown}" in text
    tiny = saxpy.checker.convert([1e-50, x, x, x])  # 0 as an f32
    assert "got 1e-50 (0.0 as an f32)" in message(lambda: saxpy.check(tiny))
    # Without the promise, any value goes.
    anything = launcher("vector_add", "saxpy")
    anything.check(anything.checker.convert([-0.5, x, x, x]))


def test_the_grid_and_its_limits():
    matmul = launcher("matmul", "matmul")
    tile = {axis.dim: axis.tile for axis in matmul.abi.grid}  # what the pipeline chose
    assert [axis.dim for axis in matmul.abi.grid] == ["M", "N"]
    args = matmul.checker.convert(
        [gpu((1000, 5), dtype="f16"), gpu((5, 130), dtype="f16"), gpu((1000, 130), dtype="f16")]
    )
    assert matmul.grid(args) == (-(-1000 // tile["M"]), -(-130 // tile["N"]), 1)
    n = 65535 * tile["N"] + 1  # one block more than grid axis y takes
    args = matmul.checker.convert(
        [gpu((64, 5), dtype="f16"), gpu((5, n), dtype="f16"), gpu((64, n), dtype="f16")]
    )
    assert "more than CUDA's 65535" in message(lambda: matmul.grid(args))
    # Within every axis's limit, but 2**31 blocks in all: block indices are divided in i32.
    m, n = (2**31 // 65535 + 1) * tile["M"], 65535 * tile["N"]
    args = matmul.checker.convert(
        [gpu((m, 5), dtype="f16"), gpu((5, n), dtype="f16"), gpu((m, n), dtype="f16")]
    )
    assert "in 32 bits" in message(lambda: matmul.grid(args))


def test_parameters_are_packed_in_abi_order_at_aligned_offsets():
    saxpy = launcher("vector_add", "saxpy")
    assert [p.name for p in saxpy.abi.parameters][:3] == ["alpha", "x", "x.extent.0"]
    x, y, out = (
        gpu((10,), address=0x1000),
        gpu((10,), address=0x2000),
        gpu((10,), (3,), "f32", 0x3000),
    )
    values = saxpy.checker.convert([1.5, x, y, out]).values
    assert saxpy.parameters(values) == (1.5, 0x1000, 10, 1, 0x2000, 10, 1, 0x3000, 10, 3)
    saxpy._struct.pack_into(saxpy._buffer, 0, *saxpy.parameters(values))
    raw = saxpy._buffer.raw
    assert struct.unpack_from("<f", raw, 0) == (1.5,)
    assert struct.unpack_from("<Qqq", raw, 8) == (0x1000, 10, 1)  # the pointer 8-byte aligned
    assert saxpy._struct.size == 4 + 4 + 3 * 24


def test_a_fast_launch_hands_the_driver_the_parameters_of_the_full_path(monkeypatch):
    from tilec.runtime import launcher as launcher_module

    saxpy = launcher("vector_add", "saxpy")
    calls = []

    def launch_kernel(*args):
        count = len(saxpy.abi.parameters)
        pointers = (ctypes.c_void_p * count).from_address(args[9])
        codes = [saxpy._struct.format[1:].replace("x", "")[i] for i in range(count)]
        calls.append(
            (
                args[:9],
                tuple(
                    struct.unpack("<" + code, ctypes.string_at(address, struct.calcsize(code)))[0]
                    for code, address in zip(codes, pointers)
                ),
            )
        )
        return (0,)

    driver = type("Driver", (), {"cuLaunchKernel": staticmethod(launch_kernel), "CUstream": int})
    monkeypatch.setattr(launcher_module, "cuda_modules", lambda: (None, driver))
    function = object()
    saxpy._functions[0] = function
    x, y = gpu((1000,), address=0x1000), gpu((1000,), address=0x2000)
    out = gpu((1000,), (3,), "f32", 0x3000)
    values = saxpy.checker.convert([1.5, x, y, out]).values
    launch = saxpy.fast_launch(values, {}, (4, 1, 1), 0)
    launch(1.5, 0x1000, 0x2000, 0x3000, 77)
    launch(-2.0, 0x5000, 0x6000, 0x7000, 78)  # new addresses and scalar, same extents
    assert calls[0] == (
        (function, 4, 1, 1, saxpy.abi.num_threads, 1, 1, saxpy.abi.shared_bytes, 77),
        saxpy.parameters(values),
    )
    assert calls[1][1] == (-2.0, 0x5000, 1000, 1, 0x6000, 1000, 1, 0x7000, 1000, 3)
    assert saxpy.fast_launch(values, {}, (0, 1, 1), 0)(1.5, 0, 0, 0, 77) is None  # empty
    assert len(calls) == 2


@pytest.mark.skipif(gpu_available(), reason="this machine has a GPU")
def test_no_gpu_suggests_the_interpreter():
    add = tilec.load_kernel(f"{EXAMPLES}/vector_add.tile", "vector_add")
    x = np.ones(10, np.float32)
    with pytest.raises(NoGPUError) as info:
        add(x, x, x)
    assert "TILEC_INTERPRET=1" in str(info.value)
    assert "cuda" not in type(info.value).__module__


def test_a_checker_needs_only_the_parameters():
    """The runtime knows nothing of the IR: parameters are plain data."""
    abi = launcher("vector_add", "vector_add").abi
    check = ArgumentChecker("vector_add", abi.parameters)
    assert check.signature == "x: f32[N], y: f32[N], out: f32[N]"


def test_a_persistent_kernel_launches_the_blocks_the_gpu_holds_on_both_paths(monkeypatch):
    # A persistent kernel (passes/pipeline_persistent.py) walks its tiles from
    # program_id(0) by num_programs(0): launched with the tiles' grid, every block along y
    # would redo the tiles of its x. Both launch paths take min(tiles, SMs x blocks per SM).
    import dataclasses

    from tilec.runtime import launcher as launcher_module

    saxpy = launcher("vector_add", "saxpy")
    saxpy.abi = dataclasses.replace(saxpy.abi, persistent=True)
    grids = []

    def launch_kernel(*args):
        grids.append(args[1:4])
        return (0,)

    driver = type("Driver", (), {"cuLaunchKernel": staticmethod(launch_kernel), "CUstream": int})
    monkeypatch.setattr(launcher_module, "cuda_modules", lambda: (None, driver))
    saxpy._functions[0] = object()
    saxpy._residency[0] = (132, 1)  # as the driver reports it for a 200 KiB block on an H200
    x, y = gpu((1000,), address=0x1000), gpu((1000,), address=0x2000)
    out = gpu((1000,), (3,), "f32", 0x3000)
    values = saxpy.checker.convert([1.5, x, y, out]).values
    saxpy.fast_launch(values, {}, (32, 12, 1), 0)(1.5, 0x1000, 0x2000, 0x3000, 77)
    saxpy.fast_launch(values, {}, (5, 2, 1), 0)(1.5, 0x1000, 0x2000, 0x3000, 77)
    assert grids == [(132, 1, 1), (10, 1, 1)]
    assert saxpy.persistent_grid((32, 12, 1), 0) == (132, 1, 1)


def test_an_f32_scalar_past_the_largest_rounds_to_infinity():
    """A Python float beyond the f32 range is packed as C, numpy and torch round it (to ±inf at
    and past the midpoint between the largest f32 and 2^128), on the full path and the fast
    path's converter alike, instead of struct's OverflowError escaping as a traceback."""
    import math
    import struct

    from tilec.runtime.arguments import _scalar, scalar_converter

    convert = scalar_converter("f32", float)
    largest = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
    for value, expected in (
        (1e39, math.inf),
        (-1e39, -math.inf),
        (2.0**128 - 2.0**103, math.inf),  # the midpoint: ties to even, past the largest
        (largest, largest),
        (1.5, 1.5),
    ):
        for packed in (_scalar("f32", value), convert(value)):
            assert packed == expected, (value, packed)
            struct.pack("<f", packed)
    assert math.isnan(convert(math.nan))
