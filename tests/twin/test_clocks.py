"""Kueue's clocks in the twin (twin/clocks.py): backoff, requeue batch, release delay, loops.

Each case here fails without the clocks: the twin frees a victim at the end of its cycle and wakes
parked workloads before the next, so the parked workload wins quota an active head takes on a
cluster (issue 18, seed 150), and a preempt-back loop converges instead of going round.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.twin import Twin, parse_cluster
from gpufleet.twin.apis.specs import PodSetSpec, WorkloadSpec
from gpufleet.twin.clocks import BATCH, Clock, ClockSettings
from gpufleet.twin.loops import PREEMPT_BACK_LOOP
from gpufleet.twin.results import CycleResult
from gpufleet.twin.step import step
from tests.twin.clock_cluster import CQ, WL, cluster
from tests.twin.test_paths import Cluster, Queue, cluster_yaml

# Seed 150's shape: r (ClusterQueue a, within nominal) reclaims 4 GPUs from d's borrower v; r needs 2.
# p (b, within nominal) was parked when the cohort was full; r2 waits behind r in a's heap.
SEED_150 = cluster(
    [CQ("a", 2, reclaim="Any"), CQ("b", 2), CQ("d", 0)],
    [WL("v", "d", 4, 0, admitted=True), WL("p", "b", 2, 1), WL("r", "a", 2, 2), WL("r2", "a", 2, 3)],
)


@pytest.mark.parametrize(
    ("productive", "starts"),
    [
        # unproductive cycles: the wait armed before a cycle is the backoff the cycles before it left
        ([False] * 8, [0, 0, 1, 3, 7, 15, 25, 35]),
        # an admission resets it; the wait armed before the productive cycle still runs out first
        ([False, False, False, True, False, False], [0, 0, 1, 3, 7, 7]),
        ([True, True, True], [0, 0, 0]),
    ],
)
def test_backoff_schedule(productive: list[bool], starts: list[int]) -> None:
    clock = Clock(0, ClockSettings())
    seen = []
    for flag in productive:
        clock.begin(clock.next_start)
        seen.append(clock.now)
        clock.end(flag)
    assert seen == starts


def test_a_requeue_batch_fires_one_period_after_the_first_change() -> None:
    clock = Clock(0, ClockSettings())
    clock.batch("cohort/all")
    clock.advance_to(600)
    clock.batch("cohort/all")  # AddAfter keeps the earlier ready time
    assert clock.pop_due(999) is None
    assert clock.pop_due(1000) == (BATCH, "cohort/all")
    assert clock.due() is None


def _decisions(report: dict) -> list[tuple[int, list[str], list[str]]]:
    return [
        (c["atMs"], [a["workload"] for a in c["admitted"]], [p["workload"] for p in c["preempted"]])
        for c in report["cycles"]
        if c["admitted"] or c["preempted"]
    ]


@pytest.mark.parametrize(
    ("clocks", "decisions", "pending"),
    [
        # Kueue: v keeps its quota for the release delay; r is admitted when it frees; r2, active
        # behind r, takes the rest at once; p wakes with the requeue batch a second later: too late.
        (ClockSettings(), [(0, [], ["ns/v"]), (1005, ["ns/r"], []), (1015, ["ns/r2"], [])], {"ns/p", "ns/v"}),
        # the unit-test world: v frees at the end of cycle 1 and p wakes before cycle 2
        (None, [(0, [], ["ns/v"]), (0, ["ns/p", "ns/r"], [])], {"ns/r2", "ns/v"}),
    ],
)
def test_seed_150_an_active_head_takes_the_quota_before_the_parked_workload_wakes(
    clocks: ClockSettings | None, decisions: list[tuple[int, list[str], list[str]]], pending: set[str]
) -> None:
    report = step([("seed150.yaml", SEED_150)], None, clocks)
    assert _decisions(report) == decisions
    assert {p["workload"] for p in report["cycles"][-1]["pending"]} == pending
    assert report["loop"] is None


@pytest.mark.parametrize(("delay", "admitted_at"), [(0, 0), (1000, 1005), (2500, 2505)])
def test_the_victim_keeps_its_quota_for_the_release_delay(delay: int, admitted_at: int) -> None:
    twin = Twin(parse_cluster([("seed150.yaml", SEED_150)]), clocks=ClockSettings(release_delay_ms=delay))
    origin = twin.clock.now if twin.clock else 0
    for result in twin.run(None):
        if any(a.workload == "ns/r" for a in result.admitted):
            assert twin.clock is not None
            assert twin.clock.now - origin == admitted_at
            return
        # until then v is evicted but counted: d still uses its 4 GPUs
        assert twin.workloads["ns/v"].evicted == (result.number > 1 or bool(result.preempted))
        assert twin.status("d").usage["gpu/nvidia.com/gpu"] == 4
    pytest.fail("r was never admitted")


# Found by the twin on random clusters: w0 (q1) preempts w5 and w6 (q2) by fair sharing; when their
# quota frees a second later they are requeued at once, win it back in the tournament, and w0 is
# parked until the requeue batch wakes it to preempt them again.
LOOP_CLUSTER = Cluster(
    flavors=2,
    nested=False,
    fair=True,
    afs=False,
    queues=(
        Queue(0, "BestEffortFIFO", (3, 4), None, None, "LowerPriority", "Never", "LowerPriority", 2, False, (0, 0)),
        Queue(0, "BestEffortFIFO", (0, 2), None, None, "Any", "Never", "Never", 1, False, (0, 0)),
        Queue(0, "BestEffortFIFO", (4, 4), None, None, "LowerPriority", "Never", "Never", 0, False, (0, 0)),
    ),
)
LOOP_JOBS = [
    ("q1", 3, 3, 0),
    ("q2", 1, 4, 10),
    ("q2", 3, 3, 10),
    ("q1", 1, 2, 10),
    ("q2", 1, 1, 0),
    ("q2", 1, 4, 0),
    ("q2", 1, 4, 10),
]


def _loop_twin(clocks: ClockSettings | None) -> Twin:
    """The first three jobs settle; then the rest arrive (as the e2e differential runs them)."""
    twin = Twin(parse_cluster([("loop.yaml", cluster_yaml(LOOP_CLUSTER))]), clocks=clocks)
    specs = [
        WorkloadSpec(
            "team",
            f"w{i}",
            q,
            (PodSetSpec("main", pods, (("gpu", gpus),)),),
            priority=prio,
            created=i * 1000,
            uid=f"w{i}",
        )
        for i, (q, pods, gpus, prio) in enumerate(LOOP_JOBS)
    ]
    for spec in specs[:3]:
        twin.add_workload(spec)
    list(twin.run(None))
    for spec in specs[3:]:
        twin.add_workload(spec)
    return twin


def test_a_preempt_back_loop_is_reported() -> None:
    twin = _loop_twin(ClockSettings())
    results = list(twin.run(None, loops=True))
    loop = twin.loop
    assert loop is not None and loop.reason == PREEMPT_BACK_LOOP
    assert loop.period_ms == 2000
    assert sorted((p.preemptor, p.workload) for p in loop.preempted) == [("team/w0", "team/w5"), ("team/w0", "team/w6")]
    assert len(results) < 50  # stopped at the first repeat, not at the cycle limit
    assert "team/w0 evicts team/w5" in loop.message


def test_without_clocks_the_same_cluster_converges() -> None:
    twin = _loop_twin(None)
    results = list(twin.run(None, loops=True))
    assert twin.loop is None
    assert sum(len(r.preempted) for r in results) == 1
    assert {"team/w5", "team/w6"} <= {a.workload for r in results for a in r.admitted}


def test_until_stable_ends_a_preempt_back_loop_on_the_command_line(tmp_path: Path) -> None:
    """A Kueue that never settles must not make ``twin step`` spin: it stops and says what loops."""
    path = tmp_path / "loop.yaml"
    path.write_text(_loop_yaml(), encoding="utf-8")
    result = CliRunner().invoke(app, ["twin", "step", str(path), "--until-stable", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["loop"]["reason"] == PREEMPT_BACK_LOOP
    assert report["clocks"] == {"releaseDelayMs": 1000, "requeueBatchMs": 1000}


def _loop_yaml() -> str:
    """The loop's cluster as objects a user exports: w0 and w1 admitted where the first run put them."""
    admitted = {"w0": ("q1", "f1"), "w1": ("q2", "f0")}
    docs = [cluster_yaml(LOOP_CLUSTER)]
    for i, (q, pods, gpus, prio) in enumerate(LOOP_JOBS):
        name = f"w{i}"
        status = ""
        if name in admitted:
            cq, flavor = admitted[name]
            status = (
                f"\nstatus:\n  admission:\n    clusterQueue: {cq}\n    podSetAssignments:\n"
                f"    - {{name: main, count: {pods}, flavors: {{gpu: {flavor}}}}}\n"
                f"  conditions:\n  - {{type: QuotaReserved, status: 'True', reason: QuotaReserved, "
                f"lastTransitionTime: '2025-01-01T00:00:1{i}Z'}}"
            )
        docs.append(
            f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {{namespace: team, name: {name}, "
            f"uid: {name}, creationTimestamp: '2025-01-01T00:00:0{i}Z'}}\nspec:\n  queueName: {q}\n  priority: {prio}\n"
            f"  podSets:\n  - name: main\n    count: {pods}\n    template:\n      spec:\n        containers:\n"
            f"        - name: c\n          resources:\n            requests: {{gpu: '{gpus}'}}{status}"
        )
    return "\n---\n".join(docs)


@pytest.mark.parametrize(
    ("gates", "woken_after"), [("", 1000), ("featureGates: {SchedulerLongRequeueInterval: true}", 10_000)]
)
def test_the_long_requeue_interval_gate_wakes_parked_workloads_after_ten_seconds(gates: str, woken_after: int) -> None:
    """``y`` is parked (NoFit) while ``x`` holds the queue's 2 GPUs; when ``x`` finishes, ``y`` waits
    for the requeue batch: 1 s, or 10 s with Kueue's alpha ``SchedulerLongRequeueInterval`` gate
    (``getRequeueBatchPeriod`` in ``pkg/cache/queue/inadmissible_workloads.go``)."""
    objects = cluster([CQ("a", 2, cohort=None)], [WL("x", "a", 2, 0, admitted=True), WL("y", "a", 2, 1)], fair=False)
    objects += f"\n---\napiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n{gates}\n"
    twin = Twin(parse_cluster([("gates.yaml", objects)]), clocks=ClockSettings())
    assert twin.clock is not None
    assert twin.clock.settings.requeue_batch_ms == woken_after
    assert not [a for r in twin.run(None) for a in r.admitted]  # y parked
    finished = twin.clock.now
    twin.finish("ns/x")
    for result in twin.run(None):
        if [a.workload for a in result.admitted] == ["ns/y"]:
            assert twin.clock.now - finished == woken_after
            return
    pytest.fail("y was never admitted")


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "reference"])
def test_a_head_that_repeats_its_verdict_after_a_requeue_batch_does_not_end_the_run(fast: bool) -> None:
    """``b`` (1 GPU) is parked while ``x1`` and ``x2`` fill the queue's 4 GPUs. ``x1`` finishes and
    ``a`` (4 GPUs, older than ``b``) arrives: ``a`` fails ("3 more needed") and is parked. The requeue
    batch a second later wakes both; ``a``, the older, fails again with the same words, and Kueue's
    next cycle pops ``b``, which fits. The run must not stop at the repeated verdict (seed 140)."""
    objects = cluster(
        [CQ("q", 4, cohort=None)],
        [WL("x1", "q", 1, 0, admitted=True), WL("x2", "q", 3, 0, admitted=True), WL("b", "q", 1, 5)],
        fair=False,
    )
    twin = Twin(parse_cluster([("repeat.yaml", objects)]), clocks=ClockSettings(), fast=fast, streaks=fast)
    assert not [a for r in twin.run(None) for a in r.admitted]  # b parked
    twin.finish("ns/x1")
    twin.add_workload(WorkloadSpec("ns", "a", "q", (PodSetSpec("main", 1, (("nvidia.com/gpu", 4),)),), created=1000))
    results = list(twin.run(None))
    tried = [p.workload for r in results for p in r.pending]
    assert tried == ["ns/a", "ns/a"]  # before and after the batch, the same verdict both times
    assert [a.workload for r in results for a in r.admitted] == ["ns/b"]


