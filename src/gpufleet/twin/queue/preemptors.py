"""Kueue v0.19.2: ``pkg/cache/queue/cluster_queue.go``.

Kueue's preemptor workload of each ClusterQueue, and the alpha ``PrioritizePreemptorWorkloads`` gate.

Kueue remembers, per ClusterQueue, the workload last requeued while its victims are being
evicted (``preemptorWorkload`` in ``pkg/cache/queue/cluster_queue.go``, set in
``requeueIfNotPresent`` on ``RequeueReasonPendingPreemption``); the mark stays until the workload
leaves the queue (admitted or deleted). With ``PrioritizePreemptorWorkloads`` (alpha, off by
default in v0.19.2; Kueue's answer to cohort-reclaim thrash, kueue#13662) a marked workload:

* is ordered before every other entry of the cycle: the classical order's first rule
  (``scheduler.go`` ``makeClassicalIterator``) and the fair-sharing tournament's, at every level
  (``fair_sharing_iterator.go`` ``entryComparer.less``);
* reserves the quota it is owed when it needs preemption but finds no candidates, even in a
  ClusterQueue that can always reclaim (``reserveCapacityForUnreclaimablePreempt``), so what its
  victims freed is not taken by a borrower of another queue before it is admitted.

The twin keeps the mark as (workload, its last reservation time): an admission changes the
reservation time, so a workload admitted since it was marked is no longer the preemptor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

from gpufleet.twin.workload import Workload

PRIORITIZE_PREEMPTOR_WORKLOADS = "PrioritizePreemptorWorkloads"


class _Entry(Protocol):
    @property
    def wl(self) -> Workload: ...

    def classical_key(self) -> tuple[int, int, int, str]: ...


E = TypeVar("E", bound=_Entry)


class PreemptorWorkloads:
    """The preemptor workload of each ClusterQueue, and whether the gate prioritizes them."""

    __slots__ = ("_marked", "enabled")

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._marked: dict[str, tuple[str, int]] = {}

    def mark(self, wl: Workload) -> None:
        """``wl`` was requeued waiting for its victims: its ClusterQueue's preemptor now."""
        self._marked[wl.cluster_queue] = (wl.key, wl.reserved_at)

    def marked(self) -> tuple[tuple[str, str], ...]:
        """(ClusterQueue, workload) of every mark, for a fingerprint of the state (loops.py)."""
        return tuple(sorted((cq, key) for cq, (key, _) in self._marked.items()))

    def is_preemptor(self, wl: Workload) -> bool:
        return wl.admission is None and self._marked.get(wl.cluster_queue) == (wl.key, wl.reserved_at)

    def prioritized(self, wl: Workload) -> bool:
        """The gate is on and ``wl`` is its ClusterQueue's preemptor."""
        return self.enabled and self.is_preemptor(wl)

    def first(self) -> Callable[[_Entry], bool] | None:
        """For the tournament: which entries go first at every level (None: the gate is off)."""
        if not self.enabled:
            return None
        return lambda e: self.prioritized(e.wl)

    def classical(self, entries: Iterable[E]) -> Iterator[E]:
        """The classical order: preemptors first when the gate is on, then the classical key."""
        if not self.enabled:
            return iter(sorted(entries, key=lambda e: e.classical_key()))
        return iter(sorted(entries, key=lambda e: (not self.prioritized(e.wl), e.classical_key())))
