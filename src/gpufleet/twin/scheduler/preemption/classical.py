"""Kueue v0.19.2: ``pkg/scheduler/preemption/classical/candidate_generator.go``,
``pkg/scheduler/preemption/classical/hierarchical_preemption.go``.

Classic preemption's candidates in a cohort tree: Kueue v0.19.2's hierarchical generator.

Kueue's classical preemption (``classicalPreemptions``, ``preemption/preemption.go``) always takes
its candidates from ``classical.NewCandidateIterator`` (``classical/candidate_generator.go`` and
``classical/hierarchical_preemption.go``); ``findCandidates`` serves fair sharing only. On a flat
cohort the generator's rules and the flat ones pick the same queues; in a tree they differ, so
the twin follows the generator everywhere.

Which workloads (each must use a contested flavor-resource):

* **own queue** (``withinClusterQueue`` not Never): those the policy allows, ``InClusterQueue``;
* **other queues** (the preemptor's queue has a parent and ``reclaimWithinCohort`` is not Never):
  the ancestors are walked from the parent to the root. At each ancestor its subtree is visited
  again except the child already visited, entering only child cohorts over their subtree quota on
  some contested flavor-resource and taking only ClusterQueues over their nominal quota there. The
  preemptor has the *hierarchical advantage* in an ancestor's subtree when its request fits in its
  own nominal quota, or in the unused quota of an ancestor below that one (the request less what
  each node on the way keeps locally: ``QuantitiesFitInQuota``): the quota it asks for is nearer
  to it than to the candidate. Such candidates are reclaimed whatever their priority
  (``InCohortReclamation``), within ``reclaimWithinCohort``. The others are priority candidates:
  ``InCohortReclaimWhileBorrowing`` when ``borrowWithinCohort`` is on and the candidate's priority
  is below the preemptor's and at most ``maxPriorityThreshold``; else ``InCohortReclamation``, but
  only while the preemptor will not borrow.

Order: ONE key, (not evicted, list, ``victim_key``) where list is 0 for hierarchical candidates,
1 for priority candidates, 2 for the own queue, and ``victim_key`` is ``CandidatesOrdering``'s
tail (lower priority, admitted more recently, uid last as the tie-breaker). Under
AdmissionFairSharing each ClusterQueue's part is in its usage order and the parts are merged as
sorted runs, as ``preemption.Candidates`` does.

Whether a candidate still counts is decided as it comes up, since earlier victims change usage:
own-queue ones always; a priority candidate that needs the preemptor not to borrow is skipped
while borrowing; any other one only while its ClusterQueue and every cohort between it and the
ancestor it was found under still use more than their quota (``candidateIsValid``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from gpufleet.twin.apis import reasons
from gpufleet.twin.apis.specs import ANY, LOWER_OR_NEWER_EQUAL_PRIORITY, NEVER, PreemptionSpec
from gpufleet.twin.cache.cohort import ClusterQueue, CohortTree
from gpufleet.twin.cache.resource_node import QuotaNode, local_available
from gpufleet.twin.workload import Workload

__all__ = [
    "Candidate",
    "CandidateOrder",
    "Variant",
    "attempts",
    "generate",
    "is_valid",
    "may_reclaim_in_hierarchy",
    "under_nominal",
]


class Variant(Enum):
    """How a candidate may be preempted (Kueue's ``preemptionVariant``); ``reason`` is Kueue's."""

    WITHIN_CLUSTER_QUEUE = "WithinClusterQueue"
    HIERARCHICAL_RECLAIM = "HierarchicalReclaim"
    RECLAIM_WITHOUT_BORROWING = "ReclaimWithoutBorrowing"  # only while the preemptor will not borrow
    RECLAIM_WHILE_BORROWING = "ReclaimWhileBorrowing"

    @property
    def reason(self) -> str:
        return _REASONS[self]


_REASONS = {
    Variant.WITHIN_CLUSTER_QUEUE: reasons.IN_CLUSTER_QUEUE,
    Variant.HIERARCHICAL_RECLAIM: reasons.IN_COHORT_RECLAMATION,
    Variant.RECLAIM_WITHOUT_BORROWING: reasons.IN_COHORT_RECLAMATION,
    Variant.RECLAIM_WHILE_BORROWING: reasons.IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass(frozen=True, slots=True)
class Candidate:
    """A workload that may be preempted, how, and the ancestor (``lca``) whose subtree walk found it.

    ``lca`` bounds the validity check: only the nodes from the candidate's ClusterQueue up to, not
    including, ``lca`` must still exceed their quota. ``None`` for the preemptor's own queue.
    """

    workload: Workload
    variant: Variant
    lca: QuotaNode | None

    @property
    def reason(self) -> str:
        return self.variant.reason


@dataclass(frozen=True, slots=True)
class CandidateOrder:
    """The generator's result: every candidate in preemption order, and what Kueue's choice of
    borrowing attempts reads (``NoCandidateFromOtherQueues``, ``NoCandidateForHierarchicalReclaim``)."""

    candidates: tuple[Candidate, ...]
    none_from_other_queues: bool
    none_for_hierarchical_reclaim: bool


Part = Callable[[ClusterQueue], list[Workload]]
"""A ClusterQueue's workloads using a contested flavor-resource, in candidate order (each part
sorted on its own, evicted first); the generator filters it and never changes it."""

Merge = Callable[[dict[str, list[Workload]]], list[Workload]]
"""Parts of several ClusterQueues into one list in candidate order (``Candidates.ordered``)."""


def within_quota(node: QuotaNode, frs: frozenset[int]) -> bool:
    """Kueue's ``IsWithinNominalInResources``: usage at most the subtree quota on every one of ``frs``."""
    usage, subtree = node.usage, node.subtree
    return all(usage[fr] <= subtree[fr] for fr in frs)


