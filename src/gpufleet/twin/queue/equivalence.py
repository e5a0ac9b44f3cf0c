"""Kueue v0.19.2: ``pkg/workload/workload.go``, ``pkg/cache/queue/cluster_queue.go``.

Scheduling equivalence: Kueue's ``SchedulingEquivalenceHashing`` (Beta, on by default since 0.18).

Kueue hashes what scheduling reads of a Workload (``computeSchedulingHash`` in
``pkg/workload/workload.go``): per pod set its name, pod spec shape (requests, node selector,
affinity, tolerations), effective count, effective requests, ``minCount`` and topology request,
plus the effective priority. The creation time, the name and the ClusterQueue are not in it.

When a BestEffortFIFO head is parked because it got NoFit or Preempt without candidates
(``requeueIfNotPresent`` / ``handleInadmissibleHash`` in ``pkg/cache/queue/cluster_queue.go``),
its ClusterQueue remembers the hash with the head's reason and moves every workload in its heap
with that hash to the inadmissible list at once; a workload pushed later with a remembered hash
goes there directly. The next pass over the heap so skips the whole backlog of look-alikes instead
of parking them one head per cycle. ``queueInadmissibleWorkloads`` (a capacity change in the
cohort tree) forgets the hashes and moves everything back. StrictFIFO queues never bulk-move.

Kueue writes no condition on the moved workloads (the workload controller's "Bypassed scheduling
evaluation" condition needs ``UnadmittedWorkloadsObservability``, off by default), so the twin's
verdict for them is its own explanation (``kueue_writes=False``).
"""

from __future__ import annotations

from gpufleet.twin.apis.specs import WorkloadSpec
from gpufleet.twin.results import INADMISSIBLE, Pending
from gpufleet.twin.workload import Workload

NO_FIT = "NoFit"  # Kueue's RequeueReasonNoFit
PREEMPTION_NO_CANDIDATES = "PreemptionNoCandidates"  # Kueue's RequeueReasonPreemptionNoCandidates
PENDING_EVALUATION = "PendingEvaluation"  # what an empty reason resolves to (resolveQuotaReservedReason)
BYPASSED = "Bypassed scheduling evaluation because an equivalent workload recently failed"


class EquivalenceClasses:
    """Numbers the scheduling shapes seen so far: equal number, equal Kueue hash."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: dict[tuple[object, ...], int] = {}

    def of(self, spec: WorkloadSpec) -> int:
        """The class of a workload as written (before ``excludeResourcePrefixes``: Kueue's pod
        spec shape keeps the excluded requests)."""
        key = (spec.priority, spec.pod_sets)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self._ids)
        return found


def bulk_reason(reason: str) -> str:
    """The reason Kueue stores with a bulk-moved hash: the head's, or PendingEvaluation."""
    return reason if reason and reason != "Pending" else PENDING_EVALUATION


def bypassed(wl: Workload, reason: str, written: Pending | None = None) -> Pending:
    """The twin's verdict for a workload skipped because an equivalent one failed; ``written``:
    the verdict Kueue wrote for it when it failed on its own before, which its condition keeps."""
    kept = (written.reason, written.message) if written is not None and written.kueue_writes else None
    return Pending(wl.key, wl.cluster_queue, reason, BYPASSED, INADMISSIBLE, kueue_writes=False, written=kept)
