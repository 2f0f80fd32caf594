"""Generated kernels on the GPU against the interpreter, and a sample under compute-sanitizer.

    python -m tilec.fuzz.gpu --count 10000 --seconds 480 --sanitize 40

Each generated kernel (`tilec.fuzz.generate.sample_program(seed)`, one kernel per program) is
written to a `.tile` file, loaded with `tilec.load_kernel` (what `@tilec.jit` does: the
specialization of its arguments, the default pipeline, PTX, the runtime's launch) and called
on torch CUDA tensors made from random inputs, every output inside a guard region that must
come back untouched (`tilec.gpucheck._guarded`). The expected outputs are the interpreter's
on the same inputs, running the tile IR the GPU's PTX was compiled from (same tile sizes, so
the same reduction trees); floats must agree within the interpreter's tolerances
(`tilec.interp.runner.DEFAULT_RTOL`), integers exactly.

A sample of the kernels (`sanitize_sample`) runs again under `compute-sanitizer --tool
memcheck` and `--tool racecheck`, one process per tool over the whole sample
(`--sanitize-driver FILE`, on numpy inputs as gpucheck's driver does).

`run(count, seconds, sanitize_sample)` returns a JSON-serialisable summary; the command
writes it to `$OUT/fuzz.json` (or `--json`), with every mismatching program under
`$OUT/fuzz-findings/`. Exit status 0 when every kernel matched and the sanitizer was clean.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilec.diagnostics import TileError
from tilec.fuzz.generate import GeneratedProgram, sample_program

__all__ = ["check_on_gpu", "main", "run", "sanitizer_command"]

FIRST_SEED = 1_000_000  # GPU seeds apart from the CPU run's, so the two cover more programs


def _written(func: Any) -> set:
    from tilec.interp.launch import written_parameters

    return set(written_parameters(func))


def _expected(program: GeneratedProgram, compiled_ir: Any, name: str, values: list) -> dict:
    """The interpreter's outputs, by parameter name, on copies of `values`, running the IR
    the PTX came from."""
    from tilec.interp.launch import find_kernel, parameter_name
    from tilec.interp.runner import run_on_copies
    from tilec.ir.types import TensorType

    # The copies in the arguments' own shapes (a flattened kernel views them as one dimension).
    outputs, _sizes = run_on_copies(compiled_ir, name, values, None)
    func = find_kernel(compiled_ir, name)
    written = _written(func)
    tensors = [a for a in func.arguments if isinstance(a.type, TensorType)]
    return {parameter_name(a): v for a, v in zip(tensors, outputs) if a in written}


def _values_behind(func: Any, tensor: Any) -> list[Any]:
    """The operations the values stored into `tensor` are computed from: a backward slice
    over operands, through loops' carried values and induction variables (their inits,
    yields and bounds) and branches' yields and conditions."""
    from tilec.dialects import scf
    from tilec.dialects import tile as T
    from tilec.dialects.atomic import ATOMIC_OPS
    from tilec.ir.core import BlockArgument

    pending = [
        v
        for op in func.walk()
        if isinstance(op, (T.StoreOp, *ATOMIC_OPS)) and op.view is tensor
        for v in (op.value, op.mask)
        if v is not None
    ]
    seen, ops = set(), {}
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, BlockArgument):
            loop = value.owner.parent_op
            if isinstance(loop, scf.ForOp):
                i = value.index
                pending.extend([loop.lower, loop.upper, loop.step])
                if i > 0:
                    pending.extend([loop.inits[i - 1], loop.yield_op.values[i - 1]])
            continue
        op = value.owner
        ops[id(op)] = op
        if isinstance(op, scf.ForOp):
            i = value.index
            pending.extend([op.inits[i], op.yield_op.values[i]])
        elif isinstance(op, scf.IfOp):
            i = value.index
            pending.append(op.condition)
            for region in (op.then, op.otherwise):
                if region.blocks:
                    pending.append(region.block.ops[-1].operands[i])
        else:
            pending.extend(op.operands)
    return list(ops.values())


# Math functions whose GPU results differ from the interpreter's correctly rounded ones, and
# by how many ulps at most (docs/lowering.md; 3 also covers the narrow types' double rounding).
APPROXIMATE_ULPS = {
    "math.exp": 3,
    "math.exp2": 3,
    "math.log": 2,
    "math.log2": 2,
    "math.rsqrt": 2,
    "math.sin": 2,
    "math.cos": 2,
    "math.tanh": 2,
    "math.erf": 3,
    "math.powf": 1,
}


