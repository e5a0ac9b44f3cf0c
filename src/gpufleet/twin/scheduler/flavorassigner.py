"""Kueue v0.19.2: ``pkg/scheduler/flavorassigner/flavorassigner.go``.

Flavor assignment: which flavor each pod set gets, and in which mode (Fit, Preempt, NoFit).

For each pod set and each resource group of the ClusterQueue, the flavors are tried in the
queue's order (Kueue's ``flavorassigner.go``):

* a flavor whose node labels the pod set's node selector / required affinity contradicts, or
  whose NoSchedule/NoExecute taints the pod set does not tolerate, is skipped (NoMatchingFlavor);
* per resource: above ``potential_available`` is NoFit (ExceedsMaxQuota); within ``available``
  is Fit, with the borrowing level of the lowest subtree that holds it; otherwise preemption is
  simulated when it could help (request within nominal, a cohort below the root whose quota
  holds it, ``borrowWithinCohort``, or fair sharing with reclaim) and yields Preempt / Reclaim /
  no candidates, else NoFit (WaitingForQuota);
* a flavor's mode is the worst of its resources; the search stops at a Fit without borrowing,
  or where ``flavorFungibility`` says ``MayStopSearch``; otherwise the best flavor seen wins by
  ``preference`` (BorrowingOverPreemption by default), the earlier flavor on ties.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpufleet.twin.apis import reasons
from gpufleet.twin.apis.specs import (
    NEVER,
    PREEMPTION_OVER_BORROWING,
    TRY_NEXT_FLAVOR,
    PodSetSpec,
    ResourceFlavorSpec,
)
from gpufleet.twin.cache.cohort import ClusterQueue, FlavorChoice
from gpufleet.twin.cache.resource_node import QuotaNode, available, borrowing_level, potential_available
from gpufleet.twin.scheduler.preemption.classical import may_reclaim_in_hierarchy
from gpufleet.twin.workload import Admission, PodSetAdmission, Workload

# Modes, ordered from worst to best (Kueue's granular ranks).
NO_FIT = 0
NO_CANDIDATES = 1  # preemption needed, but no allowed victims: reported as Preempt
PREEMPT = 2
RECLAIM = 3
FIT = 4

Oracle = Callable[[Workload, ClusterQueue, int, int], tuple[int, int]]
"""Simulates preemption for one flavor-resource and quantity (Kueue's ``SimulatePreemption``):
PREEMPT, RECLAIM or NO_CANDIDATES, and the borrowing level then, with the targets' usage
removed (with the usage as it is when there are none)."""

# What ``_fits`` reads of the live quota tree (a ``Reading``: kind, flavor-resource, quantity, value).
AVAILABLE, LEVEL, IN_HIERARCHY, ORACLE = range(4)
Value = int | tuple[int, int]  # what a reading gives: a number, or the oracle's mode and level
Reading = tuple[int, int, int, Value]


class _Read:
    """A node of one key's readings tree (see ``FlavorAssigner._recall``): what ``_assign`` reads
    next, given the values read before it, and where each value read leads."""

    __slots__ = ("fr", "kind", "next", "val")

    def __init__(self, kind: int, fr: int, val: int) -> None:
        self.kind, self.fr, self.val = kind, fr, val
        self.next: dict[Value, _Read | Assignment] = {}


class Assignment:
    """The outcome of flavor assignment for one workload at given pod counts. Never changed once
    made, so heads may share one (the memo's look-alikes, a plan's plain Fit)."""

    __slots__ = ("admission", "borrowing", "contested", "message", "mode", "pod_sets", "reason", "usage")

    def __init__(self, mode: int = FIT) -> None:
        self.pod_sets: Sequence[PodSetAdmission] = ()
        self.mode = mode
        self.borrowing = 0  # the deepest borrowing level over the assigned flavor-resources
        self.usage: dict[int, int] = {}  # flavor-resource index -> quantity
        self.contested: set[int] = set()  # flavor-resources that need preemption
        self.reason = ""
        self.message = ""
        # The quota reservation it makes, built at the first admission and shared by the next
        # ones (``Twin.admit``): an immutable value, and one object fewer per running workload.
        self.admission: Admission | None = None

    @classmethod
    def fit(cls, borrowing: int, usage: dict[int, int], pod_sets: tuple[PodSetAdmission, ...]) -> Assignment:
        """A plain Fit (``fit_plans``) with the plan's usage and pod sets."""
        result = cls()
        result.pod_sets, result.borrowing, result.usage = pod_sets, borrowing, usage
        return result


def full_counts(wl: Workload) -> tuple[int, ...]:
    """Every pod set's requested count (a head's first try, before partial admission)."""
    return tuple([ps.count for ps in wl.pod_sets])


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


@dataclass(frozen=True, slots=True)
class _Layout:
    """How one pod set maps onto one ClusterQueue's resource groups (computed once, cached)."""

    missing: tuple[str, ...]  # requested resources no resource group covers
    groups: tuple[tuple[int, tuple[tuple[str, int], ...], tuple[tuple[FlavorChoice, str], ...]], ...]
    # per group: (index, ((resource, per-pod request), ...), ((flavor, mismatch reason or ""), ...))


class PlainFit(Protocol):
    """A plain Fit worked out once per shape (``fastpath/fit_plans.py``'s ``Plan``): the borrowing
    level at which it holds on the live tree (-1: try every flavor), and its assignment there."""

    def level(self, node: QuotaNode) -> int: ...
    def assignment(
        self, level: int, make: Callable[[int, dict[int, int], tuple[PodSetAdmission, ...]], Assignment]
    ) -> Assignment: ...


# The fast path's plan maker (``fastpath/fit_plans.make_plan``): None, the reference path, tries
# every flavor of every head.
MakePlan = Callable[
    [Callable[[ClusterQueue, PodSetSpec], _Layout], ClusterQueue, tuple[PodSetSpec, ...], tuple[int, ...]],
    PlainFit | None,
]


class FlavorAssigner:
    """Assigns flavors for workloads of one configuration (flavors, fair-sharing flag, oracle)."""

    def __init__(
        self,
        flavors: dict[str, ResourceFlavorSpec],
        oracle: Oracle,
        fair_sharing: bool,
        *,
        plans: MakePlan | None = None,
    ) -> None:
        self.flavors = flavors
        self.plans = plans  # the fast path: a plain Fit checked against a plan (see ``_plan``), and replays
        self.oracle = oracle
        self.fair_sharing = fair_sharing
        self._layouts: dict[tuple[str, PodSetSpec], _Layout] = {}
        # Per (ClusterQueue, pod sets, counts): what a plain Fit within the queue's own quota
        # would assign (see ``_plain_fit``); None where the first flavor can never give one.
        self._plans: dict[tuple[object, ...], PlainFit | None] = {}
        # The same plans at full size by the memo's shape alone (``assign_full``).
        self._full_plans: dict[tuple[str, int], PlainFit | None] = {}
        # Per the same key, the assignments ``_assign`` made, by what it read of the quota tree
        # to make them, in order (see ``_recall``).
        self._replays: dict[tuple[object, ...], _Read | Assignment] = {}
        self._reading: list[Reading] | None = None  # what the running ``_assign`` reads, when kept

    def layout(self, cq: ClusterQueue, ps: PodSetSpec) -> _Layout:
        key = (cq.name, ps)
        found = self._layouts.get(key)
        if found is None:
            missing = () if cq.ignore_undeclared else tuple(r for r, q in ps.requests if q > 0 and r not in cq.group_of)
            by_group: dict[int, list[tuple[str, int]]] = {}
            for resource, per_pod in ps.requests:
                if resource in cq.group_of:
                    by_group.setdefault(cq.group_of[resource], []).append((resource, per_pod))
            groups = []
            for idx in sorted(by_group):
                choices = []
                for flavor in cq.groups[idx].flavors:
                    spec = self.flavors.get(flavor.flavor) or ResourceFlavorSpec(flavor.flavor)
                    choices.append((flavor, matches(ps, spec)))
                groups.append((idx, tuple(by_group[idx]), tuple(choices)))
            found = self._layouts[key] = _Layout(missing, tuple(groups))
        return found

    def assign(self, wl: Workload, cq: ClusterQueue, counts: tuple[int, ...]) -> Assignment:
        """The assignment at ``counts``: with ``plans``, a plain Fit is read off the pod sets'
        plan for this queue (most admissions in a busy cluster) instead of trying each flavor,
        and any other assignment is replayed where the tree reads as when it was made."""
        if self.plans is None:
            return self._assign(wl, cq, counts)
        shape = wl.shape  # the memo's number for (ClusterQueue, pod sets, ...): cheaper to hash
        key = (shape, counts) if shape is not None and shape[0] == cq.name else (cq.name, wl.pod_sets, counts)
        plan = self._plan(key, wl, cq, counts)
        if plan is not None:
            level = plan.level(cq.node)
            if level >= 0:
                return plan.assignment(level, Assignment.fit)
        return self._replayed(wl, cq, counts, key)

    def assign_full(self, wl: Workload, cq: ClusterQueue) -> Assignment:
        """``assign`` with every pod set at full size (a head's first try). With plans, a head the
        memo has numbered (``wl.shape``: its queue and look-alike class) finds its plan by that
        number alone: no counts built and hashed per head."""
        shape = wl.shape
        if self.plans is None or shape is None or shape[0] != cq.name:
            return self.assign(wl, cq, full_counts(wl))
        try:
            plan = self._full_plans[shape]
        except KeyError:  # None is a plan: "never a plain Fit"
            counts = full_counts(wl)
            plan = self._full_plans[shape] = self._plan((shape, counts), wl, cq, counts)
        if plan is not None:
            level = plan.level(cq.node)
            if level >= 0:
                return plan.assignment(level, Assignment.fit)
        counts = full_counts(wl)
        return self._replayed(wl, cq, counts, (shape, counts))

    def _replayed(self, wl: Workload, cq: ClusterQueue, counts: tuple[int, ...], key: tuple[object, ...]) -> Assignment:
        """``_assign``, or its earlier answer where the live tree reads as it did then (``_recall``)."""
        replay = self._replays.get(key)
        if replay is not None:
            found = self._recall(wl, cq, replay)
            if found is not None:
                return found
        reading: list[Reading] = []
        self._reading = reading
        try:
            result = self._assign(wl, cq, counts)
        finally:
            self._reading = None
        self._replays[key] = _learn(replay, reading, result)
        return result

    def _recall(self, wl: Workload, cq: ClusterQueue, node: _Read | Assignment) -> Assignment | None:
        """The assignment ``_assign`` would make, if it made it before from the same readings.

        ``_assign`` is a function of the workload's pod sets and counts (the key), the static
        quota, and what it reads of the live tree, in the order it reads it (``_fits``:
        ``available``, ``borrowing_level``, ``may_reclaim_in_hierarchy``, the preemption oracle
        for this workload); which reading comes next depends only on the values before it. So the
        readings of one key form a tree whose leaves are assignments: walk it reading the live
        tree; a value never seen there ends the walk (None)."""
        tree = cq.node
        got: Value
        while isinstance(node, _Read):
            kind, fr, val = node.kind, node.fr, node.val
            if kind == AVAILABLE:
                got = available(tree, fr)
            elif kind == LEVEL:
                got = borrowing_level(tree, fr, val)
            elif kind == IN_HIERARCHY:
                got = may_reclaim_in_hierarchy(tree, fr, val)
            else:
                got = self.oracle(wl, cq, fr, val)
            found = node.next.get(got)
            if found is None:
                return None
            node = found
        return node

    def _plan(
        self, key: tuple[object, ...], wl: Workload, cq: ClusterQueue, counts: tuple[int, ...]
    ) -> PlainFit | None:
        """The plain-Fit plan of ``wl``'s pod sets at ``counts`` in ``cq``, made once per key."""
        try:
            return self._plans[key]
        except KeyError:  # None is a plan: "never a plain Fit"
            assert self.plans is not None
            plan = self._plans[key] = self.plans(self.layout, cq, wl.pod_sets, counts)
            return plan

    def _assign(self, wl: Workload, cq: ClusterQueue, counts: tuple[int, ...]) -> Assignment:
        """Every flavor of every group tried in order, with the failures of those that do not fit."""
        result = Assignment()
        usage = result.usage
        pod_sets: list[PodSetAdmission] = []
        result.pod_sets = pod_sets
        for ps, count in zip(wl.pod_sets, counts, strict=True):
            layout = self.layout(cq, ps)
            failures: list[str] = []
            failure_reasons: set[str] = set()
            if layout.missing:
                failures.extend(reasons.resource_unavailable(r) for r in layout.missing)
                result.mode = NO_FIT
                self._note(result, ps.name, failures, {reasons.NO_MATCHING_FLAVOR})
                return result
            flavors_of_ps: list[tuple[str, str]] = []
            for _, per_pod, choices in layout.groups:
                requests = per_pod if count == 1 else tuple((r, q * count) for r, q in per_pod)
                chosen = self._choose(wl, cq, choices, requests, so_far=usage, failures=failures, why=failure_reasons)
                if chosen is None:
                    result.mode = NO_FIT
                    self._note(result, ps.name, failures, failure_reasons)
                    return result
                flavor, mode, level, hot = chosen
                result.contested.update(hot)
                for resource, qty in requests:
                    fr = flavor.frs[resource]
                    usage[fr] = usage.get(fr, 0) + qty
                    flavors_of_ps.append((resource, flavor.flavor))
                result.mode = min(result.mode, mode)
                result.borrowing = max(result.borrowing, level)
                if mode < FIT:
                    self._note(result, ps.name, failures, failure_reasons)
                if failures:
                    failures, failure_reasons = [], set()
            pod_sets.append(PodSetAdmission(ps.name, count, tuple(flavors_of_ps)))
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
        cq: ClusterQueue,
        choices: tuple[tuple[FlavorChoice, str], ...],
        requests: tuple[tuple[str, int], ...],
        *,
        so_far: dict[int, int],
        failures: list[str],
        why: set[str],
    ) -> tuple[FlavorChoice, int, int, tuple[int, ...]] | None:
        """The chosen flavor, its mode and borrowing level, and the flavor-resources that need
        preemption in it: only those whose own mode is below Fit (Kueue's per-resource
        ``FlavorAssignment.Mode``, which ``frsNeedPreemption`` reads)."""
        failure_reasons = why
        fungibility = cq.spec.flavor_fungibility
        best: tuple[FlavorChoice, int, int, tuple[int, ...]] | None = None
        best_rank: tuple[int, ...] | None = None
        for flavor, mismatch in choices:
            if mismatch:
                failures.append(mismatch)
                failure_reasons.add(reasons.NO_MATCHING_FLAVOR)
                continue
            mode, level = FIT, 0
            hot: list[int] = []
            for resource, qty in requests:
                fr = flavor.frs.get(resource)
                if fr is None:
                    failures.append(reasons.resource_unavailable(resource))
                    failure_reasons.add(reasons.NO_MATCHING_FLAVOR)
                    mode = NO_FIT
                    continue
                m, lv = self._fits(
                    wl,
                    cq,
                    fr,
                    resource=resource,
                    flavor=flavor.flavor,
                    previous=so_far.get(fr, 0),
                    request=qty,
                    failures=failures,
                    failure_reasons=failure_reasons,
                )
                mode = min(mode, m)
                level = max(level, lv)
                if m < FIT:
                    hot.append(fr)
            if mode == FIT and level == 0:
                return flavor, mode, level, ()
            if mode > NO_CANDIDATES:
                rank = _rank(mode, level, fungibility.preference)
                if best_rank is None or rank < best_rank:
                    best, best_rank = (flavor, mode, level, tuple(hot)), rank
                try_next = (
                    fungibility.when_can_borrow == TRY_NEXT_FLAVOR
                    if mode == FIT
                    else fungibility.when_can_preempt == TRY_NEXT_FLAVOR
                )
                if not try_next:
                    return flavor, mode, level, tuple(hot)
            elif mode == NO_CANDIDATES and (best_rank is None or (best_rank[0] == 9 and level < best_rank[1])):
                best, best_rank = (flavor, mode, level, tuple(hot)), (9, level)  # below any viable flavor
        return best

    def _fits(
        self,
        wl: Workload,
        cq: ClusterQueue,
        fr: int,
        *,
        resource: str,
        flavor: str,
        previous: int,
        request: int,
        failures: list[str],
        failure_reasons: set[str],
    ) -> tuple[int, int]:
        node = cq.node
        val = previous + request
        free = available(node, fr)
        reading = self._reading
        if reading is not None:
            reading.append((AVAILABLE, fr, val, free))
        if val <= free:  # available never exceeds potential_available, so this is a Fit
            level = borrowing_level(node, fr, val)
            if reading is not None:
                reading.append((LEVEL, fr, val, level))
            return FIT, level
        capacity = potential_available(node, fr)
        if val > capacity:
            failures.append(reasons.insufficient_quota(resource, flavor, previous, request, capacity))
            failure_reasons.add(reasons.EXCEEDS_MAX_QUOTA)
            return NO_FIT, 0
        failures.append(reasons.insufficient_unused_quota(resource, flavor, val - free))
        failure_reasons.add(reasons.WAITING_FOR_QUOTA)
        policy = cq.spec.preemption
        within_nominal = val <= node.nominal[fr]
        may_borrow_preempt = node.parent is not None and (
            policy.borrow_within_cohort != NEVER or (self.fair_sharing and policy.reclaim_within_cohort != NEVER)
        )
        if not within_nominal and not may_borrow_preempt:
            in_hierarchy = may_reclaim_in_hierarchy(node, fr, val)
            if reading is not None:
                reading.append((IN_HIERARCHY, fr, val, in_hierarchy))
            if not in_hierarchy:
                return NO_FIT, 0
        found = self.oracle(wl, cq, fr, val)
        if reading is not None:
            reading.append((ORACLE, fr, val, found))
        return found


