"""Ours, not Kueue's: a fast path, off with ``Twin(spec, fast=False)`` (see ``fastpath/__init__.py``).

The fast path's bound on fair-sharing preemption before any candidate list is built.

For a ClusterQueue directly under a root cohort without child cohorts (each share compared is
then a queue's own). Beyond nominal, the search (``fairsharing``) takes the preemptor's own
candidates without a share test and another queue's only when the preemptor's share (request
counted) may pass the target's (``fairsharing.may_pass``). Taking own victims only lowers the
preemptor's share, and a target's share only falls when one of its own victims is taken; so when
no borrowing queue's share is passed even by the preemptor's lowest (every own candidate gone), no
other queue gives a victim, and the second strategy passes none either. Then the search finds
nothing unless its own candidates alone make room: read arithmetically where the tree has no
lending or borrowing limit on the request (``_plain``), else no bound.

Look-alike classes parked in one queue ask it again after every quota change, so what it reads of
the tree is kept for the current quota state (``forget`` drops it when the verdict memo clears).
"""

from __future__ import annotations

import math

from gpufleet.twin.apis.specs import LOWER_OR_NEWER_EQUAL_PRIORITY, NEVER
from gpufleet.twin.cache.cohort import ClusterQueue
from gpufleet.twin.cache.fair_sharing import FairShare
from gpufleet.twin.cache.resource_node import QuotaNode, available
from gpufleet.twin.resources import UNLIMITED
from gpufleet.twin.scheduler.preemption.fairsharing import may_pass
from gpufleet.twin.scheduler.preemption.preemption import InOrder
from gpufleet.twin.workload import Workload

Key = tuple[int, float]  # ``DRS.key``

_NONE: tuple[Key | None, QuotaNode | None, Key | None] = (None, None, None)


