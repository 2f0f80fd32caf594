"""The search: from the heuristic's choice, one decision at a time, within a budget.

    result = Tuner(Settings(budget_s=30)).run(problem, clock)

1. The heuristic's own choice (config `{}`) is compiled, checked (its output becomes the
   reference unless a numpy reference is given) and timed. When even it does not compile, no
   candidate can: the search stops with that error (a `TileError` naming the constraint).
2. *Coordinate descent*: for each decision the kernel has (`space.applicable`), every other
   value of it, nearest first, is tried with the rest of the best config so far; the best
   candidate that beats the incumbent by more than `min_gain` becomes the incumbent. Sweeps
   repeat until one changes nothing.
3. *Successive halving*, in its last round: the fastest candidates (`finalists`, plus the
   heuristic) are timed once more, interleaved, and ranked by the median of all their
   rounds, so that the winner is not a lucky first measurement.

Candidates of one sweep compile in parallel worker processes (`ProcessPoolExecutor`, spawn:
no state of the parent leaks in) while the parent checks and times those already built, one at
a time. A candidate that a pass refuses is *pruned* with the pass's reason; one whose lowering
fails, whose worker dies (*crashed*: it is retried alone to find which), or that compiles past
`compile_timeout_s` (*timeout*) is recorded and excluded; one whose output is wrong is never
timed. Two configs that give the same PTX are one kernel: the second is not timed again.

The budget (`budget_s` of wall time, `max_candidates` compiled) stops the search between
candidates; Ctrl-C stops it at once, keeping every measurement made (`interrupted`).
"""

from __future__ import annotations

import concurrent.futures as futures
import math
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tilec.diagnostics import TileError
from tilec.tune.clock import Clock
from tilec.tune.space import Decision, applicable, current_value
from tilec.tune.worker import Build, Problem, build_candidate, config_key

__all__ = ["Candidate", "Settings", "TuneResult", "Tuner"]


@dataclass
class Settings:
    """How long and how widely to search."""

    budget_s: float = 30.0  # wall time of the whole search
    max_candidates: int = 0  # candidates compiled at most (0: no limit)
    workers: int = 0  # compile processes (0: the CPUs, at most 8)
    compile_timeout_s: float = 120.0  # a compile that runs longer is abandoned
    min_gain: float = 0.01  # a new incumbent must be this much faster
    finalists: int = 3  # candidates timed again at the end
    progress: bool = True  # a rich progress bar on a terminal
    builder: Callable[[Problem, dict], Build] = build_candidate  # tests inject their own
    # `@tilec.jit(autotune=Settings(...))`: the clock for a call's arguments (None: the GPU's,
    # on copies of them).
    clock: Callable[[Sequence[Any]], Clock] | None = None


@dataclass
class Candidate:
    """One configuration tried, and what became of it. `status`: "ok" (timed), "pruned",
    "failed", "wrong", "crashed", "timeout", "duplicate" (the same code as `same_as`)."""

    index: int
    config: dict[str, Any]
    status: str
    reason: str = ""
    decisions: dict[str, Any] = field(default_factory=dict)
    times: list[float] = field(default_factory=list)
    compile_s: float = 0.0
    same_as: int | None = None
    code: str = ""

    @property
    def ms(self) -> float:
        return statistics.median(self.times) if self.times else math.nan

    @property
    def spread(self) -> float:
        return max(self.times) / min(self.times) if self.times else math.nan

    @property
    def timed(self) -> bool:
        return self.status in ("ok", "duplicate") and bool(self.times)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "config": self.config,
            "status": self.status,
            "reason": self.reason,
            "decisions": self.decisions,
            "ms": None if math.isnan(self.ms) else self.ms,
            "spread": None if math.isnan(self.spread) else self.spread,
            "compile_s": self.compile_s,
            "same_as": self.same_as,
        }


