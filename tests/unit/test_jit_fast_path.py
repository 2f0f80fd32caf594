"""`@tilec.jit`'s fast path for repeated calls on torch tensors, on the CPU: the driver, the
GPU and torch's CUDA side are the stubs of `tilec.benchmarks.launch_overhead`. A call whose
arguments differ from a remembered one in anything a check depends on (dtype, shape, strides,
alignment, device) takes the full path again, and bad ones are refused as before."""

from __future__ import annotations

import ctypes
import struct
import threading
from contextlib import ExitStack, suppress
from typing import Any, NamedTuple
from unittest import mock

import pytest
import torch

import tilec
from tilec.benchmarks import launch_overhead
from tilec.runtime import LaunchError
from tilec.runtime.arguments import SCALAR_CODES

MIXED = """
def mixed(x: f32[N], y: f32[N], alpha: f16, n: i32, big: i64, beta: f64):
    for tn in tiles(N):
        y[tn] = x[tn] * alpha + n + big + beta

def row_max(x: f32[M, N], y: f32[M], c: f32):
    for tm in tiles(M):
        y[tm] = max(x[tm, :] * c, axis=1)
"""


class Launch(NamedTuple):
    """One `cuLaunchKernel` call: its arguments, and the kernel parameters they point at, read
    during the call (the driver copies them then)."""

    args: tuple
    parameters: tuple

    @property
    def grid(self) -> tuple:
        return self.args[1:4]

    @property
    def stream(self) -> Any:
        return self.args[8]


class Stream:
    def __init__(self, handle: int):
        self.cuda_stream = handle


def received(launcher: Any, address: int) -> tuple:
    """The parameter values behind the `void*[]` at `address`, as the kernel's ABI types them."""
    parameters = launcher.abi.parameters
    pointers = (ctypes.c_void_p * len(parameters)).from_address(address)
    values = []
    for p, pointer in zip(parameters, pointers):
        code = {"pointer": "Q", "scalar": SCALAR_CODES.get(p.dtype)}.get(p.kind, "q")
        raw = ctypes.string_at(pointer, struct.calcsize(code))
        values.append(struct.unpack("<" + code, raw)[0])
    return tuple(values)


@pytest.fixture
def kernels(tmp_path):
    path = tmp_path / "k.tile"
    path.write_text(launch_overhead.SOURCE + MIXED)
    launches: list[Launch] = []
    results: list[int] = []  # what the next launches return (then success)
    made: list[Any] = []
    with ExitStack() as stack:
        launch_overhead._stubs(stack)
        driver = launch_overhead._Driver

        def record(*args):
            (launcher,) = [
                launcher
                for kernel in made
                for launcher in kernel._launchers.values()
                if args[0] in launcher._functions.values()
            ]
            launches.append(Launch(args, received(launcher, args[9])))
            return (results.pop(0) if results else 0,)

        stack.enter_context(pytest.MonkeyPatch.context()).setattr(
            driver, "cuLaunchKernel", staticmethod(record)
        )
        scale = tilec.load_kernel(path, "scale", tile={"N": 256})
        add2d = tilec.load_kernel(path, "add2d", tile={"M": 16, "N": 64})
        mixed = tilec.load_kernel(path, "mixed", tile={"N": 256})
        row_max = tilec.load_kernel(path, "row_max", tile={"M": 16})
        made += [scale, add2d, mixed, row_max]
        yield scale, add2d, launches, mixed, results, row_max


def expected(kernel, *args) -> tuple:
    """The parameters the full path packs for `args`."""
    (launcher,) = kernel._launchers.values()
    return launcher.parameters(launcher.checker.convert(args).values)


def full_checks(kernel):
    """Counts the calls that went through the full checks."""
    checker = kernel._checker
    calls = []
    original = checker.convert

    class Counting:
        arguments = checker.arguments

        def convert(self, values):
            calls.append(values)
            return original(values)

    kernel.__dict__["_checker"] = Counting()
    return calls