def _learn(root: _Read | Assignment | None, readings: list[Reading], result: Assignment) -> _Read | Assignment:
    """``root`` (a key's readings tree, if any) with the branch of ``readings`` ending in ``result``."""
    if not isinstance(root, _Read) or not readings:
        return _branch(readings, result)  # the key's first readings (or none: the result reads nothing)
    node, i = root, 0
    while True:  # follow the known part: the same values lead to the same next reading
        kind, fr, val, got = readings[i]
        assert (node.kind, node.fr, node.val) == (kind, fr, val)
        found = node.next.get(got)
        if not isinstance(found, _Read):
            node.next[got] = _branch(readings[i + 1 :], result)
            return root
        node, i = found, i + 1


def _branch(readings: list[Reading], result: Assignment) -> _Read | Assignment:
    """A chain of readings ending in ``result``."""
    leaf: _Read | Assignment = result
    for kind, fr, val, got in reversed(readings):
        node = _Read(kind, fr, val)
        node.next[got] = leaf
        leaf = node
    return leaf


def _rank(mode: int, level: int, preference: str | None) -> tuple[int, ...]:
    """Lower is better: Kueue's ``isPreferred`` as one key (fit/preempt vs borrow order, level)."""
    fit = 0 if mode == FIT else 1
    borrow = 1 if level > 0 else 0
    if preference == PREEMPTION_OVER_BORROWING:
        return (borrow, fit, level, -mode)
    return (fit, borrow, level, -mode)
