"""Everything tilec proves on a GPU, in one command: `python -m tilec.gpucheck`.

1. the GPU tests (`pytest -m gpu tests/gpu`, in a process of their own);
2. `compute-sanitizer` over every example, with `--tool memcheck` (out-of-bounds and
   misaligned accesses) and `--tool racecheck` (shared-memory hazards: a missing barrier): one
   sanitizer process per tool and `.tile` file, each running this module's driver
   (`--sanitize-driver FILE`), which runs every kernel of the file at its awkward shapes on
   numpy inputs (no torch: only tilec's kernels run) and checks the results against the
   example's numpy reference;
3. the benchmark suite (`tilec.benchmarks.gpu`, `tilec.benchmarks.suite`): every workload
   against its best peer (cuBLAS, SDPA, torch.compile, eager torch, autotuned Triton) and the
   ceilings, measured in the same run; host overhead of a call; `--only PATTERN` runs a part;
4. with `--fuzz N`: N generated kernels (`tilec.fuzz.gpu`) compiled and run on the GPU against
   the interpreter, for at most `--fuzz-seconds`, and `--fuzz-sanitize` of them under memcheck
   and racecheck.

It prints the suite's table last and writes everything as JSON to `$OUT/gpucheck.json` (or
`--json`), and the chart of tilec/best-peer ratios to `$OUT/suite_ratios.png` (beside the JSON).
Exit status 0 when every test and example passed and the sanitizer found nothing.

The example runner here (`run_example`, `CASES`) is shared with `tests/gpu`: each kernel of each
example at several sizes, awkward ones included, on random inputs, compared with the example's
numpy reference (`examples/*_reference.py`) at the interpreter's tolerances, every output
inside a guard region that must come back untouched.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tilec.example_cases import CASES, case_kernel

__all__ = ["CASES", "EXAMPLES", "ExampleRun", "main", "run_example"]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

GUARD_ELEMENTS = 256  # before and after every output
GUARD_BYTE = 0xA5  # what the guard regions (and the padding of strided outputs) hold


@dataclass
class ExampleRun:
    """One kernel of one example at one size, run on the GPU and checked."""

    example: str
    kernel: str
    sizes: dict[str, int]
    layout: str
    checks: list[Any] = field(default_factory=list)  # tilec.interp.runner.OutputCheck
    guards_intact: bool = True

    @property
    def passed(self) -> bool:
        return self.guards_intact and bool(self.checks) and all(c.passed for c in self.checks)

    def describe(self) -> str:
        sizes = ",".join(f"{k}={v}" for k, v in self.sizes.items())
        errors = "; ".join(c.render().strip() for c in self.checks if not c.passed)
        guards = "" if self.guards_intact else "; an output's guard region was overwritten"
        verdict = "ok" if self.passed else "FAILED: " + (errors + guards).lstrip("; ")
        return f"{self.example}.{self.kernel} [{sizes}] {self.layout}: {verdict}"


def run_example(
    example: str,
    kernel: str,
    sizes: dict[str, int],
    *,
    layout: str = "contiguous",
    arrays: str = "torch",
    seed: int = 0,
    pass_options: dict | None = None,
) -> ExampleRun:
    """Run `kernel` of `examples/<example>.tile` on the GPU on random inputs of `sizes` and
    check what it writes against the example's numpy reference.

    `arrays="torch"` passes torch CUDA tensors: inputs laid out as `layout` says
    ("contiguous"; "padded": rows longer than the extent, so the row stride is not the
    extent; "transposed": 2-D inputs stored transposed, so the last stride is not 1), and
    each output inside a guard region, whose bytes must be untouched afterwards.
    `arrays="numpy"` passes the numpy arrays themselves (the runtime copies them).
    `pass_options`: compile with these (`{"walk-tiles": {"enable": True}}`), for a test of an
    option the default pipeline leaves off."""
    from tilec.interp.launch import parameter_name, written_parameters
    from tilec.interp.runner import (
        DEFAULT_RTOL,
        _compare,
        _expected_outputs,
        load_reference,
        random_arguments,
        reference_path,
        reference_tolerance,
    )
    from tilec.ir.types import FloatType, TensorType
    from tilec.jit import load_kernel

    path = EXAMPLES / f"{example}.tile"
    case = kernel
    kernel, dtypes = case_kernel(case)  # "name[T=f32]": a binding of its dtype parameters
    options: dict = {"dtypes": dtypes} if dtypes else {}
    if pass_options:
        options["pass_options"] = pass_options
    function = load_kernel(path, kernel, **options)
    func = function.ir.functions[0]
    reference = load_reference(reference_path(path))
    scalars = getattr(reference, "SCALARS", {}).get(kernel, {})
    values = random_arguments(func, sizes, seed=seed, scalars=scalars)
    before = [np.copy(v) if isinstance(v, np.ndarray) else v for v in values]
    written = written_parameters(func)
    run = ExampleRun(example, case, dict(sizes), layout if arrays == "torch" else "numpy")
    if arrays == "numpy":
        function(*values)
        outputs = {parameter_name(a): v for a, v in zip(func.arguments, values) if a in written}
    else:
        import torch

        device_values, guards = [], []
        for arg, value in zip(func.arguments, values):
            if not isinstance(value, np.ndarray):
                device_values.append(value)
            elif arg in written:
                tensor, check = _guarded(value, layout)
                device_values.append(tensor)
                guards.append((parameter_name(arg), tensor, check))
            else:
                device_values.append(_laid_out(_to_torch(value), layout))
        function(*device_values)
        torch.cuda.synchronize()
        outputs = {name: _to_numpy(t) for name, t, _check in guards}
        run.guards_intact = all(check() for _name, _t, check in guards)
    expected = _expected_outputs(
        func, getattr(reference, kernel)(*before), [n for n in outputs], str(path)
    )
    tolerance = reference_tolerance(reference, kernel, gpu=True)
    for arg in func.arguments:
        name = parameter_name(arg)
        if name not in expected or not isinstance(arg.type, TensorType):
            continue
        element = arg.type.element
        if not isinstance(element, FloatType):
            rtol, reason = 0.0, "integers"
        elif tolerance is not None:
            rtol, reason = float(tolerance), "set by the reference"
        else:
            rtol, reason = DEFAULT_RTOL[element.name]
        run.checks.append(_compare(name, name, outputs[name], expected[name], rtol, reason))
    return run


def _to_torch(array: np.ndarray) -> Any:
    import torch

    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).cuda().view(torch.bfloat16)
    if array.dtype.name in _F8:  # ml_dtypes' f8: torch takes the bytes
        bits = np.ascontiguousarray(array).view(np.uint8)
        return torch.from_numpy(bits).cuda().view(getattr(torch, _F8[array.dtype.name]))
    return torch.from_numpy(np.ascontiguousarray(array)).cuda()


_F8 = {"float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}  # ml_dtypes -> torch


def _to_numpy(tensor: Any) -> np.ndarray:
    import torch

    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    for name in _F8:
        if tensor.dtype == getattr(torch, name, None):
            import ml_dtypes

            return tensor.contiguous().view(torch.uint8).numpy().view(getattr(ml_dtypes, name))
    return tensor.numpy()


def _laid_out(tensor: Any, layout: str) -> Any:
    """`tensor` (contiguous, on the GPU) stored as `layout` says, same values."""
    import torch

    if layout == "padded" and tensor.dim() >= 2:
        wide = torch.zeros((*tensor.shape[:-1], tensor.shape[-1] + 13), dtype=tensor.dtype)
        wide = wide.to(tensor.device)
        wide[..., : tensor.shape[-1]] = tensor
        return wide[..., : tensor.shape[-1]]
    if layout == "transposed" and tensor.dim() == 2:
        return tensor.t().contiguous().t()
    return tensor


def _guarded(array: np.ndarray, layout: str) -> tuple[Any, Any]:
    """A GPU tensor holding `array`, inside a byte buffer whose every other byte (guard regions
    before and after, row padding in the "padded" layout) is `GUARD_BYTE`; and a function
    saying whether those bytes are still untouched."""
    import torch

    source = _to_torch(array)
    shape = tuple(source.shape)
    pad = 13 if layout == "padded" and len(shape) >= 2 else 0
    strides, step = [], 1
    for axis in reversed(range(len(shape))):
        strides.append(step)
        step *= shape[axis] + (pad if axis == len(shape) - 1 else 0)
    strides.reverse()
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    total = 2 * GUARD_ELEMENTS + extent
    size = source.element_size()
    raw = torch.full((total * size,), GUARD_BYTE, dtype=torch.uint8, device="cuda")
    typed = raw.view(source.dtype)
    view = typed.as_strided(shape, strides, GUARD_ELEMENTS)
    view.copy_(source)
    inside = torch.zeros(total, dtype=torch.bool, device="cuda")
    inside.as_strided(shape, strides, GUARD_ELEMENTS).fill_(True)
    outside = ~inside.repeat_interleave(size)

    def intact() -> bool:
        return bool((raw[outside] == GUARD_BYTE).all())

    return view, intact


# ---------------------------------------------------------------------------------------------
# The sanitizer driver


def sanitize_driver(example: str) -> int:
    """Run every kernel of `example` at its sizes on numpy inputs (what compute-sanitizer
    watches). Prints one line per run; exit status 1 when one differs from the reference."""
    failed = 0
    for kernel, sizes_list in CASES[example].items():
        for sizes in sizes_list:
            run = run_example(example, kernel, sizes, arrays="numpy")
            print(run.describe(), flush=True)
            failed += not run.passed
    return 1 if failed else 0


SANITIZER_TOOLS = ("memcheck", "racecheck")
_MEMCHECK_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error")
_RACECHECK_SUMMARY = re.compile(
    r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)"
)


def sanitizer_errors(output: str) -> int | None:
    """The problems compute-sanitizer reports in `output` (None: no summary line). memcheck
    prints "ERROR SUMMARY: N errors"; racecheck "RACECHECK SUMMARY: H hazards displayed (E
    errors, W warnings)", whose warnings are hazards too, so they count."""
    if m := _MEMCHECK_SUMMARY.search(output):
        return int(m.group(1))
    if m := _RACECHECK_SUMMARY.search(output):
        return int(m.group(1)) + int(m.group(2))
    return None


