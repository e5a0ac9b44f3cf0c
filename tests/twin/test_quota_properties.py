"""Property tests of the quota tree's arithmetic (hypothesis).

Random two-level trees (root cohort with its own quota → child cohorts with lending and
borrowing limits → ClusterQueues with limits) receive random admissions that respect
``available``; the invariants Kueue's resource_node.go guarantees must hold throughout.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.twin.cache.resource_node import (
    QuotaNode,
    add_usage,
    available,
    potential_available,
    recompute_subtree,
    remove_usage,
)
from gpufleet.twin.resources import UNLIMITED

FR = 0


@dataclass
class Tree:
    root: QuotaNode
    queues: list[QuotaNode]
    cohorts: list[QuotaNode]


limits = st.one_of(st.none(), st.integers(0, 20))


@st.composite
def trees(draw: st.DrawFn) -> Tree:
    root = QuotaNode("root", 1, is_cohort=True)
    root.nominal[FR] = draw(st.integers(0, 10))
    cohorts, queues = [], []
    for ci in range(draw(st.integers(1, 3))):
        co = QuotaNode(f"co{ci}", 1, is_cohort=True)
        co.nominal[FR] = draw(st.integers(0, 10))
        co.lending_limit[FR] = draw(limits)
        bl = draw(limits)
        co.borrowing_limit[FR] = UNLIMITED if bl is None else bl
        co.parent = root
        root.child_cohorts.append(co)
        cohorts.append(co)
        for qi in range(draw(st.integers(1, 3))):
            cq = QuotaNode(f"cq{ci}{qi}", 1, is_cohort=False)
            cq.nominal[FR] = draw(st.integers(0, 10))
            cq.lending_limit[FR] = draw(st.one_of(st.none(), st.integers(0, cq.nominal[FR])))
            bl = draw(limits)
            cq.borrowing_limit[FR] = UNLIMITED if bl is None else bl
            cq.parent = co
            co.child_queues.append(cq)
            queues.append(cq)
    for node in (root, *cohorts, *queues):
        path = []
        n: QuotaNode | None = node
        while n is not None:
            path.append(n)
            n = n.parent
        node.path = tuple(path)
    recompute_subtree(root)
    return Tree(root, queues, cohorts)


def _cap(node: QuotaNode) -> int:
    """What a node may hold at most: nominal + borrowing limit (unlimited when unset)."""
    limit = node.borrowing_limit[FR]
    return UNLIMITED if limit == UNLIMITED else node.subtree[FR] + limit


def _admit_randomly(data: st.DataObject, tree: Tree, steps: int) -> list[tuple[QuotaNode, int]]:
    admitted = []
    for _ in range(steps):
        cq = data.draw(st.sampled_from(tree.queues))
        free = available(cq, FR)
        if free <= 0:
            continue
        val = data.draw(st.integers(1, free))
        add_usage(cq, FR, val)
        admitted.append((cq, val))
    return admitted


@settings(max_examples=200, deadline=None)
@given(tree=trees(), data=st.data())
def test_admissions_within_available_never_break_limits(tree: Tree, data: st.DataObject) -> None:
    _admit_randomly(data, tree, 12)
    # The root never holds more than its subtree quota.
    assert tree.root.usage[FR] <= tree.root.subtree[FR]
    for node in (*tree.cohorts, *tree.queues):
        # Nobody uses more than nominal + borrowing limit.
        assert node.usage[FR] <= _cap(node)
        # What is still available plus what is used never exceeds the ExceedsMaxQuota bound.
        assert available(node, FR) + node.usage[FR] <= potential_available(node, FR)


@settings(max_examples=200, deadline=None)
@given(tree=trees(), data=st.data())
def test_cohort_usage_is_children_past_local_quota(tree: Tree, data: st.DataObject) -> None:
    """Incremental bubbling equals the from-scratch sum Kueue's accumulateFromChild computes."""
    admitted = _admit_randomly(data, tree, 12)
    for cq, val in admitted[: len(admitted) // 2]:
        remove_usage(cq, FR, val)
    for co in (*tree.cohorts, tree.root):
        children = co.child_cohorts + co.child_queues
        assert co.usage[FR] == sum(max(0, c.usage[FR] - c.local[FR]) for c in children)


@settings(max_examples=200, deadline=None)
@given(tree=trees(), data=st.data())
def test_available_is_monotone_in_usage(tree: Tree, data: st.DataObject) -> None:
    _admit_randomly(data, tree, 6)
    before = {id(n): available(n, FR) for n in tree.queues}
    cq = data.draw(st.sampled_from(tree.queues))
    add_usage(cq, FR, data.draw(st.integers(1, 5)))
    for n in tree.queues:
        assert available(n, FR) <= before[id(n)]


@settings(max_examples=200, deadline=None)
@given(tree=trees(), data=st.data())
def test_add_then_remove_restores_every_node(tree: Tree, data: st.DataObject) -> None:
    _admit_randomly(data, tree, 6)
    snapshot = [(n, n.usage[FR]) for n in (tree.root, *tree.cohorts, *tree.queues)]
    cq = data.draw(st.sampled_from(tree.queues))
    val = data.draw(st.integers(1, 30))
    add_usage(cq, FR, val)
    remove_usage(cq, FR, val)
    assert [(n, n.usage[FR]) for n, _ in snapshot] == snapshot


@settings(max_examples=200, deadline=None)
@given(tree=trees())
def test_lending_limits_respected_up_the_tree(tree: Tree) -> None:
    """A parent's subtree quota counts at most each child's lending limit of the child's quota."""
    for co in (*tree.cohorts, tree.root):
        lent = 0
        for child in co.child_cohorts + co.child_queues:
            limit = child.lending_limit[FR]
            share = child.subtree[FR] - child.local[FR]
            if limit is not None:
                assert share <= limit
            lent += share
        assert co.subtree[FR] == co.nominal[FR] + lent
