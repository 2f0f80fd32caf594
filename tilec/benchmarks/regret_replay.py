"""The heuristics' regret predicted on the CPU, from searches the GPU has already timed.

    python -m tilec.benchmarks.regret_replay [FILE.json ...] [--only PATTERN]

A regret run (`python -m tilec.benchmarks.regret`) records, per suite workload, every
candidate the tuner timed with the decisions it compiled to. The heuristics change after
it; whether a change helps is a question for the GPU, but where the heuristic's new choice
is a configuration the search already timed, the answer is in the record. For each search
of the given JSON files (default: every `docs/benchmarks/regret*.json`, a later file's
search of a workload and size replacing an earlier one's) this compiles the kernel, on the
CPU, as the suite would call it at that size (its arguments built on torch's meta device:
shapes, dtypes and strides, no data; on the CPU where the reference needs data), reads back the heuristic's decisions, and looks them
up among the recorded candidates:

    workload  size  then-heuristic ms  now: ms (the candidate with the same decisions)
    winner ms  predicted regret  what changed

A choice no recorded candidate made is reported as such ("not timed"), never guessed. The
recorded times are one run's on one GPU, of the code of that day: the prediction holds where
the code generated for those decisions has not changed since (a search recorded before a
lowering change replays that change's "before"), and a GPU session confirms it
(docs/benchmarks.md cites both). Searches recorded since 2026-12-05 keep each candidate's
code digest (`Build.code`: its PTX and ABI); where today's heuristic makes a recorded
candidate's decisions but compiles other code, the row says "code changed since" and is left
out of the geometric mean; older records have no digest, and the summary counts them as
unverified.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tilec.benchmarks.suite_core import EXAMPLES, Context, Implementation

__all__ = ["heuristic_build", "heuristic_decisions", "main", "problem_of", "replay"]

DOCS = EXAMPLES.parent / "docs" / "benchmarks"
# Decisions that only say how the search was set up, not what was compiled.
_IGNORED = frozenset()


class _Meta(Context):
    """The suite's context on torch's meta device: records what tilec's kernel is called with,
    builds nothing else."""

    captured: tuple | None = None

    def tilec(self, file: str, kernel: str, make: Callable, output: Any) -> Implementation:
        self.captured = (file, kernel, make, output)
        return Implementation("tilec", None, missing="replay")

    def compiled(self, function: Callable, inputs: Sequence[Any]) -> Implementation:
        return Implementation("torch.compile", None, missing="replay")


class _Arguments:
    """Stands in for the kernel: keeps the arguments a runner passes it."""

    def __init__(self) -> None:
        self.values: tuple = ()

    def __call__(self, *values: Any) -> None:
        self.values = values


def _described(value: Any) -> Any:
    """A meta (or CPU) tensor as GPU memory described by hand (a 1 MiB-aligned address that
    nothing reads: only its shape, strides, dtype and alignment reach the compiler)."""
    from tilec.runtime.arguments import DeviceTensor, _torch_dtype

    if type(value).__module__.startswith("torch") and not getattr(value, "is_cuda", True):
        return DeviceTensor(1 << 20, tuple(value.shape), value.stride(), _torch_dtype(value), 0)
    return value


def _meta_sets(make: Callable[[], Sequence[Any]], _bytes: int) -> list[Sequence[Any]]:
    return [make()]


def problem_of(workload: Any, size: tuple, arch: str = "sm_90a") -> Any:
    """The tuner's problem of `workload`'s kernel at `size`, as the suite calls it (built on
    the CPU: the arguments' shapes, dtypes, strides and alignment; nothing is run)."""
    import tilec.benchmarks.suite_core as core
    from tilec.jit import load_kernel
    from tilec.tune.api import problem_for_call

    context = _Meta(sets=_meta_sets, triton=None, triton_missing="replay")
    device = core.DEVICE
    try:
        core.DEVICE = "meta"
        case = workload.build(size, context)
    except NotImplementedError:  # an op of its reference has no meta kernel (bincount)
        core.DEVICE = "cpu"
        case = workload.build(size, context)
    finally:
        core.DEVICE = device
    if context.captured is None:
        raise RuntimeError(f"{workload.name}: the suite case has no tilec kernel")
    file, kernel, make, _output = context.captured
    function = load_kernel(EXAMPLES / file, kernel)
    arguments = _Arguments()
    make(arguments)(*case.sets[0])
    return problem_for_call(function, [_described(v) for v in arguments.values], arch=arch)


def heuristic_decisions(workload: Any, size: tuple, arch: str = "sm_90a") -> dict[str, Any]:
    """The decisions tilec's heuristics make today for `workload` at `size`, as the suite
    calls its kernel (compiled on the CPU; nothing is run)."""
    return heuristic_build(workload, size, arch)[0]


def heuristic_build(workload: Any, size: tuple, arch: str = "sm_90a") -> tuple[dict, str]:
    """`heuristic_decisions` and the digest of the code they compile to (`Build.code`)."""
    from tilec.tune.worker import build_candidate

    build = build_candidate(problem_of(workload, size, arch), {})
    if build.status == "pruned" or not build.decisions:
        raise RuntimeError(f"{workload.name}: the heuristic's build failed: {build.reason}")
    return dict(build.decisions), build.code


def _same(recorded: dict[str, Any], now: dict[str, Any], known: set[str]) -> bool:
    """Whether a recorded candidate made today's decisions: equal on every decision the
    record knows (one a candidate lacks -- a split of 1 reports none -- differs from one it
    has); decisions added since the record are not compared."""
    return all(recorded.get(k) == now.get(k) for k in known)


def _changed(before: dict[str, Any], now: dict[str, Any], known: set[str]) -> str:
    moved = [
        f"{k} {before.get(k)}->{now.get(k)}" for k in sorted(known) if before.get(k) != now.get(k)
    ]
    return ", ".join(moved) or "unchanged"


def replay(search: dict[str, Any], decisions: dict[str, Any], code: str = "") -> dict[str, Any]:
    """One recorded search against today's `decisions` (compiled to `code`, `Build.code`):
    the then-heuristic's time, the time of the recorded candidate that made today's
    decisions (None: none did), the winner's, the predicted regret, and whether that
    candidate's recorded code is today's ("same", "changed", or "unknown": no digest)."""
    timed = [c for c in search["candidates"] if c.get("status") == "ok" and c.get("ms")]
    before = search["heuristic"]
    known = {k for c in search["candidates"] for k in (c.get("decisions") or {})} - _IGNORED
    if _same(before.get("decisions") or {}, decisions, known):
        matched = [before]  # the same choice: its own time, not a luckier twin's
        now_ms = before["ms"]
    else:
        matched = sorted(
            (c for c in timed if _same(c.get("decisions") or {}, decisions, known)),
            key=lambda c: c["ms"],
        )
        now_ms = matched[len(matched) // 2]["ms"] if matched else None  # the twins' median
    digests = {c.get("code") for c in matched} - {None, ""}
    verdict = "unknown" if not digests or not code else "same" if code in digests else "changed"
    winner = search["winner"]["ms"]
    return {
        "workload": search.get("workload", search["kernel"]),
        "size": search.get("size", ""),
        "then_ms": before["ms"],
        "then_regret": search["regret"],
        "now_ms": now_ms,
        "winner_ms": winner,
        "predicted_regret": now_ms / winner if now_ms else None,
        "changed": _changed(before.get("decisions") or {}, decisions, known),
        "code": verdict,
    }


def _searches(files: Sequence[str]) -> list[dict[str, Any]]:
    """The searches of `files`, the last file's search of a (workload, size) kept."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for name in files:
        for search in json.loads(Path(name).read_text())["searches"]:
            key = (search.get("workload", search["kernel"]), search.get("size", ""))
            found.pop(key, None)
            found[key] = search
    return list(found.values())


def _size_of(workload: Any, label: str) -> tuple | None:
    for size in (*workload.sizes, *workload.quick, *workload.small):
        if workload.label(size) == label:
            return size
    return None


def main(argv: list[str] | None = None) -> int:
    from tilec.benchmarks.suite import WORKLOADS, select

    parser = argparse.ArgumentParser(
        prog="python -m tilec.benchmarks.regret_replay", description=__doc__
    )
    parser.add_argument("files", nargs="*", help="regret JSON files (default: docs/benchmarks)")
    parser.add_argument("--only", help="workloads: comma-separated substrings or globs")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    files = args.files or sorted(glob.glob(str(DOCS / "regret*.json")), key=_recorded_order)
    chosen = select(args.only, list(WORKLOADS)) if args.only else set(WORKLOADS)
    rows, regrets, then = [], [], []
    unverified = 0
    print(
        f"{'workload':<20} {'size':<34} {'then ms':>8} {'now ms':>8} {'best ms':>8} "
        f"{'regret then':>11} {'now':>6}  what changed"
    )
    for search in _searches(files):
        name = search.get("workload", search["kernel"])
        workload = WORKLOADS.get(name)
        if workload is None or name not in chosen:
            continue
        size = _size_of(workload, search.get("size", ""))
        if size is None:
            print(f"{name:<20} {search.get('size', ''):<34} (no such suite size any more)")
            continue
        try:
            decisions, code = heuristic_build(workload, size, search.get("arch", "sm_90a"))
        except Exception as e:  # one workload's failure is reported; the others go on
            print(f"{name:<20} {search.get('size', ''):<34} FAILED {type(e).__name__}: {e}")
            continue
        row = replay(search, decisions, code)
        rows.append(row)
        now = row["now_ms"] if row["code"] != "changed" else None
        if row["code"] == "changed":
            row["changed"] += "; code changed since (the recorded time is another kernel's)"
        now_text = f"{now:8.4f}" if now else "not timed"
        regret_text = f"{row['predicted_regret']:6.3f}" if now else "     ?"
        print(
            f"{row['workload']:<20} {row['size']:<34} {row['then_ms']:8.4f} "
            f"{now_text:>8} {row['winner_ms']:8.4f} {row['then_regret']:11.3f} "
            f"{regret_text}  {row['changed']}",
            flush=True,
        )
        if now:
            regrets.append(row["predicted_regret"])
            then.append(row["then_regret"])
            unverified += row["code"] == "unknown"
    if regrets:
        print(
            f"geomean regret over the {len(regrets)} searches whose new choice was timed: "
            f"then {_geomean(then):.3f}, now {_geomean(regrets):.3f} (worst {max(regrets):.3f}); "
            f"{unverified} of them recorded without code digests (the code of their decisions "
            "may have changed since: unverified)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def _recorded_order(name: str) -> float:
    """Files in the order their runs were made: their searches' `tuned_at` stamps."""
    stamps = [s.get("tuned_at") for s in json.loads(Path(name).read_text())["searches"]]
    stamps = [s for s in stamps if isinstance(s, (int, float))]
    return min(stamps, default=0.0)


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


if __name__ == "__main__":
    sys.exit(main())