def run_sanitizer(
    example: str, tool_name: str = "memcheck", timeout: float = 300
) -> dict[str, Any]:
    """`compute-sanitizer --tool TOOL_NAME` over the driver for `example`."""
    run: dict[str, Any] = {"example": example, "tool": tool_name}
    tool = shutil.which("compute-sanitizer")
    if tool is None and os.path.exists("/usr/local/cuda/bin/compute-sanitizer"):
        tool = "/usr/local/cuda/bin/compute-sanitizer"
    if tool is None:
        return {**run, "ran": False, "note": "compute-sanitizer not found"}
    command = [
        tool,
        "--tool",
        tool_name,
        "--error-exitcode",
        "99",
        sys.executable,
        "-m",
        "tilec.gpucheck",
        "--sanitize-driver",
        example,
    ]
    start = time.perf_counter()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**run, "ran": True, "passed": False, "note": "timed out"}
    output = result.stdout + result.stderr
    _save("sanitizer.txt", f"==== {tool_name} {example}\n{output}\n", append=True)
    errors = sanitizer_errors(output)
    return {
        **run,
        "ran": True,
        "errors": errors,
        "results_ok": result.returncode == 0,
        "passed": result.returncode == 0 and errors == 0,
        "seconds": round(time.perf_counter() - start, 1),
        "output": output[-4000:],
    }


