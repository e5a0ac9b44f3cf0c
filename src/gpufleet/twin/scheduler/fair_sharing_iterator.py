"""Kueue v0.19.2: ``pkg/scheduler/fair_sharing_iterator.go``.

Admission order under fair sharing: the tournament over the cohort tree
(``pkg/scheduler/fair_sharing_iterator.go``), on the shares of ``cache/fair_sharing.py``.

At every cohort, from the leaves up, each child offers one candidate (a ClusterQueue its head, a child
cohort the winner of its own tournament) and the best one goes up. "Best" is ONE key:

1. not borrowing, at this level, on the flavor-resources the workload requests
   (``FairSharingPrioritizeNonBorrowing``, on since Kueue 0.17);
2. lower DRS of that child *after* adding the candidate workload;
3. higher priority;
4. older queue-order timestamp;
5. the workload's uid or ``namespace/name`` (final tie-breaker).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from gpufleet.twin.cache.drs import DRS
from gpufleet.twin.cache.fair_sharing import FairShare
from gpufleet.twin.cache.resource_node import QuotaNode, add_usage, remove_usage


class Candidate(Protocol):
    """What the tournament needs from a scheduling entry."""

    @property
    def node(self) -> QuotaNode: ...
    @property
    def usage(self) -> dict[int, int]: ...
    @property
    def order(self) -> tuple[int, int, str]: ...

    standing: tuple[bool, tuple[int, float]] | None
    """Cache for the ClusterQueue-level key (borrowing, DRS) while the quota tree is unchanged."""


E = TypeVar("E", bound=Candidate)


def tournament(fs: FairShare, entries: Sequence[E], first: Callable[[E], bool] | None = None) -> Iterator[E]:
    """Yield entries in fair-sharing order; the caller admits each one before asking for the next.

    Keys are cached per (entry, cohort) and dropped only for entries whose competing subtree
    changed (the ancestors of the popped ClusterQueue), so a flat cohort costs one DRS per entry.
    ``first``: entries that win against every entry it does not name, at every level, before the
    rules above (``PrioritizePreemptorWorkloads``, see ``preemptors``).
    """
    by_root: dict[str, list[E]] = {}
    lone: list[E] = []
    for e in entries:
        if e.node.parent is None:
            lone.append(e)
        else:
            name = e.node.root.name
            group = by_root.get(name)  # not setdefault: no new list per entry
            if group is None:
                group = by_root[name] = []
            group.append(e)
    yield from sorted(lone, key=lambda e: e.order if first is None else (not first(e), *e.order))
    for name in sorted(by_root):
        group = by_root[name]
        if all(e.node.parent is e.node.root for e in group):
            # A flat cohort: every key is a ClusterQueue's own, which only its own entry changes.
            if first is None:
                yield from sorted(group, key=lambda e: (*_standing(fs, e), *e.order))
            else:
                yield from sorted(group, key=lambda e: (not first(e), *_standing(fs, e), *e.order))
        else:
            yield from _run_root(fs, group, first)


WITHIN_QUOTA: tuple[bool, tuple[int, float]] = (False, (0, 0.0))  # no borrowing: share 0, whatever the weight


def _standing(fs: FairShare, e: Candidate) -> tuple[bool, tuple[int, float]]:
    """Borrowing on its flavor-resources and DRS of ``e``'s ClusterQueue with ``e`` admitted."""
    standing = e.standing
    if standing is None:
        if fs.cache and _within_quota(e.node, e.usage):
            standing = e.standing = WITHIN_QUOTA
        else:
            share = fs.drs(e.node, e.usage)
            standing = e.standing = (share.borrowing_on(tuple(e.usage)), share.key())
    return standing


def _within_quota(node: QuotaNode, usage: dict[int, int]) -> bool:
    """Whether ``drs(node, usage)`` finds nothing borrowed (then the share is 0 whatever the
    weight): ``drs``'s own test, without building the share (the fast path)."""
    used, subtree = node.usage, node.subtree
    for fr in node.defined:  # noqa: SIM110 (a loop: no generator per call on the hot path)
        if used[fr] + usage.get(fr, 0) > subtree[fr]:
            return False
    return True


def _run_root(fs: FairShare, entries: list[E], first: Callable[[E], bool] | None = None) -> Iterator[E]:
    remaining: dict[int, E] = {id(e.node): e for e in entries}
    under: dict[int, list[E]] = {}
    for e in entries:
        for anc in e.node.path[1:-1]:
            under.setdefault(id(anc), []).append(e)
    keys: dict[tuple[int, int], tuple[Any, ...]] = {}

    def key_at(e: E, level: int) -> tuple[Any, ...]:
        """Key of ``e`` at the cohort ``e.node.path[level + 1]`` (its child there is path[level])."""
        ck = (id(e), level)
        k = keys.get(ck)
        if k is None:
            if level == 0:
                standing = _standing(fs, e)
            else:
                share = _drs_with(fs, e, e.node.path[level])
                standing = (share.borrowing_on(tuple(e.usage)), share.key())
            k = keys[ck] = (*standing, *e.order) if first is None else (not first(e), *standing, *e.order)
        return k

    # A ClusterQueue's key depends only on its own usage, which changes only when its entry is
    # admitted, so each cohort keeps its leaf entries in a heap built once per cycle.
    leaves: dict[int, list[tuple[tuple[Any, ...], int, E]]] = {}
    for i, e in enumerate(entries):
        leaves.setdefault(id(e.node.parent), []).append((key_at(e, 0), i, e))
    for heap in leaves.values():
        heapq.heapify(heap)

    root = entries[0].node.root
    while remaining:
        winner = _play(root, remaining, key_at, leaves)
        assert winner is not None
        del remaining[id(winner.node)]
        yield winner
        for anc in winner.node.path[1:-1]:
            for e in under.get(id(anc), ()):
                keys.pop((id(e), e.node.path.index(anc)), None)


def _drs_with(fs: FairShare, e: Candidate, child: QuotaNode) -> DRS:
    for fr, q in e.usage.items():
        add_usage(e.node, fr, q)
    try:
        return fs.drs(child)
    finally:
        for fr, q in e.usage.items():
            remove_usage(e.node, fr, q)


def _play(
    cohort: QuotaNode,
    remaining: dict[int, E],
    key_at: Callable[[E, int], tuple[Any, ...]],
    leaves: dict[int, list[tuple[tuple[Any, ...], int, E]]],
) -> E | None:
    best: E | None = None
    best_key: tuple[Any, ...] | None = None
    heap = leaves.get(id(cohort))
    if heap:
        while heap and id(heap[0][2].node) not in remaining:
            heapq.heappop(heap)
        if heap:
            best_key, _, best = heap[0]
    for child in cohort.child_cohorts:
        cand = _play(child, remaining, key_at, leaves)
        if cand is not None:
            k = key_at(cand, cand.node.path.index(child))
            if best_key is None or k < best_key:
                best, best_key = cand, k
    return best
