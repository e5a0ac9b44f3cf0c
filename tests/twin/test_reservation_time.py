"""Reservation times in whole seconds: why the UID picks the victim among a settling's admissions.

Kueue writes QuotaReserved's lastTransitionTime in whole seconds, and its cycles run milliseconds
apart, so workloads admitted in one settling share a reservation second. Its victim order
(``preemption/common/ordering.go`` CandidatesOrdering: ... priority, admitted more recently first,
then UID) then falls to the UID. Found by the randomized differential test against the real Kueue
(seed 24: two equivalent Jobs admitted a few milliseconds apart; Kueue evicted the lower UID, the
twin, stamping cycles a millisecond apart, the newer one).

Setup, worked by hand: ClusterQueue ``a`` (2 GPUs, withinClusterQueue LowerPriority). ``one`` and
``two`` (1 GPU each, priority 0) are admitted in one settling; ``high`` (1 GPU, priority 100) then
needs one of them to go.
"""

from __future__ import annotations

import pytest

from gpufleet.twin import Twin
from gpufleet.twin.apis.specs import WorkloadSpec
from tests.twin import gpu_cluster

QUEUE = gpu_cluster.queue("a", 2, preemption="{withinClusterQueue: LowerPriority}")


def wl(name: str, uid: str, created: int, priority: int = 0) -> WorkloadSpec:
    return gpu_cluster.workload(name, "a", 1, created, priority=priority, uid=uid)


def victims(twin: Twin) -> list[str]:
    return [p.workload for result in twin.run(None) for p in result.preempted]


@pytest.mark.parametrize(
    ("uid_one", "uid_two", "victim"),
    [
        ("uid-1", "uid-2", "team/one"),  # the lower UID goes, though ``two`` was admitted a cycle later
        ("uid-2", "uid-1", "team/two"),
    ],
)
def test_workloads_admitted_in_one_settling_tie_and_the_lower_uid_is_the_victim(
    uid_one: str, uid_two: str, victim: str
) -> None:
    twin = gpu_cluster.twin(QUEUE)
    twin.add_workload(wl("one", uid_one, 1_000))
    twin.add_workload(wl("two", uid_two, 2_000))
    list(twin.run(None))
    twin.add_workload(wl("high", "uid-9", 3_000, priority=100))
    assert victims(twin) == [victim]


def test_a_workload_admitted_at_a_later_moment_is_the_more_recent_victim() -> None:
    """Admitted in two settlings (an input between them), ``two`` is the more recent whatever its UID."""
    twin = gpu_cluster.twin(QUEUE)
    twin.add_workload(wl("one", "uid-2", 1_000))
    list(twin.run(None))
    twin.add_workload(wl("two", "uid-1", 2_000))
    list(twin.run(None))
    twin.add_workload(wl("high", "uid-9", 3_000, priority=100))
    assert victims(twin) == ["team/two"]


def test_the_simulator_clock_stamps_each_cycle() -> None:
    """``reservations_per_cycle`` (the simulator's instants): the later cycle is the more recent."""
    twin = gpu_cluster.twin(QUEUE, reservations_per_cycle=True)
    twin.add_workload(wl("one", "uid-1", 1_000))
    twin.add_workload(wl("two", "uid-2", 2_000))
    list(twin.run(None))
    twin.add_workload(wl("high", "uid-9", 3_000, priority=100))
    assert victims(twin) == ["team/two"]
