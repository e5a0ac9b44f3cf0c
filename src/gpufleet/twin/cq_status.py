"""A nested ClusterQueue's status writes, and the requeue each one sets off (Kueue v0.19.2).

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
outside any cohort, never does. The twin follows it on Kueue's clocks only (``clocks.py``), and
starts the reconcile's second at the first change to the status, where Kueue starts it at the
first event on any of the ClusterQueue's workloads (a condition the scheduler wrote, for one), so
Kueue's may come up to a second earlier.
"""

from __future__ import annotations

from gpufleet.twin.cohort import ClusterQueue
from gpufleet.twin.queues import Queues

Status = tuple[int, int, tuple[int, ...]]


class StatusWrites:
    """The status Kueue last wrote for each nested ClusterQueue, and whether a new one differs."""

    __slots__ = ("_queues", "written")

    def __init__(self, nested: list[ClusterQueue], queues: Queues) -> None:
        self._queues = queues
        # what Kueue wrote before the twin's first cycle: the settled state it starts from
        self.written: dict[str, Status] = {cq.name: self.status(cq) for cq in nested}

    @staticmethod
    def nested(cq: ClusterQueue) -> bool:
        """Whether ``cq``'s Cohort has a parent (``node.path``: the queue, its Cohort, ..., the root)."""
        return len(cq.node.path) > 2

    def watches(self, name: str) -> bool:
        return name in self.written

    def status(self, cq: ClusterQueue) -> Status:
        """What ``updateCqStatusIfChanged`` compares: pending and reserving workloads (admitted
        ones are the same without admission checks) and usage, which the weighted share follows."""
        node = cq.node
        return len(self._queues.by_cq[cq.name]), len(cq.workloads), tuple([node.usage[fr] for fr in node.defined])

    def write(self, cq: ClusterQueue) -> bool:
        """The reconcile: True when the status changed, i.e. Kueue writes it and its Cohorts reconcile."""
        now = self.status(cq)
        if self.written[cq.name] == now:
            return False
        self.written[cq.name] = now
        return True