def fits_in_quota(node: QuotaNode, request: dict[int, int]) -> tuple[bool, dict[int, int]]:
    """Kueue's ``QuantitiesFitInQuota``: whether ``request`` fits in ``node``'s subtree quota now,
    and what of it is left for the parent once ``node``'s local (non-lendable) free quota is used."""
    fits = True
    left: dict[int, int] = {}
    for fr, v in request.items():
        if node.usage[fr] + v > node.subtree[fr]:
            fits = False
        left[fr] = max(0, v - local_available(node, fr))
    return fits, left


def may_reclaim_in_hierarchy(node: QuotaNode, fr: int, val: int) -> bool:
    """The second value of Kueue's ``FindHeightOfLowestSubtreeThatFits``: the lowest node of the
    path that holds ``val`` more of ``fr`` now is not the root. Then the flavor assigner simulates
    preemption even for a request above nominal, since quota in the preemptor's own subtree is
    borrowed by others (``fitsResourceQuota``)."""
    remaining = val
    for n in node.path:
        if n.parent is None:
            return False
        if n.usage[fr] + remaining <= n.subtree[fr]:
            return True
        remaining -= local_available(n, fr)
    return False


def _allowed(policy: str, wl: Workload, cand: Workload) -> bool:
    """Kueue's ``SatisfiesPreemptionPolicy`` for LowerPriority, LowerOrNewerEqualPriority and Any."""
    if policy == ANY:
        return True
    if cand.priority < wl.priority:
        return True
    return policy == LOWER_OR_NEWER_EQUAL_PRIORITY and cand.priority == wl.priority and wl.created < cand.created


def _priority_variant(policy: PreemptionSpec, wl: Workload, cand: Workload) -> Variant:
    """A candidate without the hierarchical advantage: reclaimable while borrowing only below the
    preemptor's priority and at most ``maxPriorityThreshold`` (``isAboveBorrowingThreshold``)."""
    if policy.borrow_within_cohort == NEVER or cand.priority >= wl.priority:
        return Variant.RECLAIM_WITHOUT_BORROWING
    threshold = policy.max_priority_threshold
    if threshold is not None and cand.priority > threshold:
        return Variant.RECLAIM_WITHOUT_BORROWING
    return Variant.RECLAIM_WHILE_BORROWING


def _over_quota_queues(
    tree: CohortTree, cohort: QuotaNode, skip: QuotaNode | None, own: ClusterQueue, frs: frozenset[int]
) -> list[ClusterQueue]:
    """Every ClusterQueue over nominal under ``cohort``, entering only child cohorts over quota and
    leaving out ``skip`` (the subtree the walk came up from) and the preemptor's own queue."""
    found: list[ClusterQueue] = []
    for child in cohort.child_cohorts:
        if child is not skip and not within_quota(child, frs):
            found += _over_quota_queues(tree, child, skip, own, frs)
    for leaf in cohort.child_queues:
        if leaf is not own.node and not within_quota(leaf, frs):
            found.append(tree.cluster_queues[leaf.name])
    return found


