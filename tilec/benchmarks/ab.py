"""A/B runs of suite workloads: tilec's kernel as the heuristics compile it against the same
kernel under other configurations, timed in one process with the suite's clock.

    python -m tilec.benchmarks.ab --only paged_decode --config hoist-loads.enable=false
    python -m tilec.benchmarks.ab --only 'col_sum*' --config tile.M=32,tile.N=128 --all-sizes
    python -m tilec.benchmarks.ab --only swiglu --config warps=4 --dry-run     # no GPU
    python -m tilec.benchmarks.ab --plan docs/benchmarks/pending-2026-12-05.json
    python -m tilec.benchmarks.ab --only gemm_nt_bf16 --size 8,13824,5120 --config split=1
    ncu -k gemm_nn --launch-skip 6 --launch-count 1 python -m tilec.benchmarks.ab \
        --only gemm_nn --config pipeline.cluster=2 --launches 3   # one launch of the config's

A configuration is the tuner's (`tilec tune --sweep`'s names, comma-separated: `warps=4`,
`tile.M=32,tile.N=128`, `hoist-loads.enable=false`, `pipeline.warp_specialize=1`); each is
one A/B pair with the heuristics' own choice, so a change made without a GPU can be timed
against what it replaced -- the predictions docs/benchmarks.md lists -- in one call. The
suite's case gives the inputs (rotated past the L2 cache), the expected output (each
configuration's output is checked before it is timed) and the runner; the tuner's sweep
(`tilec.tune.api.sweep_runner`) compiles the configurations in parallel and times them with
`time_ms` in interleaved rounds. Peers are not built: the suite run (`tilec.benchmarks.gpu`)
times them. `--dry-run` compiles every configuration on the CPU and prints the decisions it
came to, and whether its code is the heuristic's own (it would measure nothing), before GPU
time is spent. `--json FILE` writes the rows, after each size (a call cut off by its time
limit keeps what it measured). A plan's entries are all resolved first: one that names no
workload or size of the suite stops the run before anything is timed. `--size` (a plan
entry's `size`: a list) times a workload at a shape of its own dimensions that the suite does
not list -- the test of a heuristic on shapes nobody fitted it to -- with the suite's case for
it (inputs, reference, peers' absence: only tilec's configurations are timed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["load_plan", "main", "parse_config", "parse_size"]


def parse_config(text: str) -> dict[str, Any]:
    """`tile.M=32,warps=4` as the tuner's config (values: true/false, integers, else text)."""
    from tilec.diagnostics import TileError
    from tilec.tune.cli import _value

    config: dict[str, Any] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip():
            raise TileError(
                f"--config: expected DECISION=VALUE[,DECISION=VALUE...], got '{text}'",
                hint="e.g. --config warps=4 --config tile.M=32,tile.N=128 "
                "--config hoist-loads.enable=false",
            )
        config[name.strip()] = _value(value.strip())
    return config


def _sizes(workload: Any, all_sizes: bool) -> tuple:
    return tuple(workload.sizes) if all_sizes else tuple(workload.sizes[:1])


def parse_size(text: str) -> tuple[int, ...]:
    """`16,11008,4096` as a workload size (its dimensions in the suite's order)."""
    from tilec.diagnostics import TileError

    try:
        size = tuple(int(v) for v in text.split(","))
    except ValueError:
        size = ()
    if not size or min(size) < 1:
        raise TileError(
            f"--size: expected positive integers separated by commas, got '{text}'",
            hint="the workload's dimensions in the suite's order, e.g. --size 16,11008,4096 "
            "for gemm_nt_bf16's M, N, K",
        )
    return size


def _named(workload: Any, label: str) -> tuple:
    """The suite size of `workload` labelled `label` (a plan's `at`), or none."""
    return tuple(s for s in (*workload.sizes, *workload.small) if workload.label(s) == label)