# ---------------------------------------------------------------------------------------------
# The whole check


def run_gpu_tests(timeout: float = 300) -> dict[str, Any]:
    """`pytest -m gpu tests/gpu` in its own process (so that no CPU test's TRITON_INTERPRET
    reaches the Triton references)."""
    command = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider"]
    command.append(str(ROOT / "tests" / "gpu"))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    start = time.perf_counter()
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env
        )
    except subprocess.TimeoutExpired as e:
        return {"passed": False, "summary": "timed out", "output": str(e.stdout)[-6000:]}
    output = result.stdout + result.stderr
    _save("pytest.txt", output)
    lines = [line for line in output.splitlines() if line.strip()]
    return {
        "passed": result.returncode == 0,
        "summary": lines[-1] if lines else "",
        "seconds": round(time.perf_counter() - start, 1),
        "output": output[-6000:],
    }


def _save(name: str, text: str, append: bool = False) -> None:
    """Keep a whole log beside the JSON, in $OUT when it is set (the device machine's)."""
    directory = os.environ.get("OUT")
    if directory:
        with open(os.path.join(directory, name), "a" if append else "w", encoding="utf-8") as f:
            f.write(text)


def _commit() -> str:
    """The commit measured: $TILEC_COMMIT (a copy of the tree without .git), else git's."""
    if os.environ.get("TILEC_COMMIT"):
        return os.environ["TILEC_COMMIT"]
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sanitize-driver", metavar="EXAMPLE", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="where to write the results (default $OUT/gpucheck.json)")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-sanitizer", action="store_true")
    parser.add_argument("--skip-benchmarks", action="store_true")
    parser.add_argument("--quick", action="store_true", help="smaller benchmark sizes")
    parser.add_argument(
        "--only", metavar="PATTERN", help="benchmark only these workloads (as tilec bench --only)"
    )
    parser.add_argument(
        "--fuzz", type=int, default=0, metavar="N", help="run N generated kernels on the GPU"
    )
    parser.add_argument("--fuzz-seconds", type=float, default=480, help="time bound of --fuzz")
    parser.add_argument(
        "--fuzz-sanitize", type=int, default=40, help="fuzzed kernels under compute-sanitizer"
    )
    args = parser.parse_args(argv)
    if args.sanitize_driver:
        return sanitize_driver(args.sanitize_driver)

    from tilec.benchmarks import gpu as benchmarks
    from tilec.benchmarks import report
    from tilec.runtime import get_device

    if not args.skip_benchmarks:
        try:  # a pattern that picks nothing is an error now, not after the tests
            benchmarks.plan(quick=args.quick, only=args.only)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2

    device = get_device()
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": device.name,
        "commit": _commit(),
        "host": platform.node(),
        "versions": benchmarks.versions(),
    }
    print(f"tilec gpucheck: {results['gpu']}, commit {results['commit']}, {results['date']}")
    if not args.skip_tests:
        results["tests"] = run_gpu_tests()
        print(results["tests"]["output"][-3000:], flush=True)
    if not args.skip_sanitizer:
        results["sanitizer"] = [
            run_sanitizer(example, tool) for tool in SANITIZER_TOOLS for example in CASES
        ]
        for entry in results["sanitizer"]:
            print(f"{entry['tool']} {entry['example']}: {entry.get('errors')} error(s)", flush=True)
            if not entry.get("passed"):
                print(entry.get("output", entry.get("note", "")), flush=True)
    suite: list[dict[str, Any]] | None = None
    if not args.skip_benchmarks:
        try:
            suite = benchmarks.run(quick=args.quick, only=args.only, progress=True)
        except Exception as e:  # the rest of the check is still worth its JSON
            results["benchmarks_error"] = f"{type(e).__name__}: {e}"
        else:
            results["benchmarks"] = report.to_json(suite)
    if args.fuzz:
        from tilec.fuzz import gpu as fuzz_gpu

        results["fuzz"] = fuzz_gpu.run(
            args.fuzz,
            args.fuzz_seconds,
            args.fuzz_sanitize,
            workers=min(16, os.cpu_count() or 1),
            progress=True,
        )
    out = args.json or os.path.join(os.environ.get("OUT", "."), "gpucheck.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, default=str)
    print(f"\nresults written to {out}")
    if suite is not None:
        print(report.chart(suite, os.path.join(os.path.dirname(out) or ".", "suite_ratios.png")))
    print()
    ok = True
    lines = []
    if "tests" in results:
        ok &= results["tests"]["passed"]
        lines.append(f"GPU tests: {results['tests']['summary']}")
    if "sanitizer" in results:
        for tool in SANITIZER_TOOLS:
            runs = [e for e in results["sanitizer"] if e["tool"] == tool]
            clean = [e["example"] for e in runs if e.get("passed")]
            dirty = [e["example"] for e in runs if not e.get("passed")]
            ok &= not dirty
            lines.append(
                f"{tool}: {len(clean)} clean" + (f"; FAILED: {', '.join(dirty)}" if dirty else "")
            )
    if "fuzz" in results:
        from tilec.fuzz import gpu as fuzz_gpu

        ok &= results["fuzz"].get("ok", False)
        lines.append(fuzz_gpu.render(results["fuzz"]))
    if "benchmarks_error" in results:
        lines.append(f"benchmarks FAILED: {results['benchmarks_error']}")
    if suite is not None:
        lines.append(benchmarks.table(suite))
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
