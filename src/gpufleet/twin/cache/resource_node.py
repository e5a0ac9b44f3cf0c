"""Kueue v0.19.2: ``pkg/cache/scheduler/resource_node.go``.

The quota tree's arithmetic, per (flavor, resource), exactly as Kueue's ``resource_node.go``.

A node is a ClusterQueue or a Cohort. Per flavor-resource index ``fr`` it holds:

* ``subtree[fr]``: its own nominal quota plus what its children lend it (their subtree quota
  minus their local, non-lendable part);
* ``local[fr]``: the part of ``subtree`` that is never lent upward (``subtree - lendingLimit``
  when a lending limit is set, else 0);
* ``usage[fr]``: for a ClusterQueue its admitted usage; for a Cohort the sum of the children's
  usage *past* their local quota (usage "bubbles up" only once the local part is used up).

``available`` and ``potential_available`` recurse to the root the way Kueue does, including the
borrowing limit's cap ``(subtree - local) - max(0, usage - local) + borrowingLimit``. The functions
are loops over a precomputed root path rather than recursion, because they are the hot path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufleet.twin.resources import UNLIMITED

if TYPE_CHECKING:
    from gpufleet.twin.cache.drs import DRS


class QuotaNode:
    """Mutable quota state of one ClusterQueue or Cohort; arrays are indexed by flavor-resource."""

    __slots__ = (
        "borrowing_limit",
        "child_cohorts",
        "child_queues",
        "defined",
        "height",
        "is_cohort",
        "lending_limit",
        "local",
        "name",
        "nominal",
        "parent",
        "path",
        "share",
        "subtree",
        "usage",
        "weight",
    )

    def __init__(self, name: str, size: int, *, is_cohort: bool, weight: float = 1.0) -> None:
        self.name = name
        self.is_cohort = is_cohort
        self.weight = weight
        self.parent: QuotaNode | None = None
        self.child_cohorts: list[QuotaNode] = []
        self.child_queues: list[QuotaNode] = []
        self.nominal = [0] * size
        self.borrowing_limit = [UNLIMITED] * size
        self.lending_limit: list[int | None] = [None] * size
        self.subtree = [0] * size
        self.local = [0] * size
        self.usage = [0] * size
        self.path: tuple[QuotaNode, ...] = (self,)  # self, parent, ..., root
        self.defined: tuple[int, ...] = ()  # flavor-resources this node's subtree lists
        # Kueue's ``getNodeHeight``: 0 for a ClusterQueue; for a Cohort the longest way down to a
        # leaf, at least 1 (``recompute_subtree``). Borrowing levels are these heights.
        self.height = 0
        # The node's dominant resource share as last computed (fair_sharing.py), dropped by every
        # change of its usage: ``add_usage`` and ``remove_usage`` clear it on each node they touch.
        self.share: DRS | None = None

    def __repr__(self) -> str:
        kind = "Cohort" if self.is_cohort else "ClusterQueue"
        return f"<{kind} {self.name}>"

    @property
    def root(self) -> QuotaNode:
        return self.path[-1]


def local_available(node: QuotaNode, fr: int) -> int:
    """Guaranteed quota of ``node`` that its usage has not consumed and that its parent cannot see."""
    return max(0, node.local[fr] - node.usage[fr])


def available(node: QuotaNode, fr: int) -> int:
    """How much more of ``fr`` ``node`` can use now, honouring borrowing limits up the tree.

    May be negative after over-admission (quota lowered under running workloads), as in Kueue.
    """
    path = node.path
    top = path[-1]
    avail = top.subtree[fr] - top.usage[fr]
    for i in range(len(path) - 2, -1, -1):
        n = path[i]
        lq = n.local[fr]
        used = n.usage[fr]
        limit = n.borrowing_limit[fr]
        if limit != UNLIMITED:
            cap = (n.subtree[fr] - lq) - (used - lq if used > lq else 0) + limit
            avail = min(avail, cap)
        if lq > used:
            avail += lq - used
    return avail


def potential_available(node: QuotaNode, fr: int) -> int:
    """The most ``node`` could ever use of ``fr`` with no usage anywhere (ExceedsMaxQuota's bound)."""
    path = node.path
    avail = path[-1].subtree[fr]
    for i in range(len(path) - 2, -1, -1):
        n = path[i]
        avail += n.local[fr]
        limit = n.borrowing_limit[fr]
        if limit != UNLIMITED and n.subtree[fr] + limit < avail:
            avail = n.subtree[fr] + limit
    return avail


def add_usage(node: QuotaNode, fr: int, val: int) -> None:
    """Add usage at ``node``; what exceeds its local available part bubbles up to the parent."""
    n: QuotaNode | None = node
    while n is not None:
        free_local = n.local[fr] - n.usage[fr]
        n.usage[fr] += val
        n.share = None
        if free_local >= val:
            return
        if free_local > 0:
            val -= free_local
        n = n.parent


def remove_usage(node: QuotaNode, fr: int, val: int) -> None:
    """Remove usage at ``node``, and the part of it that was stored in the parent."""
    n: QuotaNode | None = node
    while n is not None:
        stored_in_parent = n.usage[fr] - n.local[fr]
        n.usage[fr] -= val
        n.share = None
        if stored_in_parent <= 0:
            return
        val = min(val, stored_in_parent)
        n = n.parent


def is_borrowing(node: QuotaNode, fr: int) -> bool:
    """Whether ``node`` already uses more than its own subtree quota of ``fr``."""
    return node.parent is not None and node.usage[fr] > node.subtree[fr]


def borrowing_level(node: QuotaNode, fr: int, val: int, less: dict[QuotaNode, int] | None = None) -> int:
    """How far up the tree ``val`` more of ``fr`` must come from, as Kueue's
    ``FindHeightOfLowestSubtreeThatFits`` measures it: 0 within the queue's own quota, else the
    height of the lowest cohort whose subtree holds it (walking up while the request, less what
    each node keeps locally, does not fit there), or the root's when none does.

    A height, not a count of steps up: a queue right under a root that also has a child cohort
    borrows at level 2, not 1, and entries of different queues are ordered by these levels.
    ``less``: usage taken out first (``usage_less``), for the level after preemption.
    """
    remaining = val
    for n in node.path:
        used = n.usage[fr] if less is None else n.usage[fr] - less.get(n, 0)
        if used + remaining <= n.subtree[fr] or n.parent is None:
            return n.height
        if n.local[fr] > used:
            remaining -= n.local[fr] - used
    return node.path[-1].height


def usage_less(fr: int, removed: list[tuple[QuotaNode, int]]) -> dict[QuotaNode, int]:
    """How much less of ``fr`` each node would use with ``removed`` (queue, quantity) taken out one
    after the other, as ``remove_usage`` would take them, the tree left untouched (its nodes' kept
    shares stay valid): what a level after preemption reads."""
    less: dict[QuotaNode, int] = {}
    for queue, quantity in removed:
        val = quantity
        n: QuotaNode | None = queue
        while n is not None:
            was = less.get(n, 0)
            stored_in_parent = n.usage[fr] - was - n.local[fr]
            less[n] = was + val
            if stored_in_parent <= 0:
                break
            val = min(val, stored_in_parent)
            n = n.parent
    return less


def recompute_subtree(root: QuotaNode) -> None:
    """Accumulate ``subtree``, ``local`` and cohort ``usage`` bottom-up (after a config change).

    ClusterQueue usage is kept; cohort usage is rebuilt from the children past their local quota.
    """
    size = len(root.subtree)
    for child in root.child_cohorts:
        recompute_subtree(child)
    subtree = list(root.nominal)
    if root.is_cohort:
        usage = [0] * size
        for child in (*root.child_cohorts, *root.child_queues):
            if not child.is_cohort:
                _set_local(child)
            for fr in range(size):
                subtree[fr] += child.subtree[fr] - child.local[fr]
                usage[fr] += max(0, child.usage[fr] - child.local[fr])
        root.usage = usage
    root.subtree = subtree
    if root.is_cohort:
        children = len(root.child_cohorts) + len(root.child_queues)
        root.height = max([min(children, 1), *(child.height + 1 for child in root.child_cohorts)])
    _set_local(root)
    root.share = None
    for leaf in root.child_queues:
        leaf.share = None


def _set_local(node: QuotaNode) -> None:
    if not node.is_cohort:
        node.subtree = list(node.nominal)
    node.local = [
        0 if limit is None else max(0, node.subtree[fr] - limit) for fr, limit in enumerate(node.lending_limit)
    ]
