"""One scheduling cycle, step by step as Kueue's ``scheduler.go schedule()``.

1. Heads: pop one workload from every active ClusterQueue.
2. Snapshot: the live quota tree plus an undo journal (nothing is deep-copied); usage added for
   preemptors and reservations is rolled back at the end of the cycle.
3. Nominate: reject what cannot be considered (inactive or missing queue, namespace mismatch),
   assign flavors to the rest, find preemption targets, try partial admission.
4. Order: fair-sharing tournament, or the classical ONE key
   (borrowing level, -priority, queue-order timestamp, uid or namespace/name).
5. Admit greedily against the snapshot: NoFit is skipped; Preempt without targets reserves
   the queue's nominal share when it cannot always reclaim; overlapping targets and "no longer
   fits after processing another workload" are skipped; Preempt issues evictions (the preemptor
   is never admitted in the cycle that evicts its victims); Fit is admitted.
6. Requeue the rest by the queue's strategy, and evict the victims (a victim already being
   evicted is not evicted again: Kueue's "preemption ongoing").

A *quiet* cycle, one in which no head fits and the heads that name victims name only workloads
already being evicted (preemptors waiting for their victims' pods to go), admits nothing and
issues no eviction: the quota tree after it is the one before it, and only the queues change.
It skips the full order (see ``_quiet`` for why the waiting preemptors' own order suffices).
After a capacity change BestEffortFIFO queues rotate through all their parked workloads one head
per cycle, mostly in quiet cycles. A twin built with ``batch_inert_cycles`` runs a streak of quiet
cycles in one call; the streak ends at the first cycle that is not quiet (processed in full in
the same call), at a stable one (nothing changed and the verdicts repeat the cycle before: the
scheduling loop's own stop rule, so batched and cycle-by-cycle runs stop at the same cycle), or
when no queue has an active head. Their verdicts come back in one result, in cycle order; the
cycles that only park a backlog's calm heads one by one run in bulk (``_rotate``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from gpufleet.twin import equivalence, reasons
from gpufleet.twin.cohort import ClusterQueue
from gpufleet.twin.fairshare import tournament
from gpufleet.twin.flavors import FIT, NO_CANDIDATES, NO_FIT, PREEMPT, Assignment
from gpufleet.twin.preemption import Target
from gpufleet.twin.queues import ClusterQueueQueue
from gpufleet.twin.quota import QuotaNode, add_usage, available, remove_usage
from gpufleet.twin.results import ACTIVE, INADMISSIBLE, CycleResult, Pending
from gpufleet.twin.workload import Workload

if TYPE_CHECKING:
    from gpufleet.twin.scheduler import Twin

SKIPPED, ASSUMED, PREEMPTING = "skipped", "assumed", "preempting"
UNASSIGNED = Assignment(mode=NO_FIT)  # shared, never mutated: heads rejected before flavor assignment


class Entry:
    """A head under consideration this cycle: its assignment, targets and decision record."""

    __slots__ = (
        "assignment", "cq", "message", "node", "order", "reason",
        "requeue_now", "status", "targets", "usage", "wl",
    )  # fmt: skip

    def __init__(self, wl: Workload, cq: ClusterQueue | None) -> None:
        self.wl = wl
        self.cq = cq
        self.assignment = UNASSIGNED
        self.targets: list[Target] = []
        self.status = ""
        self.reason = ""
        self.message = ""
        self.requeue_now = False  # Kueue's FailedAfterNomination / PendingPreemption
        # What the fair-sharing tournament reads (plain attributes: it reads them a lot).
        self.order = wl.order
        self.usage: dict[int, int] = self.assignment.usage
        if cq is not None:
            self.node: QuotaNode = cq.node

    def assign(self, assignment: Assignment, targets: list[Target]) -> None:
        self.assignment, self.targets, self.usage = assignment, targets, assignment.usage
        self.reason, self.message = assignment.reason, assignment.message

    @property
    def standing(self) -> tuple[bool, tuple[int, float]] | None:
        """The tournament's cache lives on the (remembered) assignment, not on this cycle's entry."""
        return self.assignment.standing

    @standing.setter
    def standing(self, value: tuple[bool, tuple[int, float]] | None) -> None:
        self.assignment.standing = value

    def classical_key(self) -> tuple[int, int, int, str]:
        return (self.assignment.borrowing, *self.wl.order)


class Snapshot:
    """The cycle's view of quota: the live tree with an undo journal for transient usage."""

    __slots__ = ("_journal",)

    def __init__(self) -> None:
        self._journal: list[tuple[QuotaNode, dict[int, int]]] = []

    def add_transient(self, node: QuotaNode, usage: dict[int, int]) -> None:
        for fr, q in usage.items():
            add_usage(node, fr, q)
        self._journal.append((node, usage))

    def rollback(self) -> None:
        for node, usage in reversed(self._journal):
            for fr, q in usage.items():
                remove_usage(node, fr, q)
        self._journal.clear()


