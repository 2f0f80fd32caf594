"""Where the tuner checks and times its candidates: in its own process on the current GPU, or
in one *measuring process* per GPU when the search is given several (`Settings.gpus`).

    devices = open_devices(clock, gpus, events)       # `InProcess` or `MeasuringProcesses`
    heuristic = devices.start(problem, build, deadline)  # each device ready; the first's outcome
    while devices.free():
        devices.measure(ticket, build)                 # checked, then timed, on an idle device
    for ticket, outcome in devices.handle(events.get()): ...
    outcome = devices.time_on_first(build)             # the final round: one device, one clock

The search (`tilec.tune.search`) is one piece of code over either: it deals built candidates
to whichever device is free and takes their outcomes as they come back on its event queue.

A measuring process is spawned with `CUDA_VISIBLE_DEVICES` naming its one GPU, set before
anything in it initializes CUDA; its clock is made there by the clock's picklable factory
(`Clock.factory`). It is given the problem and the heuristic's build first: it checks the
heuristic (which seeds its own reference outputs, on the same seeded inputs as every other
device) and times it. That time calibrates the device: a device's times are scaled by the
first device's time for the heuristic over its own, so that during the descent a candidate
timed on a slightly slower GPU is ranked as if timed on the first. The calibration removes a
device's overall speed, not how it differs kernel by kernel (clocks, thermals, memory): so
the final round times every finalist on the first device, and the winner and the regret come
from that device's times alone.

A measuring process that dies (a kernel that kills it) records the candidate it was measuring
as *crashed* and is spawned again, as is one whose CUDA context a faulting kernel spoilt (it
says so, and leaves). One that cannot start, or is not the GPU model the clock names, is an
error naming the GPU; once the search has begun, a GPU whose process cannot start again is
left out (`gpus()` says why). Ctrl-C is the parent's alone (the processes ignore it): the
search stops and the processes are killed — they only run kernels on their own inputs.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import multiprocessing
import os
import pickle
import queue
import signal
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tilec.diagnostics import TileError

__all__ = [
    "InProcess",
    "MeasuringProcesses",
    "Outcome",
    "check_and_time",
    "open_devices",
    "resolve_gpus",
]


@dataclass
class Outcome:
    """What measuring one build gave. `status`: "ok" (timed), "wrong", "failed" or
    "crashed" (the measuring process died); `device`: the GPU that measured it (None: the
    tuner's own process)."""

    status: str
    reason: str = ""
    times: list[float] = field(default_factory=list)
    device: int | None = None


def check_and_time(clock: Any, build: Any) -> Outcome:
    """Check `build`'s output, then time it: a wrong result is never timed."""
    try:
        wrong = clock.check(build)
    except Exception as e:
        return Outcome("failed", f"run: {type(e).__name__}: {e}"[:300])
    if wrong is not None:
        return Outcome("wrong", wrong)
    return time_again(clock, build)


def time_again(clock: Any, build: Any) -> Outcome:
    try:
        return Outcome("ok", times=list(clock.time(build)))
    except Exception as e:
        return Outcome("failed", f"timing: {type(e).__name__}: {e}"[:300])


def resolve_gpus(gpus: Sequence[int] | str, count: int, clock_name: str) -> list[int]:
    """The GPU ordinals `gpus` names ("all", "0,1" or a list), each checked against the
    `count` the clock sees: a GPU named twice or one out of range is an error naming it."""
    text = gpus if isinstance(gpus, str) else ",".join(str(k) for k in gpus)
    if isinstance(gpus, str):
        if gpus.strip() == "all":
            if count == 0:
                raise TileError(f"no GPU to tune on: the {clock_name} clock sees none")
            return list(range(count))
        try:
            ordinals = [int(k) for k in gpus.split(",")]
        except ValueError:
            raise TileError(
                f"the GPUs to tune on: expected 'all' or GPU numbers such as 0,1, got '{gpus}'"
            ) from None
    else:
        ordinals = [int(k) for k in gpus]
    seen: set[int] = set()
    for k in ordinals:
        if k in seen:
            raise TileError(f"GPU {k} is named twice in the GPUs to tune on ({text})")
        if not 0 <= k < count:
            sees = f"GPUs 0 to {count - 1}" if count > 1 else "GPU 0" if count else "no GPU"
            raise TileError(
                f"there is no GPU {k} to tune on ({text}): the {clock_name} clock sees {sees}"
            )
        seen.add(k)
    return ordinals


def open_devices(clock: Any, gpus: Sequence[int] | str, events: queue.Queue) -> Any:
    """`InProcess(clock)` when `gpus` is empty (the current GPU) or "all" of one, else a
    measuring process on each GPU it names."""
    if not gpus:
        return InProcess(clock, events)
    count = clock.device_count()
    ordinals = resolve_gpus(gpus, count, clock.name)
    if isinstance(gpus, str) and gpus.strip() == "all" and count == 1:
        return InProcess(clock, events)  # the one GPU there is: no process to start
    return MeasuringProcesses(clock, ordinals, events)


class InProcess:
    """The tuner's own clock, in its own process: one device, measuring as it is asked."""

    first: int | None = None  # the device of the final round: this process's

    def __init__(self, clock: Any, events: queue.Queue):
        self.clock, self.events = clock, events

    def gpus(self) -> list[dict[str, Any]] | None:
        return None

    def start(self, problem: Any, heuristic: Any, deadline: float) -> Outcome:
        self.clock.prepare(problem, heuristic)
        return check_and_time(self.clock, heuristic)

    def free(self) -> bool:
        return True

    def measure(self, ticket: int, build: Any) -> None:
        self.events.put(("device", ticket, check_and_time(self.clock, build)))

    def handle(self, event: tuple) -> list[tuple[int, Outcome]]:
        return [(event[1], event[2])]

    def time_on_first(self, build: Any) -> Outcome:
        return time_again(self.clock, build)

    def close(self) -> None:
        pass


@dataclass
class _Device:
    """One GPU's measuring process, as the parent sees it."""

    ordinal: int
    process: Any = None
    connection: Any = None
    generation: int = 0  # which process of this GPU an event is from (one per restart)
    state: str = "starting"  # "starting", "idle", "busy" or "dead"
    ticket: int | None = None  # what it measures now
    name: str = ""
    heuristic: Outcome | None = None
    scale: float = 1.0  # its times, times this: on the first device's scale
    used: int = 0  # when it was last given a candidate (the least recently used goes next)
    left_out: str = ""  # why it no longer measures (its process could not start again)


class MeasuringProcesses:
    """One measuring process per GPU in `ordinals` (module docstring); the first is the one
    clock of the final round."""

    def __init__(self, clock: Any, ordinals: Sequence[int], events: queue.Queue):
        factory = clock.factory()
        if factory is None:
            raise TileError(
                f"the {clock.name} clock times in this process only: it cannot time on "
                "several GPUs",
                hint="leave the GPUs to tune on at their default (the current one)",
            )
        try:
            self.factory = pickle.dumps(factory)
        except Exception as e:
            raise TileError(
                f"the {clock.name} clock cannot be sent to a measuring process: "
                f"{type(e).__name__}: {e}",
                hint="its factory must pickle (module-level functions, no lambdas)",
            ) from None
        self.clock_device = clock.device
        self.events = events
        self.first = ordinals[0]
        self.devices = {k: _Device(k) for k in ordinals}
        self.problem: Any = None
        self.heuristic: Any = None
        self.started = False
        self.closing = False
        self.counter = itertools.count(1)
        # Started now: they import and start while the heuristic compiles.
        for device in self.devices.values():
            self._spawn(device)

    # -- the processes ------------------------------------------------------------------------

    def _spawn(self, device: _Device) -> None:
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        device.generation += 1
        device.process = context.Process(
            target=_serve,
            args=(device.ordinal, _visible(device.ordinal), self.factory, child),
            name=f"tilec-measure-gpu{device.ordinal}",
            daemon=True,
        )
        device.process.start()
        child.close()  # the parent's copy: the child's death is then the pipe's end
        device.connection, device.state, device.ticket = parent, "starting", None
        reader = threading.Thread(
            target=_read, args=(parent, self.events, device.ordinal, device.generation), daemon=True
        )
        reader.start()
        if self.heuristic is not None:  # started again: prepared as the search goes on
            message = ("prepare", 0, (self.problem, self.heuristic))
            # From a thread: a large message waits for the new process to import and read it.
            threading.Thread(target=_post, args=(device, message), daemon=True).start()

    def close(self) -> None:
        self.closing = True
        for device in self.devices.values():
            if device.process is not None and device.process.is_alive():
                device.process.kill()
        for device in self.devices.values():
            if device.process is not None:
                device.process.join(timeout=5)
                device.connection.close()

    # -- what the search asks -----------------------------------------------------------------

    def gpus(self) -> list[dict[str, Any]]:
        """Each GPU, the scale of its times, and why it was left out (for the record)."""
        return [
            {"gpu": d.ordinal, "scale": d.scale, **({"left_out": d.left_out} if d.left_out else {})}
            for d in self.devices.values()
        ]

    def start(self, problem: Any, heuristic: Any, deadline: float) -> Outcome:
        """Every device prepared with `heuristic` (checked and timed on each: its reference
        and its calibration); the heuristic's outcome on the first device."""
        self.problem, self.heuristic = problem, heuristic
        for device in self.devices.values():
            _post(device, ("prepare", 0, (problem, heuristic)))
        self._wait(lambda: all(d.state != "starting" for d in self.devices.values()), deadline)
        self.started = True
        first = self.devices[self.first]
        assert first.heuristic is not None
        for device in self.devices.values():
            if device.name != self.clock_device:
                raise TileError(
                    f"GPU {device.ordinal} is a {device.name}, not a {self.clock_device}: the "
                    "GPUs to tune on must be one model (the winner is cached for it)",
                    hint="name GPUs of the current GPU's model",
                )
        if first.heuristic.status != "ok":
            return first.heuristic
        base = statistics.median(first.heuristic.times)
        for device in self.devices.values():
            outcome = device.heuristic
            assert outcome is not None
            if outcome.status != "ok":
                raise TileError(
                    f"GPU {device.ordinal} cannot run the heuristic's kernel that GPU "
                    f"{self.first} ran: {outcome.status}: {outcome.reason}"
                )
            own = statistics.median(outcome.times)
            device.scale = base / own if own > 0 and base > 0 else 1.0
        first.heuristic.device = self.first
        return first.heuristic

    def free(self) -> bool:
        return any(d.state == "idle" for d in self.devices.values())

    def measure(self, ticket: int, build: Any) -> None:
        """Give `build` to the idle device that has waited longest."""
        device = min((d for d in self.devices.values() if d.state == "idle"), key=lambda d: d.used)
        self._send(device, "measure", ticket, build)

    def time_on_first(self, build: Any) -> Outcome:
        """Time `build` again on the first device (waiting for it to be free)."""
        first = self.devices[self.first]
        self._wait(lambda: first.state in ("idle", "dead"), math.inf)
        if first.state == "dead":
            return Outcome("failed", f"GPU {self.first}'s measuring process is gone")
        ticket = -next(self.counter)  # the search's tickets are positive
        self._send(first, "time", ticket, build)
        done: list[Outcome] = []
        self._wait(lambda: bool(done), math.inf, ticket=ticket, into=done)
        return done[0]

    def handle(self, event: tuple) -> list[tuple[int, Outcome]]:
        """The outcomes a device event completes (`(ticket, outcome)`), the device's state
        brought up to date."""
        _, ordinal, generation, message = event
        device = self.devices[ordinal]
        if self.closing or generation != device.generation:
            return []  # from a process since replaced or killed
        if message is None:
            return self._died(device)
        kind = message[0]
        if kind == "broken":
            return self._lost(device, f"its clock could not be made: {message[1]}")
        if kind == "ready":
            device.name, device.heuristic = message[1], message[2]
            if not self.started:
                device.state = "idle"
            elif device.heuristic.status == "ok":
                device.state = "idle"  # a restarted process: its calibration is kept
            else:
                return self._lost(device, f"the heuristic's kernel {device.heuristic.status}")
            return []
        _, ticket, outcome, leaving = message
        device.state, device.ticket = "idle", None
        if leaving:  # its CUDA context is spoilt: a fresh process takes over
            self._spawn(device)
        outcome.times = [t * device.scale for t in outcome.times]
        outcome.device = ordinal
        return [(ticket, outcome)]

    # -- inside ---------------------------------------------------------------------------

    def _send(self, device: _Device, kind: str, ticket: int, build: Any) -> None:
        device.state, device.ticket = "busy", ticket
        device.used = next(self.counter)
        _post(device, (kind, ticket, build))

    def _died(self, device: _Device) -> list[tuple[int, Outcome]]:
        device.process.join(timeout=5)
        if device.state == "starting":
            return self._lost(device, "its measuring process died while starting")
        done = []
        if device.state == "busy" and device.ticket is not None:
            why = f"the measuring process of GPU {device.ordinal} died"
            done.append((device.ticket, Outcome("crashed", why, device=device.ordinal)))
        self._spawn(device)
        return done

    def _lost(self, device: _Device, why: str) -> list[tuple[int, Outcome]]:
        """A device whose process cannot start (it measures nothing): an error before the
        search has started; after, the device is left out (an error when none is left)."""
        if device.process.is_alive():
            device.process.kill()
        if not self.started:
            raise TileError(f"GPU {device.ordinal}: {why}")
        device.state, device.left_out = "dead", why
        if all(d.state == "dead" for d in self.devices.values()):
            raise TileError(f"no GPU is left to tune on: the last one, GPU {device.ordinal}: {why}")
        return []

    def _wait(
        self,
        done: Any,
        deadline: float,
        *,
        ticket: int | None = None,
        into: list[Outcome] | None = None,
    ) -> None:
        """Handle device events until `done()`; outcomes for `ticket` go `into` the list,
        other events are put back on the queue afterwards, in their order."""
        aside = []
        try:
            while not done():
                left = deadline - time.perf_counter()
                if left <= 0:
                    waiting = [d.ordinal for d in self.devices.values() if d.state == "starting"]
                    raise TileError(
                        f"the measuring processes of GPUs {waiting} were not ready within the "
                        "budget"
                    )
                try:
                    event = self.events.get(timeout=min(left, 3600))
                except queue.Empty:
                    continue
                if event[0] != "device":
                    aside.append(event)
                    continue
                for got, outcome in self.handle(event):
                    if got == ticket and into is not None:
                        into.append(outcome)
                    # else: a measurement the search abandoned (its budget ran out)
        finally:
            for event in aside:
                self.events.put(event)


def _visible(ordinal: int) -> str:
    """`CUDA_VISIBLE_DEVICES` for GPU `ordinal` as this process numbers it (through its own
    `CUDA_VISIBLE_DEVICES`, when set)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return str(ordinal)
    entries = [e.strip() for e in listed.split(",") if e.strip()]
    return entries[ordinal] if ordinal < len(entries) else str(ordinal)


def _post(device: _Device, message: tuple) -> None:
    # When the process is gone, its reader thread says so, and the search records it.
    with contextlib.suppress(OSError):
        device.connection.send(message)


def _read(connection: Any, events: queue.Queue, ordinal: int, generation: int) -> None:
    """A thread of the parent: each message of one measuring process onto the event queue,
    and None when the process is gone."""
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            events.put(("device", ordinal, generation, None))
            return
        events.put(("device", ordinal, generation, message))


def _serve(ordinal: int, visible: str, factory: bytes, connection: Any) -> None:
    """A measuring process: GPU `ordinal` alone visible, its clock made by `factory`, and
    every request answered in turn until the parent goes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent's search, which ends us
    os.environ["CUDA_VISIBLE_DEVICES"] = visible  # before anything initializes CUDA here
    try:
        clock = pickle.loads(factory)(ordinal)
    except Exception as e:
        connection.send(("broken", f"{type(e).__name__}: {e}"[:300]))
        return
    while True:
        try:
            kind, ticket, payload = connection.recv()
        except (EOFError, OSError):
            return
        if kind == "prepare":
            problem, build = payload
            try:
                clock.prepare(problem, build)
            except Exception as e:
                outcome = Outcome("failed", f"prepare: {type(e).__name__}: {e}"[:300])
            else:
                outcome = check_and_time(clock, build)
            connection.send(("ready", clock.device, outcome))
        else:
            measure = check_and_time if kind == "measure" else time_again
            outcome = measure(clock, payload)
            # A kernel that faulted spoils the CUDA context: a fresh process takes over.
            leaving = outcome.status == "failed" and not _context_usable()
            connection.send(("measured", ticket, outcome, leaving))
            if leaving:
                return


def _context_usable() -> bool:
    """Whether this process's CUDA context still works (True when it has none)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return True
    try:
        torch.cuda.synchronize()
    except Exception:
        return False
    return True