def tolerance(func: Any, tensor: Any) -> tuple[float, str, bool]:
    """How closely the GPU must match the interpreter on `tensor`: (rtol, reason,
    approximate).

    A float result is as precise as the narrowest float it was computed through (an f32
    `exp` stored into an f64 output agrees to f32's tolerance, not f64's); an integer one
    exactly. `approximate`: an approximate math function (`APPROXIMATE_ULPS`) is in the
    value's slice, so an ulp of it may move a later truncation, comparison or bit operation
    by any amount at some elements: `check_on_gpu` then also accepts, element by element,
    what the interpreter gives with those functions' results moved by up to their ulps."""
    from tilec.interp.runner import DEFAULT_RTOL
    from tilec.ir.types import FloatType, TensorType

    element = tensor.type.element if isinstance(tensor.type, TensorType) else None
    ops = _values_behind(func, tensor)
    floats = {getattr(r.type, "element", r.type) for op in ops for r in op.results}
    floats = {t.name for t in floats if isinstance(t, FloatType)}
    approximate = any(op.name in APPROXIMATE_ULPS for op in ops)
    if isinstance(element, FloatType):
        floats.add(element.name)
        rtol, reason = max(DEFAULT_RTOL[name] for name in floats)
        return rtol, reason, approximate
    return 0.0, "integers", approximate


def _next_float(x: np.ndarray, up: bool) -> np.ndarray:
    """The neighbouring float of each element (toward +inf when `up`), by its bits: any IEEE
    format numpy holds (f16, bf16, f32, f64); inf and NaN stay."""
    signed = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
    bits = np.ascontiguousarray(x).view(signed)
    smallest_negative = np.iinfo(signed).min + 1  # the sign bit and the lowest mantissa bit
    magnitude_zero = (bits & np.iinfo(signed).max) == 0
    positive = bits >= 0
    one = signed(1)
    if up:
        moved = np.where(positive, bits + one, np.where(magnitude_zero, one, bits - one))
    else:
        moved = np.where(
            positive, np.where(magnitude_zero, signed(smallest_negative), bits - one), bits + one
        )
    finite = np.isfinite(x.astype(np.float64))
    return np.where(finite, moved.astype(signed).view(x.dtype), x)


@contextlib.contextmanager
def _math_moved(ulps: int):
    """The interpreter with every approximate math function's result moved `ulps` units in
    the last place (toward +inf when positive), each bounded by its `APPROXIMATE_ULPS`."""
    from tilec.interp.semantics import SEMANTICS

    saved = {}
    for cls in list(SEMANTICS):
        bound = APPROXIMATE_ULPS.get(getattr(cls, "name", ""))
        if bound is None:
            continue
        saved[cls] = handler = SEMANTICS[cls]
        steps = max(-bound, min(bound, ulps))

        def moved(state, op, args, handler=handler, steps=steps):
            result = np.asarray(handler(state, op, args))
            for _ in range(abs(steps)):
                result = _next_float(result, up=steps > 0)
            return result

        SEMANTICS[cls] = moved
    try:
        yield
    finally:
        SEMANTICS.update(saved)


def _elements_within(got: np.ndarray, expected: np.ndarray, rtol: float) -> np.ndarray:
    """Which elements pass `tilec.interp.runner._compare`'s test (integers: equal)."""
    if got.dtype.kind in "biu":
        return got.astype(np.int64) == expected.astype(np.int64)
    g, e = got.astype(np.float64), expected.astype(np.float64)
    magnitude = np.abs(np.where(np.isfinite(e), e, 0.0))
    scale = float(magnitude.max()) if magnitude.size else 0.0
    with np.errstate(invalid="ignore"):
        close = np.abs(g - e) <= rtol * (magnitude + scale)
    return close | (np.isnan(g) & np.isnan(e)) | (np.isinf(g) & (g == e))