def test_a_repeated_call_skips_the_checks_and_hands_the_driver_the_same_parameters(kernels):
    scale, _add2d, launches, *_ = kernels
    x, y = torch.randn(1000), torch.empty(1000)
    slow = full_checks(scale)
    scale(x, y, 2.0)
    scale(x, y, 2.0)
    assert len(slow) == 1 and len(launches) == 2
    assert launches[0].parameters == launches[1].parameters == expected(scale, x, y, 2.0)
    assert launches[0].args[:9] == launches[1].args[:9]  # function, grid, block, stream
    x2, y2 = torch.randn(1000), torch.empty(1000)  # new addresses, same signature
    scale(x2, y2, 3.0)
    assert len(slow) == 1
    assert launches[-1].parameters == expected(scale, x2, y2, 3.0)
    assert launches[-1].grid == (4, 1, 1)  # 1000 / 256 blocks
    assert launches[-1].args[4:8] == launches[0].args[4:8]  # block, shared memory


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # f16: 1e6 is inf
def test_scalars_of_every_type_are_converted_as_the_full_path_does(kernels):
    _scale, _add2d, launches, mixed, *_ = kernels
    x, y = torch.randn(100), torch.empty(100)
    slow = full_checks(mixed)
    mixed(x, y, 1.5, 7, 2**40, 0.25)
    mixed(x, y, 1e6, -3, -(2**62), 1e300)  # f16 overflows to inf, as numpy rounds it
    mixed(x, y, 2, 3, 4, 5)  # ints for the floats: a signature of its own
    mixed(x, y, 3, 4, 5, 6)
    assert len(slow) == 2
    for launch, args in zip(
        launches,
        [(1.5, 7, 2**40, 0.25), (1e6, -3, -(2**62), 1e300), (2, 3, 4, 5), (3, 4, 5, 6)],
    ):
        assert launch.parameters == expected(mixed, x, y, *args)
    assert launches[1].parameters[6] == float("inf")
    with pytest.raises(LaunchError, match="does not fit i32"):
        mixed(x, y, 1.5, 2**31, 0, 0.0)  # out of range: the full path says why
    with pytest.raises(LaunchError, match="expected an integer for i32, got float"):
        mixed(x, y, 1.5, 2.5, 0, 0.0)
    assert len(launches) == 4


def test_the_sign_of_a_scale_is_part_of_the_signature(kernels):
    """A scale the kernel may assume positive (hoist-scale's): a negative one after a positive
    one is another specialization, compiled and remembered apart, never the positive
    kernel's launch; a value that rounds to 0 as an f32 is not positive."""
    *_, launches, _mixed, _results, row_max = kernels
    x, y = torch.randn(40, 100), torch.empty(40)
    slow = full_checks(row_max)
    for c in (0.5, 0.25, -0.5, -0.25, 1e-50, 0.5):
        row_max(x, y, c)
    assert len(slow) == 2  # 0.5, then -0.5; 1e-50 (0 as an f32) takes -0.5's launch
    assert len(launches) == 6
    compiled = {
        launcher.specialization.positive: launcher for launcher in row_max._launchers.values()
    }
    assert len(compiled) == 2
    positive, other = compiled[frozenset({"c"})], compiled[frozenset()]
    functions = [launch.args[0] for launch in launches]
    assert functions == [positive._functions[0]] * 2 + [other._functions[0]] * 3 + [
        positive._functions[0]
    ]


def test_the_stream_is_looked_up_on_every_call(kernels, monkeypatch):
    scale, _add2d, launches, *_ = kernels
    current = [0]
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: current[0])
    x, y = torch.randn(100), torch.empty(100)
    scale(x, y, 2.0)
    scale(x, y, 2.0)
    current[0] = 0x5000  # torch.cuda.stream(...) or graph capture switched it
    scale(x, y, 2.0)
    scale(x, y, 2.0, stream=0x6000)
    scale(x, y, 2.0, stream=Stream(0x7000))  # an object with `cuda_stream`, as torch's
    assert [launch.stream for launch in launches] == [0, 0, 0x5000, 0x6000, 0x7000]


