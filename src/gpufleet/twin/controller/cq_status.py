"""Kueue v0.19.2: ``pkg/controller/core/clusterqueue_controller.go``,
``pkg/controller/core/cohort_controller.go``.

A nested ClusterQueue's status writes, and the requeue each one sets off (Kueue v0.19.2).

Parked workloads do not only wake when quota frees. In a cohort tree, Kueue also moves them back
to their heaps about two seconds after an admission, and the twin must too, or it reports the
message a parked workload got before the admission where Kueue writes a fresh one after it (the
random differential's seeds 167, 277 and 280; Kueue's log shows the chain below):

1. Every event on a workload asks the ClusterQueue controller to reconcile its ClusterQueue one
   ``UpdatesBatchPeriod`` (1 s) later (``NotifyWorkloadUpdate``, ``nonCQObjectHandler.Generic``:
   ``AddAfter``, so the first event of a quiet spell sets the time).
2. The reconcile writes the status only if it changed (``updateCqStatusIfChanged``: pending,
   reserving and admitted workloads, reserved and used quota, the weighted share).
3. The ClusterQueue's update event reconciles the Cohorts above it, the root excepted
   (``cohortCqHandler.Generic`` with ``Cache.ClusterQueueAncestors``), and every Cohort reconcile
   calls ``Manager.AddOrUpdateCohort``, which asks for the root's requeue batch
   (``notifyCohort``): one ``requeueBatchPeriod`` later the tree's parked workloads go back to
   their heaps and the equivalence hashes that bypassed their look-alikes are forgotten.

So only a ClusterQueue whose Cohort has a parent sets this off; one right under its root, or
outside any cohort, never does. The twin follows it on Kueue's clocks only (``clocks.py``). The
events it sees on a workload: its addition, admission, eviction (``Evicted`` is written when the
scheduler preempts it), release and finish, and a head's changed ``QuotaReserved`` condition
(``cycle.record``); the Job controller's own writes are not modelled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufleet.twin.cache.cohort import ClusterQueue, CohortTree
from gpufleet.twin.queue.queues import Queues

if TYPE_CHECKING:
    from gpufleet.twin.clocks import KueueTime

Status = tuple[int, int, tuple[int, ...]]


class StatusWrites:
    """The status Kueue last wrote for each nested ClusterQueue, and the reconcile that compares it."""

    __slots__ = ("_queues", "_time", "_tree", "written")

    @classmethod
    def of(cls, tree: CohortTree, queues: Queues, time: KueueTime | None) -> StatusWrites | None:
        """The watch for ``tree`` on Kueue's clocks, hooked to them; None without clocks or without
        a ClusterQueue whose Cohort has a parent (nothing to watch: nothing is computed)."""
        nested = [cq for cq in tree.cluster_queues.values() if len(cq.node.path) > 2]  # queue, Cohort, ..., root
        if time is None or not nested:
            return None
        writes = cls(tree, queues, time, nested)
        time.status = writes.due
        return writes

    def __init__(self, tree: CohortTree, queues: Queues, time: KueueTime, nested: list[ClusterQueue]) -> None:
        self._tree, self._queues, self._time = tree, queues, time
        # what Kueue wrote before the twin's first cycle: the settled state it starts from
        self.written: dict[str, Status] = {cq.name: self.status(cq) for cq in nested}

    def event(self, name: str) -> None:
        """An event on a workload of ClusterQueue ``name``: a watched one reconciles a second later."""
        if name in self.written:
            self._time.clock.status_later(name)

    def due(self, name: str) -> None:
        """The reconcile of ``name``: a changed status is written, its Cohorts reconcile, and the
        tree's requeue batch is asked for (``Clock.batch``)."""
        cq = self._tree.cluster_queues[name]
        now = self.status(cq)
        if self.written[name] != now:
            self.written[name] = now
            self._time.clock.batch(self._queues.root_of[name])

    def status(self, cq: ClusterQueue) -> Status:
        """What ``updateCqStatusIfChanged`` compares: pending and reserving workloads (admitted
        ones are the same without admission checks) and usage, which the weighted share follows."""
        node = cq.node
        return len(self._queues.by_cq[cq.name]), len(cq.workloads), tuple([node.usage[fr] for fr in node.defined])