def run_cycle(twin: Twin, previous: tuple[Pending, ...] | None = None) -> CycleResult:
    """One cycle, or with ``batch_inert_cycles`` a streak of quiet ones ended by the first that is
    not quiet, that is stable (``previous``: the verdicts of the cycle before, if any), or that
    leaves no active head."""
    streak: list[Pending] = []
    # Quiet cycles change no quota, so the same waiting preemptors meet the same outcome.
    decided: dict[tuple[str, ...], list[tuple[str, str, str, bool]]] = {}
    while True:
        # 1. Get the heads from the queues, one per active ClusterQueue.
        # 3. Nominate: flavors, borrowing and preemption targets for each head.
        entries, rejected = nominate(twin, twin.queues.heads())
        waiting = None if rejected else _quiet(twin, entries)
        victims: dict[str, tuple[Target, Entry]] = {}
        if waiting is None:
            admitted = _decide(twin, entries, victims)
        else:
            _wait(twin, waiting, decided)
            admitted = []
        # 6. Requeue what was not admitted, then evict the victims (their quota frees up now).
        pending = tuple(_requeue(twin, e) for e in (*entries, *rejected) if e.status != ASSUMED)
        issued = (twin.evict(t.workload, t.reason, e.wl) for t, e in victims.values())
        preempted = tuple(p for p in issued if p is not None)
        twin.cycle += 1
        stable = not admitted and not preempted and pending == previous
        if waiting is None or stable or not twin.batch_inert_cycles or not any(q.active for q in twin.queues.serving):
            return CycleResult(
                twin.cycle,
                tuple(twin.admitted_record(e.wl) for e in admitted),
                preempted,
                (*streak, *pending),
                stable=stable,
                last=pending,
            )
        streak += pending
        previous = pending
        rotated = _rotate(twin, entries, pending, bool(waiting), streak)
        if rotated is not None:
            previous = rotated
            if not any(q.active for q in twin.queues.serving):
                return CycleResult(twin.cycle, (), (), tuple(streak), last=rotated)


def _decide(twin: Twin, entries: list[Entry], victims: dict[str, tuple[Target, Entry]]) -> list[Entry]:
    """Steps 2, 4 and 5: order the entries; admit greedily against a snapshot (an undo journal
    over the live quota tree); issue preemptions, never admitting a preemptor in the cycle of
    its evictions. Returns the admitted entries; ``victims`` collects what to evict."""
    snapshot = Snapshot()
    admitted = [e for e in _process(twin, _order(twin, entries), snapshot, victims) if e.status == ASSUMED]
    snapshot.rollback()
    return admitted


def _order(twin: Twin, entries: list[Entry]) -> Iterator[Entry]:
    """Step 4: the fair-sharing tournament, or the classical key."""
    if twin.fair is not None:
        return tournament(twin.fair, entries)
    return iter(sorted(entries, key=Entry.classical_key))


BUSY, WAITING, HOLDING, CALM = range(4)  # an entry's part in a quiet cycle (see _quiet)


def _quiet(twin: Twin, entries: list[Entry]) -> list[Entry] | None:
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
        part = _part(twin, e)
        if part == BUSY:
            return None
        if part == WAITING:
            waiting.append(e)
        holding = holding or part == HOLDING
    if waiting and holding:
        return None
    if len(waiting) > 1 and twin.fair is not None and not all(e.node.parent is e.node.root for e in waiting):
        return None  # a ClusterQueue in a nested cohort: the tournament's order is not a sort
    return waiting


def _part(twin: Twin, e: Entry) -> int:
    assert e.cq is not None
    return _part_of(twin, e.cq, e.assignment, e.targets)


