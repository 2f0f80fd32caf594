"""tilec's kernels on the GPU against the ceilings and the references, measured in one run.

    python -m tilec.benchmarks.gpu [--quick] [--only softmax,matmul] [--json OUT]
    tilec bench [...]                                  (the same, with a progress bar)

For vector add, softmax, layernorm and matmul at the sizes of the shared BASELINES.md (the H200
figures tilec races; `--quick`: smaller ones), each implementation's median time, its rate (GB/s for the memory-bound
kernels, counting each input read once and each output written once; TFLOP/s = 2·M·N·K for
matmul), the percentage of the ceiling measured in the same run (a device-to-device copy for
memory-bound kernels, cuBLAS for matmul), and tilec's time over torch's (cuBLAS for matmul) and
Triton's (`tests/reference/triton_kernels.py`). Each output is checked against torch's before
it is timed. Also: the host time of one `@tilec.jit` call that hits the cache, next to Triton's.

Timing follows the device library's METHOD.md: CUDA events around each run, warm-up first,
the median of many runs, and inputs rotated among enough sets that together they are several
times the L2 cache, so a run never finds its inputs there. The implementations of one size
take turns, `ROUNDS` times (tilec, reference, Triton, tilec, ...): each one's figure is the
median of its rounds, and `spread` is its slowest round over its fastest, so a reference whose
speed moves between rounds (cuBLAS does) is seen moving, and no implementation gets the GPU
in a state the others never saw.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["Result", "load_triton_references", "run", "table", "versions"]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TRITON_REFERENCES = ROOT / "tests" / "reference" / "triton_kernels.py"

L2_BYTES = 60 << 20  # H200 (read off the device when torch says)
TIME_BUDGET_S = 0.1  # per implementation, size and round, after warm-up
ROUNDS = 3  # the implementations of one size take turns this many times

SIZES = {
    "copy": [(1 << 28,)],  # f32 elements: 1 GiB read + 1 GiB written
    "vector_add": [(1 << 28,)],
    "softmax": [(8192, 4096), (4096, 16384), (32768, 1024)],
    "layernorm": [(8192, 8192), (8192, 1024)],
    "matmul": [
        (1024, 1024, 1024),
        (2048, 2048, 2048),
        (4096, 4096, 4096),
        (8192, 8192, 8192),
        (4000, 3000, 1000),
        (4096, 4096, 4096, "bf16"),
        (8192, 8192, 8192, "bf16"),
    ],
}
QUICK_SIZES = {
    "copy": [(1 << 26,)],
    "vector_add": [(1 << 26,)],
    "softmax": [(4096, 1024)],
    "layernorm": [(4096, 1024)],
    "matmul": [(1024, 1024, 1024)],
}


@dataclass
class Result:
    """One implementation of one workload at one size."""

    workload: str
    size: str
    implementation: str  # "tilec", "torch", "cuBLAS", "triton", "copy"
    ms: float  # median
    rate: float  # GB/s or TFLOP/s
    unit: str
    correct: bool | None = None  # output checked against torch's (None: not checked)
    note: str = ""
    spread: float = math.nan  # slowest round's time over the fastest's (`ROUNDS` rounds)


def versions() -> dict[str, str]:
    """The versions a benchmark depends on."""
    import llvmlite

    import tilec

    found = {"tilec": tilec.__version__, "llvmlite": llvmlite.__version__}
    for module in ("torch", "triton", "cuda.core", "cuda.bindings"):
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
    if not path.is_file():
        return None
    saved = os.environ.pop("TRITON_INTERPRET", None)
    try:
        spec = importlib.util.spec_from_file_location("tilec_triton_references", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except ImportError:
            return None
        return module
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved


def time_ms(run: Callable[..., Any], input_sets: Sequence[Sequence[Any]]) -> float:
    """The median time in ms of `run(*inputs)`, rotating among `input_sets`, after warm-up."""
    import torch

    def once(inputs: Sequence[Any]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(*inputs)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    first = max(once(input_sets[0]), 1e-3)  # also loads and compiles
    warmup = int(min(max(0.05 / (first / 1e3), 3), 100))
    repeats = int(min(max(TIME_BUDGET_S / (first / 1e3), 10), 500))
    for i in range(warmup):
        run(*input_sets[i % len(input_sets)])
    events = []
    for i in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(*input_sets[i % len(input_sets)])
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def _sets(make: Callable[[], Sequence[Any]], bytes_per_set: int) -> list[Sequence[Any]]:
    """Enough input sets (at least 2) that together they are 4 times the L2 cache."""
    count = min(max(2, math.ceil(4 * L2_BYTES / max(bytes_per_set, 1))), 32)
    return [make() for _ in range(count)]


def _close(got: Any, expected: Any, rtol: float) -> bool:
    got, expected = got.double(), expected.double()
    scale = expected.abs().max()
    return bool(((got - expected).abs() <= rtol * (expected.abs() + scale)).all())


# ---------------------------------------------------------------------------------------------
# Workloads: each yields Results for every implementation at one size.


def _copy(size: tuple, triton: Any) -> list[Result]:
    import torch

    (n,) = size
    src, dst = torch.rand(n, device="cuda"), torch.empty(n, device="cuda")
    ms = time_ms(lambda s, d: d.copy_(s), [(src, dst), (dst, src)])
    return [Result("copy", f"{n * 4 >> 20} MiB", "copy", ms, 2 * n * 4 / ms / 1e6, "GB/s")]


def _vector_add(size: tuple, triton: Any) -> list[Result]:
    import torch

    from tilec.jit import load_kernel

    (n,) = size
    kernel = load_kernel(EXAMPLES / "vector_add.tile", "vector_add")
    bytes_moved = 3 * n * 4
    sets = _sets(lambda: (torch.rand(n, device="cuda"), torch.rand(n, device="cuda")), 2 * n * 4)
    out = torch.empty(n, device="cuda")
    x, y = sets[0]
    expected = x + y
    kernel(x, y, out)
    implementations: list[tuple[str, Callable[..., Any], Any]] = [
        ("tilec", lambda a, b: kernel(a, b, out), lambda: out),
        ("torch", lambda a, b: torch.add(a, b, out=out), lambda: out),
    ]
    if triton is not None:
        implementations.append(("triton", lambda a, b: triton.vector_add(a, b), None))
    return _measure("vector_add", f"N={n}", implementations, sets, expected, bytes_moved, "GB/s")


def _softmax(size: tuple, triton: Any) -> list[Result]:
    import torch

    from tilec.jit import load_kernel

    m, n = size
    kernel = load_kernel(EXAMPLES / "softmax.tile", "softmax")
    sets = _sets(lambda: (torch.randn(m, n, device="cuda") * 4,), m * n * 4)
    y = torch.empty(m, n, device="cuda")
    (x,) = sets[0]
    expected = torch.softmax(x.double(), dim=1).float()
    implementations: list[tuple[str, Callable[..., Any], Any]] = [
        ("tilec", lambda a: kernel(a, y), lambda: y),
        ("torch", lambda a: torch.softmax(a, dim=1), None),
    ]
    if triton is not None:
        implementations.append(("triton", lambda a: triton.softmax(a), None))
    return _measure(
        "softmax", f"{m}x{n} f32", implementations, sets, expected, 2 * m * n * 4, "GB/s", 1e-5
    )


def _layernorm(size: tuple, triton: Any) -> list[Result]:
    import torch

    from tilec.jit import load_kernel

    m, n = size
    eps = 1e-5
    kernel = load_kernel(EXAMPLES / "layernorm.tile", "layernorm")
    w = torch.randn(n, device="cuda").half()
    b = torch.randn(n, device="cuda").half()
    sets = _sets(lambda: (torch.randn(m, n, device="cuda").half(),), m * n * 2)
    y = torch.empty(m, n, device="cuda", dtype=torch.float16)
    (x,) = sets[0]
    expected = torch.nn.functional.layer_norm(x.double(), (n,), w.double(), b.double(), eps)
    implementations: list[tuple[str, Callable[..., Any], Any]] = [
        ("tilec", lambda a: kernel(a, w, b, y, eps), lambda: y),
        ("torch", lambda a: torch.nn.functional.layer_norm(a, (n,), w, b, eps), None),
    ]
    if triton is not None:
        implementations.append(("triton", lambda a: triton.layernorm(a, w, b, eps), None))
    moved = 2 * m * n * 2 + 2 * n * 2
    return _measure(
        "layernorm", f"{m}x{n} f16", implementations, sets, expected.half(), moved, "GB/s", 4e-3
    )


def _matmul(size: tuple, triton: Any) -> list[Result]:
    import torch

    from tilec.jit import load_kernel

    m, n, k, *rest = size
    dtype = rest[0] if rest else "f16"
    torch_dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    example = "matmul" if dtype == "f16" else "matmul_bf16"
    kernel = load_kernel(EXAMPLES / f"{example}.tile", example)
    sets = _sets(
        lambda: (
            torch.randn(m, k, device="cuda").to(torch_dtype),
            torch.randn(k, n, device="cuda").to(torch_dtype),
        ),
        (m * k + k * n) * 2,
    )
    c = torch.empty(m, n, device="cuda", dtype=torch_dtype)
    a, b = sets[0]
    expected = (a.double() @ b.double()).to(torch_dtype)
    implementations: list[tuple[str, Callable[..., Any], Any]] = [
        ("tilec", lambda x, z: kernel(x, z, c), lambda: c),
        ("cuBLAS", lambda x, z: torch.matmul(x, z), None),
    ]
    if triton is not None:
        implementations.append(("triton", lambda x, z: triton.matmul(x, z), None))
    # Each implementation rounds its f32 sums to the output type once, as `expected` does: the
    # two may differ by an ulp of it (bf16 has 8 bits of mantissa: 2 ulp is 1.6%).
    rtol = 2e-3 if dtype == "f16" else 1.6e-2
    return _measure(
        "matmul",
        f"{m}x{n}x{k} {dtype}",
        implementations,
        sets,
        expected,
        2 * m * n * k,
        "TFLOP/s",
        rtol=rtol,
    )


def _measure(
    workload: str,
    size: str,
    implementations: list[tuple[str, Callable[..., Any], Any]],
    sets: list[Sequence[Any]],
    expected: Any,
    amount: int,
    unit: str,
    rtol: float = 2e-3,
) -> list[Result]:
    """Check each implementation, then time them in `ROUNDS` interleaved rounds. `amount`:
    bytes moved, or FLOPs."""
    failed: dict[str, str] = {}
    correct: dict[str, bool] = {}
    for name, run, output in implementations:
        try:
            got = run(*sets[0])
            got = output() if output is not None else got
            correct[name] = _close(got, expected, rtol)
        except Exception as e:  # report a failing implementation, measure the others
            failed[name] = str(e)
    rounds: dict[str, list[float]] = {name: [] for name in correct}
    for _ in range(ROUNDS):
        for name, run, _output in implementations:
            if name in failed:
                continue
            try:
                rounds[name].append(time_ms(run, sets))
            except Exception as e:
                failed[name] = str(e)
    results = []
    scale = 1e6 if unit == "GB/s" else 1e9
    for name, _run, _output in implementations:
        if name in failed:
            results.append(
                Result(workload, size, name, math.nan, math.nan, unit, False, failed[name])
            )
            continue
        times = rounds[name]
        ms = statistics.median(times)
        results.append(
            Result(
                workload,
                size,
                name,
                ms,
                amount / ms / scale,
                unit,
                correct[name],
                spread=max(times) / min(times),
            )
        )
    return results


def _host_overhead(triton: Any) -> list[Result]:
    """Host microseconds per call that hits every cache (tiny vector add, torch tensors)."""
    import torch

    from tilec.jit import load_kernel

    kernel = load_kernel(EXAMPLES / "vector_add.tile", "vector_add")
    x, y, out = (torch.rand(1024, device="cuda") for _ in range(3))
    kernel(x, y, out)
    calls: list[tuple[str, Callable[[], Any]]] = [("tilec", lambda: kernel(x, y, out))]
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


WORKLOADS: dict[str, Callable[[tuple, Any], list[Result]]] = {
    "copy": _copy,
    "vector_add": _vector_add,
    "softmax": _softmax,
    "layernorm": _layernorm,
    "matmul": _matmul,
}


def run(
    *, quick: bool = False, only: Sequence[str] | None = None, progress: bool = False
) -> list[dict[str, Any]]:
    """Every workload at every size (the copy ceiling first); results as dicts."""
    global L2_BYTES
    import torch

    L2_BYTES = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", L2_BYTES)
    triton = load_triton_references()
    sizes = QUICK_SIZES if quick else SIZES
    chosen = ["copy", *[w for w in WORKLOADS if w != "copy" and (not only or w in only)]]
    steps: list[tuple[str, tuple | None]] = [(w, s) for w in chosen for s in sizes[w]]
    steps += [("host overhead", None), ("cold compile", None)]
    results: list[Result] = []
    bar = _progress(len(steps)) if progress else None
    for workload, size in steps:
        if bar is not None:
            bar.describe(f"{workload} {size or ''}")
        if workload == "host overhead":
            results += _host_overhead(triton)
        elif workload == "cold compile":
            results += _cold_compile()
        else:
            results += WORKLOADS[workload](size, triton)
            torch.cuda.empty_cache()
        if bar is not None:
            bar.advance()
    if bar is not None:
        bar.close()
    return [asdict(r) for r in results]


class _progress:
    """rich's progress bar when rich is installed, else one line per step."""

    def __init__(self, total: int):
        try:
            from rich.progress import Progress
        except ImportError:
            self.rich = None
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
    """The results as a text table: per workload and size, tilec's figures and ratios."""
    copy = [r for r in results if r["workload"] == "copy"]
    ceiling = copy[0]["rate"] if copy else math.nan
    lines = []
    if copy:
        lines.append(f"device copy: {ceiling:.0f} GB/s (read + write), the memory ceiling")
    header = (
        f"{'workload':<11} {'size':<22} {'tilec ms':>9} {'tilec rate':>16} {'% ceil':>7} "
        f"{'ref ms':>9} {'tilec/ref':>9} {'triton ms':>9} {'tilec/triton':>12} ok  "
        "spread tilec/ref/triton"
    )
    lines += [header, "-" * len(header)]
    groups: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in results:
        if r["workload"] in ("copy",):
            continue
        groups.setdefault((r["workload"], r["size"]), {})[r["implementation"]] = r
    for (workload, size), impls in groups.items():
        mine = impls.get("tilec")
        if workload in ("host overhead", "cold compile"):
            parts = [f"{k} {v['rate']:.3g} {v['unit']}" for k, v in impls.items()]
            lines.append(f"{workload:<11} {size:<22} " + ", ".join(parts))
            continue
        reference = impls.get("torch") or impls.get("cuBLAS") or {}
        triton = impls.get("triton") or {}
        if mine is None:
            continue
        if mine["unit"] == "GB/s":
            percent = 100 * mine["rate"] / ceiling
        else:  # matmul: the ceiling is cuBLAS at the same size
            percent = 100 * mine["rate"] / reference.get("rate", math.nan)
        ok = "yes" if all(v.get("correct") for v in impls.values()) else "NO "
        spreads = "/".join(
            f"{v.get('spread', math.nan):.2f}" for v in (mine, reference, triton) if v
        )
        lines.append(
            f"{workload:<11} {size:<22} {mine['ms']:9.4f} {mine['rate']:10.1f} {mine['unit']:<5} "
            f"{percent:6.1f}% {reference.get('ms', math.nan):9.4f} "
            f"{mine['ms'] / reference.get('ms', math.nan):9.3f} "
            f"{triton.get('ms', math.nan):9.4f} "
            f"{mine['ms'] / triton.get('ms', math.nan):12.3f} {ok} {spreads}"
        )
    lines.append(
        "(ref: torch, or cuBLAS for matmul; ratios are times: above 1, tilec is slower; each "
        f"time is the median of {ROUNDS} interleaved rounds, spread = slowest round / fastest)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None, *, progress: bool = False) -> int:
    parser = argparse.ArgumentParser(prog="tilec bench", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run_command(args, progress=progress)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a minute)")
    parser.add_argument(
        "--only", help="comma-separated workloads: " + ", ".join(w for w in WORKLOADS)
    )
    parser.add_argument("--json", help="also write the results here")


def run_command(args: argparse.Namespace, *, progress: bool = True) -> int:
    """What `tilec bench` does with its parsed arguments."""
    from tilec.runtime import get_device

    device = get_device()
    only = [w.strip() for w in args.only.split(",")] if args.only else None
    unknown = [w for w in only or () if w not in WORKLOADS]
    if unknown:
        print(f"error: unknown workload '{unknown[0]}'", file=sys.stderr)
        return 1
    results = run(quick=args.quick, only=only, progress=progress)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"gpu": device.name, "results": results}, f, indent=1)
    print(f"{device.name}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(progress=sys.stderr.isatty()))
