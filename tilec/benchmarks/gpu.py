"""tilec's kernels on the GPU against the best peer of each, measured in one run.

    python -m tilec.benchmarks.gpu [--quick] [--only 'gemm_*,softmax'] [--json OUT] [--chart PNG]
    tilec bench [...]                                  (the same, with a progress bar)

The suite (`tilec.benchmarks.suite`) says what runs: every workload at its sizes, each against
the peers a user would pick instead (cuBLAS, SDPA, `torch.compile`, eager torch, Triton's
autotuned tutorial kernels). This module measures it: first the ceilings of the same run (a
device-to-device copy's bandwidth; cuBLAS at 8192³ in f16, bf16 and int8, the tensor-core
throughput), then every case, then the host time of one cached `@tilec.jit` call and a cold
compile. `tilec.benchmarks.report` turns the results into the table, the summary line, JSON
and a chart.

Timing follows the device library's METHOD.md: CUDA events around each run (enqueued behind a
sleep kernel, so the GPU never waits for the host: `time_ms`), warm-up first,
the median of many runs, and inputs rotated among enough sets that together they are several
times the L2 cache, so a run never finds its inputs there. Every implementation's output is
checked (against float64 torch where that is cheap) before anything is timed; one that fails
or is wrong is reported so, and the others are still measured. The implementations of one
case take turns, `ROUNDS` times (tilec, peer, peer, tilec, ...): each one's figure is the
median of its rounds, and `spread` is its slowest round over its fastest, so a peer whose
speed moves between rounds (cuBLAS does) is seen moving, and no implementation gets the GPU
in a state the others never saw. A slow implementation runs fewer times (`SLOW_LIMIT_S`), so
that one cannot take minutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tilec.benchmarks import report
from tilec.benchmarks.suite import WORKLOADS, Context, Implementation, Workload, select

__all__ = ["Result", "load_triton_references", "plan", "run", "table", "time_ms", "versions"]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TRITON_REFERENCES = ROOT / "tests" / "reference" / "triton_kernels.py"

L2_BYTES = 60 << 20  # H200 (read off the device when torch says)
TIME_BUDGET_S = 0.1  # per implementation, case and round, after warm-up
SLOW_LIMIT_S = 1.0  # an implementation slower than this per round runs fewer times
ROUNDS = 3  # the implementations of one case take turns this many times
BACKLOG_RUNS = 32  # runs enqueued behind one sleep kernel (`time_ms`)
# Clock cycles per second for `_backlog`'s sleep: the H200's highest clock, so that a sleep is
# never shorter than meant (a lower clock only makes it longer).
GPU_CYCLES_PER_S = 2.0e9
MAX_SETS = 256  # input sets of one case (small sizes need many to fill 4x the L2)
EXTRAS = ("host_overhead", "cold_compile")  # the rows after the suite, selectable by --only

CEILINGS = {  # which ceiling: (label, implementation); measured when a chosen workload uses it
    "copy": ("device copy", "torch copy_"),
    "f16": ("cuBLAS f16 8192³", "cuBLAS"),
    "bf16": ("cuBLAS bf16 8192³", "cuBLAS"),
    "int8": ("cuBLAS int8 8192³", "torch._int_mm"),
    "fp8": ("cuBLAS fp8 e4m3 8192³", "torch._scaled_mm"),
}


@dataclass
class Result:
    """One implementation of one workload at one size."""

    workload: str
    size: str
    implementation: str  # "tilec", "cuBLAS", "torch.compile", "triton (autotuned)", ...
    ms: float  # median of the rounds' medians
    rate: float  # GB/s, TFLOP/s or TOPS
    unit: str
    correct: bool | None = None  # output checked (None: not checked)
    note: str = ""
    spread: float = math.nan  # slowest round's time over the fastest's (`ROUNDS` rounds)
    role: str = ""  # "tilec", "peer", "ceiling", "info" ("": from the name, as before)
    status: str = "ok"  # "ok", "wrong" (timed, but its output differs), "failed", "missing"
    kind: str = ""  # "compute" or "memory"
    tier: str = "suite"  # "suite" (the sizes the mean is over) or "small"
    ceiling: str = ""  # what its roofline fraction is of: "copy", "f16", "bf16", "int8"
    eager: bool = False  # eager torch: the target of the small sizes


def versions() -> dict[str, str]:
    """The versions a benchmark depends on."""
    import llvmlite

    import tilec

    found = {"tilec": tilec.__version__, "llvmlite": llvmlite.__version__}
    for module in ("torch", "triton", "cuda.core", "cuda.bindings", "matplotlib"):
        try:
            found[module] = __import__(module, fromlist=["_"]).__version__
        except (ImportError, AttributeError):
            found[module] = "absent"
    return found


def load_triton_references(path: Path = TRITON_REFERENCES) -> Any:
    """A private copy of the Triton reference kernels, compiled for the GPU.

    Triton decides when a `@triton.jit` function is defined whether it runs in its CPU
    interpreter (`TRITON_INTERPRET=1`, which tests/unit/test_triton_cpu.py sets for its own
    process). Loading the module here, under another name, with the variable removed for the
    duration of the import, gives GPU kernels whatever the process's environment says.
    Returns None when the file or Triton is missing."""
    module, _reason = _triton_references(path)
    return module


def _triton_references(path: Path = TRITON_REFERENCES) -> tuple[Any, str]:
    """The Triton references and, when they are None, why."""
    if not path.is_file():
        return None, f"{path.name} absent"
    saved = os.environ.pop("TRITON_INTERPRET", None)
    try:
        spec = importlib.util.spec_from_file_location("tilec_triton_references", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except ImportError as e:
            return None, f"Triton is not installed ({e})"
        except Exception as e:  # an old Triton without autotune's arguments, ...
            return None, f"the Triton references do not load: {type(e).__name__}: {e}"
        return module, ""
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved


def time_ms(run: Callable[..., Any], input_sets: Sequence[Sequence[Any]]) -> float:
    """The median time in ms of `run(*inputs)` on the GPU, rotating among `input_sets`, after
    warm-up. About `TIME_BUDGET_S` of runs, at least 10; an implementation so slow that warm-up
    and 10 runs would take over `SLOW_LIMIT_S` gets one warm-up run and at least 3 timed ones.

    The runs are enqueued `BACKLOG_RUNS` at a time behind a sleep kernel (`_backlog`) long
    enough for the host to enqueue them all, so the GPU never waits for the host between a
    start event and its kernel: a small kernel's figure is the device's time, not the host's
    launch path (tilec's 10 µs, eager torch's 5, Triton's 24 — the `host_overhead` row
    reports those). Without it a 3 µs kernel measured 16-26 µs, and which of the two depended
    on the host's timing (the regret run of 0e6dbb9: rotary's candidates, spreads to 1.5)."""
    import torch

    def once(inputs: Sequence[Any]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(*inputs)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    first = max(once(input_sets[0]), 1e-3)  # also loads and compiles
    first_s = first / 1e3
    warmup = int(min(max(0.05 / first_s, 3), 100))
    repeats = int(min(max(TIME_BUDGET_S / first_s, 10), 500))
    if (warmup + repeats) * first_s > SLOW_LIMIT_S:
        warmup, repeats = 1, max(3, int(SLOW_LIMIT_S / first_s))
    began = time.perf_counter()
    for i in range(warmup):
        run(*input_sets[i % len(input_sets)])
    host_s = (time.perf_counter() - began) / warmup  # enqueueing one run (the GPU may lag)
    events = []
    for i in range(repeats):
        if i % BACKLOG_RUNS == 0:
            _backlog(min(BACKLOG_RUNS, repeats - i) * host_s)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(*input_sets[i % len(input_sets)])
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def _backlog(host_s: float) -> None:
    """Keep the GPU busy for about twice `host_s` (plus 20 µs), so that what the host
    enqueues meanwhile waits in the stream rather than the GPU waiting for it. A no-op without
    a GPU or where torch has no `torch.cuda._sleep` (its spin kernel, of clock cycles)."""
    import torch

    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None and torch.cuda.is_available():
        sleep(int((2 * host_s + 20e-6) * GPU_CYCLES_PER_S))


def _sets(make: Callable[[], Sequence[Any]], bytes_per_set: int) -> list[Sequence[Any]]:
    """Enough input sets (at least 2) that together they are 4 times the L2 cache."""
    count = min(max(2, math.ceil(4 * L2_BYTES / max(bytes_per_set, 1))), MAX_SETS)
    return [make() for _ in range(count)]


def _close(got: Any, expected: Any, rtol: float) -> bool:
    if callable(expected):  # a property of right outputs (suite.Case.expected)
        return bool(expected(got, rtol))
    if tuple(got.shape) != tuple(expected.shape):
        return False
    got, expected = got.double(), expected.double()
    scale = expected.abs().max()
    return bool(((got - expected).abs() <= rtol * (expected.abs() + scale)).all())


def _synchronize() -> None:
    """Wait for the GPU, so that an asynchronous error is charged to the implementation that
    caused it (no-op without CUDA: the CPU tests)."""
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _role_of(name: str) -> str:
    return "tilec" if name == "tilec" else "peer"


def _measure(
    workload: str,
    size: str,
    implementations: Sequence[Implementation | tuple[str, Callable[..., Any], Any]],
    sets: list[Sequence[Any]],
    expected: Any,
    amount: float,
    unit: str,
    rtol: float = 2e-3,
    **fields: Any,
) -> list[Result]:
    """Check each implementation's output against `expected` (None: not checked), then time
    those that ran in `ROUNDS` interleaved rounds. `amount`: bytes moved, or operations.
    `fields` go into every Result (kind, tier, ceiling). A missing tilec kernel is "failed",
    a missing peer "missing"."""
    impls = [
        i if isinstance(i, Implementation) else Implementation(*i, role=_role_of(i[0]))
        for i in implementations
    ]
    failed: dict[str, str] = {}
    correct: dict[str, bool | None] = {}
    for impl in impls:
        if impl.run is None:
            continue
        try:
            got = impl.run(*sets[0])
            got = impl.output() if impl.output is not None else got
            _synchronize()
            # An "info" implementation does comparable work, not the same (a dense GEMM of a
            # grouped GEMM's size): reported beside the row, its output not checked.
            unchecked = expected is None or impl.role == "info"
            correct[impl.name] = None if unchecked else _close(got, expected, rtol)
        except Exception as e:  # report a failing implementation, measure the others
            failed[impl.name] = f"{type(e).__name__}: {str(e).strip()[:300]}"
    rounds: dict[str, list[float]] = {name: [] for name in correct if name not in failed}
    for _ in range(ROUNDS):
        for impl in impls:
            if impl.name not in rounds or impl.name in failed:
                continue
            try:
                rounds[impl.name].append(time_ms(impl.run, sets))
            except Exception as e:
                failed[impl.name] = f"{type(e).__name__}: {str(e).strip()[:300]}"
    results = []
    scale = 1e6 if unit == "GB/s" else 1e9
    for impl in impls:
        role = impl.role or "peer"
        common = {"role": role, "eager": impl.eager, **fields}
        if impl.run is None:
            status = "failed" if role == "tilec" else "missing"
            results.append(
                Result(
                    workload,
                    size,
                    impl.name,
                    math.nan,
                    math.nan,
                    unit,
                    None,
                    impl.missing,
                    status=status,
                    **common,
                )
            )
        elif impl.name in failed:
            results.append(
                Result(
                    workload,
                    size,
                    impl.name,
                    math.nan,
                    math.nan,
                    unit,
                    False,
                    failed[impl.name],
                    status="failed",
                    **common,
                )
            )
        else:
            times = rounds[impl.name]
            ms = statistics.median(times)
            ok = correct[impl.name]
            results.append(
                Result(
                    workload,
                    size,
                    impl.name,
                    ms,
                    amount / ms / scale,
                    unit,
                    ok,
                    spread=max(times) / min(times),
                    status="wrong" if ok is False else "ok",
                    **common,
                )
            )
    return results


# ---------------------------------------------------------------------------------------------
# Ceilings of the run


def _ceiling(which: str, quick: bool) -> list[Result]:
    """The copy bandwidth, or cuBLAS's throughput at 8192³ (int8: `torch._int_mm`)."""
    import torch

    label, name = CEILINGS[which]
    fields = {"role": "ceiling", "ceiling": which}
    if which == "copy":
        n = 1 << (26 if quick else 28)  # f32 elements: 1 GiB read + 1 GiB written
        src, dst = torch.rand(n, device="cuda"), torch.empty(n, device="cuda")
        copy = Implementation(name, lambda s, d: d.copy_(s), role="ceiling")
        size = f"{n * 4 >> 20} MiB"
        return _measure(
            "ceiling", size, [copy], [(src, dst), (dst, src)], None, 2 * n * 4, "GB/s", **fields
        )
    n = 8192
    if which in ("int8", "fp8"):
        function = "_int_mm" if which == "int8" else "_scaled_mm"
        if not hasattr(torch, function):
            return [
                Result(
                    "ceiling",
                    label,
                    name,
                    math.nan,
                    math.nan,
                    "TOPS",
                    None,
                    f"this torch has no torch.{function}",
                    status="missing",
                    **fields,
                )
            ]
        # B stored [N, K] and passed as its column-major view: cuBLASLt's fast layout (a
        # row-major int8 B takes a path several times slower).
        if which == "int8":
            operands = [
                tuple(
                    torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8) for _ in "ab"
                )
                for _ in range(2)
            ]
            gemm = Implementation(name, lambda a, b: torch._int_mm(a, b.t()), role="ceiling")
            return _measure("ceiling", label, [gemm], operands, None, 2 * n**3, "TOPS", **fields)
        one = torch.ones((), device="cuda")
        operands = [
            tuple(torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn) for _ in "ab")
            for _ in range(2)
        ]
        gemm = Implementation(
            name,
            lambda a, b: torch._scaled_mm(
                a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
            ),
            role="ceiling",
        )
        return _measure("ceiling", label, [gemm], operands, None, 2 * n**3, "TFLOP/s", **fields)
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[which]
    operands = [tuple(torch.randn(n, n, device="cuda").to(dtype) for _ in "ab") for _ in range(2)]
    gemm = Implementation(name, torch.matmul, role="ceiling")
    return _measure("ceiling", label, [gemm], operands, None, 2 * n**3, "TFLOP/s", **fields)


