"""Choosing victims: Kueue's classic preemption and its fair-sharing variant.

Candidates (``findCandidates``): workloads of the preemptor's own ClusterQueue allowed by
``withinClusterQueue``, and workloads of other ClusterQueues in the same cohort tree that are
*borrowing* on a contested flavor-resource, allowed by ``reclaimWithinCohort``. Only workloads
that use a contested flavor-resource count.

Candidate order (``CandidatesOrdering``) is ONE key: workloads already being evicted first (their
quota is about to free anyway); other ClusterQueues before the preemptor's own; lower priority
first; admitted more recently first; uid or ``namespace/name`` last.

Selection (``minimalPreemptions``): remove candidates in order, skipping a cohort candidate whose
ClusterQueue stopped borrowing, until the preemptor fits; then walk the chosen ones backwards and
give back every victim whose return still lets the preemptor fit (fill-back). Which candidates and
whether the preemptor may borrow follow Kueue's heuristics (see ``Preemptor.classic``). Everything
is simulated on the live quota tree and undone before returning.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter

from gpufleet.twin import reasons
from gpufleet.twin.cohort import ClusterQueue, CohortTree
from gpufleet.twin.fairshare import DRS, FairShare
from gpufleet.twin.quota import add_usage, available, is_borrowing, remove_usage
from gpufleet.twin.specs import (
    ANY,
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    NEVER,
)
from gpufleet.twin.workload import Workload

VICTIM_KEY = attrgetter("victim_key")  # the candidate order's tail (see Workload.victim_key)
EVICTED = attrgetter("evicted")


class Candidates:
    """``findCandidates``' result: ``by_queue``, each ClusterQueue's part of the candidate order
    (what fair sharing visits queue by queue), and ``ordered()``, the whole list.

    Each part is sorted on its own by a key computed at admission, and the whole list merges the
    other queues' parts (a sort over sorted runs), so no per-candidate key function runs in Python.
    """

    __slots__ = ("by_queue", "own_queue")

    def __init__(self, by_queue: dict[str, list[Workload]], own_queue: str) -> None:
        for part in by_queue.values():
            part.sort(key=VICTIM_KEY)
            if any(map(EVICTED, part)):
                part[:] = [c for c in part if c.evicted] + [c for c in part if not c.evicted]
        self.by_queue = by_queue
        self.own_queue = own_queue

    def ordered(self) -> list[Workload]:
        """Evicted first, other queues before the own one, then ``victim_key``."""
        others = sorted(
            (c for name, part in self.by_queue.items() if name != self.own_queue for c in part), key=VICTIM_KEY
        )
        own = self.by_queue.get(self.own_queue, [])
        evicted = [c for c in others if c.evicted] + [c for c in own if c.evicted]
        return evicted + [c for c in others if not c.evicted] + [c for c in own if not c.evicted]


@dataclass(frozen=True, slots=True)
class Target:
    """A workload to evict so that a preemptor fits, and Kueue's reason for it."""

    workload: Workload
    reason: str