def generate(
    tree: CohortTree,
    wl: Workload,
    cq: ClusterQueue,
    request: dict[int, int],
    frs: frozenset[int],
    *,
    part: Part,
    merge: Merge,
) -> CandidateOrder:
    """All candidates for ``wl`` (asking ``request``, contesting ``frs``) in ``cq``, in order."""
    policy = cq.spec.preemption
    variants: dict[str, Variant] = {}  # workload key -> variant, for other queues' candidates
    lca: dict[str, QuotaNode] = {}  # ClusterQueue name -> the ancestor whose walk found it
    advantaged: dict[str, list[Workload]] = {}  # hierarchical candidates per ClusterQueue
    by_priority: dict[str, list[Workload]] = {}  # priority candidates per ClusterQueue
    if cq.node.parent is not None and policy.reclaim_within_cohort != NEVER:
        advantage, left = fits_in_quota(cq.node, request)
        previous: QuotaNode | None = None
        for ancestor in cq.node.path[1:]:
            for other in _over_quota_queues(tree, ancestor, previous, cq, frs):
                found = [c for c in part(other) if _allowed(policy.reclaim_within_cohort, wl, c)]
                if not found:
                    continue
                for c in found:
                    variants[c.key] = Variant.HIERARCHICAL_RECLAIM if advantage else _priority_variant(policy, wl, c)
                (advantaged if advantage else by_priority)[other.name] = found
                lca[other.name] = ancestor
            fits, left = fits_in_quota(ancestor, left)
            advantage = advantage or fits  # once a subtree holds the request, every wider one does
            previous = ancestor
    own: list[Candidate] = []
    if policy.within_cluster_queue != NEVER:
        own = [
            Candidate(c, Variant.WITHIN_CLUSTER_QUEUE, None)
            for c in part(cq)
            if _allowed(policy.within_cluster_queue, wl, c)
        ]
    lists = [
        [Candidate(c, variants[c.key], lca[c.cluster_queue]) for c in merge(parts)] if parts else []
        for parts in (advantaged, by_priority)
    ]
    lists.append(own)
    evicted = [c for group in lists for c in group if c.workload.evicted]
    rest = [c for group in lists for c in group if not c.workload.evicted]
    return CandidateOrder(
        tuple(evicted + rest),
        none_from_other_queues=not advantaged and not by_priority,
        none_for_hierarchical_reclaim=not advantaged,
    )


def is_valid(tree: CohortTree, cq: ClusterQueue, candidate: Candidate, frs: frozenset[int], *, borrowing: bool) -> bool:
    """Whether ``candidate`` still counts now that earlier victims are (simulated) gone."""
    name = candidate.workload.cluster_queue
    if name == cq.name:
        return True
    if borrowing and candidate.variant is Variant.RECLAIM_WITHOUT_BORROWING:
        return False
    for node in tree.cluster_queues[name].node.path:
        if node is candidate.lca:
            return True
        if within_quota(node, frs):
            return False
    return True


def attempts(cq: ClusterQueue, frs: frozenset[int], order: CandidateOrder) -> tuple[bool, ...]:
    """Which runs over the candidates Kueue makes, in order: True lets the preemptor borrow.

    One run with borrowing when no other queue offers a candidate, or when ``borrowWithinCohort``
    is off and the preemptor's queue is not under nominal on every contested flavor-resource (a run
    without borrowing could not succeed on other queues' quota); without then with borrowing when
    ``borrowWithinCohort`` is off and no candidate is hierarchical; else with then without.
    """
    forbidden = cq.spec.preemption.borrow_within_cohort == NEVER
    if order.none_from_other_queues or (forbidden and not under_nominal(cq, frs)):
        return (True,)
    if forbidden and order.none_for_hierarchical_reclaim:
        return (False, True)
    return (True, False)


def under_nominal(cq: ClusterQueue, frs: frozenset[int]) -> bool:
    """Kueue's ``queueUnderNominalInResourcesNeedingPreemption``: usage strictly below nominal on all ``frs``."""
    node = cq.node
    return all(node.usage[fr] < node.nominal[fr] for fr in frs)
