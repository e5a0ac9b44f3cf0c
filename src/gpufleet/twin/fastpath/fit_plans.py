"""Ours, not Kueue's: a fast path, off with ``Twin(spec, fast=False)`` (see ``fastpath/__init__.py``).

Plain-Fit plans: flavor assignment's common outcome, worked out once per shape (the fast path).

In a busy cluster most heads get a plain Fit: every resource group's first matching flavor holds
the request within ``available``. ``flavorassigner.FlavorAssigner._assign`` finds that by trying the flavors
in order and collecting failure messages; a ``Plan`` is the same answer computed once per
(ClusterQueue, pod sets, counts): which flavor-resources to check, with what quantity, and the
usage and pod-set admissions they give. At each head the plan only reads the quota tree; where it
cannot vouch for the answer (a request above ``available``, or borrowing while a group has other
flavors to try) the assigner tries every flavor as before. ``Twin(spec, fast=False)``, the
reference path, never uses plans; ``tests/twin/test_paths.py`` checks both give the same cycles.
"""

from __future__ import annotations

from collections.abc import Callable

from gpufleet.twin.apis.specs import TRY_NEXT_FLAVOR, PodSetSpec
from gpufleet.twin.cache.cohort import ClusterQueue
from gpufleet.twin.cache.resource_node import QuotaNode, available, borrowing_level
from gpufleet.twin.scheduler.flavorassigner import Assignment, _Layout
from gpufleet.twin.workload import PodSetAdmission


class Plan:
    """What a plain Fit assigns, and the requests whose room decides whether it is one. Its
    usage and pod sets are shared by the assignments it gives (which nothing changes).

    ``checks``: (flavor-resource, quantity with the earlier pod sets' usage of it), in the order
    ``_assign`` checks them; ``alone``: a Fit that borrows is the assignment too, because every
    group has this one flavor (the best seen) or ``flavorFungibility.whenCanBorrow`` is not
    ``TryNextFlavor`` (``_choose`` stops at it).
    """

    __slots__ = ("alone", "checks", "fits", "pod_sets", "usage")

    def __init__(
        self,
        checks: tuple[tuple[int, int], ...],
        usage: dict[int, int],
        pod_sets: tuple[PodSetAdmission, ...],
        alone: bool,
    ) -> None:
        self.checks = checks
        self.usage = usage
        self.pod_sets = pod_sets
        self.alone = alone
        self.fits: dict[int, Assignment] = {}  # by borrowing level: one shared assignment each

    def level(self, node: QuotaNode) -> int:
        """The borrowing level of a Fit for every request (``_fits``: within ``available``, at
        ``borrowing_level``), or -1 where ``_assign`` must decide: a request above ``available``,
        or borrowing where a group has other flavors to try."""
        usage, subtree, root, level = node.usage, node.subtree, node.parent is None, 0
        for fr, val in self.checks:
            if val > available(node, fr):
                return -1
            if usage[fr] + val > subtree[fr] and not root:
                if not self.alone:
                    return -1
                level = max(level, borrowing_level(node, fr, val))
        return level

    def assignment(
        self, level: int, make: Callable[[int, dict[int, int], tuple[PodSetAdmission, ...]], Assignment]
    ) -> Assignment:
        """The plain Fit at ``level``, made once (assignments are never changed once made)."""
        found = self.fits.get(level)
        if found is None:
            found = self.fits[level] = make(level, self.usage, self.pod_sets)
        return found


def make_plan(
    layout: Callable[[ClusterQueue, PodSetSpec], _Layout],
    cq: ClusterQueue,
    pod_sets: tuple[PodSetSpec, ...],
    counts: tuple[int, ...],
) -> Plan | None:
    """What ``_assign`` gives when every group's first matching flavor fits each request: at
    borrowing level 0 that flavor is chosen at once (``_choose`` stops at a Fit without borrowing);
    when it borrows, only if it is the group's one flavor or ``whenCanBorrow`` stops the search
    there. The failures of flavors skipped before
    it are dropped (``_assign`` keeps them only below Fit). None when a pod set misses a resource
    or the first matching flavor lacks one: those never end in a Fit by the first flavor."""
    usage: dict[int, int] = {}
    checks: list[tuple[int, int]] = []
    admissions: list[PodSetAdmission] = []
    alone = True  # every group has one flavor
    for ps, count in zip(pod_sets, counts, strict=True):
        found = layout(cq, ps)
        if found.missing:
            return None
        flavors_of_ps: list[tuple[str, str]] = []
        for _, per_pod, choices in found.groups:
            flavor = next((f for f, mismatch in choices if not mismatch), None)
            if flavor is None or any(r not in flavor.frs for r, _ in per_pod):
                return None
            alone = alone and len(choices) == 1
            requests = per_pod if count == 1 else tuple((r, q * count) for r, q in per_pod)
            checks.extend((flavor.frs[r], usage.get(flavor.frs[r], 0) + q) for r, q in requests)
            for resource, qty in requests:
                fr = flavor.frs[resource]
                usage[fr] = usage.get(fr, 0) + qty
                flavors_of_ps.append((resource, flavor.flavor))
        admissions.append(PodSetAdmission(ps.name, count, tuple(flavors_of_ps)))
    stops = cq.spec.flavor_fungibility.when_can_borrow != TRY_NEXT_FLAVOR
    return Plan(tuple(checks), usage, tuple(admissions), alone or stops)
