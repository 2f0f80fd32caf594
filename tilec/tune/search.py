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
no state of the parent leaks in) while those already built are checked and timed as they
arrive: by the parent's own clock, one at a time, or — given several GPUs (`Settings.gpus`) —
by one measuring process per GPU, each built candidate dealt to a free one
(`tilec.tune.devices`). A candidate that a pass refuses is *pruned* with the pass's reason;
one whose lowering fails, whose worker dies (*crashed*: it is retried alone to find which),
or that compiles past `compile_timeout_s` (*timeout*) is recorded and excluded, as is one
whose measuring process dies (*crashed*: the process is started again); one whose output is
wrong is never timed. Two configs that give the same code are one kernel: the second takes
the first's outcome and is not measured again.

Over several GPUs, times from every GPU rank candidates during the descent (each GPU's scaled
by its time for the heuristic), but the last round times every finalist on the first GPU, and
the winner and the regret come from that GPU's times alone: GPUs of one host differ by a few
percent in clocks and thermals, which must not decide the winner. (When the budget stops the
search, the finalists timed elsewhere are still timed once on the first GPU.)

The budget (`budget_s` of wall time, `max_candidates` compiled) stops the search between
candidates; Ctrl-C stops it at once, keeping every measurement made (`interrupted`).
"""

from __future__ import annotations

import concurrent.futures as futures
import math
import multiprocessing
import os
import queue
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tilec.diagnostics import TileError
from tilec.tune.clock import Clock
from tilec.tune.devices import Outcome, open_devices
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
    # The GPUs to time on: () the current one, in this process; "all", "0,1" or [0, 1]: a
    # measuring process on each, the final round on the first (`tilec.tune.devices`).
    gpus: Sequence[int] | str = ()


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
    device: int | None = None  # the GPU its `times` are from (None: the tuner's own process)
    # A finalist ranked on another GPU than the final round's: that GPU and its times there.
    descent_device: int | None = None
    descent_times: list[float] = field(default_factory=list)

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
            # A digest of the PTX and ABI (`Build.code`): whether the code of these decisions
            # has changed since (`tilec.benchmarks.regret_replay`).
            "code": self.code,
            "device": self.device,
            "descent_device": self.descent_device,
            "descent_ms": statistics.median(self.descent_times) if self.descent_times else None,
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
    gpus: list[dict[str, Any]] | None = None  # each GPU timed on, and its times' scale

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
            # The binding of its dtype parameters, where it has some (`--dtype T=bf16`).
            "dtypes": dict((self.problem.options or {}).get("dtypes") or {}),
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
            "gpus": self.gpus,
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
        # The first candidate of each code: None while it is being measured.
        self.codes: dict[str, Candidate | None] = {}
        self._builds: dict[int, Build] = {}
        self.frontend_attributes: set[str] = set()
        self.start = time.perf_counter()
        # Compiles finished and outcomes of the devices, in the order they happen.
        self.events: queue.Queue = queue.Queue()
        self.tickets = 0
        self.devices = open_devices(clock, s.gpus, self.events)
        self.progress = _Progress(problem.kernel, s) if s.progress else None
        stopped = "converged"
        searched: list[str] = []
        self.pool: futures.ProcessPoolExecutor | None = None
        try:
            self.pool = self._new_pool()
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
            self._final_round(heuristic, spent=stopped == "budget")
        except _Stop as stop:
            stopped = stop.why
        except KeyboardInterrupt:
            stopped = "interrupted"
        finally:
            self._shutdown()
            self.devices.close()
            if self.progress is not None:
                self.progress.close()
        if not self.candidates:  # stopped before the heuristic's kernel was measured
            if stopped == "interrupted":
                raise KeyboardInterrupt
            raise TileError(f"the search stopped ({stopped}) before the heuristic was measured")
        heuristic = self.candidates[0]
        # The winner from one clock: the first GPU's times (the final round's).
        first = self.devices.first
        timed = [c for c in self.candidates if c.status == "ok" and c.timed and c.device == first]
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
            self.devices.gpus(),
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

    def _final_round(self, heuristic: Candidate, spent: bool = False) -> None:
        """The finalists timed again on the first GPU, which ranks them. A finalist ranked on
        another GPU is first timed on the first, its times there replacing the others (kept as
        `descent_times`), even when the budget is spent: the winner comes from one clock."""
        ranked = sorted(
            (c for c in self.candidates if c.status == "ok" and c.timed), key=lambda c: c.ms
        )
        finalists = ranked[: self.settings.finalists]
        if heuristic not in finalists:
            finalists.append(heuristic)
        first = self.devices.first
        for candidate in finalists:
            if candidate.device != first:
                candidate.descent_device, candidate.descent_times = (
                    candidate.device,
                    candidate.times,
                )
                candidate.times, candidate.device = [], first
                self._time_again(candidate)
        if spent or len(finalists) < 2:
            return
        for candidate in finalists:
            if candidate.status == "ok":
                self._check_budget(final=True)
                self._time_again(candidate)

    def _time_again(self, candidate: Candidate) -> None:
        outcome = self.devices.time_on_first(self._builds[candidate.index])
        if outcome.status == "ok":
            candidate.times += outcome.times
            return
        # A finalist that fails when timed again cannot win.
        candidate.status = outcome.status
        candidate.reason = f"timed again: {outcome.reason}"

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
        """Compile `configs` in the workers, and check and time each on a free device as it
        is built; the candidates, in the order their outcomes came. `prepare`: the heuristic's
        batch, which starts the devices; the budget does not stop it (its kernel is the
        search's reference: a budget spent before it is measured, on a loaded machine, would
        leave nothing to report)."""
        s = self.settings
        fresh = [c for c in configs if config_key(c) not in self.tried]
        if s.max_candidates:
            fresh = fresh[: max(s.max_candidates - self._counted(), 0)]
        budgeted = not prepare
        if budgeted:
            self._check_budget()
        if not fresh:
            return []
        self.batch: list[Candidate] = []
        self.compiling: dict[futures.Future, tuple[dict, bool]] = {}  # -> (config, alone)
        self.alone: list[dict] = []  # configs whose pool broke: compiled one at a time
        self.built: deque[Build] = deque()  # waiting for a free device
        self.measuring: dict[int, Build] = {}  # by ticket
        self.same_code: dict[str, list[Build]] = {}  # waiting for the outcome of their code
        for config in fresh:
            self._compile(config, alone=False)
        last_compile = time.perf_counter()
        while self.compiling or self.alone or self.built or self.measuring:
            if not self.compiling and self.alone:
                self._restart_pool()
                self._compile(self.alone.pop(0), alone=True)
                last_compile = time.perf_counter()
            while self.built and self.devices.free():
                self.tickets += 1
                self.measuring[self.tickets] = build = self.built.popleft()
                self.devices.measure(self.tickets, build)
            now = time.perf_counter()
            wait = s.budget_s - (now - self.start) if budgeted else 1.0
            if self.compiling:
                wait = min(wait, s.compile_timeout_s - (now - last_compile))
            try:
                event = self.events.get(timeout=max(wait, 0.01))
            except queue.Empty:
                now = time.perf_counter()
                if budgeted and now - self.start > s.budget_s:
                    for f in self.compiling:
                        f.cancel()
                    raise _Stop("budget") from None
                if self.compiling and now - last_compile >= s.compile_timeout_s:
                    self._abandon_compiles()
                    last_compile = now
                continue
            if event[0] != "compiled":
                for ticket, outcome in self.devices.handle(event):
                    self._measured(ticket, outcome)
                continue
            entry = self.compiling.pop(event[1], None)
            if entry is None:
                continue  # a compile abandoned with its pool
            last_compile = time.perf_counter()
            config, alone = entry
            try:
                build = event[1].result()
            except futures.process.BrokenProcessPool:
                if alone:
                    build = Build(config, "crashed", "the compiling worker process died")
                else:
                    self._pool_broke(config)
                    continue
            except Exception as e:
                build = Build(config, "failed", f"worker: {type(e).__name__}: {e}")
            self._built(build, prepare)
        return self.batch

    def _compile(self, config: dict, alone: bool) -> None:
        future = self.pool.submit(self.settings.builder, self.problem, config)
        self.compiling[future] = (config, alone)
        future.add_done_callback(lambda f, events=self.events: events.put(("compiled", f)))

    def _pool_broke(self, config: dict) -> None:
        """A worker died: `config` and every compile not finished go to be compiled alone, so
        that the one that kills its worker is found (and recorded as crashed)."""
        self.alone.append(config)
        for f, (other, _) in list(self.compiling.items()):
            if not (f.done() and not f.cancelled() and f.exception() is None):
                del self.compiling[f]
                self.alone.append(other)

    def _abandon_compiles(self) -> None:
        """The compiles under way ran past the limit (when none shows as started, the pool is
        stuck: every one left is abandoned); the rest go to a new pool."""
        limit = self.settings.compile_timeout_s
        running = [f for f in self.compiling if f.running()] or list(self.compiling)
        for f in running:
            config, _ = self.compiling.pop(f)
            self._record(Build(config, "timeout", f"compile ran past {limit:g} s"))
        rest = list(self.compiling.values())
        self.compiling = {}
        self._restart_pool()
        for config, alone in rest:
            self._compile(config, alone)

    def _built(self, build: Build, heuristic: bool) -> None:
        """A build back from its worker: recorded when it was not built, measured first on
        every device when it is the heuristic's, else queued for a device (or for the outcome
        of the same code, when one is being measured)."""
        if build.status != "built":
            self._record(build)
            return
        if heuristic:
            outcome = self.devices.start(self.problem, build, self.start + self.settings.budget_s)
            self.frontend_attributes = _frontend_attributes(self.problem)
            self._outcome(self._record(build), outcome)
            return
        if build.code in self.codes:
            same = self.codes[build.code]
            if same is None:
                self.same_code.setdefault(build.code, []).append(build)
            else:
                self._same_as(self._record(build), same)
            return
        self.codes[build.code] = None
        self.built.append(build)

    def _measured(self, ticket: int, outcome: Outcome) -> None:
        build = self.measuring.pop(ticket, None)
        if build is None:
            return  # abandoned when the budget ran out
        candidate = self._record(build)
        self._outcome(candidate, outcome)
        for twin in self.same_code.pop(build.code, []):
            self._same_as(self._record(twin), candidate)

    def _outcome(self, candidate: Candidate, outcome: Outcome) -> None:
        candidate.status, candidate.reason = outcome.status, outcome.reason
        candidate.times, candidate.device = list(outcome.times), outcome.device
        self.codes[candidate.code] = candidate
        if self.progress is not None:
            self.progress.update(self)

    def _same_as(self, candidate: Candidate, same: Candidate) -> None:
        """`candidate` is the same code as `same`: it takes its outcome."""
        candidate.same_as = same.index
        candidate.reason = f"the same code as #{same.index}"
        if same.status == "ok":
            candidate.status = "duplicate"
            candidate.times, candidate.device = list(same.times), same.device
        else:
            candidate.status = same.status
            candidate.reason += f": {same.reason}"

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
        self.batch.append(candidate)
        self.tried[config_key(build.config)] = candidate
        self._builds[candidate.index] = build
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
        pool = getattr(self, "pool", None)
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())
        for process in processes:
            process.kill()
        for process in processes:
            process.join(timeout=10)
        # A worker killed while it wrote its result leaves half a message in the result pipe:
        # the executor's manager thread then waits in `recv` for the rest for ever, and
        # `shutdown(wait=True)` with it (CPython 3.11; the Ctrl-C test hung so, one run in a
        # few). With the workers gone, closing this process's copy of the pipe's write end
        # turns that wait into end-of-file, which the executor takes for a broken pool.
        writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
        if writer is not None:
            writer.close()
        pool.shutdown(wait=True, cancel_futures=True)

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
