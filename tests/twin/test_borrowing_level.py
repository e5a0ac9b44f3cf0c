"""The borrowing level, as Kueue v0.19.2 measures it, and the two places it decides an outcome.

Kueue's ``FindHeightOfLowestSubtreeThatFits`` (``pkg/scheduler/preemption/classical``) gives the
*height* of the lowest cohort whose subtree holds a request (``getNodeHeight``: the longest way down
to a leaf, at least 1), not the number of steps up to it; and ``SimulatePreemption`` gives a head that
needs preemption the level with its targets' usage removed, or with the usage as it stands when it
has none. Entries are ordered by that level before priority, and a head that cannot preempt reserves
quota by it. Both outcomes below were seen on the real Kueue (``tests/e2e/pinned_scenarios.py``,
checked against it in CI).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.twin import Twin
from gpufleet.twin.apis import specs as s
from gpufleet.twin.cache.resource_node import borrowing_level, remove_usage, usage_less
from tests.twin.trees import Job, Queue, tree

CLASSICAL = s.ConfigSpec(fair_sharing=False)
# c0 holds c1 and the queue qr; c1 holds qa and c2; c2 holds qd. Heights: c2 1, c1 2, c0 3.
DEEP = {"c0": (None, 1.0), "c1": ("c0", 1.0), "c2": ("c1", 1.0)}
DEEP_QUEUES = {"qa": Queue("c1", 2), "qd": Queue("c2", 1), "qr": Queue("c0", 0)}


@dataclass(frozen=True)
class Level:
    queue: str
    running: tuple[Job, ...]
    request: int
    level: int  # Kueue's
    steps: int  # the count of steps up, what the twin gave before


LEVELS = {
    "within its own nominal quota": Level("qa", (), 2, 0, 0),
    "borrowing inside c1": Level("qa", (), 3, 2, 1),
    "a queue right under a root with a child cohort": Level("qr", (), 1, 3, 1),
    "two steps up, and a height of 2": Level("qd", (), 2, 2, 2),
    "more than the whole tree: the root's height": Level("qr", (), 5, 3, 1),
    "c1 used up by qd, so up to c0": Level("qa", (Job("d", "qd", 1),), 3, 3, 2),
}


@pytest.mark.parametrize("case", LEVELS.values(), ids=LEVELS.keys())
def test_a_borrowing_level_is_the_height_of_the_lowest_cohort_that_holds_the_request(case: Level) -> None:
    twin = Twin(tree(DEEP, DEEP_QUEUES, list(case.running), [], CLASSICAL))  # the running Jobs' usage held
    node = twin.tree.cluster_queues[case.queue].node
    assert borrowing_level(node, 0, case.request) == case.level


def _admitted(spec: s.ClusterSpec) -> set[str]:
    twin = Twin(spec)
    done = {a.workload for result in twin.run() for a in result.admitted}
    return {key.removeprefix("ns/") for key in done}


def test_entries_go_by_height_before_priority() -> None:
    """qr borrows from c0 (height 2: c0 also holds c1), qa inside c1 (height 1): qa's low-priority
    Job goes first and takes the 4 GPUs both ask for, as Kueue did (``LEVEL_IS_A_HEIGHT``)."""
    queues = {
        "qa": Queue("c1", 0, reclaim=s.NEVER),
        "qb": Queue("c1", 4, reclaim=s.NEVER),
        "qr": Queue("c0", 0, reclaim=s.NEVER),
    }
    cohorts = {"c0": (None, 1.0), "c1": ("c0", 1.0)}
    pending = [Job("high", "qr", 4, priority=1000, at=1), Job("low", "qa", 4, priority=10, at=2)]
    assert _admitted(tree(cohorts, queues, [], pending, CLASSICAL)) == {"low"}


def test_a_head_without_candidates_reserves_by_its_level_with_the_usage_as_it_stands() -> None:
    """q0 holds 2 of its 4 GPUs and its StrictFIFO head asks for 4 with no candidate: it would borrow
    (level 1, though 4 is within its nominal quota), so it reserves all 4 and q2's Job behind it never
    fits in the cohort's last 3 GPUs, as Kueue did (``RESERVE_AT_LEVEL``)."""
    lower = s.LOWER_PRIORITY
    queues = {
        "q0": Queue("c0", 4, reclaim=lower, within=lower, strategy=s.STRICT_FIFO),
        "q1": Queue("c0", 4, reclaim=s.NEVER),
        "q2": Queue("c0", 0, reclaim=s.NEVER),
    }
    running = [Job("own", "q0", 2, priority=1000, at=1), Job("other", "q1", 3, priority=1000, at=2)]
    pending = [Job("head", "q0", 4, priority=1000, at=3), Job("small", "q2", 1, priority=10, at=4)]
    assert _admitted(tree({"c0": (None, 1.0)}, queues, running, pending, CLASSICAL)) == set()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["qa", "qd", "qr"]), st.integers(1, 3)), max_size=6),
    st.lists(st.booleans(), min_size=6, max_size=6),
    st.sampled_from(["qa", "qd", "qr"]),
    st.integers(1, 6),
    st.sampled_from([None, 0, 1]),
)
def test_the_level_after_preemption_reads_the_tree_as_removing_the_targets_would_leave_it(
    running: list[tuple[str, int]], taken: list[bool], queue: str, request: int, lending: int | None
) -> None:
    """``usage_less`` (the tree untouched) against removing the targets' usage for real."""
    queues = {**DEEP_QUEUES, "qd": Queue("c2", 1, lending=lending)}  # a lending limit keeps usage local
    jobs = [Job(f"r{i}", q, gpus, at=i) for i, (q, gpus) in enumerate(running)]
    twin = Twin(tree(DEEP, queues, jobs, [], CLASSICAL))
    nodes = {name: cq.node for name, cq in twin.tree.cluster_queues.items()}
    removed = [(nodes[q], gpus) for (q, gpus), take in zip(running, taken, strict=False) if take]
    node = nodes[queue]
    read = borrowing_level(node, 0, request, usage_less(0, removed))
    for n, q in removed:
        remove_usage(n, 0, q)
    assert read == borrowing_level(node, 0, request)