def _dry_run(workload: Any, size: tuple, configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from tilec.benchmarks.regret_replay import problem_of
    from tilec.tune.space import config_text
    from tilec.tune.worker import build_candidate

    problem = problem_of(workload, size)
    heuristic = build_candidate(problem, {})
    rows = []
    for config in [{}, *configs]:
        build = heuristic if not config else build_candidate(problem, config)
        same = bool(config) and build.code == heuristic.code
        rows.append(
            {
                "workload": workload.name,
                "size": workload.label(size),
                "shape": tuple(size),
                "config": config,
                "status": build.status,
                "reason": build.reason,
                "decisions": build.decisions,
                "same_as_heuristic": same,
            }
        )
        note = "  (the heuristic's own code: measures nothing)" if same else ""
        print(
            f"  {config_text(config):<40} {build.status:<7} {build.decisions}{note}"
            + (f"  {build.reason}" if build.reason else ""),
            flush=True,
        )
    return rows


def _measure(workload: Any, size: tuple, configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from tilec.benchmarks.regret import suite_kernel
    from tilec.tune.api import sweep_runner
    from tilec.tune.space import config_text

    function, make, case, output, right = suite_kernel(workload, size)
    result = sweep_runner(function, make, case.sets, configs, right=right, output=output, rounds=3)
    base = result.heuristic.ms
    rows = []
    for config in [{}, *configs]:
        candidate = result.heuristic if not config else result.candidate_for(config)
        timed = candidate is not None and candidate.status in ("ok", "duplicate")
        ms = candidate.ms if timed else None
        why = "" if candidate is None else candidate.reason
        rows.append(
            {
                "workload": workload.name,
                "size": workload.label(size),
                "shape": tuple(size),
                "config": config,
                "ms": ms,
                "spread": None if candidate is None else candidate.spread,
                "vs_heuristic": (ms / base) if ms and base else None,
                "decisions": None if candidate is None else candidate.decisions,
                "status": "not run" if candidate is None else candidate.status,
                "reason": why,
            }
        )
        shown = f"{ms:.4f} ms  x{ms / base:.3f}" if ms and base else f"{rows[-1]['status']} {why}"
        print(f"  {config_text(config):<40} {shown}", flush=True)
    return rows


def _launch(workload: Any, size: tuple, configs: list[dict[str, Any]], times: int) -> list:
    """Run the heuristic's kernel and each configuration's `times` times each, untimed and in
    that order, for a profiler: `ncu -k KERNEL --launch-skip S --launch-count 1` then picks the
    last launch of the i-th (the heuristic's 0th) with S = (i + 1) * times -- the first launch
    of all is the one that records the call's arguments (`runner_problem`)."""
    import torch

    from tilec.benchmarks.regret import suite_kernel
    from tilec.tune.api import runner_problem
    from tilec.tune.space import config_text
    from tilec.tune.worker import make_function

    function, make, case, _, _ = suite_kernel(workload, size)
    problem = runner_problem(function, make, case.sets[0])
    for config in [{}, *configs]:
        run = make(make_function(problem, config) if config else function)
        for _ in range(times):
            run(*case.sets[0])
        torch.cuda.synchronize()
        print(f"  {config_text(config):<40} launched {times} times", flush=True)
    return []


def load_plan(path: str) -> list[dict[str, Any]]:
    """The predictions of a plan file (module docstring), checked for the fields each needs."""
    from tilec.diagnostics import TileError

    try:
        plan = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise TileError(f"--plan {path}: {e}") from None
    needed = ("workload", "config", "predicted")
    if not isinstance(plan, list) or not all(
        isinstance(p, dict) and all(k in p for k in needed) and ("at" in p or "size" in p)
        for p in plan
    ):
        raise TileError(
            f"--plan {path}: expected a list of objects with {', '.join(needed)}, at",
            hint='e.g. [{"workload": "swiglu", "config": {"warps": 4}, "predicted": 1.08, '
            '"at": "8192x8192 bf16"}] (or "size": [8192, 8192] for a shape the suite lacks)',
        )
    for p in plan:
        if "size" in p:
            p["size"] = parse_size(",".join(str(v) for v in p["size"]))
    return plan


def _plan_table(plan: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    from tilec.tune.space import config_text

    print("\npredicted against measured (the configuration's time over the heuristics'):")
    for entry in plan:
        got = next(
            (
                r["vs_heuristic"]
                for r in rows
                if r["workload"] == entry["workload"]
                and r["size"] == entry.get("at", r["size"])
                and (entry.get("size") is None or r["shape"] == entry["size"])
                and r["config"] == entry["config"]
            ),
            None,
        )
        shown = f"{got:.3f}" if got else "not measured"
        at = entry.get("at") or "x".join(map(str, entry["size"]))
        print(
            f"  {entry['workload']:<16} {at:<30} {config_text(entry['config']):<30} "
            f"predicted {entry['predicted']:.2f}  measured {shown}"
        )


def main(argv: list[str] | None = None) -> int:
    from tilec.benchmarks.report import replace_file
    from tilec.benchmarks.suite import WORKLOADS, select
    from tilec.diagnostics import TileError

    parser = argparse.ArgumentParser(prog="python -m tilec.benchmarks.ab", description=__doc__)
    parser.add_argument(
        "--only", help="workloads: substrings or globs, commas (with --plan: that part of it)"
    )
    parser.add_argument("--plan", help="a JSON file of predictions to measure (module doc)")
    parser.add_argument(
        "--config", action="append", default=[], help="a configuration to time (repeatable)"
    )
    parser.add_argument("--all-sizes", action="store_true", help="every full suite size")
    parser.add_argument(
        "--size", help="a shape the suite does not list, e.g. 16,11008,4096 (with --only)"
    )
    parser.add_argument("--dry-run", action="store_true", help="compile on the CPU, time nothing")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument(
        "--launches",
        type=int,
        default=0,
        help="launch each kernel this many times, untimed, for a profiler (no rows)",
    )
    args = parser.parse_args(argv)
    if args.plan is None and args.only is None:
        parser.error("give --only (with --config) or --plan")
    if args.plan is not None and args.config:
        parser.error("--config times configurations of --only; a plan names its own")
    try:
        if args.plan is not None:
            plan = load_plan(args.plan)
            if args.only is not None:  # a part of the plan, e.g. to split it across GPU calls
                chosen = set(select(args.only, [p["workload"] for p in plan]))
                plan = [p for p in plan if p["workload"] in chosen]
            jobs = [
                (p["workload"], [p["config"]], p.get("size") or p.get("all_sizes") or p["at"])
                for p in plan
            ]
        else:
            plan = []
            configs = [parse_config(text) for text in args.config]
            if not configs:
                parser.error("give at least one --config to compare with the heuristics' choice")
            which = parse_size(args.size) if args.size else args.all_sizes
            jobs = [(name, configs, which) for name in select(args.only, list(WORKLOADS))]
    except TileError as e:
        print(e.render(), file=sys.stderr)
        return 1
    except ValueError as e:
        parser.error(str(e))
    rows: list[dict[str, Any]] = []
    run = _dry_run if args.dry_run else _measure
    if args.launches > 0:
        run = lambda w, size, configs: _launch(w, size, configs, args.launches)  # noqa: E731
    # Every job is resolved before any is run: a plan with a bad entry measures nothing (GPU
    # time is not spent on the entries before it), and every bad entry is named at once.
    resolved, errors = [], []
    for name, configs, which in jobs:
        workload = WORKLOADS.get(name)
        if workload is None:
            errors.append(f"{name}: no such workload in the suite")
            continue
        if isinstance(which, tuple):
            arity = len(workload.sizes[0])
            if len(which) != arity:
                example = ",".join(map(str, workload.sizes[0]))
                errors.append(
                    f"{name}: a size has {arity} dimensions (e.g. {example}), got "
                    f"{','.join(map(str, which))}"
                )
                continue
            sizes: tuple = (which,)
        else:
            sizes = _sizes(workload, which) if isinstance(which, bool) else _named(workload, which)
        if not sizes:
            hint = ' (a shape the suite lacks is given as "size": [...])' if plan else ""
            errors.append(f"{name}: no suite size '{which}'{hint}")
            continue
        resolved.append((workload, configs, sizes))
    if errors:
        for text in errors:
            print(text, file=sys.stderr)
        return 1
    for workload, configs, sizes in resolved:
        for size in sizes:
            print(f"{workload.name} {workload.label(size)}", flush=True)
            try:
                rows += run(workload, size, configs)
            except Exception as e:  # one workload's failure is reported; the others run
                print(f"  FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            if args.json:  # after each size: a call cut off by its time limit keeps its rows
                replace_file(args.json, json.dumps(rows, indent=1, default=str) + "\n")
    if plan and not args.dry_run:
        _plan_table(plan, rows)
    if args.json and not rows:  # nothing ran: still the (empty) file asked for
        replace_file(args.json, "[]\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
