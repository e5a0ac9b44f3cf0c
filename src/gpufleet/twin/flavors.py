"""Flavor assignment: which flavor each pod set gets, and in which mode (Fit, Preempt, NoFit).

For each pod set and each resource group of the ClusterQueue, the flavors are tried in the
queue's order (Kueue's ``flavorassigner.go``):

* a flavor whose node labels the pod set's node selector / required affinity contradicts, or
  whose NoSchedule/NoExecute taints the pod set does not tolerate, is skipped (NoMatchingFlavor);
* per resource: above ``potential_available`` is NoFit (ExceedsMaxQuota); within ``available``
  is Fit, with the borrowing level of the lowest subtree that holds it; otherwise preemption is
  simulated when it could help (request within nominal, ``borrowWithinCohort``, or fair sharing
  with reclaim) and yields Preempt / Reclaim / no candidates, else NoFit (WaitingForQuota);
* a flavor's mode is the worst of its resources; the search stops at a Fit without borrowing,
  or where ``flavorFungibility`` says ``MayStopSearch``; otherwise the best flavor seen wins by
  ``preference`` (BorrowingOverPreemption by default), the earlier flavor on ties.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpufleet.twin import reasons
from gpufleet.twin.cohort import ClusterQueue, FlavorChoice
from gpufleet.twin.quota import available, borrowing_level, potential_available
from gpufleet.twin.specs import (
    NEVER,
    PREEMPTION_OVER_BORROWING,
    TRY_NEXT_FLAVOR,
    PodSetSpec,
    ResourceFlavorSpec,
)
from gpufleet.twin.workload import PodSetAdmission, Workload

# Modes, ordered from worst to best (Kueue's granular ranks).
NO_FIT = 0
NO_CANDIDATES = 1  # preemption needed, but no allowed victims: reported as Preempt
PREEMPT = 2
RECLAIM = 3
FIT = 4

MODE_NAMES = {NO_FIT: "NoFit", NO_CANDIDATES: "Preempt", PREEMPT: "Preempt", RECLAIM: "Preempt", FIT: "Fit"}

Oracle = Callable[[Workload, ClusterQueue, int, int], int]
"""Simulates preemption for one flavor-resource and quantity; returns PREEMPT, RECLAIM or NO_CANDIDATES."""


@dataclass(slots=True)
class Assignment:
    """The outcome of flavor assignment for one workload at given pod counts."""

    pod_sets: list[PodSetAdmission] = field(default_factory=list)
    mode: int = FIT
    borrowing: int = 0
    usage: dict[int, int] = field(default_factory=dict)
    contested: set[int] = field(default_factory=set)  # flavor-resources that need preemption
    reason: str = ""
    message: str = ""

    @property
    def representative_mode(self) -> str:
        return MODE_NAMES[self.mode]


def matches(ps: PodSetSpec, flavor: ResourceFlavorSpec) -> str:
    """Why ``flavor`` cannot host ``ps`` (empty when it can): taints, then node labels."""
    for taint in flavor.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if any(t.tolerates(taint) for t in flavor.tolerations):
            continue
        if not any(t.tolerates(taint) for t in ps.tolerations):
            return reasons.untolerated_taint(taint.key, taint.value, taint.effect, flavor.name)
    labels = dict(flavor.node_labels)
    if not labels:
        return ""
    for key, value in ps.node_selector:
        if key in labels and labels[key] != value:
            return reasons.flavor_selector_mismatch(flavor.name)
    if ps.affinity_terms:
        only_own = [tuple(r for r in term if r.key in labels) for term in ps.affinity_terms]
        if not any(all(r.matches(labels) for r in term) for term in only_own):
            return reasons.flavor_selector_mismatch(flavor.name)
    return ""


class FlavorAssigner:
    """Assigns flavors for workloads of one configuration (flavors, fair-sharing flag, oracle)."""

    def __init__(self, flavors: dict[str, ResourceFlavorSpec], oracle: Oracle, fair_sharing: bool) -> None:
        self.flavors = flavors
        self.oracle = oracle
        self.fair_sharing = fair_sharing
        self._match_cache: dict[tuple[PodSetSpec, str], str] = {}

    def assign(self, wl: Workload, cq: ClusterQueue, counts: tuple[int, ...]) -> Assignment:
        result = Assignment()
        for ps, count in zip(wl.pod_sets, counts, strict=True):
            flavors_of_ps: list[tuple[str, str]] = []
            by_group: dict[int, list[tuple[str, int]]] = {}
            failures: list[str] = []
            failure_reasons: set[str] = set()
            for resource, per_pod in ps.requests:
                group = cq.group_of.get(resource)
                if group is None:
                    if per_pod > 0:
                        failures.append(reasons.resource_unavailable(resource))
                        failure_reasons.add(reasons.NO_MATCHING_FLAVOR)
                    continue
                by_group.setdefault(group, []).append((resource, per_pod * count))
            if not failures:
                for group_idx in sorted(by_group):
                    chosen = self._choose(wl, ps, cq, group_idx, by_group[group_idx], result, failures, failure_reasons)
                    if chosen is None:
                        break
                    flavor, mode, level = chosen
                    for resource, qty in by_group[group_idx]:
                        fr = flavor.frs[resource]
                        result.usage[fr] = result.usage.get(fr, 0) + qty
                        flavors_of_ps.append((resource, flavor.flavor))
                        if mode < FIT:
                            result.contested.add(fr)
                    result.mode = min(result.mode, mode)
                    result.borrowing = max(result.borrowing, level)
                    if mode < FIT:
                        self._note(result, ps.name, failures, failure_reasons)
                    failures, failure_reasons = [], set()
                else:
                    result.pod_sets.append(PodSetAdmission(ps.name, count, tuple(flavors_of_ps)))
                    continue
            result.mode = NO_FIT
            self._note(result, ps.name, failures, failure_reasons)
            return result
        return result

    @staticmethod
    def _note(result: Assignment, pod_set: str, failures: list[str], failure_reasons: set[str]) -> None:
        """Keep the first non-fitting pod set's message and reason, as Kueue's ``Message()`` does."""
        if not result.message and failures:
            result.message = reasons.couldnt_assign(pod_set, failures)
            result.reason = reasons.most_hopeful(failure_reasons)

    def _choose(
        self,
        wl: Workload,
        ps: PodSetSpec,
        cq: ClusterQueue,
        group_idx: int,
        requests: list[tuple[str, int]],
        so_far: Assignment,
        failures: list[str],
        failure_reasons: set[str],
    ) -> tuple[FlavorChoice, int, int] | None:
        fungibility = cq.spec.flavor_fungibility
        best: tuple[FlavorChoice, int, int] | None = None
        best_rank: tuple[int, ...] | None = None
        for flavor in cq.groups[group_idx].flavors:
            mismatch = self._mismatch(ps, flavor.flavor)
            if mismatch:
                failures.append(mismatch)
                failure_reasons.add(reasons.NO_MATCHING_FLAVOR)
                continue
            mode, level = FIT, 0
            for resource, qty in requests:
                fr = flavor.frs.get(resource)
                if fr is None:
                    failures.append(reasons.resource_unavailable(resource))
                    failure_reasons.add(reasons.NO_MATCHING_FLAVOR)
                    mode = NO_FIT
                    continue
                m, lv = self._fits(wl, cq, fr, resource, flavor.flavor, so_far.usage.get(fr, 0), qty, failures, failure_reasons)
                mode = min(mode, m)
                level = max(level, lv)
            if mode == FIT and level == 0:
                return flavor, mode, level
            if mode > NO_CANDIDATES:
                rank = _rank(mode, level, fungibility.preference)
                if best_rank is None or rank < best_rank:
                    best, best_rank = (flavor, mode, level), rank
                try_next = (
                    fungibility.when_can_borrow == TRY_NEXT_FLAVOR
                    if mode == FIT
                    else fungibility.when_can_preempt == TRY_NEXT_FLAVOR
                )
                if not try_next:
                    return flavor, mode, level
            elif mode == NO_CANDIDATES and best is None:
                best, best_rank = (flavor, mode, level), (9, level)
            elif mode == NO_CANDIDATES and best_rank is not None and best_rank[0] == 9 and level < best_rank[1]:
                best, best_rank = (flavor, mode, level), (9, level)
        return best

    def _mismatch(self, ps: PodSetSpec, flavor: str) -> str:
        key = (ps, flavor)
        cached = self._match_cache.get(key)
        if cached is None:
            spec = self.flavors.get(flavor) or ResourceFlavorSpec(flavor)
            cached = self._match_cache[key] = matches(ps, spec)
        return cached

    def _fits(
        self,
        wl: Workload,
        cq: ClusterQueue,
        fr: int,
        resource: str,
        flavor: str,
        previous: int,
        request: int,
        failures: list[str],
        failure_reasons: set[str],
    ) -> tuple[int, int]:
        node = cq.node
        val = previous + request
        capacity = potential_available(node, fr)
        if val > capacity:
            failures.append(reasons.insufficient_quota(resource, flavor, previous, request, capacity))
            failure_reasons.add(reasons.EXCEEDS_MAX_QUOTA)
            return NO_FIT, 0
        free = available(node, fr)
        if val <= free:
            return FIT, borrowing_level(node, fr, val)
        failures.append(reasons.insufficient_unused_quota(resource, flavor, val - free))
        failure_reasons.add(reasons.WAITING_FOR_QUOTA)
        policy = cq.spec.preemption
        within_nominal = val <= node.nominal[fr]
        may_borrow_preempt = node.parent is not None and (
            policy.borrow_within_cohort != NEVER or (self.fair_sharing and policy.reclaim_within_cohort != NEVER)
        )
        if not within_nominal and not may_borrow_preempt:
            return NO_FIT, 0
        level = 0 if val <= node.subtree[fr] else _level_without_usage(cq, fr, val)
        return self.oracle(wl, cq, fr, val), level


def _level_without_usage(cq: ClusterQueue, fr: int, val: int) -> int:
    """Borrowing level a request would need with the tree empty (used for preempting entries)."""
    for level, n in enumerate(cq.node.path):
        if val <= n.subtree[fr]:
            return level
    return len(cq.node.path) - 1


def _rank(mode: int, level: int, preference: str | None) -> tuple[int, ...]:
    """Lower is better: Kueue's ``isPreferred`` as one key (fit/preempt vs borrow order, level)."""
    fit = 0 if mode == FIT else 1
    borrow = 1 if level > 0 else 0
    if preference == PREEMPTION_OVER_BORROWING:
        return (borrow, fit, level, -mode)
    return (fit, borrow, level, -mode)