class Preemptor:
    """Finds preemption targets against the live quota tree (simulated, then undone)."""

    def __init__(self, tree: CohortTree, fair: FairShare | None, strategies: tuple[str, ...]) -> None:
        self.tree = tree
        self.fair = fair
        self.strategies = strategies

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
        found = self.find_candidates(wl, cq, frs)
        own = found.by_queue.get(cq.name, [])
        if len(found.by_queue) == (1 if own else 0):
            return self.minimal(request, cq, frs, own, allow_borrowing=True, threshold=None) if own else []
        if self.fair is not None:
            return self.fair_preemptions(cq, request, frs, found.by_queue)
        return self.classic(wl, cq, request, frs, candidates=found.ordered(), own=own)

    def classic(
        self,
        wl: Workload,
        cq: ClusterQueue,
        request: dict[int, int],
        frs: frozenset[int],
        *,
        candidates: list[Workload],
        own: list[Workload],
    ) -> list[Target]:
        """Kueue's heuristics, in order.

        1. ``borrowWithinCohort`` on: borrow while preempting, other queues' victims only below the
           threshold unless the queue is still under nominal;
        2. queue under nominal on every contested resource: try without borrowing;
        3. last resort: own-queue victims only, borrowing allowed.
        """
        threshold = self.borrow_threshold(wl, cq)
        if threshold is not None:
            if not under_nominal(cq, frs):
                candidates = [c for c in candidates if c.cluster_queue == cq.name or c.priority < threshold]
            return self.minimal(request, cq, frs, candidates, allow_borrowing=True, threshold=threshold)
        if under_nominal(cq, frs):
            targets = self.minimal(request, cq, frs, candidates, allow_borrowing=False, threshold=None)
            if targets:
                return targets
        return self.minimal(request, cq, frs, own, allow_borrowing=True, threshold=None)

    def find_candidates(self, wl: Workload, cq: ClusterQueue, frs: frozenset[int]) -> Candidates:
        policy = cq.spec.preemption
        by_queue: dict[str, list[Workload]] = {}
        if cq.node.parent is not None and policy.reclaim_within_cohort != NEVER:
            only_lower = policy.reclaim_within_cohort != ANY
            for other in self.tree.subtree_queues(cq.node.root):
                if other is cq or not any(is_borrowing(other.node, fr) for fr in frs):
                    continue
                if only_lower:
                    found = [c for c in other.using_any(frs) if c.priority < wl.priority]
                else:
                    found = list(other.using_any(frs))
                if found:
                    by_queue[other.name] = found
        if policy.within_cluster_queue != NEVER:
            newer_equal = policy.within_cluster_queue == LOWER_OR_NEWER_EQUAL_PRIORITY
            own = [
                c
                for c in cq.using_any(frs)
                if c.priority < wl.priority or (c.priority == wl.priority and newer_equal and wl.created < c.created)
            ]
            if own:
                by_queue[cq.name] = own
        return Candidates(by_queue, cq.name)

    def borrow_threshold(self, wl: Workload, cq: ClusterQueue) -> int | None:
        """``borrowWithinCohort``: victims from other queues must be below this priority."""
        policy = cq.spec.preemption
        if policy.borrow_within_cohort == NEVER or self.fair is not None:
            return None
        threshold = wl.priority
        if policy.max_priority_threshold is not None and policy.max_priority_threshold < threshold:
            threshold = policy.max_priority_threshold + 1
        return threshold

    def minimal(
        self,
        request: dict[int, int],
        cq: ClusterQueue,
        frs: frozenset[int],
        candidates: list[Workload],
        *,
        allow_borrowing: bool,
        threshold: int | None,
    ) -> list[Target]:
        """Greedy removal in candidate order until the request fits, then fill-back."""
        targets: list[Target] = []
        fits = False
        for cand in candidates:
            reason = reasons.IN_CLUSTER_QUEUE
            if cand.cluster_queue != cq.name:
                cand_cq = self.tree.cluster_queues[cand.cluster_queue]
                if not any(is_borrowing(cand_cq.node, fr) for fr in frs):
                    continue
                reason = reasons.IN_COHORT_RECLAMATION
                if threshold is not None:
                    if cand.priority >= threshold:
                        allow_borrowing = False  # such a victim stays in the final set (it is last)
                    else:
                        reason = reasons.IN_COHORT_RECLAIM_WHILE_BORROWING
            self.remove(cand)
            targets.append(Target(cand, reason))
            if workload_fits(request, cq, allow_borrowing):
                fits = True
                break
        return self._minimal(targets, fits, request, cq, allow_borrowing)

    def _minimal(
        self, targets: list[Target], fits: bool, request: dict[int, int], cq: ClusterQueue, allow_borrowing: bool
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
        """Visit the candidate queue with the highest share first; each victim must pass a strategy.

        While the preemptor's queue stays within nominal on the contested resources, victims of
        other queues are taken without the share test (``FairSharingPreemptWithinNominal``).
        """
        fair = self.fair
        assert fair is not None
        strategies = self.strategies or (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
        queues = self.tree.cluster_queues
        pools = [_Pool(queues[name], fair.drs(queues[name].node), part) for name, part in by_queue.items()]
        new_share = fair.drs(cq.node, request).key()
        targets: list[Target] = []
        retry: list[Workload] = []
        fits = False
        while pools and not fits:
            pool = max(pools, key=lambda p: (p.share.key(), p.cq.name))
            pools.remove(pool)
            if pool.cq is cq:
                victim = pool.workloads.pop(0)
                self.remove(victim)
                targets.append(Target(victim, reasons.IN_CLUSTER_QUEUE))
                if workload_fits(request, cq, True):
                    fits = True
                    break
                new_share = fair.drs(cq.node, request).key()
                if pool.workloads:
                    pool.share = fair.drs(cq.node)
                    pools.append(pool)
                continue
            within_nominal = all(cq.node.usage[fr] + request.get(fr, 0) <= cq.node.subtree[fr] for fr in frs)
            if not within_nominal and not _strategy(strategies[0], new_share, pool.share, pool.share):
                # Removing usage never raises a share, so no candidate of this queue can pass
                # (Kueue's fsStrategyUnsatisfiable, generalised): all wait for the second strategy.
                retry.extend(pool.workloads)
                continue
            for i, victim in enumerate(pool.workloads):
                after = fair.drs(pool.cq.node, _usage(victim), -1)
                if within_nominal:
                    reason = reasons.IN_COHORT_RECLAMATION
                elif _strategy(strategies[0], new_share, pool.share, after):
                    reason = reasons.IN_COHORT_FAIR_SHARING
                else:
                    retry.append(victim)
                    continue
                self.remove(victim)
                targets.append(Target(victim, reason))
                if workload_fits(request, cq, True):
                    fits = True
                    break
                pool.workloads = pool.workloads[i + 1 :]
                if pool.workloads and any(is_borrowing(pool.cq.node, fr) for fr in frs):
                    pool.share = after
                    pools.append(pool)
                break
        if not fits and len(strategies) > 1:
            fits = self._second_strategy(strategies[1], cq, request, new_share, retry=retry, targets=targets)
        return self._minimal(targets, fits, request, cq, True)

    def _second_strategy(
        self,
        strategy: str,
        cq: ClusterQueue,
        request: dict[int, int],
        new_share: tuple[int, float],
        *,
        retry: list[Workload],
        targets: list[Target],
    ) -> bool:
        """Rule S2-b over the candidates the first strategy refused: one victim per queue, the
        queue with the highest share first (the rule does not depend on the victim)."""
        fair = self.fair
        assert fair is not None
        pools = _first_of_each_queue(retry, self.tree, fair)
        for pool in sorted(pools, key=lambda p: (p.share.key(), p.cq.name), reverse=True):
            if _strategy(strategy, new_share, pool.share, pool.share):
                victim = pool.workloads[0]
                self.remove(victim)
                targets.append(Target(victim, reasons.IN_COHORT_FAIR_SHARING))
                if workload_fits(request, cq, True):
                    return True
        return False

    def can_always_reclaim(self, cq: ClusterQueue) -> bool:
        """A queue that can reclaim any borrowed quota needs no reservation when it cannot preempt."""
        return cq.spec.preemption.reclaim_within_cohort == ANY


class _Pool:
    __slots__ = ("cq", "share", "workloads")

    def __init__(self, cq: ClusterQueue, share: DRS, workloads: list[Workload]) -> None:
        self.cq = cq
        self.share = share
        self.workloads = workloads


def _first_of_each_queue(candidates: list[Workload], tree: CohortTree, fair: FairShare) -> list[_Pool]:
    pools: dict[str, _Pool] = {}
    for cand in candidates:
        if cand.cluster_queue not in pools:
            cq = tree.cluster_queues[cand.cluster_queue]
            pools[cand.cluster_queue] = _Pool(cq, fair.drs(cq.node), [cand])
    return list(pools.values())


def _strategy(name: str, preemptor_new: tuple[int, float], target_old: DRS, target_new: DRS) -> bool:
    if name == LESS_THAN_INITIAL_SHARE:
        return preemptor_new < target_old.key()
    return preemptor_new <= target_new.key()


def _usage(wl: Workload) -> dict[int, int]:
    assert wl.admission is not None
    return dict(wl.admission.usage)


def workload_fits(request: dict[int, int], cq: ClusterQueue, allow_borrowing: bool) -> bool:
    """Whether ``request`` fits in ``cq`` now; without borrowing it must stay within its own quota."""
    node = cq.node
    for fr, v in request.items():
        if not allow_borrowing and node.usage[fr] + v > node.subtree[fr]:
            return False
        if v > available(node, fr):
            return False
    return True


def under_nominal(cq: ClusterQueue, frs: Iterable[int]) -> bool:
    """Kueue's ``queueUnderNominalInResourcesNeedingPreemption``."""
    node = cq.node
    return all(node.usage[fr] < node.nominal[fr] for fr in frs)
