"""Scheduling equivalence (Kueue's ``SchedulingEquivalenceHashing``, on by default), worked by hand.

One ClusterQueue ``q`` with 8 GPUs nominal and no cohort. ``long`` (7 GPUs) and ``short`` (1 GPU)
are admitted first. Then a backlog of identical workloads asking 2 GPUs each (older), and ``small``
asking 1 GPU (newest). Nothing of the backlog fits while ``long`` runs, so every head is NoFit.

* BestEffortFIFO with hashing: the first backlog head is parked and its 999 equivalents go with it
  at once; the next cycle's head is ``small``, parked too. When ``short`` finishes, everything
  comes back; one cycle parks the backlog again (one head and its equivalents), the next admits
  ``small``: two cycles, not a thousand.
* BestEffortFIFO without hashing (the gate off): each cycle parks one backlog head, so ``small``
  is admitted after the whole backlog has been tried, one head a cycle.
* StrictFIFO: the oldest head blocks the queue either way; hashing changes nothing.
"""

from __future__ import annotations

import pytest

from gpufleet.twin import Twin
from gpufleet.twin.apis.specs import WorkloadSpec
from gpufleet.twin.queue.equivalence import BYPASSED
from gpufleet.twin.results import CycleResult
from tests.twin import gpu_cluster


def wl(name: str, gpus: int, created: int, priority: int = 0, pods: int = 1) -> WorkloadSpec:
    return gpu_cluster.workload(name, "q", gpus, created, priority=priority, pods=pods)


def twin_for(strategy: str, *, hashing: bool = True, preemption: str = "{withinClusterQueue: Never}") -> Twin:
    return gpu_cluster.twin(
        gpu_cluster.queue("q", 8, preemption=preemption, strategy=strategy), equivalence_hashing=hashing
    )


def settle(twin: Twin) -> list[CycleResult]:
    return list(twin.run(None, limit=5000))


def backlogged(strategy: str, backlog: int, *, hashing: bool = True) -> Twin:
    twin = twin_for(strategy, hashing=hashing)
    twin.add_workload(wl("long", 7, 0))
    twin.add_workload(wl("short", 1, 1))
    settle(twin)
    for i in range(backlog):
        twin.add_workload(wl(f"b{i:04}", 2, 10 + i))
    twin.add_workload(wl("small", 1, 10 + backlog))
    settle(twin)
    return twin


def cycles_until_admitted(twin: Twin, key: str) -> int | None:
    """Cycles run after the call until ``key`` is admitted (None: never, the twin settled)."""
    for n, result in enumerate(settle(twin), start=1):
        if any(a.workload == key for a in result.admitted):
            return n
    return None


@pytest.mark.parametrize(
    ("strategy", "hashing", "backlog", "expected"),
    [
        ("BestEffortFIFO", True, 1000, 2),
        ("BestEffortFIFO", True, 1, 2),
        ("BestEffortFIFO", False, 1000, 1001),
        ("BestEffortFIFO", False, 3, 4),
        ("StrictFIFO", True, 1000, None),
        ("StrictFIFO", False, 1000, None),
    ],
)
def test_the_one_that_fits_after_quota_frees(strategy: str, hashing: bool, backlog: int, expected: int | None) -> None:
    twin = backlogged(strategy, backlog, hashing=hashing)
    twin.finish("team/short")
    assert cycles_until_admitted(twin, "team/small") == expected


def test_the_backlog_is_parked_with_its_first_head_and_says_why() -> None:
    """The moved workloads carry the head's reason and the twin's own message; Kueue writes none."""
    twin = backlogged("BestEffortFIFO", 5)
    pending = {p.workload: p for p in twin.pending()}
    head = pending["team/b0000"]
    assert (head.reason, head.queue, head.kueue_writes) == ("WaitingForQuota", "inadmissible", True)
    for i in range(1, 5):
        moved = pending[f"team/b{i:04}"]
        assert (moved.reason, moved.message, moved.queue) == ("WaitingForQuota", BYPASSED, "inadmissible")
        assert moved.kueue_writes is False
    assert twin.queues.by_cq["q"].active == {}