@dataclass
class TuneResult:
    """A finished (or interrupted) search."""

    problem: Problem
    clock: str
    candidates: list[Candidate]
    heuristic: Candidate
    winner: Candidate
    searched: list[str]  # the decisions searched
    elapsed_s: float
    stopped: str  # "converged" ("swept": `Tuner.sweep`), "budget", "max-candidates", "interrupted"

    @property
    def interrupted(self) -> bool:
        return self.stopped == "interrupted"

    @property
    def regret(self) -> float:
        """The heuristic's time over the winner's (1.0: the heuristic was the best found)."""
        return self.heuristic.ms / self.winner.ms

    @property
    def pins(self) -> dict[str, Any]:
        return dict(self.winner.config)

    def candidate_for(self, config: dict[str, Any]) -> Candidate | None:
        """The candidate tried with exactly `config` (None: not tried)."""
        return next((c for c in self.candidates if c.config == dict(config)), None)

    def outcome(self, config: dict[str, Any], width: int = 60) -> tuple[float | None, str]:
        """`(ms, "")` for a timed `config` (`{}`: the heuristic's), else `(None, why)`: "not
        run", "WRONG", or its status and the first `width` characters of its reason."""
        candidate = self.heuristic if not config else self.candidate_for(config)
        if candidate is not None and candidate.timed:
            return candidate.ms, ""
        if candidate is None:
            return None, "not run"
        if candidate.status == "wrong":
            return None, "WRONG"
        reason = candidate.reason.splitlines()[0][:width] if candidate.reason else ""
        return None, f"{candidate.status}: {reason}" if reason else candidate.status

    @property
    def compiled(self) -> int:
        return sum(1 for c in self.candidates if c.status not in ("pruned",))

    @property
    def candidates_per_s(self) -> float:
        return len(self.candidates) / self.elapsed_s if self.elapsed_s > 0 else math.nan

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.problem.kernel,
            "file": self.problem.filename,
            "sizes": dict(self.problem.extents),
            "arch": self.problem.arch,
            "clock": self.clock,
            "pins": self.pins,
            "winner": self.winner.to_json(),
            "heuristic": self.heuristic.to_json(),
            "regret": self.regret,
            "searched": self.searched,
            "candidates": [c.to_json() for c in self.candidates],
            "elapsed_s": self.elapsed_s,
            "candidates_per_s": self.candidates_per_s,
            "stopped": self.stopped,
            "tuned_at": time.time(),
        }


class _Stop(Exception):
    """The budget is spent."""

    def __init__(self, why: str):
        self.why = why


