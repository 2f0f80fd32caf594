"""tilec's autotuner: the decisions the passes expose as pins, searched on the benchmark's clock.

`tilec tune FILE -k KERNEL --sizes ...` and `@tilec.jit(autotune=True)` use it; docs/tuning.md
says what is searched, how candidates are checked and timed, and where winners are cached.

* `space`: the decisions (tile sizes, warps, stages, split, block order, tensor-core path,
  occupancy) and what a compiled kernel shows of each;
* `worker`: one candidate compiled, in a worker process (pruned by the passes' own checks);
* `clock`: checking and timing — `GpuClock` (`tilec.benchmarks.gpu.time_ms`) or `FakeClock`;
* `search`: the coordinate descent within a budget, its worker pool and progress bar;
* `devices`: where candidates are checked and timed — the tuner's own process, or one
  measuring process per GPU (`Settings.gpus`), the final round on the first;
* `cache`: winners on disk; `report`: the candidates table; `api`: the entry points.
"""

from tilec.tune.api import fake_cost, problem_for, tune, tune_key, tuned_pins
from tilec.tune.clock import Clock, FakeClock, GpuClock
from tilec.tune.search import Candidate, Settings, Tuner, TuneResult
from tilec.tune.worker import Build, Problem, build_candidate

__all__ = [
    "Build",
    "Candidate",
    "Clock",
    "FakeClock",
    "GpuClock",
    "Problem",
    "Settings",
    "TuneResult",
    "Tuner",
    "build_candidate",
    "fake_cost",
    "problem_for",
    "tune",
    "tune_key",
    "tuned_pins",
]