def _host_overhead(triton: Any) -> list[Result]:
    """Host microseconds per call that hits every cache (tiny vector add, torch tensors)."""
    import torch

    from tilec.jit import load_kernel

    kernel = load_kernel(EXAMPLES / "vector_add.tile", "vector_add")
    x, y, out = (torch.rand(1024, device="cuda") for _ in range(3))
    kernel(x, y, out)
    calls: list[tuple[str, Callable[[], Any]]] = [("tilec", lambda: kernel(x, y, out))]
    # The same kernel as a PyTorch operator (`tilec.torch.op`, Stage L): the dispatcher, the
    # checks against the signature and the output's allocation come on top of the call.
    import tilec.torch as tilec_torch

    operator = tilec_torch.op("tilec_bench::vector_add", kernel)
    operator(x, y)
    calls.append(("tilec.torch op", lambda: operator(x, y)))
    if triton is not None:
        calls.append(("triton", lambda: triton.vector_add(x, y)))
    # The driver call alone, on the parameters tilec packed last: the floor under both.
    from cuda.bindings import driver

    (launcher,) = kernel._launchers.values()
    function = next(iter(launcher._functions.values()))
    stream = torch.cuda.current_stream().cuda_stream
    grid = launcher.grid(kernel._checker.convert([x, y, out]))
    block, pointers = launcher.abi.num_threads, launcher._pointers_address
    shared = launcher.abi.shared_bytes  # what the kernel's own launches ask for
    calls.append(
        (
            "cuLaunchKernel",
            lambda: driver.cuLaunchKernel(
                function, *grid, block, 1, 1, shared, stream, pointers, 0
            ),
        )
    )
    # The same with the stream as a `CUstream` made once, as tilec's repeated calls pass it;
    # and libcuda's function called through ctypes instead of cuda.bindings.
    stream_object = driver.CUstream(stream)
    calls.append(
        (
            "cuLaunchKernel (CUstream)",
            lambda: driver.cuLaunchKernel(
                function, *grid, block, 1, 1, shared, stream_object, pointers, 0
            ),
        )
    )
    direct, handle = _ctypes_launch_kernel(), int(function)
    if direct is not None and direct(handle, *grid, block, 1, 1, shared, stream, pointers, 0) == 0:
        calls.append(
            (
                "cuLaunchKernel (ctypes)",
                lambda: direct(handle, *grid, block, 1, 1, shared, stream, pointers, None),
            )
        )
    # Batches of 100 calls, each drained before the next: a deeper queue of tiny kernels would
    # fill the driver's launch queue, and then the host waits for the GPU, which is not what
    # this measures. The implementations take turns, a batch each, so that a noisy host slows
    # them alike; the median batch is reported.
    for _name, call in calls:
        for _ in range(100):
            call()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name, _call in calls}
    for _ in range(30):
        for name, call in calls:
            start = time.perf_counter()
            for _ in range(100):
                call()
            samples[name].append((time.perf_counter() - start) / 100 * 1e6)
            torch.cuda.synchronize()
    results = []
    for name, times in samples.items():
        us = statistics.median(times)
        results.append(Result("host overhead", "1 call", name, us / 1e3, us, "µs/call"))
    return results