class Tuner:
    """Runs searches (module docstring) with its `Settings`."""

    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings()

    def run(self, problem: Problem, clock: Clock) -> TuneResult:
        """Search from the heuristic's choice (module docstring)."""
        return self._search(problem, clock, None)

    def sweep(self, problem: Problem, clock: Clock, configs: Sequence[dict]) -> TuneResult:
        """Try exactly `configs` (after the heuristic's choice, which is the reference), all
        of them within the budget: what a probe of a few pass options is, as a search."""
        return self._search(problem, clock, [dict(c) for c in configs])

    def _search(self, problem: Problem, clock: Clock, configs: list[dict] | None) -> TuneResult:
        s = self.settings
        self.problem, self.clock = problem, clock
        self.candidates: list[Candidate] = []
        self.tried: dict[str, Candidate] = {}
        self.codes: dict[str, Candidate] = {}
        self._builds: dict[int, Build] = {}
        self.frontend_attributes: set[str] = set()
        self.start = time.perf_counter()
        self.progress = _Progress(problem.kernel, s) if s.progress else None
        self.pool = self._new_pool()
        stopped = "converged"
        searched: list[str] = []
        try:
            heuristic = self._evaluate([{}], prepare=True)[0]
            if not heuristic.timed:
                raise TileError(
                    f"nothing to tune: the heuristics' own configuration of '{problem.kernel}' "
                    f"is {heuristic.status}: {heuristic.reason}",
                    hint="an empty search space: relax the pins, or choose smaller sizes"
                    if heuristic.status == "pruned"
                    else "the kernel the heuristics choose does not work here: the search "
                    "needs it as its starting point and reference",
                )
            try:
                if configs is None:
                    decisions = self._decisions(heuristic)
                    searched = [d.name for d in decisions]
                    self._descend(heuristic, decisions)
                else:
                    searched = sorted({name for c in configs for name in c})
                    stopped = "swept"
                    self._evaluate(configs)
            except _Stop as stop:
                stopped = stop.why
            if stopped != "budget":
                self._final_round(heuristic)
        except _Stop as stop:
            stopped = stop.why
        except KeyboardInterrupt:
            stopped = "interrupted"
        finally:
            self._shutdown()
            if self.progress is not None:
                self.progress.close()
        heuristic = self.candidates[0]
        timed = [c for c in self.candidates if c.timed and c.status == "ok"]
        winner = min(timed, key=lambda c: c.ms) if timed else heuristic
        return TuneResult(
            problem,
            clock.name,
            self.candidates,
            heuristic,
            winner,
            searched,
            time.perf_counter() - self.start,
            stopped,
        )

    # -- the search ---------------------------------------------------------------------------

    def _decisions(self, heuristic: Candidate) -> list[Decision]:
        from tilec.ir.parser import parse_module

        build = self._builds[heuristic.index]
        kernel = parse_module(build.ir, self.problem.filename).functions[0]
        from tilec.tune.worker import make_function

        fixed = [f"tile.{d}" for d in self.problem.options.get("tile", {})]
        # A dimension used whole has no tile size to pin (its tile covers the extent).
        fixed += [f"tile.{d}" for d in make_function(self.problem, {})._whole_dims]
        fixed += [n for n in ("warps", "stages", "split") if n in self.problem.options]
        fixed += [f"{p}.{o}" for p, values in self.problem.pass_options.items() for o in values]
        pinned = kernel.attributes.get("tilec.pinned_tiles")
        fixed += [f"tile.{str(s)[1:]}" for s, _ in (pinned.value if pinned is not None else ())]
        for name in ("num_warps", "num_stages", "pinned_split"):
            if f"tilec.{name}" in self.frontend_attributes:
                fixed.append({"num_warps": "warps", "num_stages": "stages"}.get(name, "split"))
        return applicable(kernel, self.problem.extents, self.problem.arch, fixed=fixed)

    def _descend(self, heuristic: Candidate, decisions: Sequence[Decision]) -> None:
        best = heuristic
        changed = True
        while changed:
            changed = False
            for decision in decisions:
                now = current_value(decision, best.config, best.decisions)
                configs = [{**best.config, decision.name: v} for v in decision.nearest_first(now)]
                tried = [c for c in self._evaluate(configs) if c.timed]
                if not tried:
                    continue
                fastest = min(tried, key=lambda c: c.ms)
                if fastest.ms < best.ms * (1 - self.settings.min_gain):
                    best, changed = fastest, True

    def _final_round(self, heuristic: Candidate) -> None:
        ranked = sorted(
            (c for c in self.candidates if c.status == "ok" and c.timed), key=lambda c: c.ms
        )
        finalists = ranked[: self.settings.finalists]
        if heuristic not in finalists:
            finalists.append(heuristic)
        if len(finalists) < 2:
            return
        for candidate in finalists:
            self._check_budget(final=True)
            candidate.times += self.clock.time(self._builds[candidate.index])

    # -- compiling and measuring --------------------------------------------------------------

    def _check_budget(self, final: bool = False) -> None:
        s = self.settings
        if time.perf_counter() - self.start > s.budget_s:
            raise _Stop("budget")
        if not final and s.max_candidates and self._counted() >= s.max_candidates:
            raise _Stop("max-candidates")

    def _counted(self) -> int:
        """Candidates that count against `max_candidates`: all but those the passes pruned
        (a prune costs a pass pipeline, not a lowering and a measurement)."""
        return sum(1 for c in self.candidates if c.status != "pruned")

    def _evaluate(self, configs: Sequence[dict], prepare: bool = False) -> list[Candidate]:
        """Compile `configs` in the workers, then check and time each as it is built."""
        s = self.settings
        fresh = []
        for config in configs:
            if config_key(config) in self.tried:
                continue
            fresh.append(config)
        if s.max_candidates:
            fresh = fresh[: max(s.max_candidates - self._counted(), 0)]
        if not fresh:
            self._check_budget()
            return []
        self._check_budget()
        pending = {self.pool.submit(s.builder, self.problem, c): c for c in fresh}
        results: list[Candidate] = []
        alone: list[dict] = []
        while pending:
            left = s.budget_s - (time.perf_counter() - self.start)
            done, _ = futures.wait(
                pending,
                timeout=max(min(left, s.compile_timeout_s), 0.01),
                return_when=futures.FIRST_COMPLETED,
            )
            if not done:
                if time.perf_counter() - self.start > s.budget_s:
                    for f in pending:
                        f.cancel()
                    raise _Stop("budget")
                # The compiles under way ran past the limit (when none shows as started, the
                # pool is stuck: every one left is abandoned).
                running = [f for f in pending if f.running()] or list(pending)
                for f in running:
                    results.append(self._record(Build(pending.pop(f), "timeout")))
                    results[-1].reason = f"compile ran past {s.compile_timeout_s:g} s"
                rest = list(pending.values())
                self._restart_pool()
                pending = {self.pool.submit(s.builder, self.problem, c): c for c in rest}
                continue
            for f in done:
                config = pending.pop(f)
                try:
                    build = f.result()
                except futures.process.BrokenProcessPool:
                    alone.append(config)
                    continue
                except Exception as e:
                    build = Build(config, "failed", f"worker: {type(e).__name__}: {e}")
                results.append(self._measure(build, prepare and not results))
            if alone and pending:
                alone += list(pending.values())
                pending = {}
        if alone:
            results += self._retry_alone(alone)
        return results

    def _retry_alone(self, configs: list[dict]) -> list[Candidate]:
        """Configs whose worker pool broke: each compiled alone, so the one that kills its
        worker is found (and recorded as crashed) and the others are measured."""
        results = []
        for config in configs:
            self._restart_pool()
            try:
                build = self.pool.submit(self.settings.builder, self.problem, config).result(
                    timeout=self.settings.compile_timeout_s
                )
            except futures.process.BrokenProcessPool:
                build = Build(config, "crashed", "the compiling worker process died")
            except futures.TimeoutError:
                build = Build(
                    config, "timeout", f"compile ran past {self.settings.compile_timeout_s:g} s"
                )
            results.append(self._measure(build, False))
        return results

    def _record(self, build: Build) -> Candidate:
        candidate = Candidate(
            len(self.candidates),
            dict(build.config),
            build.status,
            build.reason,
            dict(build.decisions),
            compile_s=build.compile_s,
            code=build.code,
        )
        self.candidates.append(candidate)
        self.tried[config_key(build.config)] = candidate
        self._builds[candidate.index] = build
        if self.progress is not None:
            self.progress.update(self)
        return candidate

    def _measure(self, build: Build, heuristic: bool) -> Candidate:
        if heuristic and build.status == "built":
            self.clock.prepare(self.problem, build)
            self.frontend_attributes = _frontend_attributes(self.problem)
        candidate = self._record(build)
        if build.status != "built":
            return candidate
        same = self.codes.get(build.code)
        if same is not None:
            candidate.status, candidate.same_as = "duplicate", same.index
            candidate.reason = f"the same code as #{same.index}"
            candidate.times = list(same.times)
            return candidate
        try:
            wrong = self.clock.check(build)
        except Exception as e:
            candidate.status, candidate.reason = "failed", f"run: {type(e).__name__}: {e}"[:300]
            return candidate
        if wrong is not None:
            candidate.status, candidate.reason = "wrong", wrong
            return candidate
        try:
            candidate.times = list(self.clock.time(build))
        except Exception as e:
            candidate.status, candidate.reason = "failed", f"timing: {type(e).__name__}: {e}"[:300]
            return candidate
        candidate.status = "ok"
        self.codes[build.code] = candidate
        if self.progress is not None:
            self.progress.update(self)
        return candidate

    # -- the worker pool ----------------------------------------------------------------------

    def _new_pool(self) -> futures.ProcessPoolExecutor:
        workers = self.settings.workers or min(os.cpu_count() or 1, 8)
        return futures.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn")
        )

    def _shutdown(self) -> None:
        # Killing is safe: a worker only compiles (its kernel-cache writes are atomic), and
        # waiting for an abandoned compile would hold up Ctrl-C and the budget.
        for process in list(getattr(self.pool, "_processes", {}).values()):
            process.kill()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def _restart_pool(self) -> None:
        self._shutdown()
        self.pool = self._new_pool()


