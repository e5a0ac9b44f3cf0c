"""Kueue v0.19.2: ``pkg/scheduler/scheduler.go``.

One scheduling cycle, step by step as Kueue's ``scheduler.go schedule()``: the reference path.

1. Heads: pop one workload from every active ClusterQueue.
2. Snapshot: the live quota tree plus an undo journal (``cache/snapshot.py``); usage added for
   preemptors and reservations is rolled back at the end of the cycle.
3. Nominate: reject what cannot be considered (inactive or missing queue, namespace mismatch),
   assign flavors to the rest, find preemption targets, try partial admission.
4. Order: fair-sharing tournament, or the classical ONE key
   (borrowing level, -priority, queue-order timestamp, uid or namespace/name).
5. Admit greedily against the snapshot: NoFit is skipped; Preempt without targets reserves
   the queue's nominal share when it cannot always reclaim; overlapping targets and "no longer
   fits after processing another workload" are skipped; Preempt issues evictions (the preemptor
   is never admitted in the cycle that evicts its victims); Fit is admitted.
6. Requeue the rest by the queue's strategy (a BestEffortFIFO head parked after NoFit or Preempt
   without candidates takes its scheduling equivalents with it: ``queue/equivalence.py``), and evict
   the victims (a victim already being evicted is not evicted again: "preemption ongoing").

The cycle works against ``Cluster``, the little it needs of the twin: the quota tree and queues,
verdicts for a head, admit and evict. The fast path's quiet-cycle streaks (``fastpath/quiet_streaks.py``) are
built from these steps; this module knows nothing of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from gpufleet.twin.apis import reasons
from gpufleet.twin.cache.cohort import ClusterQueue, CohortTree
from gpufleet.twin.cache.fair_sharing import FairShare
from gpufleet.twin.cache.resource_node import QuotaNode, available
from gpufleet.twin.cache.snapshot import Snapshot
from gpufleet.twin.queue import equivalence
from gpufleet.twin.queue.queues import ClusterQueueQueue, Queues
from gpufleet.twin.results import ACTIVE, INADMISSIBLE, Admitted, CycleResult, Pending, Preempted
from gpufleet.twin.scheduler.fair_sharing_iterator import tournament
from gpufleet.twin.scheduler.flavorassigner import FIT, NO_CANDIDATES, NO_FIT, PREEMPT, Assignment
from gpufleet.twin.scheduler.preemption.preemption import Preemptor, Target
from gpufleet.twin.workload import Workload

SKIPPED, ASSUMED, PREEMPTING, NAMESPACE_MISMATCH = "skipped", "assumed", "preempting", "namespaceMismatch"
UNASSIGNED = Assignment(mode=NO_FIT)  # shared, never mutated: heads rejected before flavor assignment
NO_TARGETS: tuple[Target, ...] = ()  # shared: most heads preempt nothing, and need no list each


class Verdict:
    """One head's flavor assignment and preemption targets, and what is derived from them."""

    __slots__ = ("assignment", "quiet", "standing", "targets")

    def __init__(self, assignment: Assignment, targets: Sequence[Target]) -> None:
        self.assignment = assignment
        self.targets = targets
        self.standing: tuple[bool, tuple[int, float]] | None = None  # fair_sharing_iterator.py fills it
        self.quiet: int | None = None  # fastpath/quiet_streaks.py fills it


class Cluster(Protocol):
    """What a cycle reads and changes: the quota tree, the queues, verdicts, admit and evict."""

    tree: CohortTree
    queues: Queues
    fair: FairShare | None
    preemptor: Preemptor
    equivalence_hashing: bool
    last_status: dict[str, Pending]
    cycle: int

    def namespace_matches(self, cq: ClusterQueue, wl: Workload) -> bool: ...

    def get_assignments(self, wl: Workload, cq: ClusterQueue) -> Verdict: ...

    def admit(self, wl: Workload, cq: ClusterQueue, assignment: Assignment) -> None: ...

    def evict(self, wl: Workload, reason: str, preemptor: Workload) -> Preempted | None: ...

    def condition_written(self, wl: Workload) -> None: ...

    def admitted_record(self, wl: Workload) -> Admitted: ...

    def begin_cycle(self) -> None: ...

    def end_cycle(self, productive: bool) -> None: ...

    def quiet_next(self) -> bool: ...


