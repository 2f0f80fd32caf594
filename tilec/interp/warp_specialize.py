"""`tile.warp_specialize` in the interpreter: the producer and consumer regions as coroutines.

The two regions of the op run concurrently on the GPU, on different warps; here each runs in
a thread of its own, but only one at a time holds the baton, so a run is deterministic. The
producer starts; a region runs until it waits on an mbarrier phase that has not completed
(`tilec.interp.tma`), and then hands the baton to the other. When neither can go on -- each
waits on a phase only the other could complete, or the other has finished -- the wait is a
deadlock on the GPU, and the interpreter reports it at the wait, with the message of a wait
that no arrival can complete.

Ordering between the regions goes through mbarriers only: `tile.mbarrier_arrive` releases
the slots its region has read (and whose dots were waited for), and a wait that the arrival's
phase completes acquires them, so a stage written by the producer before its consumers
released it is reported as the race it is. A `tile.barrier` inside a region synchronizes that
region's warps only: it publishes writes and mbarrier inits, but releases no read to the other
region.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tilec.dialects.warp_specialize import WarpSpecializeOp
from tilec.interp.pipeline import _async
from tilec.interp.semantics import semantics
from tilec.ir.core import Operation

if TYPE_CHECKING:
    from tilec.interp.machine import BlockState

__all__ = ["Roles"]


class _Abort(BaseException):
    """Unwinds an agent whose partner failed."""


class Roles:
    """Agents that run concurrently on the GPU -- the regions of a `tile.warp_specialize`,
    the blocks of a cluster (`tilec.interp.cluster`), or both -- and the baton they pass.

    Each agent runs in a thread of its own, but only the one holding the baton runs, so a run
    is deterministic. An agent runs until it waits on something not ready yet (`wait_until`)
    and then hands the baton to the next agent, in the order they were started, that can go
    on. An agent may start agents of its own (`run` called from inside it: a block of a
    cluster reaching its `tile.warp_specialize`); it then waits until they have finished."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running: str | None = None
        self._order: list[str] = []
        self._done: set[str] = set()
        self._waiting: dict[str, Callable[[], bool]] = {}
        self._failed = False
        self._errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []

    def run(self, agents: list[tuple[str, Callable[[], None]]]) -> None:
        """Run each `(name, work)` of `agents` to its end, concurrently; the first error
        raised in any agent is raised here. Called from inside a running agent, that agent
        waits for these (which run after it in the baton's order)."""
        names = [name for name, _ in agents]
        with self._cond:
            parent = self._running
            if len(set(names)) != len(names) or set(names) & set(self._order):
                raise AssertionError(f"interpreter bug: agent names {names} are not unique")
            at = self._order.index(parent) + 1 if parent is not None else len(self._order)
            self._order[at:at] = names

        def body(name: str, work: Callable[[], None]) -> None:
            with self._cond:
                self._cond.wait_for(lambda: self._running == name or self._failed)
            try:
                if self._failed:
                    return
                with np.errstate(all="ignore"):
                    work()
            except _Abort:
                pass
            except BaseException as e:  # handed to the caller's thread
                with self._cond:
                    self._errors.append(e)
                    self._failed = True
                    self._cond.notify_all()
            finally:
                with self._cond:
                    self._done.add(name)
                    self._waiting.pop(name, None)
                    if self._running == name:
                        self._pass_baton(name, finished=True)

        threads = [
            threading.Thread(target=body, args=(name, work), name=f"tilec-{name}")
            for name, work in agents
        ]
        self._threads += threads
        for t in threads:
            t.start()
        if parent is None:
            with self._cond:
                self._running = names[0]
                self._cond.notify_all()
            for t in list(self._threads):
                t.join()
            if self._errors:
                raise self._errors[0]
            return
        self.wait_until(lambda: all(n in self._done for n in names))
        if not all(n in self._done for n in names):  # they wait on what only the parent does
            raise AssertionError("interpreter bug: started agents neither finished nor failed")

    @property
    def running(self) -> str | None:
        """The agent that holds the baton (the one whose ops run now)."""
        return self._running

    def _pass_baton(self, me: str, finished: bool = False) -> bool:
        """Give the baton to the next agent that can go on (call holding the lock): one not
        waiting, or whose wait is over; when `me` has finished, any agent still running (a
        waiting one then finds it cannot go on). Whether there was one."""
        at = self._order.index(me)
        for name in self._order[at + 1 :] + self._order[: at + 1]:
            if name == me or name in self._done:
                continue
            ready = self._waiting.get(name)
            if finished or ready is None or ready():
                self._running = name
                self._cond.notify_all()
                return True
        self._running = None
        self._cond.notify_all()
        return False

    def wait_until(self, ready: Callable[[], bool]) -> None:
        """Block the running agent until `ready()` holds, letting the others run; returns
        when it holds, and also when no other agent can make it hold (a deadlock, which the
        caller reports)."""
        with self._cond:
            me = self._running
            assert me is not None, "interpreter bug: a wait outside a running agent"
            while not ready():
                self._waiting[me] = ready
                if not self._pass_baton(me):
                    break
                self._cond.wait_for(lambda: self._running == me or self._failed)
                if self._failed:
                    self._waiting.pop(me, None)
                    raise _Abort
            self._waiting.pop(me, None)
            self._running = me


@semantics(WarpSpecializeOp)
def _warp_specialize(state: BlockState, op: Operation, args: list[Any]) -> Any:
    a = _async(state)
    if a.roles is not None:
        raise state.error(op, "is nested in another tile.warp_specialize")
    # In a cluster, the blocks' regions all share the cluster's baton.
    roles = a.cluster.roles if a.cluster is not None else Roles()
    prefix = a.cluster.agent_name(state) + " " if a.cluster is not None else ""
    a.roles = roles

    def region(block: Any) -> Callable[[], None]:
        return lambda: state.run_block(block, [])

    try:
        roles.run(
            [
                (prefix + "producer", region(op.producer.block)),
                (prefix + "consumer", region(op.consumer.block)),
            ]
        )
    finally:
        a.roles = None
    return []
