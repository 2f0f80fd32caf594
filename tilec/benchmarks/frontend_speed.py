"""How fast the frontend turns each example kernel into tile IR: parse, analysis, IR generation.

    python -m tilec.benchmarks.frontend_speed [--repeat 20] [--examples DIR] [--json OUT]

Every kernel of every `examples/*.tile` file is cut out of its file (with its decorator) and
compiled on its own, `--repeat` times; the table gives the median time of each step and of the
three together (the frontend, target ≤ 50 ms per kernel: issue #3), and of verifying the IR,
which is reported apart. Costs paid once per process are measured in a fresh interpreter and
reported apart too: importing tilec, loading the parser tables shipped with the grammar (what
every run does), building them from the grammar and loading them from tilec's cache directory
instead (what a run does when the shipped file does not match), and the first compile (which
also compiles the lexer's regular expressions).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tilec.dialects.builtin import ModuleOp
from tilec.frontend import analyze, parse_source
from tilec.frontend.irgen import generate_ir
from tilec.frontend.syntax import FunctionDef
from tilec.ir.verifier import verify

DEFAULT_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TARGET_MS = 50.0


def kernel_sources(text: str, filename: str) -> dict[str, str]:
    """Each kernel of a `.tile` file as a source text of its own (decorators included)."""
    module = parse_source(text, filename)
    lines = text.split("\n")
    definitions = [s for s in module.body if isinstance(s, FunctionDef)]
    starts = [min([d.loc.line for d in f.decorators] + [f.loc.line]) for f in definitions]
    ends = [*starts[1:], len(lines) + 1]
    return {
        f.name: "\n".join(lines[start - 1 : end - 1]) + "\n"
        for f, start, end in zip(definitions, starts, ends)
    }


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def time_kernel(name: str, text: str, repeat: int) -> dict:
    """Median times (ms) of each frontend step on one kernel's source."""
    steps: dict[str, list[float]] = {"parse": [], "analyze": [], "irgen": [], "verify": []}
    totals: list[float] = []
    module: ModuleOp | None = None
    for _ in range(repeat):
        # As timeit does: no garbage collection inside a measurement.
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        syntax_tree = parse_source(text, f"{name}.tile")
        t1 = time.perf_counter()
        program = analyze(syntax_tree)
        t2 = time.perf_counter()
        module = generate_ir(program)
        t3 = time.perf_counter()
        verify(module)
        t4 = time.perf_counter()
        gc.enable()
        steps["parse"].append(t1 - t0)
        steps["analyze"].append(t2 - t1)
        steps["irgen"].append(t3 - t2)
        steps["verify"].append(t4 - t3)
        totals.append(t3 - t0)
    assert module is not None
    figures = {f"{step}_ms": _median_ms(samples) for step, samples in steps.items()}
    figures["frontend_ms"] = _median_ms(totals)
    figures["ops"] = sum(1 for _ in module.walk())
    figures["lines"] = text.count("\n")
    return figures


# Run in a fresh interpreter by `one_time_costs`; prints JSON on stdout.
_ONE_TIME_PROBE = """
import json, os, sys, time
t0 = time.perf_counter()
import tilec
from tilec.frontend import syntax
t1 = time.perf_counter()
os.environ["TILEC_CACHE_DIR"] = ""
syntax._Parser(shipped_tables=None)
t2 = time.perf_counter()
os.environ["TILEC_CACHE_DIR"] = sys.argv[1]
syntax._Parser(shipped_tables=None)  # the first one with a cache directory writes the tables
t3 = time.perf_counter()
syntax._Parser(shipped_tables=None)  # loads them
t4 = time.perf_counter()
assert syntax._get_parser().tables_source == "shipped"  # as every run does
t5 = time.perf_counter()
tilec.compile(open(sys.argv[2], encoding="utf-8").read())
t6 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "parser_build_ms": (t2 - t1) * 1e3,
                  "parser_load_ms": (t4 - t3) * 1e3, "parser_shipped_ms": (t5 - t4) * 1e3,
                  "first_compile_ms": (t6 - t5) * 1e3}))
"""


def one_time_costs(example: Path, cache_directory: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", _ONE_TIME_PROBE, str(cache_directory), str(example)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="runs per kernel (default 20)")
    parser.add_argument("--examples", type=Path, default=DEFAULT_EXAMPLES)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)

    paths = sorted(args.examples.glob("*.tile"))
    if not paths:
        parser.error(f"no .tile files in {args.examples}")
    kernels: dict[str, dict] = {}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for name, source in kernel_sources(text, path.name).items():
            kernels[name] = {"file": path.name, **time_kernel(name, source, args.repeat)}

    with tempfile.TemporaryDirectory(prefix="tilec-bench-cache-") as cache_directory:
        once = one_time_costs(paths[0], Path(cache_directory))

    figures = {
        "kernels": kernels,
        "one_time": once,
        "repeat": args.repeat,
        "target_ms": TARGET_MS,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }
    print(
        f"Frontend speed per example kernel, median of {args.repeat} runs (ms); "
        "frontend = parse + analyze + irgen"
    )
    header = (
        f"{'kernel':<20} {'file':<22} {'lines':>5} {'ops':>5} {'parse':>7} {'analyze':>8} "
        f"{'irgen':>7} {'frontend':>9} {'verify':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, k in kernels.items():
        print(
            f"{name:<20} {k['file']:<22} {k['lines']:>5} {k['ops']:>5} {k['parse_ms']:>7.2f} "
            f"{k['analyze_ms']:>8.2f} {k['irgen_ms']:>7.2f} {k['frontend_ms']:>9.2f} "
            f"{k['verify_ms']:>7.2f}"
        )
    slowest = max(kernels, key=lambda n: kernels[n]["frontend_ms"])
    worst = kernels[slowest]["frontend_ms"]
    verdict = "within" if worst <= TARGET_MS else "OVER"
    print(f"slowest: {slowest}, {worst:.2f} ms ({verdict} the {TARGET_MS:.0f} ms target)")
    print(
        "once per process: import tilec {import_ms:.0f} ms; parser tables: loaded from the "
        "shipped file {parser_shipped_ms:.0f} ms (built from the grammar {parser_build_ms:.0f} ms, "
        "loaded from the cache {parser_load_ms:.0f} ms); "
        "first compile {first_compile_ms:.0f} ms".format(**once)
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=2)
    return figures


if __name__ == "__main__":
    main()
