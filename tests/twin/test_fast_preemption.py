"""The fast path's preemption shortcuts against the plain search, and its caches against recomputation.

Random cohort trees (flat or two levels, weights 0 included, one or two resources so the dominant
one varies, both fair-sharing strategies alone and together, reclaim and within-queue policies),
random admitted workloads (borrowing, some marked evicted) and random preemptors:

* the bounded fair-sharing search (``Preemptor.bounded``: targets and whole searches no candidate
  can pass are skipped, the share test asked once per victim usage, candidates kept in order)
  returns the same targets, with the same reasons, as the plain search on the same tree;
* the flat bound's answers kept for one quota state (``FlatBound.hopeless``: per question, the
  quantities known hopeless or not; the highest borrowing shares) equal the bound computed afresh
  for every queue, priority and quantity asked in any order;
* every quota node's remembered share (``FairShare.share``) equals its share computed afresh, and
  every ClusterQueue's remembered candidate order (kept across its admissions and ends) equals
  sorting its workloads again, after admissions, completions, evictions and cycles.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.twin import Twin
from gpufleet.twin.apis import specs as s
from gpufleet.twin.fastpath.preemption_bound import FlatBound
from gpufleet.twin.scheduler.preemption.preemption import Preemptor, in_candidate_order
from gpufleet.twin.workload import Workload
from tests.twin.trees import GPU, Job, Queue, pending_spec, tree

CPU = "cpu"
LTE, LTI = s.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, s.LESS_THAN_INITIAL_SHARE


@st.composite
def clusters(draw: Any) -> tuple[s.ClusterSpec, list[Job]]:
    nested = draw(st.booleans())
    cohorts: dict[str, tuple[str | None, float]] = {"root": (None, 1.0)}
    if nested:
        cohorts["a"] = ("root", float(draw(st.integers(0, 2))))
        cohorts["b"] = ("root", float(draw(st.integers(0, 2))))
    two = draw(st.booleans())
    queues = {}
    for i in range(draw(st.integers(2, 5))):
        nominal: dict[str, int] = {GPU: draw(st.integers(0, 6))}
        if two:
            nominal[CPU] = draw(st.integers(0, 6))
        queues[f"q{i}"] = Queue(
            draw(st.sampled_from(sorted(cohorts))) if nested else "root",
            nominal,
            weight=float(draw(st.integers(0, 3))),
            reclaim=draw(st.sampled_from([s.ANY, s.LOWER_PRIORITY, s.NEVER])),
            within=draw(st.sampled_from([s.NEVER, s.LOWER_PRIORITY, s.LOWER_OR_NEWER_EQUAL_PRIORITY])),
        )
    running = []
    for j in range(draw(st.integers(0, 14))):
        amounts = {GPU: draw(st.integers(1, 3))}
        if two:
            amounts[CPU] = draw(st.integers(0, 3))
        running.append(Job(f"r{j}", draw(st.sampled_from(sorted(queues))), amounts, draw(st.integers(0, 2)), j + 1))
    preemptors = []
    for j in range(draw(st.integers(1, 4))):
        amounts = {GPU: draw(st.integers(1, 6))}
        if two:
            amounts[CPU] = draw(st.integers(0, 4))
        preemptors.append(Job(f"p{j}", draw(st.sampled_from(sorted(queues))), amounts, draw(st.integers(0, 3)), 100))
    strategies = draw(st.sampled_from([(LTE,), (LTI,), (LTE, LTI)]))
    config = s.ConfigSpec(fair_sharing=True, preemption_strategies=strategies)
    return tree(cohorts, queues, running, [], config), preemptors


def _targets(twin: Twin, wl: Workload, *, bounded: bool) -> list[tuple[str, str]]:
    preemptor: Preemptor = twin.preemptor
    preemptor.bounded = bounded
    cq = twin.tree.cluster_queues[wl.cluster_queue]
    request = dict(twin.assignments.assigner.assign(wl, cq, (1,)).usage)
    if not request:
        return []
    found = preemptor.get_targets(wl, cq, request, request)
    return [(t.workload.key, t.reason) for t in found]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_bounded_fair_search_finds_the_plain_search_targets(cluster: Any, data: Any) -> None:
    spec, preemptors = cluster
    twin = Twin(spec)
    admitted = [w for w in twin.workloads.values() if w.admission is not None]
    for wl in data.draw(st.lists(st.sampled_from(admitted), max_size=3, unique=True) if admitted else st.just([])):
        twin.tree.cluster_queues[wl.cluster_queue].mark_evicted(wl, True)
    for job in preemptors:
        wl = twin.add_workload(pending_spec(job))
        assert _targets(twin, wl, bounded=True) == _targets(twin, wl, bounded=False)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_the_flat_bound_kept_for_a_quota_state_equals_the_bound_afresh(cluster: Any, data: Any) -> None:
    spec, preemptors = cluster
    twin = Twin(spec)
    bound = twin.preemptor.bound
    assert bound is not None
    workloads = [twin.add_workload(pending_spec(job)) for job in preemptors]
    fr = next(i for i, k in enumerate(twin.tree.frs.keys) if k.resource == GPU)
    frs = frozenset([fr])
    asks = st.tuples(st.sampled_from(workloads), st.integers(0, 12))
    for wl, quantity in data.draw(st.lists(asks, min_size=1, max_size=12)):
        cq = twin.tree.cluster_queues[wl.cluster_queue]
        fresh = FlatBound(bound.fair, bound.strategy, bound.in_order)
        assert bound.hopeless(wl, cq, {fr: quantity}, frs) == fresh.flat(wl, cq, {fr: quantity}, frs)


def _caches_hold(twin: Twin) -> None:
    assert twin.fair is not None
    nodes = [cq.node for cq in twin.tree.cluster_queues.values()] + list(twin.tree.cohorts.values())
    for node in nodes:
        kept, fresh = twin.fair.share(node), twin.fair.drs(node)
        assert (kept.key(), kept.borrowed, kept.resource) == (fresh.key(), fresh.borrowed, fresh.resource)
    for cq in twin.tree.cluster_queues.values():
        for frs, part in cq.ordered.items():
            assert part == in_candidate_order(list(cq.using_any(frs)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_remembered_shares_and_candidate_orders_equal_recomputed_ones(cluster: Any, data: Any) -> None:
    spec, preemptors = cluster
    twin = Twin(spec, hold_evicted_quota=True)
    for job in preemptors:
        twin.add_workload(pending_spec(job))
    _read_orders(twin)
    for _ in range(data.draw(st.integers(1, 8))):
        step = data.draw(st.sampled_from(["cycle", "finish", "gone", "add"]))
        if step == "cycle":
            twin.run_cycle()
        elif step == "finish":
            done = [k for k, w in twin.workloads.items() if w.admission is not None and not w.evicted]
            if done:
                twin.finish(data.draw(st.sampled_from(sorted(done))))
        elif step == "gone":
            evicted = [k for k, w in twin.workloads.items() if w.evicted]
            if evicted:
                twin.evicted_gone(data.draw(st.sampled_from(sorted(evicted))))
        else:
            queue = data.draw(st.sampled_from(sorted(twin.tree.cluster_queues)))
            name = f"x{len(twin.workloads)}-{data.draw(st.integers(0, 10**6))}"
            if f"ns/{name}" not in twin.workloads:
                twin.add_workload(pending_spec(Job(name, queue, data.draw(st.integers(1, 4)), 3, 200)))
        _caches_hold(twin)
        _read_orders(twin)


def _read_orders(twin: Twin) -> None:
    """Ask every queue's candidate order for each flavor-resource and for all of them together, as a
    cycle's preemption search does: the next admissions and ends must keep those kept orders valid
    (``ClusterQueue._keep_ordered``), not only leave them to be sorted afresh."""
    every = frozenset(range(len(twin.tree.frs.keys)))
    for cq in twin.tree.cluster_queues.values():
        for frs in [*(frozenset([fr]) for fr in every), every]:
            Preemptor._in_order(cq, frs)


def test_a_share_left_unchanged_by_the_victim_still_passes_the_bound() -> None:
    """The bound's edge: the preemptor's share (200, CPU) equals the target's, and the victim's
    removal leaves the target's share as it was (its dominant resource is CPU, the victim uses
    none), so ``LessThanOrEqualToFinalShare`` passes with equality; a strict bound would miss it."""
    queues = {
        "q0": Queue("root", {GPU: 0, CPU: 0}),
        "q1": Queue("root", {GPU: 0, CPU: 0}),
        "q2": Queue("root", {GPU: 10, CPU: 10}),
    }
    running = [
        Job("r0", "q1", {GPU: 1, CPU: 2}, 0, 1),
        Job("r1", "q1", {GPU: 1, CPU: 0}, 0, 2),
        Job("r2", "q2", {GPU: 8, CPU: 6}, 0, 3),
    ]
    spec = tree({"root": (None, 1.0)}, queues, running, [], s.ConfigSpec(fair_sharing=True))
    for bounded in (True, False):
        twin = Twin(spec)
        wl = twin.add_workload(pending_spec(Job("p", "q0", {GPU: 1, CPU: 2}, 1, 100)))
        assert _targets(twin, wl, bounded=bounded) == [("ns/r1", "InCohortFairSharing")]


def test_a_workload_admitted_beside_an_evicted_one_is_kept_after_it_in_candidate_order() -> None:
    """The evicted come first in candidate order whatever their priority; a workload admitted while
    one is evicted goes among the rest by ``victim_key`` (newest first at one priority)."""
    queues = {"q0": Queue("root", 6)}
    running = [Job("high", "q0", 2, 2, 1), Job("low", "q0", 2, 0, 2)]
    twin = Twin(tree({"root": (None, 1.0)}, queues, running, []), hold_evicted_quota=True)
    cq = twin.tree.cluster_queues["q0"]
    twin.run_cycle()
    cq.mark_evicted(twin.workloads["ns/high"], True)
    _read_orders(twin)  # [high (evicted), low]
    twin.add_workload(pending_spec(Job("new", "q0", 1, 0, 300)))
    twin.run_cycle()
    assert twin.workloads["ns/new"].admission is not None
    orders = list(cq.ordered.values())
    assert orders and all([w.key for w in part] == ["ns/high", "ns/new", "ns/low"] for part in orders)
    _caches_hold(twin)
