"""The regret of tilec's heuristics over the benchmark suite: each workload tuned, on the GPU.

    python -m tilec.benchmarks.regret [--only 'gemm_*,softmax'] [--budget 20s] [--out DIR]

For each workload of `tilec.benchmarks.suite` (at its first `--quick` size; its first full
size, the one the suite's targets name, with `--full-size`; or every size with `--all-sizes`) the suite's own case is built — its input sets, rotated past the L2 cache, its
expected output, and the runner that calls tilec's kernel on them — and the kernel is tuned
(`tilec.tune`) on exactly that: every candidate is launched by the suite's runner, checked
against the suite's expected output (`tilec.benchmarks.gpu._close`) and timed with `time_ms`
on the suite's sets. Printed per workload: the heuristic's time, the tuned time, the regret
(heuristic / tuned) and the winner's pins; then the geometric mean and the worst regret. The
JSON (every search, whole) goes to `OUT/regret.json` (`--out`, default `$OUT` when set).

Peers are not built (no `torch.compile`, no Triton): only tilec's kernel is measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tilec.benchmarks.suite import WORKLOADS, Context, Implementation, select

__all__ = ["main", "suite_kernel", "tune_workload"]


class _Capture(Context):
    """The suite's context, keeping what `tilec(...)` was given and building no peers."""

    captured: tuple | None = None

    def tilec(self, file: str, kernel: str, make: Callable, output: Any) -> Implementation:
        self.captured = (file, kernel, make, output)
        return super().tilec(file, kernel, make, output)

    def compiled(self, function: Callable, inputs: Sequence[Any]) -> Implementation:
        return Implementation("torch.compile", None, missing="not built for the regret run")


def suite_kernel(workload: Any, size: tuple) -> tuple[Any, Any, Any, Any, Any]:
    """`(function, make, case, output, right)` of `workload`'s tilec kernel at `size`, from its
    suite case (GPU inputs, no peers built): the kernel, its runner, the case, what reads its
    output, and the check of an output against the case's expected one (None: unchecked)."""
    from tilec.benchmarks.gpu import EXAMPLES, _close, _sets
    from tilec.jit import load_kernel

    context = _Capture(sets=_sets, examples=EXAMPLES)
    case = workload.build(size, context)
    if context.captured is None:
        raise RuntimeError(f"{workload.name}: the suite case has no tilec kernel")
    file, kernel, make, output = context.captured
    function = load_kernel(EXAMPLES / file, kernel)
    right = None
    if case.expected is not None:
        right = lambda got: _close(got, case.expected, case.rtol)  # noqa: E731
    return function, make, case, output, right


def tune_workload(workload: Any, size: tuple, settings: Any) -> dict[str, Any]:
    """Tune `workload`'s kernel at `size` on its suite case; the search's JSON."""
    from tilec.tune.api import runner_problem, tune
    from tilec.tune.clock import RunnerClock

    function, make, case, output, right = suite_kernel(workload, size)
    problem = runner_problem(function, make, case.sets[0])
    clock = RunnerClock(make, case.sets, right=right, output=output, rtol=case.rtol)
    _result, entry = tune(problem, clock, settings, refresh=True)
    entry["workload"] = workload.name
    entry["size"] = workload.label(size)
    return entry


def main(argv: list[str] | None = None) -> int:
    from tilec.tune.cli import parse_budget
    from tilec.tune.search import Settings

    parser = argparse.ArgumentParser(prog="python -m tilec.benchmarks.regret", description=__doc__)
    parser.add_argument("--only", help="workloads to tune: comma-separated substrings or globs")
    parser.add_argument("--budget", default="20s", help="per workload (default 20s)")
    parser.add_argument("--max-candidates", type=int, default=0)
    parser.add_argument("--all-sizes", action="store_true", help="every suite size, not one")
    parser.add_argument(
        "--full-size", action="store_true", help="the first full suite size, not the quick one"
    )
    parser.add_argument("--out", default=os.environ.get("OUT"), help="folder of regret.json")
    args = parser.parse_args(argv)
    names = list(WORKLOADS)
    try:
        chosen = select(args.only, names)
    except ValueError as e:
        parser.error(str(e))
    settings = Settings(budget_s=parse_budget(args.budget), max_candidates=args.max_candidates)
    entries, failures = [], []
    for workload in WORKLOADS.values():
        if workload.name not in chosen:
            continue
        if args.all_sizes:
            sizes = workload.sizes
        elif args.full_size:
            sizes = workload.sizes[:1]
        else:
            sizes = (workload.quick or workload.sizes)[:1]
        for size in sizes:
            try:
                entry = tune_workload(workload, size, settings)
            except Exception as e:  # one workload's failure is reported; the others run
                failures.append((workload.name, f"{type(e).__name__}: {str(e)[:300]}"))
                print(f"{workload.name}: FAILED {failures[-1][1]}", flush=True)
                continue
            entries.append(entry)
            print(_row(entry), flush=True)
            _write(args.out, {"partial": True}, entries)  # an interrupted run keeps its rows
    regrets = [e["regret"] for e in entries if math.isfinite(e["regret"])]
    summary: dict[str, Any] = {"workloads": len(entries), "failed": failures}
    if regrets:
        summary["geomean_regret"] = math.exp(sum(math.log(r) for r in regrets) / len(regrets))
        worst = max(entries, key=lambda e: e["regret"])
        summary["worst_regret"] = worst["regret"]
        summary["worst"] = f"{worst['workload']} {worst['size']}"
        print(
            f"geomean regret {summary['geomean_regret']:.3f}, worst {summary['worst_regret']:.3f} "
            f"({summary['worst']}); {len(failures)} failed"
        )
    path = _write(args.out, summary, entries)
    if path is not None:
        print(f"wrote {path}")
    return 0 if not failures else 1


def _write(out: str | None, summary: dict[str, Any], entries: list) -> Path | None:
    """`OUT/regret.json` (None: no `--out`), replaced whole: never half-written."""
    if not out:
        return None
    path = Path(out) / "regret.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.part")
    partial.write_text(json.dumps({"summary": summary, "searches": entries}, indent=1, default=str))
    partial.replace(path)
    return path


def _row(entry: dict[str, Any]) -> str:
    from tilec.tune.space import config_text

    return (
        f"{entry['workload']:<22} {entry['size']:<22} heuristic {entry['heuristic']['ms']:.4f} ms"
        f"  tuned {entry['winner']['ms']:.4f} ms  regret {entry['regret']:.3f}  "
        f"[{config_text(entry['pins'])}]  {len(entry['candidates'])} candidates"
    )


if __name__ == "__main__":
    sys.exit(main())