def test_each_thread_launches_from_parameters_of_its_own(kernels):
    scale, _add2d, launches, *_ = kernels
    slow = full_checks(scale)
    x, y = torch.randn(1000), torch.empty(1000)
    scale(x, y, 2.0)
    scale(x, y, 2.0)
    a, b = torch.randn(1000), torch.empty(1000)

    def work():
        scale(a, b, 3.0)  # the full path: this thread has not launched it yet
        scale(a, b, 4.0)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    scale(x, y, 5.0)
    assert len(slow) == 2
    assert [launch.parameters for launch in launches[2:]] == [
        expected(scale, a, b, 3.0),
        expected(scale, a, b, 4.0),
        expected(scale, x, y, 5.0),
    ]
    assert launches[3].args[9] != launches[4].args[9]  # separate parameter storage


def test_a_thread_without_a_context_gets_one_and_launches_again(kernels, monkeypatch):
    scale, _add2d, launches, _mixed, results, _row_max = kernels
    from tilec.runtime import launcher as launcher_module

    made_current = []
    device = type("Device", (), {"set_current": lambda self: made_current.append(1)})()
    monkeypatch.setattr(launcher_module, "get_device", lambda ordinal=None: device)
    x, y = torch.randn(100), torch.empty(100)
    scale(x, y, 2.0)
    results.append(launch_overhead._Driver.CUresult.CUDA_ERROR_INVALID_CONTEXT)
    scale(x, y, 3.0)  # the fast path
    assert made_current == [1] and len(launches) == 3
    assert launches[1].parameters == launches[2].parameters == expected(scale, x, y, 3.0)
    assert launches[1].args == launches[2].args


def test_empty_tensors_launch_nothing(kernels):
    scale, _add2d, launches, *_ = kernels
    slow = full_checks(scale)
    x, y = torch.randn(0), torch.empty(0)
    scale(x, y, 2.0)
    scale(x, y, 2.0)
    assert len(slow) == 1 and launches == []


def test_other_tensor_types_and_argument_counts_take_the_full_path(kernels):
    scale, _add2d, launches, *_ = kernels
    slow = full_checks(scale)
    x, y = torch.randn(100), torch.empty(100)
    scale(x, y, 2.0)
    # A module's weight is a plain tensor to the fast path (the training model's every linear
    # layer passes one); another subclass of torch.Tensor takes the full path.
    scale(torch.nn.Parameter(x), y, 2.0)
    assert len(slow) == 1

    class Sub(torch.Tensor):  # recognised by its module, as torch's own subclasses are
        __module__ = "torch.testing"

    scale(x.as_subclass(Sub), y, 2.0)
    scale(x.as_subclass(Sub), y, 2.0)
    assert len(slow) == 3
    with pytest.raises(LaunchError, match="takes 3 argument"):
        scale(x, y)
    with pytest.raises(LaunchError, match="takes 3 argument"):
        scale(x, y, 2.0, 1.0)
    scale(x=x, y=y, alpha=2.0)  # by name: the full path
    assert len(slow) == 6 and len(launches) == 5
    assert launches[-1].parameters == expected(scale, x, y, 2.0)


@pytest.mark.parametrize(
    "change",
    [
        lambda x: x.to(torch.float64),  # dtype
        lambda x: torch.randn(2000),  # shape
        lambda x: torch.randn(2000)[::2],  # stride
        lambda x: torch.randn(1001)[1:],  # address modulo 16
    ],
)
def test_any_change_takes_the_full_path(kernels, change):
    scale, _add2d, _launches, *_ = kernels
    x, y = torch.randn(1000), torch.empty(1000)
    slow = full_checks(scale)
    scale(x, y, 2.0)
    scale(x, y, 2.0)
    assert len(slow) == 1
    other = change(x)
    with suppress(LaunchError):
        scale(other, torch.empty(other.shape[0]), 2.0)
    assert len(slow) == 2


