"""Kueue v0.19.2: ``pkg/scheduler/scheduler.go``, ``pkg/scheduler/flavorassigner/podset_reducer.go``,
``pkg/scheduler/preemption/preemption_oracle.go``.

One head's verdict, worked out afresh: Kueue's ``getAssignments`` with its preemption oracle
and partial admission's search (the memo, ``fastpath/verdict_memo.py``, decides when to ask again).

Flavors come first (``flavorassigner.py``). A flavor that does not fit asks the oracle whether
preemption could make it fit, and at which borrowing level; with no flavor that fits, the
assignment's targets are the preemptor's (``scheduler/preemption/preemption.py``). A workload with ``minCount`` that
neither fits nor can preempt at full size is tried at reduced counts, by binary search. The tree
does not change while one head is assigned, so preemption trials are remembered for that long.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from gpufleet.twin.apis.specs import ResourceFlavorSpec
from gpufleet.twin.cache.cohort import ClusterQueue, CohortTree
from gpufleet.twin.cache.resource_node import borrowing_level, usage_less
from gpufleet.twin.scheduler.cycle import NO_TARGETS, Verdict
from gpufleet.twin.scheduler.flavorassigner import (
    FIT,
    NO_CANDIDATES,
    PREEMPT,
    RECLAIM,
    Assignment,
    FlavorAssigner,
    MakePlan,
)
from gpufleet.twin.scheduler.preemption.preemption import Preemptor, Target
from gpufleet.twin.workload import Workload

Assign = Callable[[Workload, ClusterQueue], tuple[Assignment, Sequence[Target]]]


class FreshVerdicts:
    """The reference path's verdicts: every head's worked out afresh, as Kueue does in each cycle
    (``fastpath/verdict_memo.VerdictMemo`` remembers them while quota stands still)."""

    __slots__ = ("_assign", "also")

    def __init__(self, assign: Assign, *, also: Callable[[], None] | None = None) -> None:
        self._assign = assign
        self.also = also  # what lives as long as a quota state (the preemptor's bounds): dropped on ``clear``

    def get(self, wl: Workload, cq: ClusterQueue) -> Verdict:
        return Verdict(*self._assign(wl, cq))

    def clear(self) -> None:
        """Quota, a reservation time or an evicted flag changed."""
        if self.also is not None:
            self.also()


class Assignments:
    """Flavors and preemption targets for one head, against the tree as it stands."""

    def __init__(
        self,
        tree: CohortTree,
        flavors: dict[str, ResourceFlavorSpec],
        preemptor: Preemptor,
        *,
        fair_sharing: bool,
        plans: MakePlan | None,
    ) -> None:
        self.tree = tree
        self.preemptor = preemptor
        self.assigner = FlavorAssigner(flavors, self.oracle, fair_sharing, plans=plans)
        # Preemption trials of the workload being assigned (see _targets).
        self._trials: dict[tuple[object, ...], list[Target]] = {}
        self._alone: dict[int, frozenset[int]] = {}  # a flavor-resource contested alone, one set each

    def assign(self, wl: Workload, cq: ClusterQueue) -> tuple[Assignment, Sequence[Target]]:
        """Full size first (Fit, or Preempt with targets); then, with ``minCount``, the largest
        reduced size that fits or can preempt, found by binary search (Kueue's partial admission)."""
        if self._trials:
            self._trials.clear()
        assignment = self.assigner.assign_full(wl, cq)
        if assignment.mode == FIT:
            return assignment, NO_TARGETS
        assignment, targets = self._with_targets(wl, cq, assignment)
        if targets or not wl.can_be_partially_admitted():
            return assignment, targets
        reducible = [ps.count - ps.min_count if ps.min_count is not None else 0 for ps in wl.pod_sets]
        steps = max(reducible)
        lo, hi = 1, steps
        found: tuple[Assignment, Sequence[Target]] | None = None
        while lo <= hi:
            mid = (lo + hi) // 2
            counts = tuple(ps.count - (r * mid) // steps for ps, r in zip(wl.pod_sets, reducible, strict=True))
            attempt = self._with_targets(wl, cq, self.assigner.assign(wl, cq, counts))
            if attempt[0].mode == FIT or attempt[1]:
                found, hi = attempt, mid - 1
            else:
                lo = mid + 1
        return found if found is not None else (assignment, targets)

    def _with_targets(
        self, wl: Workload, cq: ClusterQueue, assignment: Assignment
    ) -> tuple[Assignment, Sequence[Target]]:
        """The assignment with its preemption targets (none unless it needs preemption)."""
        if assignment.mode in (PREEMPT, RECLAIM, NO_CANDIDATES):
            return assignment, self._targets(wl, cq, assignment.usage, assignment.contested)
        return assignment, NO_TARGETS

    def _targets(
        self, wl: Workload, cq: ClusterQueue, request: dict[int, int], contested: Collection[int]
    ) -> list[Target]:
        """Preemption targets, remembered while one workload is assigned (the tree does not change
        meanwhile): for a single flavor-resource, the oracle's trial is the final request. One
        contested flavor-resource, the common ask, keys by its quantity alone (no sort, no set)."""
        if len(request) == 1 and len(contested) == 1 and next(iter(request)) in contested:
            key: tuple[object, ...] = next(iter(request.items()))
        else:
            key = (tuple(sorted(request.items())), frozenset(contested))
        found = self._trials.get(key)
        if found is None:
            found = self._trials[key] = self.preemptor.get_targets(wl, cq, request, contested)
        return found

    def oracle(self, wl: Workload, cq: ClusterQueue, fr: int, quantity: int) -> tuple[int, int]:
        """Could preemption make ``quantity`` of ``fr`` fit? Reclaim when only other queues lose.
        With the borrowing level Kueue's ``SimulatePreemption`` gives the entry: with the targets'
        usage removed, or as the usage stands when there are none (a head that cannot preempt
        still reserves quota by it, and entries are ordered by it)."""
        alone = self._alone.get(fr)
        if alone is None:
            alone = self._alone[fr] = frozenset((fr,))
        targets = self._targets(wl, cq, {fr: quantity}, alone)
        if not targets:
            return NO_CANDIDATES, borrowing_level(cq.node, fr, quantity)
        queues = self.tree.cluster_queues
        removed = [
            (queues[t.workload.cluster_queue].node, q)
            for t in targets
            if t.workload.admission is not None
            for f, q in t.workload.admission.usage
            if f == fr
        ]
        level = borrowing_level(cq.node, fr, quantity, usage_less(fr, removed))
        mode = RECLAIM if all(t.workload.cluster_queue != cq.name for t in targets) else PREEMPT
        return mode, level