# Seeds 167, 277 and 280 of the random differential: a head of a nested ClusterQueue fails and
# parks, a smaller one behind it is admitted, and Kueue tries the parked head again about two
# seconds later (the ClusterQueue's status write reconciles its Cohort, which asks for the tree's
# requeue batch: twin/controller/cq_status.py), so its condition counts the later admission.
def _nested_cluster(nested: bool) -> str:
    return cluster(
        [CQ("q0", 0, cohort="team" if nested else "org"), CQ("q1", 8, cohort="org")],
        [WL("held", "q1", 4, 0, admitted=True), WL("big", "q0", 6, 1), WL("small", "q0", 2, 2)],
        fair=False,
        parents={"team": "org"} if nested else None,
    )


@pytest.mark.parametrize(
    ("nested", "clocks", "tried_at", "needed"),
    [
        (True, ClockSettings(), [0, 2000], 4),  # team has a parent: its status write wakes the tree
        (False, ClockSettings(), [0], 2),  # q0 right under the root: Kueue reconciles no Cohort
        (True, None, [0], 2),  # the unit-test world has no ClusterQueue controller
    ],
    ids=["nested", "under-the-root", "no-clocks"],
)
def test_a_nested_status_write_brings_the_parked_head_back(
    nested: bool, clocks: ClockSettings | None, tried_at: list[int], needed: int
) -> None:
    report = step([("nested.yaml", _nested_cluster(nested))], None, clocks)
    written = [(c["atMs"], p["message"]) for c in report["cycles"] for p in c["pending"] if p["workload"] == "ns/big"]
    assert sorted({at for at, _ in written}) == tried_at
    assert written[-1][1].endswith(f"insufficient unused quota for nvidia.com/gpu in flavor gpu, {needed} more needed")
    assert _decisions(report)[-1][1] == ["ns/small"]