class Entry:
    """A head under consideration this cycle: its verdict and decision record."""

    __slots__ = (
        "assignment", "cq", "message", "node", "order", "reason",
        "requeue_now", "status", "targets", "usage", "verdict", "wl",
    )  # fmt: skip

    def __init__(self, wl: Workload, cq: ClusterQueue | None, verdict: Verdict | None = None) -> None:
        """``verdict``: the head's flavors and targets; None for a head rejected before them."""
        self.wl = wl
        self.cq = cq
        self.verdict = verdict
        assignment = UNASSIGNED if verdict is None else verdict.assignment
        self.assignment = assignment
        self.targets: Sequence[Target] = NO_TARGETS if verdict is None else verdict.targets
        self.status = ""
        self.reason = assignment.reason
        self.message = assignment.message
        self.requeue_now = False  # Kueue's FailedAfterNomination / PendingPreemption
        # What the fair-sharing tournament reads (plain attributes: it reads them a lot).
        self.order = wl.order
        self.usage: dict[int, int] = assignment.usage
        if cq is not None:
            self.node: QuotaNode = cq.node

    @property
    def standing(self) -> tuple[bool, tuple[int, float]] | None:
        """The tournament's view of this queue with the usage added, kept with the verdict."""
        return self.verdict.standing if self.verdict is not None else None

    @standing.setter
    def standing(self, value: tuple[bool, tuple[int, float]] | None) -> None:
        if self.verdict is not None:
            self.verdict.standing = value

    def classical_key(self) -> tuple[int, int, int, str]:
        return (self.assignment.borrowing, *self.wl.order)


def schedule(k: Cluster, previous: tuple[Pending, ...] | None = None) -> CycleResult:
    """One cycle. ``previous``: the verdicts of the cycle before, if any, for the stop rule.
    ``begin_cycle``/``end_cycle`` are Kueue's clocks around it (clocks.py; no-ops without them)."""
    k.begin_cycle()
    entries, rejected = nominate(k, k.queues.heads())  # steps 1 and 3
    victims: dict[str, tuple[Target, Entry]] = {}
    admitted = decide(k, entries, victims)  # steps 2, 4 and 5
    pending, preempted = conclude(k, entries, rejected, victims)  # step 6
    k.end_cycle(bool(admitted))
    return CycleResult(
        k.cycle,
        tuple(k.admitted_record(e.wl) for e in admitted),
        preempted,
        pending,
        stable=stable(bool(admitted), bool(preempted), pending, previous),
        last=pending,
    )


def stable(admitted: bool, preempted: bool, pending: tuple[Pending, ...], previous: tuple[Pending, ...] | None) -> bool:
    """The scheduling loop's stop rule: the cycle changed nothing, repeated the verdicts of the
    cycle before, and put every head back into its heap, so the next cycle pops the same heads
    and repeats it again. A head parked in this cycle cannot have repeated a verdict unless a
    requeue batch woke it in between, and the heads behind it in its heap come next (seed 140 of
    the 300-seed differential: the twin stopped with three workloads that fit still in a heap)."""
    return not admitted and not preempted and pending == previous and all(p.queue == ACTIVE for p in pending)


def nominate(k: Cluster, heads: Iterable[Workload]) -> tuple[list[Entry], list[Entry]]:
    """Step 3: the heads that can be considered, with their verdicts; and those rejected."""
    entries: list[Entry] = []
    rejected: list[Entry] = []
    for wl in heads:
        cq = k.tree.cluster_queues.get(wl.cluster_queue)
        if cq is not None and cq.active and k.namespace_matches(cq, wl):
            entries.append(Entry(wl, cq, k.get_assignments(wl, cq)))
            continue
        e = Entry(wl, cq)
        if cq is None:
            e.reason, e.message = reasons.MISCONFIGURED, reasons.cluster_queue_not_found(wl.cluster_queue)
        elif not cq.active:
            e.reason, e.message = reasons.SUSPENDED, reasons.cluster_queue_inactive(cq.name)
        else:
            e.reason, e.message = reasons.MISCONFIGURED, reasons.NAMESPACE_MISMATCH
            e.status = NAMESPACE_MISMATCH
        rejected.append(e)
    return entries, rejected


