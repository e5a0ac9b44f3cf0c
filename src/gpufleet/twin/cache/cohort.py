"""Kueue v0.19.2: ``pkg/cache/hierarchy/``, ``pkg/cache/scheduler/cohort.go``,
``pkg/cache/scheduler/clusterqueue.go``.

The cohort tree: ClusterQueues and Cohorts wired into ``QuotaNode``s from their specs.

Kueue's rules carried over: a ClusterQueue naming a Cohort that has no object gets an implicit,
quota-less Cohort; a Cohort whose ``parentName`` is missing gets an implicit parent; a cycle in
the parent chain disables every ClusterQueue under it until it is fixed.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from gpufleet.twin.apis.specs import ClusterQueueSpec, ClusterSpec, ResourceGroupSpec
from gpufleet.twin.cache.resource_node import QuotaNode, recompute_subtree
from gpufleet.twin.resources import UNLIMITED, FlavorResources
from gpufleet.twin.workload import Workload


@dataclass(frozen=True, slots=True)
class FlavorChoice:
    """One flavor of a resource group, with the flavor-resource index of each covered resource."""

    flavor: str
    frs: dict[str, int]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorChoice, ...]


def _victim_key(wl: Workload) -> tuple[int, int, str]:
    return wl.victim_key


class ClusterQueue:
    """A ClusterQueue: its frozen spec, its quota node, and the workloads holding its quota."""

    __slots__ = (
        "afs_usage", "group_of", "groups", "ignore_undeclared", "inactive_reason", "name", "node", "ordered", "spec",
        "using", "workloads",
    )  # fmt: skip

    def __init__(self, spec: ClusterQueueSpec, node: QuotaNode, groups: tuple[ResourceGroup, ...]) -> None:
        self.spec = spec
        self.name = spec.name
        self.node = node
        self.groups = groups
        self.group_of = {r: i for i, g in enumerate(groups) for r in g.covered}
        self.workloads: dict[str, Workload] = {}
        # Per flavor-resource, the admitted workloads whose quota uses it: preemption's candidates.
        self.using: dict[int, dict[str, Workload]] = {}
        # The fast path's candidates in candidate order per contested set (scheduler/preemption/preemption.py), valid
        # until a workload is held, dropped or marked evicted here.
        self.ordered: dict[frozenset[int], list[Workload]] = {}
        self.inactive_reason = "" if spec.stop_policy == "None" else "Stopped"
        # AdmissionFairSharing on this ClusterQueue: a workload's LocalQueue usage, which orders its
        # preemption candidates from different LocalQueues (higher usage first) before priority
        self.afs_usage: Callable[[Workload], float] | None = None
        # resources.quotaCheckStrategy: IgnoreUndeclared (QuotaCheckStrategy gate): requests of
        # resources no resource group covers are left out instead of failing the workload
        self.ignore_undeclared = False

    @property
    def active(self) -> bool:
        return not self.inactive_reason

    def hold(self, wl: Workload) -> None:
        """``wl`` now holds quota here (its admission is set)."""
        self.workloads[wl.key] = wl
        using = self.using
        for fr in wl.uses:
            holders = using.get(fr)  # not setdefault: no new dict per call
            if holders is None:
                holders = using[fr] = {}
            holders[wl.key] = wl
        self._keep_ordered(wl, held=True)

    def drop(self, wl: Workload) -> None:
        del self.workloads[wl.key]
        for fr in wl.uses:
            del self.using[fr][wl.key]
        self._keep_ordered(wl, held=False)

    def _keep_ordered(self, wl: Workload, *, held: bool) -> None:
        """Keep the candidate orders valid as ``wl`` is held or dropped: put in its place, or taken
        out, of each that it uses. Re-sorting a queue's candidates after each of its admissions and
        ends was 8 % of a forecast sample. Where the order reads AdmissionFairSharing's usage, which
        the hold changes too, or ``wl`` holds quota as an evicted workload, they are dropped instead."""
        ordered = self.ordered
        if not ordered:
            return
        if self.afs_usage is not None or (held and wl.evicted):
            ordered.clear()
            return
        for frs, part in ordered.items():
            if frs.isdisjoint(wl.uses):
                continue
            # a new list, never the one handed out: readers keep a part and take another one for a
            # change of the queue's workloads (``FlatBound._own_freed``)
            kept = part.copy()
            if held:
                evicted = 0  # the evicted come first (``in_candidate_order``): ``wl`` goes among the rest
                while evicted < len(kept) and kept[evicted].evicted:
                    evicted += 1
                insort(kept, wl, lo=evicted, key=_victim_key)
            else:
                kept.remove(wl)
            ordered[frs] = kept

    def mark_evicted(self, wl: Workload, evicted: bool) -> None:
        """Kueue's Evicted condition on ``wl``, which holds quota here (it changes the candidate order)."""
        wl.evicted = evicted
        self.ordered.clear()

    def using_any(self, frs: frozenset[int]) -> Iterable[Workload]:
        """Admitted workloads that use one of ``frs``, each once."""
        if len(frs) == 1:
            (fr,) = frs
            return self.using.get(fr, {}).values()
        found: dict[str, Workload] = {}
        for fr in frs:
            found.update(self.using.get(fr, {}))
        return found.values()


