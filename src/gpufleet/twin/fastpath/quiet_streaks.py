"""Ours, not Kueue's: a fast path, off with ``Twin(spec, fast=False)`` (see ``fastpath/__init__.py``).

Quiet-cycle streaks and bulk rotation: the fast path of ``Twin(spec, streaks=True)``.

A *quiet* cycle, one in which no head fits and the heads that name victims name only workloads
already being evicted (preemptors waiting for their victims' pods to go), admits nothing and
issues no eviction: the quota tree after it is the one before it, and only the queues change.
It skips the full order (see ``quiet`` for why the waiting preemptors' own order suffices).
After a capacity change BestEffortFIFO queues go through their parked workloads one head (and
its scheduling equivalents) per cycle, mostly in quiet cycles. ``run_streak`` runs a streak of
quiet cycles in one call; the streak ends at the first cycle that is not quiet (processed in full
in the same call), at a stable one (nothing changed and the verdicts repeat the cycle before:
the scheduling loop's own stop rule, so streaks and cycle-by-cycle runs stop at the same cycle),
or when no queue has an active head. Their verdicts come back in one result, in cycle order; the
cycles that only park a backlog's calm heads run in bulk (``_rotate``).

Built from ``scheduler/cycle.py``'s steps; the reference path (``cycle.schedule``) never calls in here.
"""

from __future__ import annotations

from gpufleet.twin.cache.cohort import ClusterQueue
from gpufleet.twin.cache.snapshot import Snapshot
from gpufleet.twin.queue import equivalence
from gpufleet.twin.queue.queues import ClusterQueueQueue
from gpufleet.twin.results import ACTIVE, INADMISSIBLE, CycleResult, Pending
from gpufleet.twin.scheduler.cycle import (
    ASSUMED,
    Cluster,
    Entry,
    Verdict,
    bulk_move,
    conclude,
    decide,
    nominate,
    order,
    process,
    record,
    reserve,
    verdict,
)
from gpufleet.twin.scheduler.cycle import stable as cycle_is_stable
from gpufleet.twin.scheduler.flavorassigner import FIT, NO_FIT
from gpufleet.twin.scheduler.preemption.preemption import Target
from gpufleet.twin.workload import Workload

BUSY, WAITING, HOLDING, CALM = range(4)  # an entry's part in a quiet cycle (see quiet)
Decided = dict[tuple[str, ...], list[tuple[str, str, str, bool]]]


def run_streak(k: Cluster, previous: tuple[Pending, ...] | None = None) -> CycleResult:
    """One cycle, or a streak of quiet ones ended by the first that is not quiet, that is stable
    (``previous``: the verdicts of the cycle before, if any), or that leaves no active head."""
    streak: list[Pending] = []
    decided: Decided = {}  # quiet cycles change no quota: the same waiting preemptors, the same outcome
    while True:
        k.begin_cycle()
        entries, rejected = nominate(k, k.queues.heads())
        waiting = None if rejected else quiet(k, entries)
        victims: dict[str, tuple[Target, Entry]] = {}
        admitted = decide(k, entries, victims) if waiting is None else _wait(k, waiting, decided)
        pending, preempted = conclude(k, entries, rejected, victims)
        k.end_cycle(bool(admitted))
        stable = cycle_is_stable(bool(admitted), bool(preempted), pending, previous)
        if waiting is None or stable or not any(q.has_active() for q in k.queues.serving) or not k.quiet_next():
            return CycleResult(
                k.cycle,
                tuple(k.admitted_record(e.wl) for e in admitted),
                preempted,
                (*streak, *pending),
                stable=stable,
                last=pending,
            )
        streak += pending
        previous = pending
        rotated = _rotate(k, entries, pending, bool(waiting), streak)
        if rotated is not None:
            previous = rotated
            if not any(q.has_active() for q in k.queues.serving):
                return CycleResult(k.cycle, (), (), tuple(streak), last=rotated)


def quiet(k: Cluster, entries: list[Entry]) -> list[Entry] | None:
    """The waiting preemptors of a quiet cycle, or ``None`` when the cycle is not quiet.

    Quiet: no entry fits, and entries with targets name only workloads already being evicted
    (preemptors waiting for their victims), so nothing is admitted and nothing new is evicted.
    Whether a waiting entry still preempts, overlaps another's targets or no longer fits depends
    only on the waiting entries processed before it when no other entry holds back quota for
    itself (``reserve``); and their order among themselves is the full order's whenever that is a
    static sort: the classical key, or fair sharing among ClusterQueues directly in their cohort
    (whose keys only their own entries change). So the full order is not computed.
    """
    waiting: list[Entry] = []
    holding = False
    for e in entries:
        assert e.cq is not None and e.verdict is not None
        if e.assignment.mode != NO_FIT and k.preemptor.preemptors.prioritized(e.wl):
            return None  # PrioritizePreemptorWorkloads: the full path decides (order, reservation)
        part = _part(k, e.cq, e.verdict)
        if part == BUSY:
            return None
        if part == WAITING:
            waiting.append(e)
        holding = holding or part == HOLDING
    if waiting and holding:
        return None
    if len(waiting) > 1 and k.fair is not None and not all(e.node.parent is e.node.root for e in waiting):
        return None  # a ClusterQueue in a nested cohort: the tournament's order is not a sort
    return waiting


