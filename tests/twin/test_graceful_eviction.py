"""Evicted workloads that keep their quota until their pods are gone (``hold_evicted_quota``).

In a cluster, Kueue marks a victim Evicted and the job controller releases its quota reservation
only once the job has stopped; meanwhile the preemptor waits, and Kueue's candidate order
(``preemption/common/ordering.go``: "Workloads already marked for preemption first") makes it
pick the same victims again, issuing nothing new ("Preemption ongoing").

Setup, worked by hand: ClusterQueues ``a`` and ``b`` in one cohort, 4 GPUs nominal each, both
``reclaimWithinCohort: Any``. ``b/big`` (4) and ``b/small1``, ``b/small2`` (2 each) borrow all of
``a``'s quota; then ``a/claim`` (4) arrives and must reclaim 4 GPUs from ``b``.
"""

from __future__ import annotations

import pytest

from gpufleet.twin import Twin
from gpufleet.twin.apis.specs import WorkloadSpec
from tests.twin import gpu_cluster

RECLAIM = "{withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}"


def cohort_queue(name: str, reclaim: str = "Any") -> str:
    """4 GPUs nominal in cohort ``all``, reclaiming from borrowers (``reclaim``)."""
    return gpu_cluster.queue(name, 4, cohort="all", preemption=RECLAIM.replace("Any", reclaim))


def wl(name: str, queue: str, gpus: int, created: int) -> WorkloadSpec:
    return gpu_cluster.workload(name, queue, gpus, created)


def borrowed_twin(*, hold: bool) -> Twin:
    """``b`` holds all 8 GPUs: big (4, admitted first), then small1 and small2 (2 each)."""
    twin = gpu_cluster.twin(cohort_queue("a"), cohort_queue("b"), hold_evicted_quota=hold)
    for i, (name, gpus) in enumerate([("big", 4), ("small1", 2), ("small2", 2)]):
        twin.add_workload(wl(name, "b", gpus, i))
        list(twin.run(None))
    assert twin.status("b").usage == {"gpu/nvidia.com/gpu": 8}
    return twin


def run(twin: Twin) -> tuple[list[str], list[str]]:
    """Cycles until stable: (admitted, newly preempted) workload keys."""
    admitted, preempted = [], []
    for result in twin.run(None):
        admitted += [a.workload for a in result.admitted]
        preempted += [p.workload for p in result.preempted]
    return admitted, preempted


def test_victims_keep_their_quota_until_their_pods_are_gone() -> None:
    twin = borrowed_twin(hold=True)
    twin.add_workload(wl("claim", "a", 4, 10))
    # Victims newest first (admitted more recently): small2, small1 make room for 4.
    assert run(twin) == ([], ["team/small2", "team/small1"])
    assert twin.status("b").usage == {"gpu/nvidia.com/gpu": 8}  # still reserved while terminating
    # More cycles (another event at the same instant): the preemptor re-targets its own victims.
    twin.add_workload(wl("late", "b", 1, 11))
    assert run(twin) == ([], [])
    claim = {p.workload: p for p in twin.pending()}["team/claim"]
    assert claim.reason == "WaitingForPreemptedWorkloads"
    assert claim.message.endswith("Pending the preemption of 2 workload(s)")
    # The pods are gone: the quota frees, the preemptor is admitted, the victims queue again.
    twin.evicted_gone("team/small2")
    twin.evicted_gone("team/small1")
    assert run(twin) == (["team/claim"], [])
    assert twin.status("a").usage == {"gpu/nvidia.com/gpu": 4}
    assert twin.status("b").usage == {"gpu/nvidia.com/gpu": 4}
    assert {p.workload for p in twin.pending()} == {"team/small1", "team/small2", "team/late"}


def test_without_holding_the_quota_frees_at_once() -> None:
    twin = borrowed_twin(hold=False)
    twin.add_workload(wl("claim", "a", 4, 10))
    admitted, preempted = run(twin)
    assert preempted == ["team/small2", "team/small1"]
    assert admitted == ["team/claim"]  # the next cycle, on the freed quota