def decide(k: Cluster, entries: list[Entry], victims: dict[str, tuple[Target, Entry]]) -> list[Entry]:
    """Steps 2, 4 and 5: order the entries; admit greedily against a snapshot; issue preemptions,
    never admitting a preemptor in the cycle of its evictions. Returns the admitted entries;
    ``common`` collects what to evict."""
    snapshot = Snapshot()
    admitted = [e for e in process(k, order(k, entries), snapshot, victims) if e.status == ASSUMED]
    snapshot.rollback()
    return admitted


def order(k: Cluster, entries: list[Entry]) -> Iterator[Entry]:
    """Step 4: the fair-sharing tournament, or the classical key."""
    if k.fair is not None:
        return tournament(k.fair, entries, k.preemptor.preemptors.first())
    return k.preemptor.preemptors.classical(entries)


def process(
    k: Cluster, ordered: Iterator[Entry], snapshot: Snapshot, victims: dict[str, tuple[Target, Entry]]
) -> Iterator[Entry]:
    """Step 5, one entry at a time in order (yielded once decided)."""
    for e in ordered:
        cq = e.cq
        assert cq is not None
        mode = e.assignment.mode
        if mode == NO_FIT:
            yield e
            continue
        if mode < FIT and not e.targets:
            if k.preemptor.reserves(cq, e.wl):
                snapshot.add_transient(cq.node, reserve(e.assignment, cq))
            yield e
            continue
        if e.targets and any(t.workload.key in victims for t in e.targets):
            _skip(e, reasons.OVERLAPPING_TARGETS)
        elif not _fits_without(k, cq, e.assignment.usage, victims, e.targets):
            _skip(e, reasons.NO_LONGER_FITS)
        elif e.targets:
            for t in e.targets:
                victims[t.workload.key] = (t, e)
            snapshot.add_transient(cq.node, e.assignment.usage)
            e.status, e.requeue_now = PREEMPTING, True
            e.reason = reasons.WAITING_FOR_PREEMPTED_WORKLOADS
            e.message += reasons.pending_preemption(len(e.targets))
        else:
            k.admit(e.wl, cq, e.assignment)
            e.status = ASSUMED
        yield e


def _skip(e: Entry, message: str) -> None:
    e.status, e.requeue_now = SKIPPED, True
    e.reason, e.message = reasons.WAITING_FOR_QUOTA, message


def _fits_without(
    k: Cluster,
    cq: ClusterQueue,
    usage: dict[int, int],
    victims: dict[str, tuple[Target, Entry]],
    targets: Sequence[Target],
) -> bool:
    """Whether ``usage`` fits once this cycle's victims and ``targets`` are gone."""
    if not victims and not targets:  # most entries: no list built per admission
        return _fits(cq, usage)
    gone = [*(t for t, _ in victims.values()), *targets]
    for t in gone:
        k.preemptor.remove(t.workload)
    try:
        return _fits(cq, usage)
    finally:
        for t in gone:
            k.preemptor.restore(t.workload)


def _fits(cq: ClusterQueue, usage: dict[int, int]) -> bool:
    """Whether ``usage`` fits in ``cq`` as the quota tree stands."""
    node = cq.node
    for fr, q in usage.items():  # noqa: SIM110 (a loop: no generator per admission)
        if q > available(node, fr):
            return False
    return True


def reserve(a: Assignment, cq: ClusterQueue) -> dict[int, int]:
    """Kueue's ``quotaResourcesToReserve``: hold back what a stuck preemptor is owed.

    Without borrowing: up to the queue's unused nominal quota; with borrowing: up to nominal plus
    borrowing limit. Lower entries then cannot borrow what this queue is about to reclaim.
    """
    node = cq.node
    result: dict[int, int] = {}
    for fr, q in a.usage.items():
        if a.borrowing > 0:
            limit = node.borrowing_limit[fr]
            result[fr] = min(q, node.nominal[fr] + limit - node.usage[fr])
        else:
            result[fr] = max(0, min(q, node.nominal[fr] - node.usage[fr]))
    return {fr: q for fr, q in result.items() if q > 0}


