"""Kueue v0.19.2: ``pkg/scheduler/scheduler.go``, ``pkg/util/wait/backoff.go``.

Kueue's scheduling loop as ``Twin.run`` drives it: when a run stops, and how it goes on while
Kueue waits (``pkg/scheduler/scheduler.go`` ``Start``: ``wait.UntilWithBackoff`` around
``schedule``, blocked in ``Manager.Heads`` without heads; the clock, its timers and the hooks of a
cycle are ``clocks.py``'s ``Clock`` and ``KueueTime``).

Without clocks a run is the unit-test world's: cycles until stable.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from gpufleet.twin.clocks import KueueTime
from gpufleet.twin.loops import Loop, LoopWatch, Watched
from gpufleet.twin.results import CycleResult, Pending


class Runs(Watched, Protocol):
    """What a run drives (``kueue.Twin``): its cycles, its heads, Kueue's time and the loop found."""

    time: KueueTime | None
    loop: Loop | None

    def has_heads(self) -> bool: ...
    def run_cycle(self, previous: tuple[Pending, ...] | None = None) -> CycleResult: ...


def run(
    twin: Runs, cycles: int | None, *, limit: int, wait: bool, until: int | None, loops: bool
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
