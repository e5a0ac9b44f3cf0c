"""Kueue v0.19.2: ``pkg/cache/scheduler/fair_sharing.go``.

Fair sharing's dominant resource share (DRS) on the quota tree (``pkg/cache/scheduler/fair_sharing.go``).

DRS of a node with a parent: for each flavor-resource in its
subtree quota, what it uses beyond that quota (optionally counting a workload's request) is
"borrowed"; borrowed amounts are summed per resource *name* across flavors and divided by what
the parent could lend of that resource (``potential_available`` of the parent, summed over the
flavors the root knows), times 1000. The largest ratio is the DRS; divided by the node's weight
it is the weighted share. Weight 0 while borrowing means an infinite share, and two such nodes
compare by their unweighted ratios (``CompareDRS``; the value is ``drs.DRS``).

Admission order under fair sharing, the tournament that reads these shares, is the scheduler's
(``scheduler/fair_sharing_iterator.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.twin.cache.drs import DRS
from gpufleet.twin.cache.resource_node import QuotaNode, potential_available


class FairShare:
    """Computes DRS on the live quota tree; what a parent can lend is cached (it ignores usage).

    ``share`` is the DRS of a node as its usage stands, kept on the node (``QuotaNode.share``) until
    ``add_usage`` or ``remove_usage`` touches it (``cache=False``: computed afresh on every call,
    the reference path). ``drs`` always computes.
    """

    def __init__(self, resource_of: Sequence[str], *, cache: bool = True) -> None:
        self.resource_of = resource_of
        self.cache = cache
        self._lendable: dict[int, dict[str, int]] = {}

    def share(self, node: QuotaNode) -> DRS:
        """``drs(node)``, remembered on the node while its usage is unchanged."""
        if not self.cache:
            return self.drs(node)
        found = node.share
        if found is None:
            found = node.share = self.drs(node)
        return found

    def lendable(self, node: QuotaNode) -> dict[str, int]:
        cached = self._lendable.get(id(node))
        if cached is None:
            cached = {}
            parent = node.parent
            if parent is not None:
                for fr in node.root.defined:
                    res = self.resource_of[fr]
                    cached[res] = cached.get(res, 0) + potential_available(parent, fr)
            self._lendable[id(node)] = cached
        return cached

    def drs(self, node: QuotaNode, extra: dict[int, int] | None = None, sign: int = 1) -> DRS:
        """DRS of ``node``, counting ``sign * extra`` on top of its usage when given."""
        if node.parent is None:
            return DRS(0.0, node.weight, (), "")
        usage = node.usage
        subtree = node.subtree
        borrowed: list[int] = []
        overs: list[int] = []
        for fr in node.defined:  # one plain loop: no generator per call on the hot path
            over = usage[fr] - subtree[fr]
            if extra is not None:
                over += sign * extra.get(fr, 0)
            if over > 0:
                borrowed.append(fr)
                overs.append(over)
        if not borrowed:
            return DRS(0.0, node.weight, (), "")
        lendable = self.lendable(node)
        resource_of = self.resource_of
        if len(borrowed) == 1:  # one resource: the loop below without its dictionary and sort
            res = resource_of[borrowed[0]]
            lend = lendable.get(res, 0)
            if lend > 0:
                return DRS(overs[0] * 1000.0 / lend, node.weight, (borrowed[0],), res)
            return DRS(0.0, node.weight, (borrowed[0],), "")
        borrowed_by_res: dict[str, int] = {}
        for fr, over in zip(borrowed, overs, strict=True):
            res = resource_of[fr]
            borrowed_by_res[res] = borrowed_by_res.get(res, 0) + over
        ratio = 0.0
        dominant = ""
        for res in sorted(borrowed_by_res):
            lend = lendable.get(res, 0)
            if lend > 0:
                value = borrowed_by_res[res] * 1000.0 / lend
                if value > ratio:
                    ratio, dominant = value, res
        return DRS(ratio, node.weight, tuple(borrowed), dominant)
