"""The tuner's entry points: a problem from a kernel and sizes, a search through the cache.

    from tilec.tune import problem_for, tune
    problem = problem_for(load_kernel("examples/matmul.tile", "matmul"), {"M": 4096, ...})
    result = tune(problem, clock)             # a TuneResult; the winner is cached

`tune` looks the problem up in the cache first (`tilec.tune.cache`) and searches only on a
miss (or with `refresh=True`); an interrupted search is returned as it stands and not cached.
`tuned_pins` is what `@tilec.jit(autotune=True)` asks at a specialization's first call.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from typing import Any

from tilec.cache import entry_lock, lock_path
from tilec.tune import cache
from tilec.tune.clock import Clock, FakeClock
from tilec.tune.search import Settings, Tuner, TuneResult
from tilec.tune.worker import Problem, make_function

__all__ = [
    "fake_cost",
    "problem_for",
    "problem_for_call",
    "runner_problem",
    "sweep_runner",
    "tune",
    "tune_key",
    "tuned_pins",
]


def problem_for(
    function: Any,
    extents: Mapping[str, int],
    *,
    arch: str | None = None,
    specialization: Any = None,
    scalars: Mapping[str, Any] | None = None,
) -> Problem:
    """The problem of tuning `function` (a `JitFunction`) at `extents` (every dimension of its
    parameters). `specialization`: the arguments' facts (default: contiguous, 16-byte aligned
    tensors, as numpy arrays of these shapes give, and the scalars `scalars` -- a reference's
    `SCALARS`, what the clock runs with -- or random ones: a positive `scale` is a fact)."""
    from tilec.interp.runner import check_sizes, random_arguments
    from tilec.lowering.ptx import default_arch

    kernel = function.ir.functions[0]
    if specialization is None:
        # Checks the sizes (every dimension, no other) with located errors, as `tilec run`
        # does, and gives the arguments whose facts the specialization records.
        values = random_arguments(kernel, extents, seed=0, scalars=scalars)
        specialization = function.specialization_of(function._checker.convert(values))
    else:  # the call's own arguments gave the facts: only the sizes are checked, no copy made
        check_sizes(kernel, extents)
    extents = {d.upper(): int(n) for d, n in extents.items()}
    source = function.source
    options = dict(function.options)
    return Problem(
        source.text,
        source.filename,
        function.name,
        dict(extents),
        arch or default_arch(),
        specialization.to_json(),
        source.line_offset,
        source.col_offset,
        options,
        {k: dict(v) for k, v in function.pass_options.items()},
        tuple(function.disable),
    )


def problem_for_call(function: Any, values: Any, *, arch: str | None = None) -> Problem:
    """The problem of tuning `function` for a call with these arguments (GPU tensors in the
    layout the call passes them: strides, alignment, extents)."""
    arguments = function._checker.convert(list(values))
    specialization = function.specialization_of(arguments)
    if arch is None and arguments.device is not None:
        from tilec.runtime import device_arch, get_device

        arch = device_arch(get_device(arguments.device))
    return problem_for(function, dict(arguments.extents), arch=arch, specialization=specialization)


class _Recording:
    """Stands in for a kernel while a caller's runner is called once: records the arguments
    the runner passes it, so that the problem has the call's extents and specialization."""

    def __init__(self, function: Any):
        self.function = function
        self.arguments: tuple = ()

    def __call__(self, *args: Any) -> None:
        self.arguments = args
        self.function(*args)


def runner_problem(function: Any, make: Any, inputs: Any) -> Problem:
    """The problem of `function` as `make(kernel)(*inputs)` calls it (one call, now)."""
    recording = _Recording(function)
    make(recording)(*inputs)
    return problem_for_call(function, recording.arguments)


def sweep_runner(
    function: Any,
    make: Any,
    sets: Any,
    configs: Any,
    *,
    right: Any = None,
    output: Any = None,
    rounds: int = 1,
    budget_s: float = 3600.0,
) -> TuneResult:
    """Time exactly `configs` of `function` (after the heuristic's choice) in a caller's
    harness (`RunnerClock`): the probes' sweeps, as tuner searches. Not cached."""
    from tilec.tune.clock import RunnerClock

    problem = runner_problem(function, make, sets[0])
    clock = RunnerClock(make, sets, right=right, output=output, rounds=rounds)
    settings = Settings(budget_s=budget_s, progress=False, finalists=0)
    return Tuner(settings).sweep(problem, clock, configs)


