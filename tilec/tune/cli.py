"""`tilec tune FILE -k KERNEL --sizes M=...,N=...`: search a kernel's decisions on the GPU.

Prints the candidates table (time, spread, what each config compiled to, why the excluded ones
were), the heuristic's choice, the winner and the regret; `--emit-pins` adds the `@kernel(...)`
line that reproduces the winner without tuning. A winner found in the cache is printed as it
was measured (`--refresh` tunes again). `--sweep DECISION=V1,V2` times exactly the configs
given (every combination) instead of searching, and caches nothing: the one way to sweep
configurations. `--gpus all` times candidates on every GPU of the host in parallel.
docs/tuning.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from tilec.diagnostics import TileError

__all__ = ["add_arguments", "parse_budget", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help=".tile file holding the kernel")
    parser.add_argument(
        "-k", "--kernel", help="the kernel to tune (needed when the file has several)"
    )
    parser.add_argument(
        "--sizes",
        metavar="DIM=N,...",
        required=True,
        help="the extent of every dimension, e.g. --sizes M=4096,N=4096,K=4096",
    )
    parser.add_argument(
        "--budget",
        default="30s",
        help="wall time of the search, e.g. 30s, 2m, 90 (seconds; default 30s)",
    )
    parser.add_argument(
        "--max-candidates",
        type=int,
        default=0,
        metavar="N",
        help="compile at most N candidates (those the passes prune do not count; default: "
        "no limit)",
    )
    parser.add_argument(
        "--workers", type=int, default=0, help="compile processes (default: the CPUs, up to 8)"
    )
    parser.add_argument(
        "--gpus",
        metavar="all|0,1,...",
        default="",
        help="time candidates on these GPUs in parallel, one measuring process each; the final "
        "round, the winner and the regret on the first (default: the current GPU, in this "
        "process)",
    )
    parser.add_argument(
        "--emit-pins",
        action="store_true",
        help="print the winner as the @kernel(...) line to paste above the kernel",
    )
    parser.add_argument(
        "--clock",
        choices=("gpu", "fake"),
        default="gpu",
        help="gpu (default): time on the GPU with the benchmark's clock; fake: a "
        "deterministic stand-in that measures nothing (tests without a GPU)",
    )
    parser.add_argument("--arch", help="architecture to compile for (default: the GPU's)")
    parser.add_argument(
        "--reference",
        metavar="FILE.py",
        help="numpy reference to check candidates against (default: the example's "
        "foo_reference.py when it exists, else the heuristic's own output)",
    )
    parser.add_argument("--tile", metavar="DIM=SIZE,...", help="pin tile sizes (not searched)")
    parser.add_argument("--warps", type=int, help="pin the warps (not searched)")
    parser.add_argument("--stages", type=int, help="pin the pipeline stages (not searched)")
    parser.add_argument(
        "--dtype",
        metavar="PARAM=DTYPE,...",
        help="bind the kernel's dtype parameters, e.g. --dtype T=bf16 (default: the first "
        "dtype each lists); the search and its cache entry are the binding's",
    )
    parser.add_argument(
        "--pass-option",
        metavar="PASS.OPTION=VALUE",
        action="append",
        default=[],
        help="set a pass option (repeatable; not searched)",
    )
    parser.add_argument(
        "--sweep",
        metavar="DECISION=V1,V2,...",
        action="append",
        default=[],
        help="try exactly these values instead of searching (repeatable: every combination), "
        "e.g. --sweep tiling.group_m=1,4,8 --sweep warps=4,8",
    )
    parser.add_argument("--json", metavar="OUT", help="also write the search as JSON to OUT")
    parser.add_argument(
        "--refresh", action="store_true", help="tune again even when the cache holds a winner"
    )


def parse_budget(text: str) -> float:
    """`30s`, `2m`, `1.5` (seconds) as seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(ms|s|m|min)?\s*", text)
    if match is None or float(match.group(1)) <= 0:
        raise TileError(f"--budget: expected a time such as 30s or 2m, got '{text}'")
    scale = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0}[match.group(2) or "s"]
    return float(match.group(1)) * scale


def parse_sweep(items: list[str]) -> list[dict[str, object]]:
    """`["warps=4,8", "tiling.group_m=1,8"]` as every combination of the values."""
    import itertools

    axes: list[tuple[str, list[object]]] = []
    for item in items:
        name, eq, values = item.partition("=")
        texts = [v.strip() for v in values.split(",") if v.strip()]
        if not eq or not name.strip() or not texts:
            raise TileError(
                f"--sweep: expected DECISION=V1,V2,..., got '{item}'",
                hint="e.g. --sweep tiling.group_m=1,4,8 --sweep tile.M=64,128",
            )
        axes.append((name.strip(), [_value(t) for t in texts]))
    names = [name for name, _ in axes]
    return [dict(zip(names, combo)) for combo in itertools.product(*(v for _, v in axes))]


def _value(text: str) -> object:
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text, 0)
    except ValueError:
        return text


def run(args: argparse.Namespace) -> int:
    from tilec.cli import _integers, _pass_options, pinned_options
    from tilec.interp.runner import load_reference, reference_path
    from tilec.jit import load_kernel
    from tilec.tune.api import default_clock, problem_for, tune
    from tilec.tune.report import render
    from tilec.tune.search import Settings

    budget = parse_budget(args.budget)
    if args.max_candidates < 0:
        raise TileError("--max-candidates must be at least 1 (0: no limit)")
    sizes = _integers(args.sizes, "--sizes", "--sizes M=4096,N=4096,K=4096")
    options = pinned_options(args)
    pass_options = _pass_options(args.pass_option)
    function = load_kernel(args.file, args.kernel, pass_options=pass_options, **options)
    if args.reference is not None:
        reference = load_reference(args.reference)
    elif os.path.isfile(reference_path(args.file)):
        reference = load_reference(reference_path(args.file))
    else:
        reference = None
    # The reference's scalars: what the clock runs with, and so what the problem's
    # specialization says of them (a positive scale).
    scalars = getattr(reference, "SCALARS", {}).get(function.name) if reference else None
    problem = problem_for(function, sizes, arch=args.arch, scalars=scalars)
    clock = default_clock(args.clock, reference)
    settings = Settings(
        budget_s=budget,
        max_candidates=args.max_candidates,
        workers=args.workers,
        gpus=args.gpus.strip(),
    )
    if args.sweep:
        from tilec.tune.search import Tuner

        result = Tuner(settings).sweep(problem, clock, parse_sweep(args.sweep))
        entry = result.to_json()
    else:
        result, entry = tune(problem, clock, settings, refresh=args.refresh)
    if result is None:
        print("(the cached winner: --refresh tunes again)")
    sys.stdout.write(render(entry, emit_pins=args.emit_pins))
    if args.json:
        from tilec.cli import write_output

        write_output(json.dumps(entry, indent=1, default=str) + "\n", args.json)
    if result is not None and result.interrupted:
        print("interrupted: the measurements above are kept; nothing was cached", file=sys.stderr)
        return 130
    return 0