def _tries(twin: Twin, run: Iterator[CycleResult], key: str, origin: int, tried: list[int]) -> list[CycleResult]:
    """Run ``run`` out; append the time (ms from ``origin``) of each cycle in which ``key`` was a head."""
    assert twin.clock is not None
    results = []
    for r in run:
        results.append(r)
        if any(p.workload == key for p in r.pending):
            tried.append(twin.clock.now - origin)
    return results


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "reference"])
def test_a_new_pending_condition_starts_the_nested_status_reconcile(fast: bool) -> None:
    """Every update of a Workload asks the ClusterQueue controller for a reconcile one second later
    (``WorkloadReconciler.Update`` -> ``notifyWatchers`` -> ``ClusterQueueReconciler.NotifyWorkloadUpdate``,
    ``AddAfter``), and the scheduler's ``requeueAndUpdate`` patches a head whose ``QuotaReserved``
    message changed. So the condition ``big`` gets at 6 s starts q0's reconcile, which at 7 s finds
    ``tiny``'s admission (6.5 s), writes the status and, through the Cohort ``team``, asks for the
    tree's requeue batch: ``big`` is tried again at 8 s. Counting only additions, admissions and
    releases as events, the reconcile would start at ``tiny``'s arrival and ``big`` wait until 8.5 s."""
    objects = cluster(
        [CQ("q0", 0, cohort="team"), CQ("q1", 8, cohort="org")],
        [WL("h1", "q1", 2, 0, admitted=True), WL("h2", "q1", 4, 0, admitted=True), WL("big", "q0", 6, 1)],
        fair=False,
        parents={"team": "org"},
    )
    twin = Twin(parse_cluster([("nested.yaml", objects)]), clocks=ClockSettings(), fast=fast, streaks=fast)
    assert twin.clock is not None
    origin, tried = twin.clock.now, list[int]()
    cycles = _tries(twin, twin.run(None), "ns/big", origin, tried)  # 4 more needed: parked
    twin.advance_to(origin + 5000)
    twin.finish("ns/h1")  # q1 sits right under the root: its own events reconcile no Cohort
    cycles += _tries(twin, twin.run(None, until=origin + 6500), "ns/big", origin, tried)  # 2 more needed
    twin.advance_to(origin + 6500)
    twin.add_workload(WorkloadSpec("ns", "tiny", "q0", (PodSetSpec("main", 1, (("nvidia.com/gpu", 1),)),), created=10))
    results = _tries(twin, twin.run(None), "ns/big", origin, tried)
    assert [a.workload for r in results for a in r.admitted] == ["ns/tiny"]
    assert tried == [0, 6000, 8000]
    # reconciles that find the status unchanged (1 s, 9 s, 11 s) wake no cycle: Kueue's loop stays
    # blocked in ``Manager.Heads`` until a workload is pushed
    assert all(r.pending or r.admitted for r in cycles + results)
    assert twin.last_status["ns/big"].message.endswith("3 more needed")


def test_an_eviction_is_an_event_on_the_victims_cluster_queue() -> None:
    """The scheduler writes ``Evicted`` and ``Preempted`` on a victim when it preempts it, an update
    that asks for its ClusterQueue's reconcile then, not only when its quota is released a second
    later."""
    objects = cluster(
        [CQ("q0", 0, cohort="team"), CQ("q1", 4, cohort="org", reclaim="Any")],
        [WL("borrower", "q0", 4, 0, admitted=True), WL("owner", "q1", 4, 1)],
        fair=False,
        parents={"team": "org"},
    )
    twin = Twin(parse_cluster([("evict.yaml", objects)]), clocks=ClockSettings())
    assert twin.clock is not None
    origin = twin.clock.now
    for result in twin.run(1):
        assert [p.workload for p in result.preempted] == ["ns/borrower"]
    assert sorted((due - origin, kind, subject) for due, _, kind, subject in twin.clock.timers) == [
        (1000, "release", "ns/borrower"),
        (1000, "status", "q0"),
    ]