def test_a_late_equivalent_is_parked_on_arrival_until_capacity_changes() -> None:
    twin = backlogged("BestEffortFIFO", 2)
    twin.add_workload(wl("late", 2, 100))
    assert "team/late" in twin.queues.by_cq["q"].inadmissible
    assert {p.workload: p for p in twin.pending()}["team/late"].message == BYPASSED
    assert settle(twin)[0].pending == ()  # no head: nothing was evaluated
    twin.finish("team/short")  # capacity changed: the classes are forgotten, all come back
    assert twin.has_heads()
    heads = [p.workload for r in settle(twin) for p in r.pending]
    assert heads[0] == "team/b0000"
    assert "team/late" not in heads  # parked with b0000's class again, not tried on its own


def test_a_moved_equivalent_keeps_the_condition_kueue_wrote_when_it_failed_on_its_own() -> None:
    """``b`` fails on its own first (Kueue writes "2 more needed" on it) and is parked; ``short``
    finishing wakes it; an older equivalent ``a``, added meanwhile, fails first and moves ``b`` with
    it. Kueue writes nothing on ``b`` then, so its condition still says "2 more needed": the twin
    reports its own explanation and, beside it, that condition (seed 51 of the random differential)."""
    twin = twin_for("BestEffortFIFO")
    twin.add_workload(wl("long", 6, 0))
    twin.add_workload(wl("short", 1, 1))
    settle(twin)
    twin.add_workload(wl("b", 3, 20))
    settle(twin)
    first = {p.workload: p for p in twin.pending()}["team/b"]
    assert (first.message, first.kueue_writes, first.written) == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, "
        "2 more needed",
        True,
        None,
    )
    twin.finish("team/short")
    twin.add_workload(wl("a", 3, 10))  # older than b: the head once both are in the heap
    results = settle(twin)
    assert [p.workload for r in results for p in r.pending] == ["team/a"]  # b is never tried again
    moved = {p.workload: p for p in twin.pending()}["team/b"]
    assert (moved.message, moved.kueue_writes) == (BYPASSED, False)
    assert moved.written == (first.reason, first.message)


@pytest.mark.parametrize(
    ("other", "moved"),
    [
        (wl("x", 2, 50), True),  # same shape, later: equivalent
        (wl("x", 2, 50, priority=5), False),  # another priority
        (wl("x", 1, 50, pods=2), False),  # same total, another pod count
        (wl("x", 3, 50), False),  # another request
    ],
    ids=["equivalent", "priority", "count", "request"],
)
def test_what_the_hash_tells_apart(other: WorkloadSpec, moved: bool) -> None:
    twin = twin_for("BestEffortFIFO")
    twin.add_workload(wl("long", 8, 0))
    settle(twin)
    twin.add_workload(wl("head", 2, 1))
    twin.add_workload(other)
    result = twin.run_cycle()  # one head: the older "head" unless "x" has a higher priority
    tried = [p.workload for p in result.pending]
    if other.priority > 0:
        assert tried == ["team/x"]
        return
    assert tried == ["team/head"]
    queue = twin.queues.by_cq["q"]
    assert ("team/x" in queue.inadmissible) is moved
    assert ("team/x" in queue.active) is not moved


def test_preemption_without_candidates_moves_the_equivalents_too() -> None:
    """``long`` (8 GPUs, priority 10) cannot be preempted by priority-0 requests within nominal:
    Preempt without candidates (Kueue's PreemptionNoCandidates) also bulk-moves."""
    twin = twin_for("BestEffortFIFO", preemption="{withinClusterQueue: LowerPriority}")
    twin.add_workload(wl("long", 8, 0, priority=10))
    settle(twin)
    for i in range(3):
        twin.add_workload(wl(f"b{i}", 4, 10 + i))
    results = settle(twin)
    assert [p.workload for r in results for p in r.pending] == ["team/b0"]
    moved = {p.workload: p for p in twin.pending()}["team/b2"]
    assert (moved.reason, moved.message) == ("WaitingForQuota", BYPASSED)
