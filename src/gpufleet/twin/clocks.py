"""Kueue v0.19.2: ``pkg/util/wait/backoff.go``, ``pkg/cache/queue/inadmissible_workloads.go``,
``pkg/scheduler/scheduler.go``.

Kueue's clocks inside the twin: the scheduler's backoff, the inadmissible requeue batch and the
release of a preempted victim's quota, on one virtual clock in integer milliseconds.

Without them a cycle is a function call and everything it causes happens before the next one.
Kueue v0.19.2 runs on three clocks that change *who* is admitted, not only when:

* **The scheduling loop's speedy backoff** (``pkg/util/wait/backoff.go``: ``UntilWithBackoff``,
  ``speedyBackoffManager``, ``initialBackoff = time.Millisecond``, ``maxBackoff = 10 *
  time.Millisecond``; ``pkg/scheduler/scheduler.go`` ``schedule()`` returns ``KeepGoing`` only when
  an entry was assumed, i.e. admitted, and ``SlowDown`` otherwise, even when it issued
  preemptions). ``BackoffUntil`` runs with ``sliding=false``: the timer is armed *before* the
  cycle with the state the previous cycles left, so the waits between cycle starts after a run of
  unproductive cycles are 0, 1, 2, 4, 8, 10, 10, ... ms, and 0 again after a productive one.
  (The comment on ``UntilWithBackoff`` says 100 ms; the constant says 10 ms, and the constant
  is what runs.) A cycle blocks in ``Manager.Heads`` while no ClusterQueue has a head; the armed
  timer runs meanwhile.
* **The inadmissible requeue batch** (``pkg/cache/queue/inadmissible_workloads.go``:
  ``requeueBatchPeriod = 1 * time.Second``; ``notifyClusterQueue``/``notifyCohort`` call the
  delaying work queue's ``AddAfter``, which keeps the *earlier* ready time of a request already
  waiting, so one batch per root cohort fires one period after the first capacity change that
  asked for it). The workload controller asks for it when a workload finishes or goes back to
  pending (``QueueAssociatedInadmissibleWorkloadsAfter`` in ``workload_controller.go``
  ``Update``), after deleting it from the cache: the quota frees at once, the parked workloads
  of the tree come back a second later, and the heads still active are tried first meanwhile.
* **The release of a victim's quota.** The scheduler only sets ``Evicted``; the job reconciler
  (``pkg/controller/jobframework/reconciler.go``, "6. handle eviction") suspends the Job and
  clears ``QuotaReserved`` once ``job.IsActive()`` is false; the workload controller's update
  from QuotaReserved to Pending then deletes it from the cache (its quota frees), pushes it back
  into its heap at once (no requeue backoff for a preemption) and asks for the batch above. How
  long that takes is the API server's and the Job controller's; issue 18's testbed measured
  about one second (``RELEASE_DELAY_MS``). Meanwhile the victim counts as evicted (first in
  Kueue's candidate order) and a waiting preemptor picks it again without a new eviction.
* **A nested ClusterQueue's status** (``controller/cq_status.py``): the ClusterQueue controller reconciles
  one ``UpdatesBatchPeriod`` (``pkg/constants``, 1 s) after an event on one of its workloads; a
  status it writes reconciles the Cohorts above it but the root, and each Cohort reconcile asks
  for its tree's requeue batch (``Manager.AddOrUpdateCohort``), so parked workloads come back
  about two seconds after an admission even though nothing freed.

Cycles take no time of their own here: a cycle starts when the armed timer has run out, or when
the next timer wakes a loop blocked without heads.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, replace

BACKOFF_INITIAL_MS = 1  # backoff.go initialBackoff
BACKOFF_CAP_MS = 10  # backoff.go maxBackoff
REQUEUE_BATCH_MS = 1000  # inadmissible_workloads.go requeueBatchPeriod
LONG_REQUEUE_BATCH_MS = 10_000  # requeueLongBatchPeriod, with the SchedulerLongRequeueInterval gate
RELEASE_DELAY_MS = 1000  # issue 18's testbed: eviction to QuotaReserved=False for a batch Job
CQ_STATUS_BATCH_MS = 1000  # constants.UpdatesBatchPeriod: a ClusterQueue reconciles after its workloads' events

# timer kinds: a victim's quota frees; a tree's parked wake; a ClusterQueue's status is reconciled
RELEASE, BATCH, STATUS = "release", "batch", "status"


@dataclass(frozen=True, slots=True)
class ClockSettings:
    """How long Kueue takes, in milliseconds. ``release_delay_ms`` is the cluster's (API server,
    Job controller); ``requeue_batch_ms`` is Kueue's constant (the twin makes it 10 s when the
    Configuration turns the ``SchedulerLongRequeueInterval`` gate on: ``for_gates``)."""

    release_delay_ms: int = RELEASE_DELAY_MS
    requeue_batch_ms: int = REQUEUE_BATCH_MS

    def __post_init__(self) -> None:
        if self.release_delay_ms < 0 or self.requeue_batch_ms < 0:
            raise ValueError("Kueue's clocks cannot run backwards: delays must be >= 0 ms")

    def for_gates(self, long_requeue: bool) -> ClockSettings:
        """Kueue's batch period under ``SchedulerLongRequeueInterval`` (alpha, off by default:
        ``getRequeueBatchPeriod``); a period set by the caller is kept."""
        if long_requeue and self.requeue_batch_ms == REQUEUE_BATCH_MS:
            return replace(self, requeue_batch_ms=LONG_REQUEUE_BATCH_MS)
        return self


class Clock:
    """The virtual clock: now, the scheduling loop's backoff, and timers waiting to fire.

    Timers are (due, sequence, kind, subject); the sequence keeps same-millisecond timers in the
    order they were set. A requeue batch is kept once per root (``batches``), as the delaying
    queue keeps one request per item.
    """

    __slots__ = (
        "_armed", "_backoff", "_seq", "_started", "batches", "next_start", "now", "settings", "statuses", "timers",
    )  # fmt: skip

    def __init__(self, origin: int, settings: ClockSettings) -> None:
        self.settings = settings
        self.now = origin
        self.next_start = origin  # when the scheduling loop's next iteration begins
        self._backoff: int | None = None  # the speedy backoff's next step; None after KeepGoing
        self._armed = 0  # the wait armed before the running cycle
        self._started = origin  # the running iteration's start (the armed timer counts from it)
        self._seq = 0
        self.timers: list[tuple[int, int, str, str]] = []
        self.batches: dict[str, int] = {}  # root -> due of its waiting requeue batch
        self.statuses: set[str] = set()  # ClusterQueues whose status reconcile is waiting

    # --- timers ---------------------------------------------------------------------------------
    def release_later(self, key: str) -> None:
        """A victim was evicted now: its quota frees ``release_delay_ms`` later."""
        self._set(self.now + self.settings.release_delay_ms, RELEASE, key)

    def batch(self, root: str) -> None:
        """Capacity changed in ``root``'s tree now: its parked workloads wake one batch period
        later, or with the batch already waiting (``AddAfter`` keeps the earlier time)."""
        if root not in self.batches:
            due = self.now + self.settings.requeue_batch_ms
            self.batches[root] = due
            self._set(due, BATCH, root)

    def status_later(self, cq: str) -> None:
        """An event on a workload of ``cq`` now: the ClusterQueue controller reconciles it one
        ``UpdatesBatchPeriod`` later, or with the reconcile already waiting (``AddAfter`` again)."""
        if cq not in self.statuses:
            self.statuses.add(cq)
            self._set(self.now + CQ_STATUS_BATCH_MS, STATUS, cq)

    def _set(self, due: int, kind: str, subject: str) -> None:
        self._seq += 1
        heapq.heappush(self.timers, (due, self._seq, kind, subject))

    def due(self) -> int | None:
        """When the next timer fires (None: none waits)."""
        return self.timers[0][0] if self.timers else None

    def pop_due(self, until: int) -> tuple[str, str] | None:
        """The next timer due at or before ``until``, removed (the clock moves to it), or None."""
        if not self.timers or self.timers[0][0] > until:
            return None
        due, _, kind, subject = heapq.heappop(self.timers)
        self.now = max(self.now, due)
        if kind == BATCH:
            del self.batches[subject]
        elif kind == STATUS:
            self.statuses.discard(subject)
        return kind, subject

    def advance_to(self, t: int) -> None:
        """The caller's time moved on (the simulator's next instant); timers are not fired here."""
        self.now = max(self.now, t)
        self.next_start = max(self.next_start, self.now)

    # --- the scheduling loop --------------------------------------------------------------------
    def begin(self, start: int) -> None:
        """An iteration of ``UntilWithBackoff`` begins at ``start``: the timer is armed with the
        backoff the previous cycles left (``Backoff()`` before ``f``, sliding off)."""
        self._started = start
        self.now = max(self.now, start)
        self._armed = self._step()

    def end(self, productive: bool) -> None:
        """The cycle ended at ``now`` (it takes no time): ``KeepGoing`` when it admitted, else
        ``SlowDown``; the next iteration begins when the armed timer runs out."""
        self._backoff = None if productive else (self._backoff or BACKOFF_INITIAL_MS)
        self.next_start = max(self.now, self._started + self._armed)

    def _step(self) -> int:
        """``wait.Backoff.Step`` on the speedy backoff: 0 when reset, else double up to the cap."""
        current = self._backoff
        if current is None:
            return 0
        self._backoff = min(current * 2, BACKOFF_CAP_MS)
        return current

    def repeat_until(self, due: int) -> int:
        """Unproductive cycles that only repeat the last one run until the timer due at ``due``
        fires: move through them (each ``SlowDown``) and return how many there were."""
        count = 0
        while self.next_start < due:
            self.begin(self.next_start)
            self.end(False)
            count += 1
        return count

    def state(self) -> tuple[object, ...]:
        """What the clock adds to the twin's state, relative to now (for loop detection)."""
        now = self.now
        timers = tuple(sorted((due - now, kind, subject) for due, _, kind, subject in self.timers))
        return (timers, self._backoff, self.next_start - now)


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
