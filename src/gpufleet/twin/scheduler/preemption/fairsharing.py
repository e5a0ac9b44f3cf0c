"""Kueue v0.19.2: ``pkg/scheduler/preemption/fairsharing/ordering.go``,
``pkg/scheduler/preemption/fairsharing/strategy.go``,
``pkg/scheduler/preemption/fairsharing/least_common_ancestor.go``.

Fair-sharing preemption over a cohort tree, as Kueue v0.19.2's ``fairPreemptions``.

Target order (``fairsharing/ordering.go`` ``nextTarget``): from the root cohort down, at every
cohort pick the child with the highest dominant resource share, a child cohort winning ties
against a ClusterQueue; descend into a cohort, stop at a ClusterQueue. Pruned for good, for the
rest of one search:

* a ClusterQueue that is not borrowing (except the preemptor's own) or has no candidate left;
* a cohort that is not borrowing and is not an ancestor of the preemptor's ClusterQueue;
* a cohort whose children are all pruned.

Two ClusterQueues with equal shares are ordered by their first candidates (Kueue's
``CandidatesOrdering``). The order is recomputed from the root before every pick, on the shares
as the victims chosen so far left them.

Shares are compared one level below the least common ancestor of the preemptor's ClusterQueue
and the target's (``least_common_ancestor.go``): in a tree, a queue under ``/a/x`` competing with
one under ``/a/y`` is judged by the shares of the cohorts ``x`` and ``y`` inside ``a``, not of the
two queues. The preemptor's request is counted in its ClusterQueue (and so in every ancestor)
while the shares are computed, and left out when checking whether it fits.

Per target (``runFirstFsStrategy``): in the preemptor's own queue take the next candidate
(InClusterQueue); while the preemptor's queue stays within nominal on the contested resources
take it without a share test (InCohortReclamation, ``FairSharingPreemptWithinNominal``); else try
the queue's candidates in order against the first strategy and take the first that passes
(InCohortFairSharing), then pick a queue again; those that fail wait for the second strategy,
which takes one candidate per queue, in the same target order, when the preemptor's share is
below the target's initial share (``runSecondFsStrategy``, rule S2-b). Then fill-back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from gpufleet.twin.apis import reasons
from gpufleet.twin.apis.specs import LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
from gpufleet.twin.cache.drs import DRS
from gpufleet.twin.cache.fair_sharing import FairShare
from gpufleet.twin.cache.resource_node import QuotaNode, add_usage, remove_usage
from gpufleet.twin.scheduler.preemption.common import Target, workload_fits
from gpufleet.twin.workload import Workload

if TYPE_CHECKING:
    from gpufleet.twin.cache.cohort import ClusterQueue, CohortTree


class Trials(Protocol):
    """What the search asks of the preemptor (``preemption.Preemptor``): the tree and its shares,
    trial removals of victims, and the settling of a found set (fill back, undo)."""

    tree: CohortTree
    fair: FairShare | None
    bounded: bool

    def remove(self, wl: Workload) -> None: ...
    def restore(self, wl: Workload) -> None: ...
    def settle(
        self, targets: list[Target], fits: bool, request: dict[int, int], cq: ClusterQueue, *, allow_borrowing: bool
    ) -> list[Target]: ...


NEGATIVE = (-1, 0.0)  # below every share: Kueue's NegativeDRS


class TargetOrdering:
    """Kueue's ``TargetClusterQueueOrdering``: which ClusterQueue gives the next victim."""

    def __init__(self, fair: FairShare, preemptor: QuotaNode, by_queue: dict[str, list[Workload]]) -> None:
        self.fair = fair
        self.preemptor = preemptor
        self.ancestors = {id(n) for n in preemptor.path[1:]}
        # Each queue's candidates, never changed (the fast path's parts are its cache), and how
        # many of them were popped: what is left of a part is ``part[at:]``.
        self.targets = by_queue
        self.at = dict.fromkeys(by_queue, 0)
        self.pruned: set[QuotaNode] = set()  # nodes hash by identity

    def __iter__(self) -> Iterator[QuotaNode]:
        if self.preemptor.parent is None:
            while self.preemptor not in self.pruned and self.has_workload(self.preemptor):
                yield self.preemptor
            return
        root = self.preemptor.root
        while root not in self.pruned:
            found = self._next(root)
            if found is not None:
                yield found

    def pop(self, node: QuotaNode) -> Workload:
        at = self.at[node.name]
        self.at[node.name] = at + 1
        return self.targets[node.name][at]

    def pop_all(self, node: QuotaNode) -> list[Workload]:
        """Every candidate left in ``node``, in order (as ``pop`` until empty)."""
        part = self.targets.get(node.name)
        if not part:
            return []
        at = self.at[node.name]
        self.at[node.name] = len(part)
        return part[at:]

    def left(self, node: QuotaNode) -> tuple[list[Workload], int]:
        """``node``'s part and the index of its next candidate (the fast path's scan)."""
        return self.targets[node.name], self.at[node.name]

    def skip(self, node: QuotaNode, to: int) -> None:
        """Pop the candidates of ``node`` before index ``to``."""
        self.at[node.name] = to

    def has_workload(self, node: QuotaNode) -> bool:
        part = self.targets.get(node.name)
        return part is not None and self.at[node.name] < len(part)

    def drop(self, node: QuotaNode) -> None:
        self.pruned.add(node)

    def _next(self, cohort: QuotaNode) -> QuotaNode | None:
        fair, pruned, targets, preemptor = self.fair, self.pruned, self.targets, self.preemptor
        best_cq: QuotaNode | None = None
        best_cq_key = NEGATIVE
        for cq in cohort.child_queues:
            if cq in pruned:
                continue
            share = cq.share  # the remembered share (fast path), else computed
            if share is None:
                share = fair.share(cq)
            part = targets.get(cq.name)
            if (not share.borrowed and cq is not preemptor) or part is None or self.at[cq.name] >= len(part):
                pruned.add(cq)
                continue
            key = share.key()
            if best_cq is not None and key == best_cq_key:
                if self._first_key(cq) < self._first_key(best_cq):
                    best_cq = cq
            elif key > best_cq_key:
                best_cq, best_cq_key = cq, key
        best_cohort: QuotaNode | None = None
        best_cohort_key = NEGATIVE
        for child in cohort.child_cohorts:
            if child in pruned:
                continue
            share = fair.share(child)
            if not share.borrowing and id(child) not in self.ancestors:
                pruned.add(child)
            elif share.key() >= best_cohort_key:  # on ties the later child (Kueue: map order)
                best_cohort, best_cohort_key = child, share.key()
        if best_cohort is None and best_cq is None:
            pruned.add(cohort)
            return None
        if best_cohort is not None and best_cohort_key >= best_cq_key:
            return self._next(best_cohort)  # a cohort wins ties: its most unfair node is chosen
        return best_cq

    def _first_key(self, cq: QuotaNode) -> tuple[bool, bool, tuple[int, int, str]]:
        """``CandidatesOrdering`` of a queue's first candidate: evicted, other queue, victim key."""
        wl = self.targets[cq.name][self.at[cq.name]]
        return (not wl.evicted, cq is self.preemptor, wl.victim_key)

    # --- shares one level below the least common ancestor -------------------------------------
    def almost_lcas(self, target: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
        """The preemptor's and the target's ancestors (or themselves) just below their LCA."""
        if target.parent is self.preemptor.parent:
            return self.preemptor, target  # siblings: their parent is the LCA
        lca = next(n for n in target.path[1:] if id(n) in self.ancestors)
        return _below(self.preemptor, lca), _below(target, lca)


def _below(node: QuotaNode, lca: QuotaNode) -> QuotaNode:
    path = node.path
    return path[path.index(lca) - 1]


def fair_preemptions(
    preemptor: Trials,
    cq: ClusterQueue,
    request: dict[int, int],
    by_queue: dict[str, list[Workload]],
    *,
    frs: frozenset[int],
    strategies: tuple[str, ...],
) -> list[Target]:
    """Victims among ``by_queue`` (each ClusterQueue's candidates, in candidate order) that make
    ``request`` fit in ``cq`` under fair sharing, or ``[]``."""
    return _Search(preemptor, cq, request, by_queue).run(frs, strategies)


class _Search:
    """One preemptor's search: the twin's preemptor (snapshot operations), its queue and request."""

    def __init__(
        self, preemptor: Trials, cq: ClusterQueue, request: dict[int, int], by_queue: dict[str, list[Workload]]
    ) -> None:
        assert preemptor.fair is not None
        self.by_queue = by_queue
        self.preemptor = preemptor
        self.fair: FairShare = preemptor.fair
        self.cq = cq
        self.request = request
        self.bounded = preemptor.bounded
        self.tried = False  # a candidate failed the first strategy on its own (not by the bound)

    def run(self, frs: frozenset[int], strategies: tuple[str, ...]) -> list[Target]:
        node, request = self.cq.node, self.request
        within_nominal = all(node.usage[fr] + request.get(fr, 0) <= node.subtree[fr] for fr in frs)
        for fr, q in request.items():  # the shares count the incoming workload
            add_usage(node, fr, q)
        try:
            targets: list[Target] = []
            if self.bounded and self.hopeless(strategies[0], within_nominal):
                fits = False
            else:
                fits, targets, retry = self.first(strategies[0], within_nominal)
                if not fits and len(strategies) > 1 and (targets or self.tried or not self.bounded):
                    fits = self.second(retry, targets)
        finally:
            for fr, q in request.items():
                remove_usage(node, fr, q)
        return self.preemptor.settle(targets, fits, request, self.cq, allow_borrowing=True)

    def hopeless(self, strategy: str, within_nominal: bool) -> bool:
        """The fast path's bound: no candidate of any queue can pass the first strategy, so
        nothing is taken, and the second (``LessThanInitialShare`` on the same, unchanged shares)
        cannot pass either; the search finds no targets whatever order it visits the queues in.
        Not hopeless when the preemptor's own queue has candidates or it stays within nominal
        (those are taken without a share test)."""
        own = self.cq.node
        if within_nominal or own.name in self.by_queue:
            return False
        fair = self.fair
        ancestors = {id(n) for n in own.path[1:]}
        queues = self.preemptor.tree.cluster_queues
        for name in self.by_queue:
            target = queues[name].node
            lca = next(n for n in target.path[1:] if id(n) in ancestors)
            if may_pass(strategy, fair.share(_below(own, lca)).key(), fair.share(_below(target, lca)).key()):
                return False
        return True

    def fits(self) -> bool:
        """``workloadFitsForFairSharing``: the request taken out again, then the ordinary check."""
        node, request = self.cq.node, self.request
        for fr, q in request.items():
            remove_usage(node, fr, q)
        try:
            return workload_fits(request, self.cq, True)
        finally:
            for fr, q in request.items():
                add_usage(node, fr, q)

    def take(self, victim: Workload, reason: str, targets: list[Target]) -> bool:
        self.preemptor.remove(victim)
        targets.append(Target(victim, reason))
        return self.fits()

    def first(self, strategy: str, within_nominal: bool) -> tuple[bool, list[Target], list[Workload]]:
        """``runFirstFsStrategy``; returns (fits, targets, candidates left for the second strategy)."""
        fair, own = self.fair, self.cq.node
        ordering = TargetOrdering(fair, own, self.by_queue)
        targets: list[Target] = []
        retry: list[Workload] = []
        for target in ordering:
            if target is own or within_nominal:
                reason = reasons.IN_CLUSTER_QUEUE if target is own else reasons.IN_COHORT_RECLAMATION
                if self.take(ordering.pop(target), reason, targets):
                    return True, targets, []
                continue
            mine, theirs = ordering.almost_lcas(target)
            new_share = fair.share(mine).key()
            old = fair.share(theirs)
            if new_share[0] == 1 and old.key()[0] == 0:  # fsStrategyUnsatisfiable: an infinite share
                retry += ordering.pop_all(target)
                continue
            if self.bounded and not may_pass(strategy, new_share, old.key()):
                retry += ordering.pop_all(target)  # every candidate fails: the loop below would say so
                continue
            if self.bounded:
                victim = self.scan(
                    ordering, target, strategy=strategy, new_share=new_share, old=old, theirs=theirs, retry=retry
                )
                if victim is not None and self.take(victim, reasons.IN_COHORT_FAIR_SHARING, targets):
                    return True, targets, []
                continue  # the shares changed (pick a queue again), or the queue has none left
            outcome: dict[tuple[tuple[int, int], ...], bool] = {}
            while ordering.has_workload(target):
                victim = ordering.pop(target)
                assert victim.admission is not None
                used = victim.admission.usage
                passed: bool | None = outcome.get(used) if self.bounded else None
                if passed is None:
                    passed = _passes(strategy, new_share, old, _share_without(self.preemptor, fair, victim, theirs))
                    outcome[used] = passed
                if passed:
                    if self.take(victim, reasons.IN_COHORT_FAIR_SHARING, targets):
                        return True, targets, []
                    break  # the shares changed: pick a queue again
                self.tried = True
                retry.append(victim)
        return False, targets, retry

    def scan(
        self,
        ordering: TargetOrdering,
        target: QuotaNode,
        *,
        strategy: str,
        new_share: tuple[int, float],
        old: DRS,
        theirs: QuotaNode,
        retry: list[Workload],
    ) -> Workload | None:
        """The fast path's loop over ``target``'s candidates: the first that passes ``strategy``,
        popped with those refused before it; None when none passes (all popped).

        Until a victim is taken the tree is unchanged, so the test's outcome depends on the victim
        only through its usage: asked once per usage, and the part is read in place. Of the refused,
        only the first goes to ``retry``: the second strategy reads no other (``second``)."""
        part, start = ordering.left(target)
        outcome: dict[tuple[tuple[int, int], ...], bool] = {}
        preemptor, fair = self.preemptor, self.fair
        found: Workload | None = None
        end = len(part)  # the first candidate not refused
        for at in range(start, end):
            victim = part[at]
            assert victim.admission is not None
            used = victim.admission.usage
            passed = outcome.get(used)
            if passed is None:
                passed = outcome[used] = _passes(
                    strategy, new_share, old, _share_without(preemptor, fair, victim, theirs)
                )
            if passed:
                found, end = victim, at
                break
        if end > start:
            self.tried = True
            retry.append(part[start])
        ordering.skip(target, end + 1 if found is not None else end)
        return found

    def second(self, retry: list[Workload], targets: list[Target]) -> bool:
        """Rule S2-b: per queue in target order, its first refused candidate when the preemptor's
        share is below the target's initial share; then the queue is dropped."""
        by_queue: dict[str, list[Workload]] = {}
        for wl in retry:  # each queue gives at most its first refused candidate: only that one is kept
            if wl.cluster_queue not in by_queue:
                by_queue[wl.cluster_queue] = [wl]
        ordering = TargetOrdering(self.fair, self.cq.node, by_queue)
        for target in ordering:
            mine, theirs = ordering.almost_lcas(target)
            passed = self.fair.share(mine).key() < self.fair.share(theirs).key()
            victim = ordering.pop(target)
            if passed and self.take(victim, reasons.IN_COHORT_FAIR_SHARING, targets):
                return True
            ordering.drop(target)
        return False


def _share_without(preemptor: Trials, fair: FairShare, victim: Workload, at: QuotaNode) -> DRS:
    """The share of ``at`` (the target's side below the LCA) with ``victim``'s usage removed."""
    assert victim.admission is not None
    if not at.is_cohort:  # the victim's own queue: its share reads only its own usage array
        usage = at.usage
        pairs = victim.admission.usage
        for fr, q in pairs:
            usage[fr] -= q
        try:
            return fair.drs(at)
        finally:
            for fr, q in pairs:
                usage[fr] += q
    preemptor.remove(victim)
    try:
        return fair.drs(at)
    finally:
        preemptor.restore(victim)


def may_pass(strategy: str, preemptor_new: tuple[int, float], target_old: tuple[int, float]) -> bool:
    """Whether any candidate of a target can pass ``strategy`` (the fast path's bound).

    Removing a victim's usage never raises a share: per resource what a node borrows can only
    shrink, the lendable amount it is divided by is fixed by quota, IEEE division and ``max`` are
    monotone, and a zero-weight node that stops borrowing goes from the infinite share to 0. So
    ``target_new <= target_old`` for every candidate, and ``LessThanOrEqualToFinalShare`` can pass
    only when ``preemptor_new <= target_old``; ``LessThanInitialShare`` does not read the victim.
    """
    if strategy == LESS_THAN_INITIAL_SHARE:
        return preemptor_new < target_old
    return preemptor_new <= target_old


def _passes(strategy: str, preemptor_new: tuple[int, float], target_old: DRS, target_new: DRS) -> bool:
    if strategy == LESS_THAN_INITIAL_SHARE:
        return preemptor_new < target_old.key()
    assert strategy == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
    return preemptor_new <= target_new.key()
