"""The twin's scheduling loop on Kueue's clocks: when a cycle starts, what fires before it, and
how a run goes on while Kueue waits (``clocks.py`` holds the clock and Kueue's rules).

``Twin`` delegates here so the reference path (``cycle.schedule``) and the fast path
(``streaks.py``) see the same three hooks: ``begin`` before a cycle takes heads, ``end`` after it,
``quiet_next`` before a streak runs another cycle as quiet. Without clocks they do nothing and a
run is the unit-test world's: cycles until stable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from gpufleet.twin.clocks import RELEASE, STATUS, Clock
from gpufleet.twin.loops import LoopWatch
from gpufleet.twin.results import CycleResult, Pending

if TYPE_CHECKING:
    from gpufleet.twin.kueue import Twin


class KueueTime:
    """The clock as the loop sees it: ``until`` caps which timers may fire in the current run."""

    __slots__ = ("_has_heads", "_release", "_wake", "clock", "sample", "status", "until")

    def __init__(
        self, clock: Clock, has_heads: Callable[[], bool], release: Callable[[str], None], wake: Callable[[str], None]
    ) -> None:
        self.clock = clock
        self.until: int | None = None
        self._has_heads, self._release, self._wake = has_heads, release, wake
        # AdmissionFairSharing's sampling (``Twin.sample_usage``), set only where it applies: the
        # LocalQueue controller decays usage once per sampling interval while the loop runs
        self.sample: Callable[[int], None] | None = None
        # a nested ClusterQueue's status reconcile (``cq_status.StatusWrites.due``), set where one exists
        self.status: Callable[[str], None] | None = None

    def begin(self) -> None:
        """The scheduling loop starts a cycle: timers due by then fire first; without heads the
        loop blocks (``Manager.Heads``) until a timer gives it some."""
        self.wait_for_heads()
        start = self.clock.next_start
        if self.sample is not None:
            self.sample(start)
        self.clock.begin(start)

    def wait_for_heads(self) -> bool:
        """The loop's next iteration: timers due by its start fire, then, while no ClusterQueue has
        a head, the next timers in order (Kueue's loop blocks in ``Manager.Heads`` until a workload
        is pushed); the iteration starts when the last of them fired. False: no timer gave heads
        and none is left to fire, so Kueue stays blocked and runs no cycle."""
        clock = self.clock
        start = clock.next_start
        self.fire(start)
        heads = self._has_heads()
        while not heads:
            due = clock.due()
            if due is None or not self.may_fire(due):
                break
            start = max(start, due)
            self.fire(start)
            heads = self._has_heads()
        clock.next_start = start
        return heads

    def quiet_next(self) -> bool:
        """Whether the next cycle starts before any timer fires (a streak may run it as quiet)."""
        due = self.clock.due()
        return due is None or due > self.clock.next_start or not self.may_fire(due)

    def may_fire(self, due: int) -> bool:
        return self.until is None or due <= self.until

    def fire(self, until: int) -> None:
        """Every timer due by ``until`` (and by the run's cap), in the order they fall due."""
        if self.until is not None:
            until = min(until, self.until)
        while (timer := self.clock.pop_due(until)) is not None:
            kind, subject = timer
            if kind == RELEASE:
                self._release(subject)
            elif kind == STATUS:  # the ClusterQueue controller writes the status it finds changed
                assert self.status is not None
                self.status(subject)
            else:  # the requeue batch of a root: its parked workloads go back before the next heads
                self._wake(subject)

    def waits(self, wait: bool, until: int | None) -> bool:
        """Whether a settled run goes on: a timer of Kueue's will fire (within ``until``)."""
        due = self.clock.due()
        return wait and due is not None and (until is None or due <= until)


def run(
    twin: Twin, cycles: int | None, *, limit: int, wait: bool, until: int | None, loops: bool
) -> Iterator[CycleResult]:
    """``Twin.run``: see its docstring."""
    time = twin.time
    previous: tuple[Pending, ...] | None = None
    watch = LoopWatch() if loops and time is not None else None
    if time is not None:
        if not wait:
            until = time.clock.next_start  # not waiting: only timers due by the first cycle fire
        time.until = until
        time.fire(time.clock.next_start)  # what is due by the first cycle's start, before it looks for heads
    for number in range(cycles if cycles is not None else limit):
        # Kueue's loop blocks without heads (``Manager.Heads``), so on the clocks even a first
        # cycle needs one or a timer to wait for; the unit-test world always runs one.
        first = number == 0 and time is None
        blocked = cycles is None and not first and not twin.has_heads()
        if blocked and (time is None or not time.waits(wait, until) or not time.wait_for_heads()):
            return  # blocked in ``Manager.Heads``, and no timer that may fire gives heads
        result = twin.run_cycle(previous)
        yield result
        if watch is not None:
            twin.loop = watch.see(twin, result)
            if twin.loop is not None:
                return
        if cycles is None and result.stable:
            if time is None or not time.waits(wait, until):
                return
            due = time.clock.due()
            assert due is not None
            twin.cycle += time.clock.repeat_until(due)
        previous = result.last