def _ctypes_launch_kernel() -> Any:
    """libcuda's `cuLaunchKernel` through ctypes, its argument types declared (None: no
    libcuda to load)."""
    import ctypes

    try:
        launch = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    except (OSError, AttributeError):
        return None
    pointer, unsigned = ctypes.c_void_p, ctypes.c_uint
    launch.argtypes = [pointer, *[unsigned] * 7, pointer, pointer, pointer]
    launch.restype = ctypes.c_int
    return launch


def _cold_compile() -> list[Result]:
    """matmul.tile to PTX, in a fresh process (no cache), as a user's first call pays it."""
    import subprocess

    probe = (
        "import time, tilec; from tilec.lowering import compile_to_ptx; "
        "from tilec.compiler import DEFAULT_PIPELINE; t = time.perf_counter(); "
        f"p = tilec.compile({str(EXAMPLES / 'matmul.tile')!r}, kernels=['matmul'], "
        "pipeline=DEFAULT_PIPELINE); compile_to_ptx(p.module, 'sm_90a'); "
        "print(time.perf_counter() - t)"
    )
    env = {**os.environ, "TILEC_CACHE_DIR": ""}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    try:
        seconds = float(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [Result("cold compile", "matmul", "tilec", math.nan, math.nan, "s", False)]
    return [Result("cold compile", "matmul.tile → PTX", "tilec", seconds * 1e3, seconds, "s")]


# ---------------------------------------------------------------------------------------------
# The whole run


@dataclass(frozen=True)
class Step:
    """One thing `run` measures: a ceiling, a case (workload, size, tier) or an extra row."""

    what: str  # "ceiling", "case", "host_overhead", "cold_compile"
    name: str
    size: tuple = ()
    tier: str = "suite"

    def describe(self) -> str:
        if self.what == "case":
            return f"{self.name} {WORKLOADS[self.name].label(self.size)}" + (
                " (small)" if self.tier == "small" else ""
            )
        return f"{self.what.replace('_', ' ')} {self.name if self.what == 'ceiling' else ''}"


def plan(
    *,
    quick: bool = False,
    only: str | Sequence[str] | None = None,
    workloads: dict[str, Workload] = WORKLOADS,
) -> list[Step]:
    """What `run` measures, in order: the ceilings the chosen workloads need, every chosen
    workload at its sizes (`quick`: its one quick size; else its sizes, then the small size of
    each memory-bound one), then the host overhead and cold compile rows. `only`: patterns
    (`suite.select`); ValueError when one picks nothing."""
    chosen = select(only, [*workloads, *EXTRAS])
    cases = [workloads[name] for name in chosen if name in workloads]
    needed = {w.ceiling for w in cases} | {"copy"}
    if any(w.kind == "compute" for w in cases):
        needed.add("f16")  # compute rows without a ceiling of their own are of f16
    steps = [Step("ceiling", c) for c in CEILINGS if c in needed]
    for workload in cases:
        for size in workload.quick if quick else workload.sizes:
            steps.append(Step("case", workload.name, size))
    if not quick:
        for workload in cases:
            steps += [Step("case", workload.name, size, "small") for size in workload.small]
    steps += [Step(extra, extra) for extra in EXTRAS if extra in chosen]
    return steps


def run(
    *,
    quick: bool = False,
    only: str | Sequence[str] | None = None,
    progress: bool = False,
    on_step: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every step of `plan(...)`; the results as dicts (`Result`'s fields). `on_step` is
    given the results so far after each step (`--json` writes them: a run cut off by a time
    limit keeps what it measured)."""
    global L2_BYTES
    import torch

    L2_BYTES = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", L2_BYTES) or L2_BYTES
    triton, triton_missing = _triton_references()
    context = Context(sets=_sets, triton=triton, triton_missing=triton_missing, examples=EXAMPLES)
    steps = plan(quick=quick, only=only)
    results: list[Result] = []
    seconds: list[tuple[float, str]] = []
    started = time.perf_counter()
    bar = _progress(len(steps)) if progress else None
    try:
        for step in steps:
            if bar is not None:
                bar.describe(step.describe())
            step_started = time.perf_counter()
            results += _run_step(step, context, quick)
            seconds.append((time.perf_counter() - step_started, step.describe()))
            if on_step is not None:
                on_step([asdict(r) for r in results])
            if bar is not None:
                bar.advance()
    finally:
        if bar is not None:
            bar.close()
    total = time.perf_counter() - started
    slowest = ", ".join(f"{what.strip()} {s:.0f} s" for s, what in sorted(seconds)[::-1][:5])
    results.append(
        Result(
            "wall time",
            "the whole run",
            "benchmarks",
            total * 1e3,
            total,
            "s",
            note=f"slowest: {slowest}",
            role="info",
        )
    )
    return [asdict(r) for r in results]


def _run_step(step: Step, context: Context, quick: bool) -> list[Result]:
    import torch

    if step.what in EXTRAS:
        try:
            found = (
                _host_overhead(context.triton) if step.what == "host_overhead" else _cold_compile()
            )
        except Exception as e:  # tilec's launcher internals moved, ...: say so, go on
            note = f"failed: {type(e).__name__}: {str(e)[:300]}"
            found = [
                Result(
                    step.what.replace("_", " "),
                    "-",
                    "tilec",
                    math.nan,
                    math.nan,
                    "",
                    False,
                    note,
                    status="failed",
                )
            ]
        return [_info(r) for r in found]
    if step.what == "ceiling":
        try:
            return _ceiling(step.name, quick)
        except Exception as e:
            label, name = CEILINGS[step.name]
            note = f"{type(e).__name__}: {str(e)[:300]}"
            return [
                Result(
                    "ceiling",
                    label,
                    name,
                    math.nan,
                    math.nan,
                    "",
                    False,
                    note,
                    role="ceiling",
                    status="failed",
                    ceiling=step.name,
                )
            ]
        finally:
            torch.cuda.empty_cache()
    workload = WORKLOADS[step.name]
    label = workload.label(step.size)
    fields = {"kind": workload.kind, "tier": step.tier, "ceiling": workload.ceiling}
    try:  # each case compiles its own torch.compile peer: none sees another's graphs
        import torch._dynamo

        torch._dynamo.reset()
    except Exception:
        pass
    case = None
    try:
        case = workload.build(step.size, context)
        return _measure(
            workload.name,
            label,
            case.implementations,
            case.sets,
            case.expected,
            case.amount,
            case.unit,
            case.rtol,
            **fields,
        )
    except Exception as e:  # the case could not even be set up: its row says so
        note = f"setting up failed: {type(e).__name__}: {str(e).strip()[:300]}"
        return [
            Result(
                workload.name,
                label,
                "tilec",
                math.nan,
                math.nan,
                "",
                False,
                note,
                role="tilec",
                status="failed",
                **fields,
            )
        ]
    finally:
        del case
        torch.cuda.empty_cache()


def _info(result: Result) -> Result:
    result.role = "info"
    return result


class _progress:
    """rich's progress bar on a terminal (when rich is installed), else one line per step on
    stderr, so that a log shows where a long run is."""

    def __init__(self, total: int):
        self.rich = None
        if not sys.stderr.isatty():
            return
        try:
            from rich.progress import Progress
        except ImportError:
            return
        self.rich = Progress(transient=True)
        self.rich.start()
        self.task = self.rich.add_task("benchmarks", total=total)

    def describe(self, text: str) -> None:
        if self.rich is None:
            print(f"... {text}", file=sys.stderr, flush=True)
        else:
            self.rich.update(self.task, description=text)

    def advance(self) -> None:
        if self.rich is not None:
            self.rich.advance(self.task)

    def close(self) -> None:
        if self.rich is not None:
            self.rich.stop()


def table(results: Sequence[dict[str, Any]]) -> str:
    """The results as the suite's table and its summary lines (`report.table`)."""
    return report.table(results, rounds=ROUNDS)


# ---------------------------------------------------------------------------------------------
# Command line


def main(argv: list[str] | None = None, *, progress: bool = False) -> int:
    parser = argparse.ArgumentParser(prog="tilec bench", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run_command(args, progress=progress)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one smaller size per workload, no small-size rows (2-3 minutes)",
    )
    parser.add_argument(
        "--only",
        metavar="PATTERN",
        help="comma-separated workload names, substrings or fnmatch patterns ('gemm_*'); "
        "workloads: " + ", ".join([*WORKLOADS, *EXTRAS]),
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results here as JSON")
    parser.add_argument(
        "--chart", metavar="PNG", help="also draw tilec/best-peer per row here (matplotlib)"
    )


def run_command(args: argparse.Namespace, *, progress: bool = True) -> int:
    """What `tilec bench` does with its parsed arguments."""
    from tilec.runtime import get_device

    try:
        plan(quick=args.quick, only=args.only)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    device = get_device()
    about = {"gpu": device.name, "versions": versions()}
    on_step = (lambda so_far: report.write_json(args.json, so_far, **about)) if args.json else None
    results = run(quick=args.quick, only=args.only, progress=progress, on_step=on_step)
    if args.json:
        report.write_json(args.json, results, **about)
    if getattr(args, "chart", None):
        print(report.chart(results, args.chart))
    print(f"{device.name}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(progress=True))