class CohortTree:
    """All quota nodes of one configuration, plus the interned flavor-resource table."""

    def __init__(self, spec: ClusterSpec) -> None:
        self.frs = FlavorResources()
        for cq_spec in spec.cluster_queues.values():
            _intern_groups(self.frs, cq_spec.resource_groups)
        for co in spec.cohorts.values():
            _intern_groups(self.frs, co.resource_groups)
        size = len(self.frs)
        self.cohorts: dict[str, QuotaNode] = {}
        for co in spec.cohorts.values():
            node = QuotaNode(co.name, size, is_cohort=True, weight=co.fair_weight)
            _set_quotas(node, self.frs, co.resource_groups)
            self.cohorts[co.name] = node
        self.cluster_queues: dict[str, ClusterQueue] = {}
        for cq_spec in spec.cluster_queues.values():
            node = QuotaNode(cq_spec.name, size, is_cohort=False, weight=cq_spec.fair_weight)
            _set_quotas(node, self.frs, cq_spec.resource_groups)
            groups = _groups(self.frs, cq_spec.resource_groups)
            cq = self.cluster_queues[cq_spec.name] = ClusterQueue(cq_spec, node, groups)
            cq.ignore_undeclared = spec.config.ignores_undeclared()
            if any(f.flavor not in spec.flavors for g in groups for f in g.flavors):
                cq.inactive_reason = "FlavorNotFound"  # Kueue keeps such a queue inactive
        for co in spec.cohorts.values():
            if co.parent:
                _link(self.cohorts[co.name], self._cohort(co.parent, size))
        for cq in self.cluster_queues.values():
            if cq.spec.cohort:
                _link(cq.node, self._cohort(cq.spec.cohort, size))
        self._disable_cycles()
        tops: dict[str, QuotaNode] = {}
        for cq in self.cluster_queues.values():
            top = cq.node
            while top.parent is not None:
                top = top.parent
            tops[f"{'cohort' if top.is_cohort else 'queue'}/{top.name}"] = top
        self.roots = [tops[name] for name in sorted(tops)]
        for root in self.roots:
            _set_paths(root, ())
            recompute_subtree(root)

    def _cohort(self, name: str, size: int) -> QuotaNode:
        node = self.cohorts.get(name)
        if node is None:
            node = self.cohorts[name] = QuotaNode(name, size, is_cohort=True)
        return node

    def _disable_cycles(self) -> None:
        breaks: list[QuotaNode] = []
        for cq in self.cluster_queues.values():
            seen: set[str] = set()
            node: QuotaNode | None = cq.node.parent
            while node is not None and node.name not in seen:
                seen.add(node.name)
                node = node.parent
            if node is not None:
                cq.inactive_reason = "CohortCycle"
                breaks.append(node)
        for node in breaks:  # cut the loop so the arithmetic terminates; members stay disabled
            if node.parent is not None:
                node.parent.child_cohorts.remove(node)
                node.parent = None

    def subtree_queues(self, node: QuotaNode) -> Iterator[ClusterQueue]:
        """Every ClusterQueue under ``node`` (``node`` included when it is one)."""
        if not node.is_cohort:
            yield self.cluster_queues[node.name]
            return
        for child in node.child_cohorts:
            yield from self.subtree_queues(child)
        for leaf in node.child_queues:
            yield self.cluster_queues[leaf.name]


def _intern_groups(frs: FlavorResources, groups: tuple[ResourceGroupSpec, ...]) -> None:
    for group in groups:
        for flavor in group.flavors:
            for quota in flavor.resources:
                frs.intern(flavor.flavor, quota.resource)


def _set_quotas(node: QuotaNode, frs: FlavorResources, groups: tuple[ResourceGroupSpec, ...]) -> None:
    defined: list[int] = []
    for group in groups:
        for flavor in group.flavors:
            for quota in flavor.resources:
                fr = frs.intern(flavor.flavor, quota.resource)
                node.nominal[fr] = quota.nominal
                node.borrowing_limit[fr] = UNLIMITED if quota.borrowing_limit is None else quota.borrowing_limit
                node.lending_limit[fr] = quota.lending_limit
                defined.append(fr)
    node.defined = tuple(defined)


def _groups(frs: FlavorResources, groups: tuple[ResourceGroupSpec, ...]) -> tuple[ResourceGroup, ...]:
    result = []
    for group in groups:
        choices = []
        for flavor in group.flavors:
            idx = {q.resource: frs.intern(flavor.flavor, q.resource) for q in flavor.resources}
            choices.append(FlavorChoice(flavor.flavor, idx))
        result.append(ResourceGroup(group.covered_resources, tuple(choices)))
    return tuple(result)


def _link(child: QuotaNode, parent: QuotaNode) -> None:
    child.parent = parent
    (parent.child_cohorts if child.is_cohort else parent.child_queues).append(child)


def _set_paths(node: QuotaNode, above: tuple[QuotaNode, ...]) -> None:
    """Record each node's path to the root and the flavor-resources its subtree defines."""
    node.path = (node, *above)
    defined = set(node.defined)
    for child in (*node.child_cohorts, *node.child_queues):
        _set_paths(child, node.path)
        defined.update(child.defined)
    node.defined = tuple(sorted(defined))