def _part_of(twin: Twin, cq: ClusterQueue, a: Assignment, targets: list[Target]) -> int:
    """Remembered on the assignment: its targets' evicted flags and its queue's usage, all it
    depends on, change only where the twin drops its remembered assignments."""
    part = a.quiet
    if part is None:
        if a.mode >= FIT or (targets and not all(t.workload.evicted for t in targets)):
            part = BUSY
        elif targets:
            part = WAITING
        elif a.mode != NO_FIT and not twin.preemptor.can_always_reclaim(cq) and reserve(a, cq):
            part = HOLDING
        else:
            part = CALM
        a.quiet = part
    return part


def _wait(twin: Twin, waiting: list[Entry], decided: dict[tuple[str, ...], list[tuple[str, str, str, bool]]]) -> None:
    """Decide the waiting preemptors of a quiet cycle, in their order, or as they were decided
    before in the same streak."""
    if not waiting:
        return
    key = tuple(e.wl.key for e in waiting)
    outcome = decided.get(key)
    if outcome is None:
        snapshot = Snapshot()
        for _ in _process(twin, _order(twin, waiting), snapshot, {}):
            pass
        snapshot.rollback()
        decided[key] = [(e.status, e.reason, e.message, e.requeue_now) for e in waiting]
        return
    for e, (status, reason, message, requeue_now) in zip(waiting, outcome, strict=True):
        e.status, e.reason, e.message, e.requeue_now = status, reason, message, requeue_now


def nominate(twin: Twin, heads: Iterable[Workload]) -> tuple[list[Entry], list[Entry]]:
    entries: list[Entry] = []
    rejected: list[Entry] = []
    for wl in heads:
        cq = twin.tree.cluster_queues.get(wl.cluster_queue)
        e = Entry(wl, cq)
        if cq is None:
            e.reason, e.message = reasons.MISCONFIGURED, reasons.cluster_queue_not_found(wl.cluster_queue)
        elif not cq.active:
            e.reason, e.message = reasons.SUSPENDED, reasons.cluster_queue_inactive(cq.name)
        elif not twin.namespace_matches(cq, wl):
            e.reason, e.message = reasons.MISCONFIGURED, reasons.NAMESPACE_MISMATCH
            e.status = "namespaceMismatch"
        else:
            e.assign(*twin.get_assignments(wl, cq))
            entries.append(e)
            continue
        rejected.append(e)
    return entries, rejected


def _process(
    twin: Twin, ordered: Iterator[Entry], snapshot: Snapshot, victims: dict[str, tuple[Target, Entry]]
) -> Iterator[Entry]:
    for e in ordered:
        cq = e.cq
        assert cq is not None
        mode = e.assignment.mode
        if mode == NO_FIT:
            yield e
            continue
        if mode < FIT and not e.targets:
            if not twin.preemptor.can_always_reclaim(cq):
                snapshot.add_transient(cq.node, reserve(e.assignment, cq))
            yield e
            continue
        if any(t.workload.key in victims for t in e.targets):
            _skip(e, reasons.OVERLAPPING_TARGETS)
        elif not _fits_without(twin, cq, e.assignment.usage, [t for t, _ in victims.values()] + e.targets):
            _skip(e, reasons.NO_LONGER_FITS)
        elif e.targets:
            for t in e.targets:
                victims[t.workload.key] = (t, e)
            snapshot.add_transient(cq.node, e.assignment.usage)
            e.status, e.requeue_now = PREEMPTING, True
            e.reason = reasons.WAITING_FOR_PREEMPTED_WORKLOADS
            e.message += reasons.pending_preemption(len(e.targets))
        else:
            twin.admit(e.wl, cq, e.assignment)
            e.status = ASSUMED
        yield e


def _skip(e: Entry, message: str) -> None:
    e.status, e.requeue_now = SKIPPED, True
    e.reason, e.message = reasons.WAITING_FOR_QUOTA, message


def _fits_without(twin: Twin, cq: ClusterQueue, usage: dict[int, int], gone: list[Target]) -> bool:
    if not gone:
        node = cq.node
        return all(q <= available(node, fr) for fr, q in usage.items())
    for t in gone:
        twin.preemptor.remove(t.workload)
    try:
        return _fits_without(twin, cq, usage, [])
    finally:
        for t in gone:
            twin.preemptor.restore(t.workload)


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