def test_an_evicted_workload_is_preferred_as_a_victim() -> None:
    """Kueue orders candidates already being evicted first. ``big`` is set to the state a previous
    preemptor (since deleted) leaves behind: evicted, quota still held. By the other criteria
    ``small2`` and ``small1`` (admitted more recently) would go first; the terminating ``big`` alone
    makes room, so nothing new is evicted and ``claim`` gets in once big's pods are gone."""
    twin = borrowed_twin(hold=True)
    twin.workloads["team/big"].evicted = True
    twin.add_workload(wl("claim", "a", 4, 10))
    assert run(twin) == ([], [])
    twin.evicted_gone("team/big")
    assert run(twin) == (["team/claim"], [])
    assert twin.status("b").usage == {"gpu/nvidia.com/gpu": 4}


def test_evicted_gone_on_a_workload_not_being_evicted_is_a_bug() -> None:
    twin = borrowed_twin(hold=True)
    with pytest.raises(ValueError, match="not being evicted"):
        twin.evicted_gone("team/big")


def test_a_workload_requeued_with_the_same_uid_and_timestamp_does_not_tie_with_its_stale_entry() -> None:
    """A Workload evicted and re-created at the same instant (waitForPodsReady with timestamp ties)
    leaves a stale heap entry with an identical order key; the queue must not compare workloads."""
    twin = gpu_cluster.twin(cohort_queue("a"))
    twin.add_workload(wl("x", "a", 8, 5))  # too big: parked in the heap path first
    twin.finish("team/x")
    twin.add_workload(wl("x", "a", 2, 5))
    twin.add_workload(wl("y", "a", 2, 5))
    assert sorted(run(twin)[0]) == ["team/x", "team/y"]


def full_cohort(*, c_reclaim: str, fair: bool, batched: bool) -> Twin:
    """Three ClusterQueues of 4 GPUs; ``b`` holds all 12: big 4, small1 2, small2 2, last 4."""
    queues = (cohort_queue("a"), cohort_queue("b"), cohort_queue("c", c_reclaim))
    twin = gpu_cluster.twin(*queues, fair_sharing=fair, hold_evicted_quota=True, streaks=batched)
    for i, (name, gpus) in enumerate([("big", 4), ("small1", 2), ("small2", 2), ("last", 4)]):
        twin.add_workload(wl(name, "b", gpus, i))
        list(twin.run(None))
    assert twin.status("b").usage == {"gpu/nvidia.com/gpu": 12}
    return twin


# (c's reclaimWithinCohort, fair sharing, the second arrival, what a/claim hears in the cycle
#  they share, who waits for ``last`` once the loop settles)
SHARED_CYCLES = [
    # c/hold cannot reclaim (Never) and holds back c's unused nominal 4 (Kueue's
    # quotaResourcesToReserve); older, it goes first, so claim no longer fits even without ``last``;
    # hold is parked and claim, alone again, waits for ``last``.
    ("Never", False, "hold", "Workload no longer fits after processing another workload", "team/claim"),
    # c/claim2 re-targets the same terminating ``last``; older, it goes first every cycle and claim
    # overlaps: by the classical order, and under fair sharing (neither queue borrows: equal shares).
    ("Any", False, "claim2", "Workload has overlapping preemption targets with another workload", "team/claim2"),
    ("Any", True, "claim2", "Workload has overlapping preemption targets with another workload", "team/claim2"),
]


@pytest.mark.parametrize(("c_reclaim", "fair", "second", "heard", "waiter"), SHARED_CYCLES)
def test_a_waiting_preemptor_sharing_a_cycle_is_decided_in_queue_order(
    c_reclaim: str, fair: bool, second: str, heard: str, waiter: str
) -> None:
    """a/claim (4, timestamp 10) preempts ``last`` and waits for it; then c's workload (4, older
    timestamp 5) shares its cycles. Whether claim still preempts depends on who goes first, so
    batched cycles must follow Kueue's order too; batched and cycle by cycle give the same
    verdicts in the same order and stop at the same cycle."""
    logs = []
    for batched in (False, True):
        twin = full_cohort(c_reclaim=c_reclaim, fair=fair, batched=batched)
        twin.add_workload(wl("claim", "a", 4, 10))
        assert run(twin) == ([], ["team/last"])
        twin.add_workload(wl(second, "c", 4, 5))
        verdicts = [(p.workload, p.message) for r in twin.run(None) for p in r.pending]
        logs.append((verdicts, twin.cycle))
    single, batched_log = logs
    assert batched_log == single
    assert ("team/claim", heard) in single[0]
    waiting = {p.workload for p in twin.pending() if p.message.endswith("Pending the preemption of 1 workload(s)")}
    assert waiting == {waiter}