def test_bad_arguments_after_good_ones_are_still_refused(kernels, monkeypatch):
    scale, add2d, _launches, *_ = kernels
    x, y = torch.randn(64, 256), torch.randn(64, 256)
    out = torch.empty(64, 256)
    add2d(x, y, out)
    add2d(x, y, out)
    with pytest.raises(LaunchError, match="expected dtype f32"):
        add2d(x.half(), y, out)
    with pytest.raises(LaunchError, match="dimension N is 256"):
        add2d(x, y, torch.empty(64, 128))
    with pytest.raises(LaunchError, match="expected 2 dimension"):
        add2d(x, y, torch.empty(64 * 256))
    with pytest.raises(LaunchError, match="the kernel was compiled for"):
        launcher = next(iter(add2d._launchers.values()))
        launcher.launch(add2d._checker.convert((torch.randn(256, 64).t(), y, out)))
    a, b = torch.randn(100), torch.empty(100)
    scale(a, b, 2)
    scale(a, b, 2)
    with pytest.raises(LaunchError, match="expected a number"):
        scale(a, b, "2")
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: -1)  # now "on the CPU"
    with pytest.raises(LaunchError, match="tensor on cpu"):
        scale(a, b, 2.0)
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 1 if self is b else 0)
    with pytest.raises(LaunchError, match="on GPU 1"):
        scale(a, b, 2.0)


class CountedStream(int):
    """A stand-in for cuda.bindings' `CUstream` that counts how many are made."""

    made: list[int] = []

    def __new__(cls, handle: int):
        cls.made.append(handle)
        return super().__new__(cls, handle)


def test_each_stream_is_made_into_a_cuda_stream_once(kernels, monkeypatch):
    scale, _add2d, launches, *_ = kernels
    monkeypatch.setattr(launch_overhead._Driver, "CUstream", CountedStream)
    monkeypatch.setattr(CountedStream, "made", [])
    x, y = torch.randn(100), torch.empty(100)
    scale(x, y, 2.0)  # the full path: the handle as it is
    for stream in [0, 0x5000, 0x5000, 0, Stream(0x5000)]:
        scale(x, y, 2.0, stream=stream)
    assert CountedStream.made == [0, 0x5000]
    assert [launch.stream for launch in launches] == [0, 0, 0x5000, 0x5000, 0, 0x5000]
    assert all(type(launch.stream) is CountedStream for launch in launches[1:])
    full, *fast = launches
    assert all(launch.args[:8] == full.args[:8] for launch in fast)  # function, grid, block
    assert all(launch.parameters == full.parameters for launch in fast)
    (launcher,) = scale._launchers.values()
    for handle in range(0x10000, 0x10000 + 100):  # many streams: the table stays small
        scale(x, y, 2.0, stream=handle)
    assert len(launcher._streams) <= 64
    assert [launch.stream for launch in launches[-100:]] == list(range(0x10000, 0x10000 + 100))


def test_a_failed_fast_launch_raises_what_the_full_path_raises(kernels, monkeypatch):
    scale, _add2d, launches, _mixed, results, _row_max = kernels
    from tilec.runtime import GPUError

    driver = launch_overhead._Driver
    names = {700: b"CUDA_ERROR_ILLEGAL_ADDRESS"}
    monkeypatch.setattr(driver, "cuGetErrorName", lambda err: (0, names[err]), raising=False)
    monkeypatch.setattr(driver, "cuGetErrorString", lambda err: (0, b"bad"), raising=False)
    x, y = torch.randn(100), torch.empty(100)
    slow = full_checks(scale)
    messages = []
    for _ in range(2):  # the full path, then the fast one
        results.append(700)
        with pytest.raises(GPUError) as info:
            scale(x, y, 2.0)
        messages.append(str(info.value))
        scale(x, y, 2.0)  # remembered only after a launch that succeeded
    assert len(slow) == 2 and len(launches) == 4
    assert messages[0] == messages[1]
    assert (
        "launching kernel 'scale' (cuLaunchKernel) failed: CUDA_ERROR_ILLEGAL_ADDRESS"
        in (messages[0])
    )


def test_the_training_steps_host_time_runs_every_operator_on_the_launch_path():
    """`launch_overhead --train`: the decoder's forward and backward run their tilec
    operators on the compiled-launch path (driver stubbed), forward and backward kernels."""
    import tilec.torch as tilec_torch

    paths = []
    original = tilec_torch.TilecOp._run

    def counting(self, *args):
        paths.append(self.name)
        return original(self, *args)

    with mock.patch.object(tilec_torch.TilecOp, "_run", counting):
        (ms,) = launch_overhead.train_step("tiny", 1, 1).values()
    assert ms > 0
    assert "tilec_llama::linear" in paths and "tilec_llama::attention_dkdv" in paths