def check_on_gpu(program: GeneratedProgram, directory: str, arrays: str = "torch") -> dict:
    """Compile and run the one kernel of `program` on the GPU and compare with the
    interpreter: {"seed", "kernel", "passed", "checks", "guards_intact", "error"?}."""
    import tilec
    from tilec.interp.launch import parameter_name
    from tilec.interp.runner import _compare, random_arguments
    from tilec.ir.types import TensorType

    name = program.kernels[0]
    path = os.path.join(directory, f"fuzz-{program.seed}.tile")
    with open(path, "w", encoding="utf-8") as f:
        f.write(program.source)
    entry: dict[str, Any] = {"seed": program.seed, "kernel": name, "passed": False}
    function = tilec.load_kernel(path, name)
    func = function.ir.functions[0]
    extents = {
        d: n
        for d, n in program.extents.items()
        if any(d in a.type.shape for a in func.arguments if isinstance(a.type, TensorType))
    }
    values = random_arguments(func, extents, seed=program.seed)
    written = _written(func)
    # One seed in three passes its tensors with padded rows (a row stride that is not the
    # extent; an output's padding must come back untouched): the jit's other variants.
    layout = "padded" if arrays == "torch" and program.seed % 3 == 1 else "contiguous"
    entry["layout"] = layout
    if arrays == "numpy":
        launch_values = [np.copy(v) if isinstance(v, np.ndarray) else v for v in values]
    else:
        from tilec.gpucheck import _guarded, _laid_out, _to_numpy, _to_torch

        launch_values, guards = [], []
        for arg, value in zip(func.arguments, values):
            if not isinstance(value, np.ndarray):
                launch_values.append(value)
            elif arg in written:
                tensor, intact = _guarded(value, layout)
                launch_values.append(tensor)
                guards.append((parameter_name(arg), tensor, intact))
            else:
                launch_values.append(_laid_out(_to_torch(value), layout))
    compiled = function.compile_for(*launch_values)
    # The IR the PTX was compiled from, in the interpreter: the same tile sizes.
    lowered = tilec.compile(path, kernels=[name], pipeline=compiled.pipeline).module
    expected = _expected(program, lowered, name, values)
    if arrays == "numpy":
        function(*launch_values)
        outputs = {
            parameter_name(a): v for a, v in zip(func.arguments, launch_values) if a in written
        }
        guards_intact = True
    else:
        import torch

        function(*launch_values)
        torch.cuda.synchronize()
        outputs = {n: _to_numpy(t) for n, t, _ in guards}
        guards_intact = all(intact() for _, _, intact in guards)
    checks, loose = [], []
    moved: list[dict] = []  # the interpreter's outputs with math results moved, when needed
    for arg in func.arguments:
        arg_name = parameter_name(arg)
        if arg_name not in expected or not isinstance(arg.type, TensorType):
            continue
        rtol, reason, approximate = tolerance(func, arg)
        got = outputs[arg_name]
        check = _compare(arg_name, arg_name, got, expected[arg_name], rtol, reason)
        if not check.passed and approximate:
            if not moved:
                for ulps in (-3, -2, -1, 1, 2, 3):
                    with _math_moved(ulps):
                        moved.append(_expected(program, lowered, name, values))
            accepted = _elements_within(got, expected[arg_name], rtol)
            for other in moved:
                accepted |= _elements_within(got, other[arg_name], rtol)
            if accepted.all():
                loose.append(arg_name)  # within what the approximate functions allow
                continue
        checks.append(check)
    entry["loose_outputs"] = loose
    entry["guards_intact"] = guards_intact
    entry["checks"] = [c.render().strip() for c in checks if not c.passed]
    entry["passed"] = guards_intact and all(c.passed for c in checks)
    return entry


def _save_finding(out_dir: str, program: GeneratedProgram, entry: dict) -> str:
    directory = os.path.join(out_dir, f"seed{program.seed}")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "program.tile"), "w", encoding="utf-8") as f:
        f.write(program.source)
    with open(os.path.join(directory, "case.json"), "w", encoding="utf-8") as f:
        json.dump({"seed": program.seed, "extents": program.extents, **entry}, f, indent=1)
    return directory


def sanitizer_command(tool: str, seeds: Sequence[int]) -> list[str] | None:
    """The compute-sanitizer command that runs the kernels of `seeds` under `tool` (None when
    compute-sanitizer is not installed)."""
    exe = shutil.which("compute-sanitizer")
    if exe is None and os.path.exists("/usr/local/cuda/bin/compute-sanitizer"):
        exe = "/usr/local/cuda/bin/compute-sanitizer"
    if exe is None:
        return None
    seed_list = ",".join(map(str, seeds))
    return [
        *(exe, "--tool", tool, "--error-exitcode", "99"),
        *(sys.executable, "-m", "tilec.fuzz.gpu", "--sanitize-driver", seed_list),
    ]