def _requeue(twin: Twin, e: Entry) -> Pending:
    wl = e.wl
    queue = twin.queues.by_cq.get(wl.cluster_queue)
    state = INADMISSIBLE
    if queue is not None and e.cq is not None and e.cq.active:
        if queue.requeue(
            wl,
            immediate=e.requeue_now,
            namespace_mismatch=e.status == "namespaceMismatch",
            preempting=e.status == PREEMPTING,
        ):
            state = ACTIVE
        elif not e.status and not e.targets and e.assignment.mode < FIT:  # NoFit, or no candidates
            _bulk_move(twin, queue, wl, e.reason or _fallback(e.assignment.mode))
    elif queue is not None:
        queue.park(wl)
    pending = _verdict(wl, e.reason, e.message, e.assignment.mode, state)
    twin.last_status[wl.key] = pending
    return pending


def _bulk_move(twin: Twin, queue: ClusterQueueQueue, wl: Workload, reason: str) -> None:
    """Park the parked head's equivalents still in the heap, as Kueue does (equivalence.py)."""
    if not twin.equivalence_hashing:
        return
    stored = equivalence.bulk_reason(reason)
    for moved in queue.bulk_move(wl.equivalence, stored):
        twin.last_status[moved.key] = equivalence.bypassed(moved, stored)


def _fallback(mode: int) -> str:
    return reasons.WAITING_FOR_QUOTA if mode in (PREEMPT, NO_CANDIDATES) else ""


def _verdict(wl: Workload, reason: str, message: str, mode: int, state: str) -> Pending:
    reason = reason or _fallback(mode)
    return Pending(wl.key, wl.cluster_queue, reason or reasons.PENDING, message, state)


def _rotate(
    twin: Twin, entries: list[Entry], pending: tuple[Pending, ...], waiting: bool, streak: list[Pending]
) -> tuple[Pending, ...] | None:
    """Run the next cycles of a quiet streak in bulk while they only rotate BestEffortFIFO queues.

    After a quiet cycle, a queue whose head went back into its heap gives the same head again,
    with the same verdict (the quota and the set of waiting preemptors are unchanged); a queue
    whose head was parked gives a new head. While every new head is calm (its verdict, remembered
    or worked out on the streak's unchanged quota: no fit and nothing to reclaim; or holding quota
    back when no preemptor waits), the cycle is quiet again and only moves those heads to the
    parked set. This is what a capacity change costs at scale (every parked workload of the tree
    comes back and is parked again, one per queue per cycle), so these cycles skip nomination and
    keep the repeated heads where they are (popping and pushing them back changes nothing).
    Returns the last bulk cycle's verdicts (``streak`` gets them all, in cycle order), or ``None``
    when the next cycle needs the full path.
    """
    last = {e.wl.cluster_queue: (e.wl, p) for e, p in zip(entries, pending, strict=True)}
    rotated = None
    while True:
        cycle: list[Pending] = []
        moves: list[tuple[ClusterQueueQueue, Workload, Pending]] = []
        for queue in twin.queues.serving:
            wl = queue.peek() if queue.active else None
            if wl is None:
                continue
            seen = last.get(queue.name)
            if seen is not None and seen[1].queue == ACTIVE:
                if seen[0] is not wl:
                    return rotated  # another head: the waiting preemptors may change
                cycle.append(seen[1])
                continue
            verdict = _calm(twin, queue, wl, holding=not waiting)
            if verdict is None:
                return rotated
            moves.append((queue, wl, verdict))
            cycle.append(verdict)
        if not moves:
            return rotated  # only repeated heads: the full path finds the cycle stable
        for queue, wl, verdict in moves:
            queue.pop()
            queue.park(wl)
            twin.last_status[wl.key] = verdict
            _bulk_move(twin, queue, wl, verdict.reason)  # every calm head is NoFit or without candidates
            last[queue.name] = (wl, verdict)
        twin.cycle += 1
        streak += cycle
        rotated = tuple(cycle)


def _calm(twin: Twin, queue: ClusterQueueQueue, wl: Workload, *, holding: bool) -> Pending | None:
    """A new head's verdict if it is parked with it and changes nothing."""
    cq = twin.tree.cluster_queues.get(wl.cluster_queue)
    if cq is None or not cq.active or not twin.namespace_matches(cq, wl):
        return None
    found = twin.get_assignments(wl, cq)  # the quota is the streak's: as the full path would find it
    a = found[0]
    part = _part_of(twin, cq, a, found[1])
    if part != CALM and not (holding and part == HOLDING):
        return None
    return _verdict(wl, a.reason, a.message, a.mode, INADMISSIBLE)