class FlatBound:
    """Whether a preemptor's fair-sharing search surely finds no targets (``hopeless``).

    Two caches live for one quota state, between two clears of the verdict memo (which call
    ``forget``): the memo clears wherever the twin reserves or releases quota or marks a victim
    evicted, the only changes to the usage, shares and candidate order read here, so within one
    quota state every answer below is the one computed afresh."""

    def __init__(self, fair: FairShare, strategy: str, in_order: InOrder) -> None:
        self.fair = fair
        self.strategy = strategy  # the search's first strategy
        self.in_order = in_order  # a queue's candidates using a contested set, in candidate order
        self._plains: dict[tuple[QuotaNode, int], bool] = {}  # see _plain (the quota is fixed)
        self._freed: dict[tuple[str, frozenset[int], int], tuple[list[Workload], dict[int, int] | None]] = {}
        # Per question (see ``hopeless``): the largest quantity known not hopeless, the smallest known hopeless.
        self._bounds: dict[tuple[object, ...], list[float]] = {}
        # Per (root, contested set): the two highest shares among the queues borrowing on it (``_highest``).
        self._borrowers: dict[tuple[int, frozenset[int]], tuple[Key | None, QuotaNode | None, Key | None]] = {}

    def forget(self) -> None:
        """The quota state changed: what was learnt of it no longer holds."""
        if self._bounds:
            self._bounds.clear()
        if self._borrowers:
            self._borrowers.clear()

    def hopeless(self, wl: Workload, cq: ClusterQueue, request: dict[int, int], frs: frozenset[int]) -> bool:
        """``flat``, read off bounds where it can be: for a request of one flavor-resource, the
        answer is monotone in the quantity.

        Look-alike classes of one queue and priority ask it with different quantities in one quota
        state. ``flat`` reads the workload only through its priority (and creation time where
        ``LowerOrNewerEqualPriority`` compares it), which the key holds. With the rest fixed, a
        larger quantity q only helps it say True: the within-nominal test and the own-candidates
        room test fail from some q on, and the share compared, ``drs(node, left)`` with ``left[fr]``
        growing in q, never falls, so ``may_pass`` is false from some q on. So every q at most one
        known False is False, and every q at least one known True is True."""
        if len(request) != 1:
            return self.flat(wl, cq, request, frs)
        ((fr, q),) = request.items()
        newer_equal = cq.spec.preemption.within_cluster_queue == LOWER_OR_NEWER_EQUAL_PRIORITY
        key = (cq.name, frs, fr, wl.priority, wl.created if newer_equal else 0)
        bounds = self._bounds.get(key)
        if bounds is None:
            bounds = self._bounds[key] = [-math.inf, math.inf]
        elif q <= bounds[0]:
            return False
        elif q >= bounds[1]:
            return True
        found = self.flat(wl, cq, request, frs)
        bounds[1 if found else 0] = q
        return found

    def flat(self, wl: Workload, cq: ClusterQueue, request: dict[int, int], frs: frozenset[int]) -> bool:
        """The bound itself (see the module's docstring)."""
        node = cq.node
        root = node.parent
        if root is None or root.parent is not None or root.child_cohorts:
            return False
        usage, subtree = node.usage, node.subtree
        for fr in frs:
            if usage[fr] + request.get(fr, 0) > subtree[fr]:
                break
        else:
            return False  # within nominal (or nothing contested): reclaimed without a share test
        policy = cq.spec.preemption
        freed = self._own_freed(wl, cq, frs) if policy.within_cluster_queue != NEVER else None
        left = request  # the preemptor's usage beyond what it has now, with its own candidates gone
        if freed is not None:
            if not self._plain(root, request):
                return False
            for fr, q in request.items():
                if q > available(node, fr) + freed.get(fr, 0):
                    break
            else:
                return False  # room once its own candidates are gone: the search decides
            left = dict(request)
            for fr, q in freed.items():
                left[fr] = left.get(fr, 0) - q
        if policy.reclaim_within_cohort == NEVER:
            return True
        highest = self._highest(root, node, frs)
        if highest is None:
            return True
        return not may_pass(self.strategy, self.fair.drs(node, left).key(), highest)  # monotone in the target's share

    def _highest(self, root: QuotaNode, node: QuotaNode, frs: frozenset[int]) -> Key | None:
        """The highest share among the queues of ``root`` other than ``node`` borrowing on ``frs``."""
        key = (id(root), frs)
        top = self._borrowers.get(key)
        if top is None:
            first: Key | None = None
            first_node: QuotaNode | None = None
            second: Key | None = None
            fair = self.fair
            for other in root.child_queues:
                used, quota = other.usage, other.subtree
                for fr in frs:
                    if used[fr] > quota[fr]:
                        share = fair.share(other).key()
                        if first is None or share > first:
                            second = first  # one at a time: compiled, the tuple form raised TypeError with first None
                            first, first_node = share, other
                        elif second is None or share > second:
                            second = share
                        break
            top = self._borrowers[key] = (first, first_node, second) if first is not None else _NONE
        return top[2] if top[1] is node else top[0]

    def _own_freed(self, wl: Workload, cq: ClusterQueue, frs: frozenset[int]) -> dict[int, int] | None:
        """What ``find_candidates``' part of ``wl``'s own queue uses, per flavor-resource; None when
        that part is empty. Kept per (queue, contested set, priority) with the candidate order it
        was read from: a new order means the queue's workloads changed."""
        part = self.in_order(cq, frs)
        newer_equal = cq.spec.preemption.within_cluster_queue == LOWER_OR_NEWER_EQUAL_PRIORITY
        by_priority = not newer_equal and cq.afs_usage is None
        key = (cq.name, frs, wl.priority)
        if by_priority:
            kept = self._freed.get(key)
            if kept is not None and kept[0] is part:
                return kept[1]
        priority, created = wl.priority, wl.created
        freed: dict[int, int] | None = None
        for c in part:
            if c.priority < priority or (c.priority == priority and newer_equal and created < c.created):
                if freed is None:
                    freed = {}
                assert c.admission is not None
                for fr, q in c.admission.usage:
                    freed[fr] = freed.get(fr, 0) + q
            elif by_priority and not c.evicted:
                break  # the rest are not evicted, in ``victim_key`` order: priority first
        if by_priority:
            self._freed[key] = (part, freed)
        return freed

    def _plain(self, root: QuotaNode, request: dict[int, int]) -> bool:
        """No lending or borrowing limit in ``root``'s tree on the requested flavor-resources: what a
        queue can use then grows by exactly the usage its own workloads give back."""
        for fr in request:
            key = (root, fr)
            plain = self._plains.get(key)
            if plain is None:
                nodes = (root, *root.child_queues, *root.child_cohorts)
                plain = self._plains[key] = all(n.local[fr] == 0 and n.borrowing_limit[fr] == UNLIMITED for n in nodes)
            if not plain:
                return False
        return True
