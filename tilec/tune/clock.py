"""How the tuner checks and times a built candidate: on the GPU with the benchmark's own clock,
or, for tests on a machine without one, with a fake clock.

Both check a candidate's output before it is timed, against one reference: the example's
numpy reference when one is given (`examples/foo_reference.py`), else the output of the
heuristic's own kernel on the same inputs. Inputs are `tilec.interp.runner.random_arguments`
(gather indices in range, the reference's `SCALARS`); outputs are compared as `tilec run`
compares them (`_compare`), at twice `DEFAULT_RTOL` when the reference is another kernel (both
sides then carry rounding error).

* `GpuClock` launches each candidate through `tilec.jit` (`JitFunction.adopt` takes the PTX the
  worker made) on torch CUDA tensors, and times it with `tilec.benchmarks.gpu.time_ms` — the
  function `tilec bench` times with (warm-up, inputs rotated past the L2 cache, median) —
  `rounds` times: the candidate's figure is the median of the rounds, its spread the slowest
  round over the fastest, as in `tilec bench`.
* `FakeClock` runs each candidate's tile IR in the interpreter (`tilec.interp`) at the
  problem's (small) sizes to check it, and takes its "time" from a cost function of the
  decisions it compiled to: deterministic, so the search, pruning, caching and the CLI are
  tested for real without a GPU. Its `speeds` make it a host of several fake GPUs (GPU k's
  times are the cost times `speeds[k]`), for the search over several GPUs.

A clock that can be made again in another process has a `factory`: a picklable callable that
builds the same clock for one GPU there (`tilec.tune.devices`: a measuring process per GPU).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tilec.tune.worker import Build, Problem, make_function

__all__ = ["Clock", "FakeClock", "GpuClock", "Reference", "RunnerClock"]


class Reference:
    """The inputs every candidate runs on and the outputs a right one writes."""

    def __init__(self, problem: Problem, reference: Any = None, seed: int = 0):
        from tilec.interp.launch import parameter_name, written_parameters
        from tilec.interp.runner import random_arguments

        function = make_function(problem, {})
        self.func = function.ir.functions[0]
        scalars = getattr(reference, "SCALARS", {}).get(problem.kernel, {}) if reference else {}
        self.values = random_arguments(self.func, problem.extents, seed=seed, scalars=scalars)
        written = written_parameters(self.func)
        self.names = [parameter_name(a) for a in self.func.arguments]
        self.written = [parameter_name(a) for a in self.func.arguments if a in written]
        self.element = {
            parameter_name(a): a.type.element.name
            for a in self.func.arguments
            if hasattr(a.type, "element")
        }
        self.expected: dict[str, np.ndarray] | None = None
        self.from_kernel = reference is None or not hasattr(reference, problem.kernel)
        if not self.from_kernel:
            from tilec.interp.runner import _expected_outputs

            result = getattr(reference, problem.kernel)(*self.copies())
            self.expected = _expected_outputs(
                self.func, result, self.written, problem.filename + " reference"
            )

    def copies(self) -> list[Any]:
        return [np.copy(v) if isinstance(v, np.ndarray) else v for v in self.values]

    def compare(self, outputs: Mapping[str, np.ndarray]) -> str | None:
        """None when `outputs` match; else which output differs and by how much. The first
        outputs given (the heuristic's, without a numpy reference) become the reference."""
        from tilec.interp.runner import DEFAULT_RTOL, _compare

        if self.expected is None:
            self.expected = {name: np.copy(v) for name, v in outputs.items()}
            return None
        for name in self.written:
            element = self.element[name]
            rtol, why = DEFAULT_RTOL.get(element, (0.0, "integers"))
            if self.from_kernel:
                rtol *= 2
            check = _compare(name, name, outputs[name], self.expected[name], rtol, why)
            if not check.passed:
                return (
                    f"wrong result: {name} differs (max rel error {check.max_rel_error:.3g}, "
                    f"rtol {rtol:g})"
                )
        return None


class Clock:
    """What the tuner asks of a timing backend. `prepare` once per search, with the problem
    and the heuristic's build; then per candidate `check` (None: right, else why not) and
    `time` (the milliseconds of each round: the tuner takes their median, and their spread).
    `device` and `driver` name the machine in the cache key. To time on several GPUs, the
    tuner asks `device_count` (the GPUs it may name) and `factory` (module docstring)."""

    name = "clock"
    device = ""
    driver = ""

    def device_count(self) -> int:
        """The GPUs this clock can time on (ordinals 0 to count - 1)."""
        return 1

    def factory(self) -> Callable[[int], Clock] | None:
        """A picklable callable making this clock again, for GPU `ordinal`, in a measuring
        process (None: it cannot be made elsewhere, and times in the tuner's process only)."""
        return None

    def prepare(self, problem: Problem, heuristic: Build) -> None:
        raise NotImplementedError

    def check(self, build: Build) -> str | None:
        raise NotImplementedError

    def time(self, build: Build) -> list[float]:
        raise NotImplementedError


class FakeClock(Clock):
    """Times are `cost(decisions)` (`space.read_back`'s dict of what the candidate compiled
    to, plus `config`: the pins it was given) times `speeds[ordinal]`, the speed of the fake
    GPU it stands for; checks run the interpreter on the candidate's tile IR. `reference`: a
    numpy reference module (else the heuristic's output)."""

    name = "fake"

    def __init__(
        self,
        cost: Callable[[Mapping[str, Any]], float],
        *,
        reference: Any = None,
        device: str = "fake GPU",
        check: bool = True,
        speeds: Sequence[float] = (1.0,),
        ordinal: int = 0,
    ):
        self.cost = cost
        self.reference_module = reference
        self.device = device
        self.driver = "none"
        self.checking = check
        self.speeds = tuple(speeds)
        self.ordinal = ordinal
        self.reference: Reference | None = None

    def device_count(self) -> int:
        return len(self.speeds)

    def factory(self) -> Callable[[int], Clock] | None:
        arguments = {
            "cost": self.cost,
            "device": self.device,
            "check": self.checking,
            "speeds": self.speeds,
        }
        return functools.partial(
            _remade_fake, type(self), _reference_file(self.reference_module), arguments
        )

    def prepare(self, problem: Problem, heuristic: Build) -> None:
        self.problem = problem
        if self.checking:
            self.reference = Reference(problem, self.reference_module)

    def _outputs(self, build: Build) -> dict[str, np.ndarray]:
        from tilec.interp import run_kernel
        from tilec.ir.parser import parse_module

        assert self.reference is not None
        module = parse_module(build.ir, self.problem.filename)
        values = self.reference.copies()
        run_kernel(module, self.problem.kernel, values)
        return {
            name: v
            for name, v in zip(self.reference.names, values)
            if name in self.reference.written
        }

    def outputs(self, build: Build) -> dict[str, np.ndarray]:
        """What the candidate writes (tests corrupt it to make a wrong candidate)."""
        return self._outputs(build)

    def check(self, build: Build) -> str | None:
        if self.reference is None:
            return None
        return self.reference.compare(self.outputs(build))

    def time(self, build: Build) -> list[float]:
        cost = float(self.cost({**build.decisions, "config": build.config}))
        return [cost * self.speeds[self.ordinal]]


class GpuClock(Clock):
    """The GPU: candidates launched through the runtime on torch tensors, timed with
    `tilec.benchmarks.gpu.time_ms` `rounds` times. `inputs`: the arguments to copy (a jit
    call's own, which are never written), else random ones at the problem's sizes."""

    name = "gpu"

    def __init__(
        self, *, reference: Any = None, rounds: int | None = None, inputs: Sequence[Any] = ()
    ):
        import torch

        from tilec.benchmarks import gpu

        self.rounds = rounds or gpu.ROUNDS
        self.reference_module = reference
        self.inputs = list(inputs)
        self.device = torch.cuda.get_device_name()
        self.driver = _driver_version()

    def device_count(self) -> int:
        import torch

        return torch.cuda.device_count()

    def factory(self) -> Callable[[int], Clock] | None:
        # The inputs travel as host copies (a process's CUDA tensors are its own), and are
        # put back on the GPU there with their strides.
        inputs = [_HostTensor.of(v) for v in self.inputs]
        return functools.partial(
            _remade_gpu, _reference_file(self.reference_module), self.rounds, inputs
        )

    def prepare(self, problem: Problem, heuristic: Build) -> None:
        import torch

        from tilec.benchmarks import gpu
        from tilec.gpucheck import _to_torch

        self.problem = problem
        self.reference = Reference(problem, self.reference_module)
        if self.inputs:
            first = [_clone(v) for v in self.inputs]
        else:
            first = [
                _to_torch(v) if isinstance(v, np.ndarray) else v for v in self.reference.values
            ]
        size = sum(v.numel() * v.element_size() for v in first if isinstance(v, torch.Tensor))
        count = min(max(2, math.ceil(4 * gpu.L2_BYTES / max(size, 1))), gpu.MAX_SETS)
        self.sets = [first] + [[_refill(v) for v in first] for _ in range(count - 1)]
        self.functions: dict[str, Any] = {}

    def function(self, build: Build) -> Any:
        """The candidate's `JitFunction`, holding the kernel its worker compiled."""
        from tilec.jit import CompiledKernel
        from tilec.lowering import Specialization
        from tilec.lowering.abi import KernelABI

        found = self.functions.get(build.code)
        if found is None:
            found = make_function(self.problem, build.config)
            specialization = Specialization.from_json(self.problem.specialization)
            _, key = found.plan_specialized(specialization, self.problem.extents, self.problem.arch)
            abi = KernelABI.from_json(build.abi)
            found.adopt(
                CompiledKernel(
                    self.problem.kernel,
                    self.problem.arch,
                    build.ptx,
                    abi,
                    specialization,
                    build.pipeline,
                    key,
                    False,
                )
            )
            self.functions[build.code] = found
        return found

    def check(self, build: Build) -> str | None:
        import torch

        from tilec.gpucheck import _to_numpy, _to_torch

        function = self.function(build)
        if self.inputs:
            values = [_clone(v) for v in self.sets[0]]
        else:
            values = [
                _to_torch(v) if isinstance(v, np.ndarray) else v for v in self.reference.values
            ]
        function(*values)
        torch.cuda.synchronize()
        outputs = {
            name: _to_numpy(v)
            for name, v in zip(self.reference.names, values)
            if name in self.reference.written
        }
        if self.inputs and self.reference.expected is None:
            self.reference.from_kernel = True
        return self.reference.compare(outputs)

    def time(self, build: Build) -> list[float]:
        from tilec.benchmarks.gpu import time_ms

        function = self.function(build)
        return [time_ms(function, self.sets) for _ in range(self.rounds)]


class RunnerClock(GpuClock):
    """A caller's own harness as the clock: `make(kernel)` returns `run(*inputs)`, which calls
    the candidate's kernel on one of `sets`; `output()` (else `run`'s result) is what it
    wrote, and `right(output)` says whether that is right (None: it must match the heuristic's
    output, as `tilec.benchmarks.gpu._close` compares at `rtol`). What the suite's regret run
    and the probes time with: their inputs, their runner, their check, and `time_ms`."""

    def __init__(
        self,
        make: Callable[[Any], Callable[..., Any]],
        sets: Sequence[Sequence[Any]],
        *,
        right: Callable[[Any], bool] | None = None,
        output: Callable[[], Any] | None = None,
        rtol: float = 2e-3,
        rounds: int | None = None,
    ):
        super().__init__(rounds=rounds)
        self.make, self.given_sets, self.right, self.output = make, list(sets), right, output
        self.rtol = rtol
        self.first: Any = None

    def factory(self) -> Callable[[int], Clock] | None:
        return None  # the caller's runner and input sets live in this process

    def prepare(self, problem: Problem, heuristic: Build) -> None:
        self.problem = problem
        self.sets = self.given_sets
        self.functions = {}

    def check(self, build: Build) -> str | None:
        import torch

        from tilec.benchmarks.gpu import _close

        got = self.make(self.function(build))(*self.sets[0])
        got = self.output() if self.output is not None else got
        torch.cuda.synchronize()
        if self.right is not None:
            return None if self.right(got) else "wrong result (the caller's check)"
        if self.first is None:  # the heuristic's output is the reference
            self.first = got.clone()
            return None
        if _close(got, self.first, self.rtol):
            return None
        return f"wrong result (rtol {self.rtol:g} against the heuristic's output)"

    def time(self, build: Build) -> list[float]:
        from tilec.benchmarks.gpu import time_ms

        run = self.make(self.function(build))
        return [time_ms(run, self.sets) for _ in range(self.rounds)]


def _reference_file(module: Any) -> str | None:
    """Where a numpy reference module was loaded from (a module does not pickle: a
    measuring process loads it again from its file)."""
    if module is None:
        return None
    path = getattr(module, "__file__", None)
    if not path:
        from tilec.diagnostics import TileError

        raise TileError(
            f"the reference module {getattr(module, '__name__', module)!r} has no file: a "
            "measuring process cannot load it"
        )
    return str(path)


def _load_reference(path: str | None) -> Any:
    if path is None:
        return None
    from tilec.interp.runner import load_reference

    return load_reference(path)


def _remade_fake(
    kind: type, reference: str | None, arguments: dict[str, Any], ordinal: int
) -> Clock:
    return kind(reference=_load_reference(reference), ordinal=ordinal, **arguments)


def _remade_gpu(reference: str | None, rounds: int, inputs: list[Any], ordinal: int) -> Clock:
    # This process sees its GPU alone (CUDA_VISIBLE_DEVICES): `ordinal` is the parent's name.
    values = [v.on_gpu() if isinstance(v, _HostTensor) else v for v in inputs]
    return GpuClock(reference=_load_reference(reference), rounds=rounds, inputs=values)


class _HostTensor:
    """A CUDA tensor's values on the host, and its strides, to make it again on a GPU."""

    def __init__(self, values: Any, stride: tuple[int, ...]):
        self.values, self.stride = values, stride

    @staticmethod
    def of(value: Any) -> Any:
        import torch

        if not isinstance(value, torch.Tensor):
            return value
        return _HostTensor(value.detach().cpu(), tuple(value.stride()))

    def on_gpu(self) -> Any:
        import torch

        copy = torch.empty_strided(
            self.values.shape, self.stride, dtype=self.values.dtype, device="cuda"
        )
        copy.copy_(self.values)
        return copy


def _clone(value: Any) -> Any:
    import torch

    if not isinstance(value, torch.Tensor):
        return value
    copy = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=value.device)
    copy.copy_(value)
    return copy


def _refill(value: Any) -> Any:
    """Another input set like `value`: floats drawn afresh (uniform in [-1, 1)), integer
    tensors (gather indices: in range) copied."""
    import torch

    copy = _clone(value)
    if isinstance(copy, torch.Tensor) and copy.is_floating_point():
        copy.uniform_(-1, 1)
    return copy


def _driver_version() -> str:
    """The CUDA driver's version, as the driver reports it ("12.8"); "unknown" when it
    cannot say."""
    try:
        from tilec.runtime.device import cuda_modules

        driver, _ = cuda_modules()
        _err, version = driver.cuDriverGetVersion()
        return f"{version // 1000}.{version % 1000 // 10}"
    except Exception:
        return "unknown"