def tune_key(problem: Problem, clock: Clock) -> cache.TuneKey:
    options = {
        "options": problem.options,
        "pass_options": problem.pass_options,
        "disable": list(problem.disable),
    }
    specialization = {"facts": problem.specialization, "extents": dict(problem.extents)}
    return cache.TuneKey(
        problem.text,
        problem.kernel,
        json.dumps(options, sort_keys=True, default=str),
        json.dumps(specialization, sort_keys=True, default=str),
        problem.arch,
        clock.device,
        clock.driver,
        clock.name,
    )


def tune(
    problem: Problem,
    clock: Clock,
    settings: Settings | None = None,
    *,
    refresh: bool = False,
) -> tuple[TuneResult | None, dict[str, Any]]:
    """`(result, entry)`: the search's result (None when the cache answered) and the entry
    (`TuneResult.to_json()` as stored). A finished search is stored; an interrupted one is
    not."""
    key = tune_key(problem, clock)
    if not refresh:
        entry = cache.load(key)
        if entry is not None:
            return None, entry
    # Processes that miss the same key together (the ranks of a job, each at its first call)
    # tune it once: the others wait on the entry's lock, at most the search's budget and a
    # minute, then find the winner (`tilec.cache.entry_lock`).
    budget = (settings or Settings()).budget_s
    with entry_lock(lock_path(cache.SUBDIRECTORY, key.digest()), budget + 60.0):
        if not refresh:
            entry = cache.load(key)
            if entry is not None:
                return None, entry
        result = Tuner(settings).run(problem, clock)
        entry = result.to_json()
        if not result.interrupted:
            cache.store(key, entry)
    return result, entry


def tuned_pins(problem: Problem, clock_factory: Any, settings: Settings | None) -> dict[str, Any]:
    """The winner's config for `problem` (from the cache, else tuned now); `{}` with
    `TILEC_AUTOTUNE=0`."""
    if not cache.enabled():
        return {}
    clock = clock_factory()
    _result, entry = tune(problem, clock, settings)
    return dict(entry["pins"])


def autotuned_function(
    function: Any, specialization: Any, extents: Mapping[str, int], arch: str, values: Any
) -> Any:
    """What `@tilec.jit(autotune=...)` compiles for a specialization: the `JitFunction` with
    the tuned winner's pins (from the cache, else tuned now on copies of `values`), or
    `function` itself with `TILEC_AUTOTUNE=0` or when the heuristics won."""
    if not cache.enabled():
        return function
    settings = function.autotune if isinstance(function.autotune, Settings) else Settings()
    problem = problem_for(function, extents, arch=arch, specialization=specialization)
    if settings.clock is not None:
        clock = settings.clock(values)
    else:
        from tilec.tune.clock import GpuClock

        torch = sys.modules.get("torch")
        tensors = [v for v in values if hasattr(v, "shape")]
        own = torch is not None and all(isinstance(v, torch.Tensor) for v in tensors)
        clock = GpuClock(inputs=values if own and tensors else ())
    _result, entry = tune(problem, clock, settings)
    function.tuned = entry
    if not entry["pins"]:
        return function
    return make_function(problem, entry["pins"])


def fake_cost(decisions: Mapping[str, Any]) -> float:
    """A deterministic stand-in for a kernel's time (the `fake` clock of `tilec tune --clock
    fake`, for tests without a GPU): a hash of what the candidate compiled to, in [1, 2) ms.
    It measures nothing; it only lets the search run end to end."""
    shown = {k: v for k, v in decisions.items() if k != "config"}
    digest = hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).digest()
    return 1.0 + int.from_bytes(digest[:4], "big") / 2**32


# The fake clock's host: two fake GPUs, the second 7% slower (`tilec tune --clock fake --gpus`).
FAKE_SPEEDS = (1.0, 1.07)


def default_clock(name: str, reference: Any = None) -> Clock:
    """The clock `tilec tune --clock NAME` uses."""
    if name == "fake":
        return FakeClock(fake_cost, reference=reference, speeds=FAKE_SPEEDS)
    from tilec.diagnostics import TileError
    from tilec.runtime import gpu_available

    if not gpu_available():
        raise TileError(
            "tilec tune times candidates on the GPU, and there is none here",
            hint="--clock fake runs the search with a stand-in clock (for tests)",
        )
    from tilec.tune.clock import GpuClock

    return GpuClock(reference=reference)
