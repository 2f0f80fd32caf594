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
    """Unwinds a region whose partner failed."""


class Roles:
    """The regions of one running `tile.warp_specialize` and the baton they pass."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running: str | None = None
        self._order: list[str] = []
        self._done: set[str] = set()
        self._waiting: dict[str, Callable[[], bool]] = {}
        self._failed = False

    def run(self, state: BlockState, regions: list[tuple[str, Any]]) -> None:
        """Run each `(name, block)` of `regions` to its end; the first error raised in any of
        them is raised here."""
        errors: list[BaseException] = []
        self._order = [name for name, _ in regions]

        def body(name: str, block: Any) -> None:
            with self._cond:
                self._cond.wait_for(lambda: self._running == name or self._failed)
            try:
                if self._failed:
                    return
                with np.errstate(all="ignore"):
                    state.run_block(block, [])
            except _Abort:
                pass
            except BaseException as e:  # handed to the caller's thread
                errors.append(e)
                with self._cond:
                    self._failed = True
                    self._cond.notify_all()
            finally:
                with self._cond:
                    self._done.add(name)
                    self._waiting.pop(name, None)
                    self._pass_baton(name, finished=True)

        threads = [
            threading.Thread(target=body, args=(name, block), name=f"tilec-{name}")
            for name, block in regions
        ]
        with self._cond:
            self._running = self._order[0]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    @property
    def running(self) -> str | None:
        """The region that holds the baton (the one whose ops run now)."""
        return self._running

    def _pass_baton(self, me: str, finished: bool = False) -> bool:
        """Give the baton to the next region that can go on (call holding the lock): one not
        waiting, or whose wait is over; when `me` has finished, any region still running (a
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
        """Block the running region until `ready()` holds, letting the others run; returns
        when it holds, and also when no other region can make it hold (a deadlock, which the
        caller reports)."""
        with self._cond:
            me = self._running
            assert me is not None, "interpreter bug: a wait outside a running region"
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
    a.roles = Roles()
    try:
        a.roles.run(state, [("producer", op.producer.block), ("consumer", op.consumer.block)])
    finally:
        a.roles = None
    return []
