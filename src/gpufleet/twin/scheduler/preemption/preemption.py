"""Kueue v0.19.2: ``pkg/scheduler/preemption/preemption.go``,
``pkg/scheduler/preemption/common/ordering.go``.

Choosing victims: Kueue's classic preemption and its fair-sharing variant.

Classic (``classicalPreemptions``): the candidates and their order come from Kueue's hierarchical
generator (``classical``): the own queue's by ``withinClusterQueue``, other queues'
found by walking the cohort tree up from the preemptor, each with its reason. One or two runs
(borrowing allowed or not, ``classical.attempts``) each remove the still-valid
candidates in order until the preemptor fits, then fill back; the first run that fits wins.

Fair sharing (``findCandidates``): workloads of the preemptor's own ClusterQueue allowed by
``withinClusterQueue``, and workloads of other ClusterQueues in the same cohort tree that are
*borrowing* on a contested flavor-resource, allowed by ``reclaimWithinCohort``; the search itself
is ``fairsharing``. Only workloads that use a contested flavor-resource count, in both.

Candidate order (``CandidatesOrdering``) is ONE key: workloads already being evicted first (their
quota is about to free anyway); other ClusterQueues before the preemptor's own; lower priority
first; admitted more recently first; uid or ``namespace/name`` last. Under AdmissionFairSharing,
two candidates of one usage-based ClusterQueue from different LocalQueues go by their LocalQueue's
usage, higher first, before priority (``ordering.go`` step 2): each ClusterQueue's part is sorted
with it, and the other queues' parts are merged as sorted runs.

Fill-back: walk the chosen victims backwards and give back every one whose return still lets the
preemptor fit (the last one stays). Everything is simulated on the live quota tree and undone
before returning.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from typing import Protocol

from gpufleet.twin.apis import reasons
from gpufleet.twin.apis.specs import (
    ANY,
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    NEVER,
)
from gpufleet.twin.cache.cohort import ClusterQueue, CohortTree
from gpufleet.twin.cache.fair_sharing import FairShare
from gpufleet.twin.cache.resource_node import add_usage, remove_usage
from gpufleet.twin.queue.preemptors import PreemptorWorkloads
from gpufleet.twin.scheduler.preemption.classical import CandidateOrder, attempts, generate, is_valid
from gpufleet.twin.scheduler.preemption.common import Target, workload_fits
from gpufleet.twin.scheduler.preemption.fairsharing import fair_preemptions
from gpufleet.twin.workload import Workload

__all__ = ["Candidates", "Preemptor", "Target", "workload_fits"]

VICTIM_KEY = attrgetter("victim_key")  # the candidate order's tail (see Workload.victim_key)
EVICTED = attrgetter("evicted")


def in_candidate_order(part: list[Workload], usage: Callable[[Workload], float] | None = None) -> list[Workload]:
    """Sort one ClusterQueue's candidates in place: evicted first, then (AdmissionFairSharing's
    ``usage``) the LocalQueue with more usage, then ``victim_key``."""
    if usage is None:
        part.sort(key=VICTIM_KEY)
    else:
        part.sort(key=lambda c: (-usage(c), c.victim_key))
    if any(map(EVICTED, part)):
        part[:] = [c for c in part if c.evicted] + [c for c in part if not c.evicted]
    return part


class Candidates:
    """``findCandidates``' result: ``by_queue``, each ClusterQueue's part of the candidate order
    (what fair sharing visits queue by queue), and ``ordered()``, the whole list.

    Each part is sorted on its own by a key computed at admission, and the whole list merges the
    other queues' parts (a sort over sorted runs), so no per-candidate key function runs in Python.
    """

    __slots__ = ("by_queue", "by_usage", "own_queue")

    def __init__(
        self, by_queue: dict[str, list[Workload]], own_queue: str, *, ordered: bool = False, by_usage: bool = False
    ) -> None:
        if not ordered:  # else each part is already in candidate order (the fast path's cache)
            for part in by_queue.values():
                in_candidate_order(part)
        self.by_queue = by_queue
        self.own_queue = own_queue
        self.by_usage = by_usage  # some part is in AdmissionFairSharing's order: merge, do not re-sort

    def ordered(self) -> list[Workload]:
        """Evicted first, other queues before the own one, then ``victim_key``."""
        if self.by_usage:
            parts = [part for name, part in self.by_queue.items() if name != self.own_queue]
            others = list(heapq.merge(*parts, key=VICTIM_KEY))
        else:
            others = sorted(
                (c for name, part in self.by_queue.items() if name != self.own_queue for c in part), key=VICTIM_KEY
            )
        own = self.by_queue.get(self.own_queue, [])
        evicted = [c for c in others if c.evicted] + [c for c in own if c.evicted]
        return evicted + [c for c in others if not c.evicted] + [c for c in own if not c.evicted]


InOrder = Callable[[ClusterQueue, frozenset[int]], list[Workload]]


class Bound(Protocol):
    """The fast path's bound on a fair-sharing search (``fastpath/preemption_bound.FlatBound``)."""

    def hopeless(self, wl: Workload, cq: ClusterQueue, request: dict[int, int], frs: frozenset[int]) -> bool: ...
    def forget(self) -> None: ...