def _sanitize(tool: str, seeds: Sequence[int], timeout: float) -> dict[str, Any]:
    from tilec.gpucheck import sanitizer_errors

    run: dict[str, Any] = {"tool": tool, "kernels": len(seeds)}
    command = sanitizer_command(tool, seeds)
    if command is None:
        return {**run, "ran": False, "note": "compute-sanitizer not found"}
    start = time.perf_counter()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**run, "ran": True, "passed": False, "note": f"timed out after {timeout} s"}
    output = result.stdout + result.stderr
    errors = sanitizer_errors(output)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, f"fuzz-{tool}.txt"), "w", encoding="utf-8") as f:
            f.write(output)
    return {
        **run,
        "ran": True,
        "errors": errors,
        "results_ok": result.returncode == 0,
        "passed": result.returncode == 0 and errors == 0,
        "seconds": round(time.perf_counter() - start, 1),
        "output": output[-3000:],
    }


def sanitize_driver(seeds: Sequence[int]) -> int:
    """Run the kernels of `seeds` on numpy inputs (what compute-sanitizer watches); exit
    status 1 when one differs from the interpreter."""
    failed = 0
    with tempfile.TemporaryDirectory(prefix="tilec-fuzz-") as directory:
        for seed in seeds:
            try:
                entry = check_on_gpu(sample_program(seed), directory, arrays="numpy")
            except Exception:
                entry = {"seed": seed, "passed": False, "error": traceback.format_exc()[-2000:]}
            print(json.dumps(entry), flush=True)
            failed += not entry["passed"]
    return 1 if failed else 0


def _refused_for_pins(program: GeneratedProgram) -> bool:
    """Whether the compiler refused `program` only for its pins (as the CPU check decides:
    `differential._pins_to_blame`): a located error for a tile no block holds is right."""
    import tilec
    from tilec.fuzz.differential import _pins_to_blame

    try:
        frontend = tilec.compile(program.source).module
    except TileError:
        return False
    return _pins_to_blame(program, frontend, "sm_90a", small_tiles=False)


def _check_seed(job: tuple[int, str]) -> dict:
    """One generated kernel on the GPU (a pool worker's job): its entry, with the program
    saved under `out_dir` when it did not match."""
    seed, out_dir = job
    program = sample_program(seed)
    with tempfile.TemporaryDirectory(prefix="tilec-fuzz-") as directory:
        try:
            entry = check_on_gpu(program, directory)
        except TileError as e:
            entry = {"seed": seed, "passed": False, "error": traceback.format_exc()[-3000:]}
            if _refused_for_pins(program):
                entry = {"seed": seed, "passed": True, "pin_rejected": e.render()[-600:]}
        except Exception:
            entry = {"seed": seed, "passed": False, "error": traceback.format_exc()[-3000:]}
    if not entry["passed"]:
        entry["directory"] = _save_finding(out_dir, program, entry)
    return entry


