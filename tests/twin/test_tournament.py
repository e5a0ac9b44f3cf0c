"""The fair-sharing tournament's shortcut for a flat cohort orders exactly as the full tournament.

In a cohort whose children are all ClusterQueues, an entry's key is its own queue's standing (DRS
with the entry admitted), which only its own entry changes; so the tournament is one sort. A
differential property test against the general tournament (``_run_root``), on the rendered
example's three-team cohort with random usage, requests and queue orders, admitting each winner
before asking for the next as the scheduler does.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.twin import Twin
from gpufleet.twin.cache.resource_node import QuotaNode, add_usage, remove_usage
from gpufleet.twin.scheduler.fair_sharing_iterator import _run_root, tournament
from tests.twin.test_verdict_memo import SPEC, TEAMS


@dataclass
class Candidate:
    node: QuotaNode
    usage: dict[int, int]
    order: tuple[int, int, str]
    standing: tuple[bool, tuple[int, float]] | None = None


def twin_with_usage(usage: list[list[int]]) -> Twin:
    twin = Twin(SPEC)
    for team, amounts in zip(TEAMS, usage, strict=True):
        node = twin.tree.cluster_queues[team].node
        for fr, q in enumerate(amounts[: len(twin.tree.frs)]):
            add_usage(node, fr, q)
    return twin


def admitting(order: object, nodes: list[tuple[QuotaNode, dict[int, int]]]) -> list[str]:
    """Drain the ordering, adding each winner's usage before the next is asked for."""
    names = []
    for e in order:  # type: ignore[attr-defined]
        for fr, q in e.usage.items():
            add_usage(e.node, fr, q)
        nodes.append((e.node, e.usage))
        names.append(e.order[2])
    for node, usage in nodes:
        for fr, q in usage.items():
            remove_usage(node, fr, q)
    return names


amounts = st.lists(st.integers(0, 24), min_size=8, max_size=8)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(amounts, min_size=3, max_size=3),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 7), st.integers(1, 16), st.integers(0, 2)), max_size=3),
)
def test_flat_cohort_sort_matches_the_full_tournament(usage: list[list[int]], asks: list[tuple[int, ...]]) -> None:
    twin = twin_with_usage(usage)
    assert twin.fair is not None
    size = len(twin.tree.frs)
    entries = []
    seen: set[int] = set()
    for i, (team, fr, q, prio) in enumerate(asks):
        if team in seen:
            continue  # one head per ClusterQueue
        seen.add(team)
        node = twin.tree.cluster_queues[TEAMS[team]].node
        assert node.parent is not None and node.parent.parent is None  # the example's cohort is flat
        entries.append((node, {fr % size: q}, (-prio, i, f"w{i}")))

    def fresh() -> list[Candidate]:
        return [Candidate(n, u, o) for n, u, o in entries]

    shortcut = admitting(tournament(twin.fair, fresh()), [])
    full = admitting(_run_root(twin.fair, fresh()), []) if entries else []
    assert shortcut == full
