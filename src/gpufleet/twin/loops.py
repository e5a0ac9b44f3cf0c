"""Ours, not Kueue's: a diagnosis of a run that never settles, which Kueue has no counterpart for.

A run that never settles: the twin's state repeats, so Kueue would go round for ever.

With Kueue's clocks a preemptor and its victims can evict each other in turn (issue 18, seed 150:
a fair-sharing preemptor and the reclaiming victims, 130 preemptions in 106 s on the real Kueue):
each eviction frees quota a second later, the freed victim wins it back, and no cycle is ever
stable. A cycle limit alone would report the first thousand cycles and nothing about why.
``LoopWatch`` fingerprints the state after every cycle the run reports and stops at the first
repeat: from there the run is periodic, since the twin is deterministic in its state.

The state is everything a later cycle reads: per admitted workload its ClusterQueue, pod-set
assignment and evicted flag; the reservation times only as their order (what the victim order
reads), grouped where they tie; per ClusterQueue the active and parked workloads, the sticky head
and the bulk-moved equivalence classes; the preemptor marks; the last cycle's verdicts (the stop
rule compares them); and Kueue's timers and backoff relative to now. Absolute times are left out
on purpose: a loop repeats its shape, not its clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import Protocol

from gpufleet.twin.clocks import Clock
from gpufleet.twin.queue.queues import Queues
from gpufleet.twin.results import CycleResult, Preempted
from gpufleet.twin.scheduler.preemption.preemption import Preemptor
from gpufleet.twin.workload import Workload

PREEMPT_BACK_LOOP = "PreemptBackLoop"  # the repeat issues evictions: workloads evict each other
REPEATING_STATE = "RepeatingState"  # the repeat issues none: Kueue's loop goes round without settling


@dataclass(frozen=True, slots=True)
class Loop:
    """Where the run repeats: the state after cycle ``to_cycle`` is the one after ``from_cycle``."""

    reason: str
    message: str
    from_cycle: int
    to_cycle: int
    period_ms: int
    preempted: tuple[Preempted, ...]  # the evictions of one period, in order


class Watched(Protocol):
    """What the fingerprint reads (``kueue.Twin``): the workloads, the queues, the preemptor
    marks, Kueue's clock and the cycle count."""

    clock: Clock | None
    cycle: int
    workloads: dict[str, Workload]
    queues: Queues
    preemptor: Preemptor


class LoopWatch:
    """Remembers the fingerprint after each reported cycle; ``see`` returns the loop at a repeat."""

    def __init__(self) -> None:
        self._seen: dict[tuple[object, ...], int] = {}
        self._history: list[tuple[int, int, tuple[Preempted, ...]]] = []  # (cycle, now, evictions)

    def see(self, twin: Watched, result: CycleResult) -> Loop | None:
        assert twin.clock is not None
        now = twin.clock.now
        self._history.append((twin.cycle, now, result.preempted))
        key = fingerprint(twin, result)
        first = self._seen.get(key)
        if first is None:
            self._seen[key] = len(self._history) - 1
            return None
        start_cycle, start_ms, _ = self._history[first]
        preempted = tuple(p for _, _, issued in self._history[first + 1 :] for p in issued)
        return describe(start_cycle, twin.cycle, now - start_ms, preempted)


def describe(start: int, end: int, period_ms: int, preempted: tuple[Preempted, ...]) -> Loop:
    """The loop with its reason and a message a user can act on."""
    span = f"the state after cycle {end} repeats the state after cycle {start} ({period_ms} ms of Kueue's time later)"
    if not preempted:
        return Loop(REPEATING_STATE, f"Kueue never settles: {span}, with no eviction in between", start, end,
                    period_ms, preempted)  # fmt: skip
    chain = ", ".join(f"{p.preemptor} evicts {p.workload} ({p.reason})" for p in preempted)
    message = (
        f"preempt-back loop: {span}; each round {len(preempted)} eviction(s): {chain}. "
        "Each victim's quota frees after the release delay and the victim wins it back, so Kueue "
        "keeps preempting for as long as these workloads stay pending"
    )
    return Loop(PREEMPT_BACK_LOOP, message, start, end, period_ms, preempted)


def fingerprint(twin: Watched, result: CycleResult) -> tuple[object, ...]:
    """The twin's state after a cycle, without absolute times (see the module docstring)."""
    assert twin.clock is not None
    admitted = sorted(
        (wl.key, wl.cluster_queue, wl.evicted, wl.admission.pod_sets)
        for wl in twin.workloads.values()
        if wl.admission is not None
    )
    held = sorted((w for w in twin.workloads.values() if w.admission is not None), key=lambda w: -w.reserved_at)
    recency = tuple(tuple(sorted(w.key for w in group)) for _, group in groupby(held, key=lambda w: w.reserved_at))
    queues = tuple(
        (
            name,
            frozenset(q.active),
            frozenset(q.inadmissible),
            q.sticky,
            frozenset(q.bulk.values()),
        )
        for name, q in sorted(twin.queues.by_cq.items())
    )
    marks = twin.preemptor.preemptors.marked()
    return (tuple(admitted), recency, queues, marks, result.last, twin.clock.state())
