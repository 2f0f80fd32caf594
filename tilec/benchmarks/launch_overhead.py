"""Host time of a cached `@tilec.jit` call on torch tensors, with the driver stubbed out.

    python -m tilec.benchmarks.launch_overhead [--calls 200000] [--repeat 7] [--json OUT]

What it measures: tilec's own Python work per call of an already-compiled kernel (issue 5's
launch-overhead target), called directly and through its PyTorch operator (`tilec.torch.op`,
Stage L: torch's dispatcher, the operator's checks and the allocation of its output) — `JitFunction.__call__` from the call to the point where it would
call `cuLaunchKernel`: argument checks and conversion, the specialization lookup, the grid,
the stream lookup, parameter packing. A repeated call takes the fast path (`tilec.jit_fast_path.
_fast_path`, `Launcher.fast_launch`), which is what this times. No GPU is needed:

* the tensors are real CPU torch tensors (so reading `data_ptr()`, `shape`, `stride()` and
  `dtype` costs what it costs on CUDA tensors), with `torch.Tensor.get_device` patched to
  answer GPU 0 (a Python function where torch has a C one: a few tens of ns pessimistic);
* torch's current-stream lookup (`torch._C._cuda_getCurrentRawStream`, absent from CPU
  builds) is a Python function returning 0;
* the driver (`tilec.runtime.launcher.cuda_modules`) is a stub whose `cuLaunchKernel` returns
  success at once, loading the cubin (`Launcher._load`) returns a placeholder, and the GPU
  (`get_device`, `device_arch`) is an sm_90a stand-in. The kernels are compiled to PTX for
  real, once, before timing (through the on-disk cache when one is configured).

`--train CONFIG` times instead the host side of a whole training step of the Stage L decoder
(`examples/torch/train.py`'s CONFIG, bf16): the forward and backward of its tilec operators
with the same stubs (tensor maps, SM counts and split workspaces stubbed too), in ms of CPU
time a step. The tensors are CPU tensors, so what torch itself does between the operators
(the model's reshapes and copies, autograd accumulating gradients) runs as CPU arithmetic:
compare the figure between commits on one machine, not with a GPU step.

So the figure is the real per-call path minus the driver call itself (4.75 µs on the lent
H200) and minus the difference between the stubs and torch's C functions. Each kernel is timed
as the median over `--repeat` rounds of `--calls` calls, in µs per call of this thread's CPU
time (`time.thread_time`: on a shared machine, the time other processes took the core is not
counted). A bare Python call of a no-op function is printed as the floor of the machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from contextlib import ExitStack
from types import SimpleNamespace
from typing import Any
from unittest import mock

import torch

import tilec

SOURCE = """
def scale(x: f32[N], y: f32[N], alpha: f32):
    for tn in tiles(N):
        y[tn] = x[tn] * alpha


def add2d(x: f32[M, N], y: f32[M, N], out: f32[M, N]):
    for tm, tn in tiles(M, N):
        out[tm, tn] = x[tm, tn] + y[tm, tn]


def vector_add(x: f32[N], y: f32[N], out: f32[N]):
    for tn in tiles(N):
        out[tn] = x[tn] + y[tn]