def run(
    count: int,
    seconds: float | None = None,
    sanitize_sample: int = 20,
    *,
    first_seed: int = FIRST_SEED,
    out_dir: str | None = None,
    sanitize_timeout: float = 600,
    workers: int = 1,
    progress: bool = False,
) -> dict[str, Any]:
    """Run up to `count` generated kernels on the GPU against the interpreter (on `workers`
    processes, each with its own CUDA context), stopping after `seconds`; then `sanitize_sample` of them (spread over the run) under memcheck and
    racecheck. A JSON-serialisable summary: counts, time, failures (seed, program directory,
    what differed), sanitizer results."""
    from tilec.runtime import gpu_available

    start = time.perf_counter()
    summary: dict[str, Any] = {
        "requested": count,
        "kernels": 0,
        "passed": 0,
        "failed": 0,
        "errors": 0,
        "failures": [],
        "first_seed": first_seed,
        "workers": workers,
        "pin_rejections": 0,  # refused with a located error only for their pins: counted apart
    }
    if not gpu_available():
        return {**summary, "seconds": 0.0, "sanitizer": [], "ok": False, "note": "no GPU"}
    out_dir = out_dir or os.path.join(os.environ.get("OUT", "."), "fuzz-findings")
    ran: list[int] = []
    seeds = range(first_seed, first_seed + count)
    jobs = [(seed, out_dir) for seed in seeds]

    def done(seed: int, entry: dict) -> bool:
        summary["kernels"] += 1
        if entry["passed"] and not entry.get("pin_rejected"):
            ran.append(seed)  # what the sanitizer sample is drawn from
        if entry.get("pin_rejected"):
            summary["pin_rejections"] += 1
        elif entry["passed"]:
            summary["passed"] += 1
        else:
            summary["errors" if "error" in entry else "failed"] += 1
            if len(summary["failures"]) < 100:
                summary["failures"].append(entry)
        if progress is not None and summary["kernels"] % 500 == 0:
            elapsed = time.perf_counter() - start
            print(
                f"  fuzz: {summary['kernels']} kernels in {elapsed:.0f} s, "
                f"{summary['kernels'] - summary['passed']} not matching",
                flush=True,
            )
        return seconds is not None and time.perf_counter() - start > seconds

    if workers <= 1:
        for job in jobs:
            if done(job[0], _check_seed(job)):
                break
    else:
        import multiprocessing

        # spawn, not fork (a forked child of a process with threads can inherit a held lock);
        # each worker holds its own CUDA context, and compiling (LLVM, ptxas) and the
        # interpreter are the time: the GPU itself idles most of the run.
        context = multiprocessing.get_context("spawn")
        with context.Pool(workers) as pool:
            # unordered: one slow kernel must not hold back the count (and the time bound)
            for entry in pool.imap_unordered(_check_seed, jobs, chunksize=2):
                if done(entry["seed"], entry):
                    pool.terminate()
                    break
    summary["seconds"] = round(time.perf_counter() - start, 1)
    summary["kernels_per_second"] = round(summary["kernels"] / max(summary["seconds"], 1e-9), 2)
    sample = (
        ran[:: max(1, len(ran) // sanitize_sample)][:sanitize_sample] if sanitize_sample else []
    )
    summary["sanitized_seeds"] = sample
    summary["sanitizer"] = (
        [_sanitize(tool, sample, sanitize_timeout) for tool in ("memcheck", "racecheck")]
        if sample
        else []
    )
    summary["ok"] = (
        summary["kernels"] > 0
        and summary["passed"] + summary["pin_rejections"] == summary["kernels"]
        and all(s.get("passed", False) for s in summary["sanitizer"])
    )
    return summary


def render(summary: dict[str, Any]) -> str:
    """The summary of `run` in a few lines: counts, sanitizer verdicts, the first failures."""
    if summary.get("note"):
        return f"fuzz not run: {summary['note']}"
    sanitizer = ", ".join(
        f"{s['tool']} {'clean' if s.get('passed') else 'NOT clean'} on {s['kernels']}"
        for s in summary["sanitizer"]
    )
    lines = [
        f"fuzz: {summary['kernels']} generated kernels on the GPU in {summary['seconds']} s: "
        f"{summary['passed']} matched the interpreter, {summary['failed']} differed, "
        f"{summary['errors']} raised, {summary.get('pin_rejections', 0)} refused for their pins "
        f"(located errors; they compile without them); sanitizer: {sanitizer or 'not run'}"
    ]
    for failure in summary["failures"][:10]:
        detail = failure.get("checks") or failure.get("error", "")
        lines.append(f"  seed {failure['seed']}: {str(detail)[-600:]}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--sanitize", type=int, default=20, help="kernels under the sanitizer")
    parser.add_argument("--first-seed", type=int, default=FIRST_SEED)
    parser.add_argument(
        "--workers", type=int, default=min(16, os.cpu_count() or 1), help="processes compiling"
    )
    parser.add_argument("--json", default=None, help="where the summary goes ($OUT/fuzz.json)")
    parser.add_argument("--sanitize-driver", metavar="SEEDS", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sanitize_driver:
        return sanitize_driver([int(s) for s in args.sanitize_driver.split(",") if s])
    summary = run(
        args.count,
        args.seconds,
        args.sanitize,
        first_seed=args.first_seed,
        workers=args.workers,
        progress=True,
    )
    if summary.get("note"):
        print(f"not run: {summary['note']}")
        return 1
    path = args.json or os.path.join(os.environ.get("OUT", "."), "fuzz.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    print(render(summary))
    print(f"summary in {path}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
