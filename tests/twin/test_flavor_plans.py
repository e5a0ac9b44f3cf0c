"""Plain-Fit plans (``fastpath/fit_plans.py``) give what trying every flavor gives.

Differential property test below the cycle: on random clusters (those of ``test_paths``) with
random admitted usage, every ClusterQueue is asked for random workloads of one or two pod sets
(sharing a resource, so the second pod set's check counts the first's usage), at full and reduced
counts. The assigner with plans must return what its flavor-by-flavor search (``_assign``) returns,
field for field. ``test_paths`` checks the same through whole cycles; this one also reaches pod-set
mixes its streams never draw.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.twin import Twin, parse_cluster
from gpufleet.twin.apis.specs import PodSetSpec, WorkloadSpec
from gpufleet.twin.scheduler.flavorassigner import Assignment
from gpufleet.twin.workload import Workload
from tests.twin.test_paths import SETTINGS, Cluster, Queue, cluster_yaml, clusters, events, play

pod_sets = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 4)), min_size=1, max_size=2)


def fields(a: Assignment) -> tuple[Any, ...]:
    return (a.mode, a.borrowing, list(a.usage.items()), tuple(a.pod_sets), a.contested, a.reason, a.message)


@settings(SETTINGS, max_examples=150)
@given(clusters, events, st.lists(pod_sets, min_size=1, max_size=4))
def test_plans_agree_with_the_flavor_search(
    cluster: Cluster, stream: list[Any], shapes: list[list[tuple[int, int]]]
) -> None:
    twin = Twin(parse_cluster([("cluster.yaml", cluster_yaml(cluster))]), hold_evicted_quota=True)
    play(twin, stream, len(cluster.queues))
    assigner = twin.assignments.assigner
    assert assigner.plans
    for n, shape in enumerate(shapes):
        sets = tuple(PodSetSpec(f"ps{i}", pods, (("gpu", gpus),)) for i, (pods, gpus) in enumerate(shape))
        for name, cq in sorted(twin.tree.cluster_queues.items()):
            wl = Workload(WorkloadSpec("team", f"probe{n}", name, sets), name)
            for counts in {tuple(ps.count for ps in sets), tuple(1 for _ in sets)}:
                assert fields(assigner.assign(wl, cq, counts)) == fields(assigner._assign(wl, cq, counts))


@pytest.mark.pure  # a spy on a compiled method
def test_a_plain_fit_skips_the_flavor_search() -> None:
    """Not vacuous: where the first flavor fits, the search is not run (and gives the same)."""
    queue = Queue(0, "BestEffortFIFO", (2, 0), None, None, "Never", "Never", "Never", 1, afs=False, consumed=(0, 0))
    c = Cluster(1, nested=False, fair=True, afs=False, queues=(queue, queue))
    twin = Twin(parse_cluster([("cluster.yaml", cluster_yaml(c))]))
    searched: list[str] = []
    search = twin.assignments.assigner._assign

    def spy(wl: Workload, cq: Any, counts: tuple[int, ...]) -> Assignment:
        searched.append(wl.key)
        return search(wl, cq, counts)

    twin.assignments.assigner._assign = spy  # type: ignore[method-assign]
    cq = twin.tree.cluster_queues["q0"]
    wl = Workload(WorkloadSpec("team", "probe", "q0", (PodSetSpec("main", 1, (("gpu", 2),)),)), "q0")
    planned = twin.assignments.assigner.assign(wl, cq, (1,))
    assert searched == []
    assert fields(planned) == fields(search(wl, cq, (1,)))


def test_a_borrowing_fit_is_planned_only_where_the_search_stops_there() -> None:
    """q0 has 1 GPU of f0 and 4 of f1; two GPUs fit in f0 only by borrowing q1's. Kueue's default
    ``whenCanBorrow: MayStopSearch`` takes f0; ``TryNextFlavor`` goes on to f1, which fits."""
    q0 = Queue(0, "BestEffortFIFO", (1, 4), None, None, "Never", "Never", "Never", 1, afs=False, consumed=(0, 0))
    q1 = replace(q0, nominal=(4, 0))
    chosen = []
    for try_next in (False, True):
        c = Cluster(2, nested=False, fair=False, afs=False, queues=(q0, q1), try_next=try_next)
        twin = Twin(parse_cluster([("cluster.yaml", cluster_yaml(c))]))
        cq = twin.tree.cluster_queues["q0"]
        wl = Workload(WorkloadSpec("team", "probe", "q0", (PodSetSpec("main", 1, (("gpu", 2),)),)), "q0")
        planned = twin.assignments.assigner.assign(wl, cq, (1,))
        assert fields(planned) == fields(twin.assignments.assigner._assign(wl, cq, (1,)))
        chosen.append((planned.pod_sets[0].flavors, planned.borrowing))
    assert chosen == [((("gpu", "f0"),), 1), ((("gpu", "f1"),), 0)]