def _part(k: Cluster, cq: ClusterQueue, v: Verdict) -> int:
    """Remembered on the verdict: its targets' evicted flags and its queue's usage, all it
    depends on, change only where the memo drops its verdicts."""
    part = v.quiet
    if part is None:
        a, targets = v.assignment, v.targets
        if a.mode >= FIT or (targets and not all(t.workload.evicted for t in targets)):
            part = BUSY
        elif targets:
            part = WAITING
        elif a.mode != NO_FIT and not k.preemptor.can_always_reclaim(cq) and reserve(a, cq):
            part = HOLDING
        else:
            part = CALM
        v.quiet = part
    return part


def _wait(k: Cluster, waiting: list[Entry], decided: Decided) -> list[Entry]:
    """Decide the waiting preemptors of a quiet cycle, in their order, or as they were decided
    before in the same streak. Nothing is admitted."""
    if not waiting:
        return []
    key = tuple(e.wl.key for e in waiting)
    outcome = decided.get(key)
    if outcome is None:
        snapshot = Snapshot()
        for e in process(k, order(k, waiting), snapshot, {}):
            assert e.status != ASSUMED
        snapshot.rollback()
        decided[key] = [(e.status, e.reason, e.message, e.requeue_now) for e in waiting]
        return []
    for e, (status, reason, message, requeue_now) in zip(waiting, outcome, strict=True):
        e.status, e.reason, e.message, e.requeue_now = status, reason, message, requeue_now
    return []


def _rotate(
    k: Cluster, entries: list[Entry], pending: tuple[Pending, ...], waiting: bool, streak: list[Pending]
) -> tuple[Pending, ...] | None:
    """Run the next cycles of a quiet streak in bulk while they only rotate BestEffortFIFO queues.

    After a quiet cycle, a queue whose head went back into its heap gives the same head again,
    with the same verdict (the quota and the set of waiting preemptors are unchanged); a queue
    whose head was parked gives a new head. While every new head is calm (its verdict, remembered
    or worked out on the streak's unchanged quota: no fit and nothing to reclaim; or holding quota
    back when no preemptor waits), the cycle is quiet again and only parks those heads (with
    their scheduling equivalents). These cycles skip nomination and keep the repeated heads where
    they are (popping and pushing them back changes nothing). Returns the last bulk cycle's
    verdicts (``streak`` gets them all, in cycle order), or ``None`` when the next cycle needs
    the full path.
    """
    last = {e.wl.cluster_queue: (e.wl, p) for e, p in zip(entries, pending, strict=True)}
    rotated = None
    while True:
        if not k.quiet_next():
            return rotated  # a timer of Kueue's fires first (clocks.py): the full path runs it
        cycle: list[Pending] = []
        moves: list[tuple[ClusterQueueQueue, Workload, Pending]] = []
        for queue in k.queues.serving:
            wl = queue.peek()
            if wl is None:
                continue
            seen = last.get(queue.name)
            if seen is not None and seen[1].queue == ACTIVE:
                if seen[0] is not wl:
                    return rotated  # another head: the waiting preemptors may change
                cycle.append(seen[1])
                continue
            calm = _calm(k, wl, holding=not waiting)
            if calm is None:
                return rotated
            moves.append((queue, wl, calm))
            cycle.append(calm)
        if not moves:
            return rotated  # only repeated heads: the full path finds the cycle stable
        k.begin_cycle()  # no timer is due by its start (quiet_next), so none fires
        for queue, wl, calm in moves:
            record(k, wl, calm)
            # every calm head is NoFit or without candidates: parked with its class
            if not (k.equivalence_hashing and queue.park_head(wl, equivalence.bulk_reason(calm.reason))):
                queue.pop()
                queue.park(wl)
                bulk_move(k, queue, wl, calm.reason)
            last[queue.name] = (wl, calm)
        k.cycle += 1
        k.end_cycle(False)
        streak += cycle
        rotated = tuple(cycle)


def _calm(k: Cluster, wl: Workload, *, holding: bool) -> Pending | None:
    """A new head's verdict if it is parked with it and changes nothing."""
    cq = k.tree.cluster_queues.get(wl.cluster_queue)
    if cq is None or not cq.active or not k.namespace_matches(cq, wl):
        return None
    found = k.get_assignments(wl, cq)  # the quota is the streak's: as the full path would find it
    if found.assignment.mode != NO_FIT and k.preemptor.preemptors.prioritized(wl):
        return None  # PrioritizePreemptorWorkloads: the full path decides
    part = _part(k, cq, found)
    if part != CALM and not (holding and part == HOLDING):
        return None
    a = found.assignment
    return verdict(wl, a.reason, a.message, a.mode, INADMISSIBLE, last=k.last_status)