# Makes the bound from the shares, the search's first strategy and the candidate order.
MakeBound = Callable[[FairShare, str, InOrder], Bound]


class Preemptor:
    """Finds preemption targets against the live quota tree (simulated, then undone)."""

    def __init__(
        self,
        tree: CohortTree,
        fair: FairShare | None,
        strategies: tuple[str, ...],
        *,
        prioritize_preemptors: bool = False,
        bounded: bool = True,
        bound: MakeBound | None = None,
    ) -> None:
        self.tree = tree
        # The fast path's bounds (``fairsharing.may_pass``): a target none of whose candidates
        # can pass the strategy is not tried candidate by candidate. Off: the plain search.
        self.bounded = bounded
        self.fair = fair
        self.strategies = strategies
        self.preemptors = PreemptorWorkloads(enabled=prioritize_preemptors)
        # The fast path's bound before any candidate list is built (fair sharing only).
        self.bound = (
            bound(fair, (strategies or (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,))[0], self._in_order)
            if fair is not None and bounded and bound is not None
            else None
        )

    def forget(self) -> None:
        """The quota state changed (the verdict memo clears): drop what the bound learnt of it."""
        if self.bound is not None:
            self.bound.forget()

    # --- the snapshot operations -------------------------------------------------------------
    def remove(self, wl: Workload) -> None:
        node = self.tree.cluster_queues[wl.cluster_queue].node
        assert wl.admission is not None
        for fr, q in wl.admission.usage:
            remove_usage(node, fr, q)

    def restore(self, wl: Workload) -> None:
        node = self.tree.cluster_queues[wl.cluster_queue].node
        assert wl.admission is not None
        for fr, q in wl.admission.usage:
            add_usage(node, fr, q)

    # --- entry point ---------------------------------------------------------------------------
    def get_targets(
        self, wl: Workload, cq: ClusterQueue, request: dict[int, int], contested: Iterable[int]
    ) -> list[Target]:
        """Victims that make ``request`` fit in ``cq``, or ``[]`` when no allowed set does."""
        frs = frozenset(contested)
        if self.fair is None:
            return self.classic(wl, cq, request, frs)
        if self.bounded and self.bound is not None and self.bound.hopeless(wl, cq, request, frs):
            return []
        found = self.find_candidates(wl, cq, frs)
        own = found.by_queue.get(cq.name, [])
        if len(found.by_queue) == (1 if own else 0):
            return self.greedy([Target(c, reasons.IN_CLUSTER_QUEUE) for c in own], request, cq, borrowing=True)
        return self.fair_preemptions(cq, request, frs, found.by_queue)

    def classic(self, wl: Workload, cq: ClusterQueue, request: dict[int, int], frs: frozenset[int]) -> list[Target]:
        """Kueue's ``classicalPreemptions``: the hierarchical generator's candidates, tried in one or
        two runs (with and without borrowing, in the order ``attempts`` gives); the first run whose
        victims make room wins."""
        order = generate(self.tree, wl, cq, request, frs, part=self._part(frs), merge=self._merge)
        for borrowing in attempts(cq, frs, order):
            targets = self.greedy(self._valid(order, cq, frs, borrowing), request, cq, borrowing=borrowing)
            if targets:
                return targets
        return []

    def _valid(self, order: CandidateOrder, cq: ClusterQueue, frs: frozenset[int], borrowing: bool) -> Iterator[Target]:
        """The run's candidates still valid, each judged when ``greedy`` reaches it (after the victims
        before it were removed). A generator function, not a generator expression: mypyc builds the
        list of a generator expression at once, which would judge every candidate up front."""
        for c in order.candidates:
            if is_valid(self.tree, cq, c, frs, borrowing=borrowing):
                yield Target(c.workload, c.reason)

    def find_candidates(self, wl: Workload, cq: ClusterQueue, frs: frozenset[int]) -> Candidates:
        policy = cq.spec.preemption
        by_queue: dict[str, list[Workload]] = {}
        using = self._in_order if self.bounded else ClusterQueue.using_any
        if cq.node.parent is not None and policy.reclaim_within_cohort != NEVER:
            only_lower = policy.reclaim_within_cohort != ANY
            for other in self.tree.subtree_queues(cq.node.root):
                if other is cq:
                    continue
                used, quota = other.node.usage, other.node.subtree
                for fr in frs:  # borrowing on a contested flavor-resource (``is_borrowing``)
                    if used[fr] > quota[fr]:
                        break
                else:
                    continue
                if only_lower:
                    found = [c for c in using(other, frs) if c.priority < wl.priority]
                elif self.bounded:
                    found = self._in_order(other, frs)  # kept in order, and nothing changes a part
                else:
                    found = list(using(other, frs))
                if found:
                    by_queue[other.name] = found
        if policy.within_cluster_queue != NEVER:
            newer_equal = policy.within_cluster_queue == LOWER_OR_NEWER_EQUAL_PRIORITY
            own = [
                c
                for c in using(cq, frs)
                if c.priority < wl.priority or (c.priority == wl.priority and newer_equal and wl.created < c.created)
            ]
            if own:
                by_queue[cq.name] = own
        queues = self.tree.cluster_queues
        by_usage = any(queues[name].afs_usage is not None for name in by_queue)
        if by_usage and not self.bounded:
            for name, part in by_queue.items():
                in_candidate_order(part, queues[name].afs_usage)
        return Candidates(by_queue, cq.name, ordered=self.bounded or by_usage, by_usage=by_usage)

    @staticmethod
    def _in_order(cq: ClusterQueue, frs: frozenset[int]) -> list[Workload]:
        """The fast path: ``cq``'s workloads using ``frs`` in candidate order, kept until its
        workloads change (filtering a sorted list keeps it sorted: the same parts as sorting after)."""
        found = cq.ordered.get(frs)
        if found is None:
            found = cq.ordered[frs] = in_candidate_order(list(cq.using_any(frs)), cq.afs_usage)
        return found

    def _part(self, frs: frozenset[int]) -> Callable[[ClusterQueue], list[Workload]]:
        """One ClusterQueue's workloads using ``frs`` in candidate order: kept (fast path) or sorted afresh."""
        if self.bounded:
            return lambda q: self._in_order(q, frs)
        return lambda q: in_candidate_order(list(q.using_any(frs)), q.afs_usage)

    def _merge(self, parts: dict[str, list[Workload]]) -> list[Workload]:
        """Other queues' parts as one list in candidate order (evicted first, then ``victim_key``)."""
        queues = self.tree.cluster_queues
        by_usage = any(queues[name].afs_usage is not None for name in parts)
        return Candidates(parts, "", ordered=True, by_usage=by_usage).ordered()

    def greedy(
        self, candidates: Iterable[Target], request: dict[int, int], cq: ClusterQueue, *, borrowing: bool
    ) -> list[Target]:
        """Remove candidates in order until the request fits, then fill-back; ``[]`` if it never fits.

        ``candidates`` is consumed lazily: a candidate's validity may depend on the victims before it."""
        targets: list[Target] = []
        fits = False
        for target in candidates:
            self.remove(target.workload)
            targets.append(target)
            if workload_fits(request, cq, borrowing):
                fits = True
                break
        return self.settle(targets, fits, request, cq, allow_borrowing=borrowing)

    def settle(
        self, targets: list[Target], fits: bool, request: dict[int, int], cq: ClusterQueue, *, allow_borrowing: bool
    ) -> list[Target]:
        """Undo the trial removals; return nothing if the victims did not make room, else the filled-back set."""
        if fits:
            targets = self.fill_back(targets, request, cq, allow_borrowing)
        for t in targets:
            self.restore(t.workload)
        return targets if fits else []

    def fill_back(
        self, targets: list[Target], request: dict[int, int], cq: ClusterQueue, allow_borrowing: bool
    ) -> list[Target]:
        """Give back, newest choice first (the last one stays), every victim not actually needed."""
        kept = list(targets)
        for i in range(len(targets) - 2, -1, -1):
            self.restore(targets[i].workload)
            if workload_fits(request, cq, allow_borrowing):
                kept.remove(targets[i])
            else:
                self.remove(targets[i].workload)
        return kept

    # --- fair sharing ---------------------------------------------------------------------------
    def fair_preemptions(
        self, cq: ClusterQueue, request: dict[int, int], frs: frozenset[int], by_queue: dict[str, list[Workload]]
    ) -> list[Target]:
        """Kueue's hierarchical fair-sharing preemption (see ``fairsharing``)."""
        strategies = self.strategies or (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
        return fair_preemptions(self, cq, request, by_queue, frs=frs, strategies=strategies)

    def can_always_reclaim(self, cq: ClusterQueue) -> bool:
        """A queue that can reclaim any borrowed quota needs no reservation when it cannot preempt."""
        return cq.spec.preemption.reclaim_within_cohort == ANY

    def reserves(self, cq: ClusterQueue, wl: Workload) -> bool:
        """Kueue's ``reserveCapacityForUnreclaimablePreempt`` condition for a head that needs
        preemption and has no candidates: its queue cannot always reclaim, or (with
        ``PrioritizePreemptorWorkloads``) it is the queue's preemptor."""
        return not self.can_always_reclaim(cq) or self.preemptors.prioritized(wl)