def _frontend_attributes(problem: Problem) -> set[str]:
    """The attributes the frontend puts on the kernel: which decisions its source pins."""
    from tilec.tune.worker import make_function

    kernel = make_function(problem, {}).ir.functions[0]
    return set(kernel.attributes)


class _Progress:
    """rich's progress bar, on a terminal: candidates tried, the best so far, and an ETA from
    whichever of the budget and `max_candidates` runs out first."""

    def __init__(self, kernel: str, settings: Settings):
        self.bar = None
        self.settings = settings
        if not sys.stderr.isatty():
            return
        try:
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
        except ImportError:
            return
        self.kernel = kernel
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            transient=True,
        )
        self.bar.start()
        self.task = self.bar.add_task(f"tuning {kernel}", total=1000)

    def update(self, tuner: Tuner) -> None:
        if self.bar is None:
            return
        s = self.settings
        done = (time.perf_counter() - tuner.start) / s.budget_s
        if s.max_candidates:
            done = max(done, len(tuner.candidates) / s.max_candidates)
        timed = [c for c in tuner.candidates if c.status == "ok"]
        best = f", best {min(c.ms for c in timed):.4g} ms" if timed else ""
        description = f"tuning {self.kernel}: {len(tuner.candidates)} candidates{best}"
        self.bar.update(self.task, completed=min(done, 1.0) * 1000, description=description)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
