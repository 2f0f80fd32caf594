"""`@tilec.jit`'s fast path for repeated calls on torch tensors, on the CPU: the driver, the
GPU and torch's CUDA side are the stubs of `tilec.benchmarks.launch_overhead`. A call whose
arguments differ from a remembered one in anything a check depends on (dtype, shape, strides,
alignment, device) takes the full path again, and bad ones are refused as before."""

from __future__ import annotations

import struct
from contextlib import ExitStack, suppress

import pytest
import torch

import tilec
from tilec.benchmarks import launch_overhead
from tilec.runtime import LaunchError


@pytest.fixture
def kernels(tmp_path):
    path = tmp_path / "k.tile"
    path.write_text(launch_overhead.SOURCE)
    launches = []
    with ExitStack() as stack:
        launch_overhead._stubs(stack)
        driver = launch_overhead._Driver

        def record(*args):
            launches.append(args)
            return (0,)

        stack.enter_context(pytest.MonkeyPatch.context()).setattr(
            driver, "cuLaunchKernel", staticmethod(record)
        )
        scale = tilec.load_kernel(path, "scale", tile={"N": 256})
        add2d = tilec.load_kernel(path, "add2d", tile={"M": 16, "N": 64})
        yield scale, add2d, launches


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


def test_a_repeated_call_skips_the_checks_and_packs_the_same_parameters(kernels):
    scale, _add2d, launches = kernels
    x, y = torch.randn(1000), torch.empty(1000)
    slow = full_checks(scale)
    scale(x, y, 2.0)
    launcher = next(iter(scale._launchers.values()))
    first = bytes(launcher._buffer)
    scale(x, y, 2.0)
    assert len(slow) == 1 and len(launches) == 2
    assert bytes(launcher._buffer) == first
    x2, y2 = torch.randn(1000), torch.empty(1000)  # new addresses, same signature
    scale(x2, y2, 3.0)
    assert len(slow) == 1
    fmt = launcher._struct
    values = fmt.unpack_from(bytes(launcher._buffer))
    assert x2.data_ptr() in values and y2.data_ptr() in values and 3.0 in values
    assert launches[-1][1:4] == (4, 1, 1)  # the grid: 1000 / 256 blocks
    assert struct.calcsize(fmt.format) == fmt.size


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
    scale, _add2d, _launches = kernels
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
    scale, add2d, _launches = kernels
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