"""


class _Driver:
    """The few names of `cuda.bindings.driver` a cached launch uses; every call succeeds."""

    CUresult = SimpleNamespace(CUDA_SUCCESS=0, CUDA_ERROR_INVALID_CONTEXT=201)
    CUstream = int  # a stream handle as `cuLaunchKernel` takes it

    @staticmethod
    def cuLaunchKernel(*args: Any) -> tuple[int]:  # the driver's name
        return (0,)


def _stubs(stack: ExitStack) -> None:
    from tilec import runtime
    from tilec.runtime import launcher

    device = SimpleNamespace(device_id=0, compute_capability=(9, 0), name="stub")

    def load(self: Any, ordinal: int) -> Any:
        function = object()
        self._functions[ordinal] = function
        return function

    stack.enter_context(mock.patch.object(launcher, "cuda_modules", lambda: (None, _Driver)))
    stack.enter_context(mock.patch.object(launcher.Launcher, "_load", load))
    stack.enter_context(mock.patch.object(runtime, "get_device", lambda ordinal=None: device))
    stack.enter_context(mock.patch.object(runtime, "device_arch", lambda d: "sm_90a"))
    stack.enter_context(mock.patch.object(torch.Tensor, "get_device", lambda self: 0))
    stack.enter_context(
        mock.patch.object(torch._C, "_cuda_getCurrentRawStream", lambda d: 0, create=True)
    )
    from tilec.runtime import split, tensormap

    # TMA descriptors, the SM count a split or persistent grid asks for, a split's workspace.
    stack.enter_context(
        mock.patch.object(tensormap, "encode_tensormap", lambda *a, **k: bytes(128))
    )
    stack.enter_context(
        mock.patch.object(launcher.Launcher, "_measure_residency", lambda self, o: (132, 1))
    )
    stack.enter_context(mock.patch.object(split.WORKSPACES, "get", lambda *a, **k: (4096, 8192)))


def _time(call: Any, calls: int, repeat: int) -> float:
    """Median µs of CPU time per call of `call()` over `repeat` rounds of `calls` calls."""
    rounds = []
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(calls):
            call()
        rounds.append((time.thread_time() - start) / calls * 1e6)
    return statistics.median(rounds)


def run(calls: int, repeat: int) -> dict[str, float]:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as directory, ExitStack() as stack:
        path = Path(directory) / "launch_overhead.tile"
        path.write_text(SOURCE)
        _stubs(stack)
        scale = tilec.load_kernel(path, "scale", tile={"N": 256})
        add2d = tilec.load_kernel(path, "add2d", tile={"M": 16, "N": 64})
        vector_add = tilec.load_kernel(path, "vector_add", tile={"N": 256})
        x1, y1 = torch.randn(4096), torch.empty(4096)
        xv, yv, ov = torch.randn(1024), torch.randn(1024), torch.empty(1024)
        x2, y2, o2 = torch.randn(64, 256), torch.randn(64, 256), torch.empty(64, 256)
        import tilec.torch as tilec_torch

        # The vector add as a PyTorch operator (`tilec.torch.op`): the dispatcher, the checks
        # against the signature and the output's allocation on top of the call.
        operator = tilec_torch.op("tilec_launch_overhead::vector_add", vector_add)
        stack.enter_context(
            mock.patch.object(tilec_torch.TilecOp, "_interpreted", staticmethod(lambda t: False))
        )
        cases = {
            "scale(x, y, 2.0)  [2 tensors 1-D + f32]": lambda: scale(x1, y1, 2.0),
            "vector_add as tilec.torch op  [out allocated]": lambda: operator(xv, yv),
            # What tilec.benchmarks.gpu times on the GPU ("host overhead", "tilec").
            "vector_add(x, y, out)  [3 tensors 1-D]": lambda: vector_add(xv, yv, ov),
            "add2d(x, y, out)  [3 tensors 2-D]": lambda: add2d(x2, y2, o2),
        }
        for call in cases.values():
            call()  # compiles, "loads", fills the caches
        results = {"bare python call (floor)": _time(lambda: None, calls, repeat)}
        for name, call in cases.items():
            results[name] = _time(call, calls, repeat)
        return results


def train_step(config: str, steps: int, repeat: int) -> dict[str, float]:
    """Median ms of CPU time of a forward and backward of the training model (module
    docstring), over `repeat` rounds of `steps` steps, after a first step that compiles."""

    import tilec.torch as tilec_torch
    from examples.torch.model import Decoder
    from examples.torch.train import CONFIGS, synthetic_batch, tilec_loss

    with ExitStack() as stack:
        _stubs(stack)
        stack.enter_context(
            mock.patch.object(tilec_torch.TilecOp, "_interpreted", staticmethod(lambda t: False))
        )
        torch.manual_seed(0)
        model = Decoder(CONFIGS[config]).to(torch.bfloat16)
        ids, targets = synthetic_batch(model.config, 0, "cpu")

        def step() -> None:
            tilec_loss(model, ids, targets).backward()

        step()
        ms = _time(step, steps, repeat) / 1e3
        return {f"training step ({config}, bf16, forward + backward)": ms}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument(
        "--train",
        metavar="CONFIG",
        help="time a training step of examples/torch/train.py's CONFIG (tiny, small, h200)",
    )
    args = parser.parse_args(argv)
    if args.train:
        results = train_step(args.train, max(1, args.calls // 20_000), args.repeat)
        print("a training step's host work, driver stubbed (ms of CPU a step):")
        unit = "ms a step"
    else:
        results = run(args.calls, args.repeat)
        print(
            f"cached @tilec.jit call, driver stubbed ({platform.python_implementation()} "
            f"{platform.python_version()}, torch {torch.__version__}):"
        )
        unit = "µs/call"
    for name, figure in results.items():
        print(f"  {name:45s} {figure:7.2f} {unit}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