def conclude(
    k: Cluster, entries: list[Entry], rejected: list[Entry], victims: dict[str, tuple[Target, Entry]]
) -> tuple[tuple[Pending, ...], tuple[Preempted, ...]]:
    """Step 6: requeue what was not admitted, then evict the victims; the cycle is over."""
    pending = tuple(requeue(k, e) for e in (*entries, *rejected) if e.status != ASSUMED)
    issued = (k.evict(t.workload, t.reason, e.wl) for t, e in victims.values())
    preempted = tuple(p for p in issued if p is not None)
    k.cycle += 1
    return pending, preempted


def requeue(k: Cluster, e: Entry) -> Pending:
    """Kueue's ``requeueAndUpdate``: back into the heap or parked, and the verdict recorded."""
    wl = e.wl
    queue = k.queues.by_cq.get(wl.cluster_queue)
    state = INADMISSIBLE
    if queue is not None and e.cq is not None and e.cq.active:
        if queue.requeue(
            wl,
            immediate=e.requeue_now,
            namespace_mismatch=e.status == NAMESPACE_MISMATCH,
            preempting=e.status == PREEMPTING,
        ):
            state = ACTIVE
        elif not e.status and not e.targets and e.assignment.mode < FIT:  # NoFit, or no candidates
            bulk_move(k, queue, wl, e.reason or _fallback(e.assignment.mode))
    elif queue is not None:
        queue.park(wl)
    if e.status == PREEMPTING:
        k.preemptor.preemptors.mark(wl)  # Kueue's preemptor workload of the ClusterQueue
    pending = verdict(wl, e.reason, e.message, e.assignment.mode, state, last=k.last_status)
    record(k, wl, pending)
    return pending


def record(k: Cluster, wl: Workload, pending: Pending) -> None:
    """A head's verdict kept as its latest. Where the condition Kueue writes changes, Kueue patches
    the Workload (``requeueAndUpdate`` writes only a changed ``QuotaReserved``), and that update is
    an event on its ClusterQueue (``controller/cq_status.py``)."""
    before = k.last_status.get(wl.key)
    k.last_status[wl.key] = pending
    if pending is not before and written(before) != (pending.reason, pending.message):
        k.condition_written(wl)


def written(p: Pending | None) -> tuple[str, str] | None:
    """The ``QuotaReserved`` condition Kueue last wrote, as far as ``p`` tells (None: none known)."""
    if p is None:
        return None
    return (p.reason, p.message) if p.kueue_writes else p.written


def bulk_move(k: Cluster, queue: ClusterQueueQueue, wl: Workload, reason: str) -> None:
    """Park the parked head's equivalents still in the heap, as Kueue does (queue/equivalence.py);
    their verdict is read from the queue while they stay parked (``Twin.pending``)."""
    if k.equivalence_hashing:
        queue.bulk_move(wl, equivalence.bulk_reason(reason))


def _fallback(mode: int) -> str:
    return reasons.WAITING_FOR_QUOTA if mode in (PREEMPT, NO_CANDIDATES) else ""


def verdict(
    wl: Workload, reason: str, message: str, mode: int, state: str, *, last: dict[str, Pending] | None = None
) -> Pending:
    """The pending verdict of a head not admitted; with ``last`` (the latest verdicts), the head's
    latest one where it says the same (a value: a backlog's heads get the same verdict after
    every capacity change, and sharing it saves building one per cycle)."""
    reason = reason or _fallback(mode) or reasons.PENDING
    if last is not None:
        found = last.get(wl.key)
        if (
            found is not None
            and found.message == message
            and found.reason == reason
            and found.queue == state
            and found.cluster_queue == wl.cluster_queue
            and found.kueue_writes
            and found.written is None
        ):
            return found
    return Pending(wl.key, wl.cluster_queue, reason, message, state)
