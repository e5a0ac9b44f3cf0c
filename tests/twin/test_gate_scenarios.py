"""Scenarios for Kueue v0.19.2's default-on gates that the twin models (the gate table of docs/twin.md).

Each is hand-worked from Kueue's code and built so that the gate decides the outcome: without
the rule the gate adds, another workload would be admitted.
"""

from __future__ import annotations

import pytest

from gpufleet.twin import Twin
from gpufleet.twin.apis import specs as s
from gpufleet.twin.step import step
from tests.twin.trees import Job, Queue, tree

FLAVORS = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f2}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: ns, name: a}
spec: {clusterQueue: a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: ns, name: b}
spec: {clusterQueue: b}
---
"""


def cluster_queue(name: str, quotas: str, covered: str = "[nvidia.com/gpu]", cohort: str = "c") -> str:
    return (
        f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n"
        f"  cohortName: {cohort}\n  namespaceSelector: {{}}\n"
        f"  resourceGroups: [{{coveredResources: {covered}, flavors: [{quotas}]}}]\n---\n"
    )


def workload(name: str, queue: str, requests: str, *, at: int, count: int = 1, extra: str = "") -> str:
    return (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\n"
        f"metadata: {{name: {name}, namespace: ns, creationTimestamp: '2026-01-01T00:00:0{at}Z'}}\n"
        f"spec:\n  queueName: {queue}\n  podSets: [{{name: main, count: {count}, template: {{spec: "
        f"{{containers: [{{name: c, resources: {{requests: {requests}}}}}]}}}}}}]\n{extra}---\n"
    )


def admitted_first_cycle(text: str) -> list[str]:
    report = step([("gates.yaml", text)], 1)
    return [a["workload"] for a in report["cycles"][0]["admitted"]]


def test_fair_sharing_prioritize_non_borrowing() -> None:
    """FairSharingPrioritizeNonBorrowing (``fair_sharing_iterator.go`` rule 2, before the share).

    Cohort c, one resource in flavors f1 and f2 (2 + 2 GPUs per queue; 8 in the cohort). a runs 4
    on f2 (borrowing 2 there: share 2/8 = 250); its head asks 2 on f1, within a's nominal. b is
    empty; its head asks 3 on f1, borrowing 1 (share 125). Only 4 fit on f1. By share b goes first;
    a's entry is not borrowing on the flavor-resource it requests, so it goes first and fits."""
    quotas = (
        "{name: f1, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}, "
        "{name: f2, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}"
    )
    running = workload("a-running", "a", "{nvidia.com/gpu: 4}", at=1).replace(
        "---\n",
        "status:\n  admission: {clusterQueue: a, podSetAssignments: [{name: main, count: 1, "
        "flavors: {nvidia.com/gpu: f2}}]}\n---\n",
    )
    text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing: {}\n---\n"
        + FLAVORS
        + cluster_queue("a", quotas)
        + cluster_queue("b", quotas)
        + running
        + workload("a-head", "a", "{nvidia.com/gpu: 2}", at=3)
        + workload("b-head", "b", "{nvidia.com/gpu: 3}", at=2)
    )
    assert admitted_first_cycle(text) == ["ns/a-head"]


@pytest.mark.parametrize("fair", [False, True])
def test_priority_sorting_within_cohort(fair: bool) -> None:
    """PrioritySortingWithinCohort: among entries equal on borrowing (classical) or on standing and
    share (fair sharing), the higher priority goes first, before the older timestamp. Cohort c, a
    and b 2 GPUs each; both heads ask 3 (borrowing 1: equal level, equal share 250); the older one
    has priority 1, the newer one 5; only one fits."""
    queues = {"a": Queue("c", 2), "b": Queue("c", 2)}
    pending = [Job("old", "a", 3, priority=1, at=1), Job("new", "b", 3, priority=5, at=2)]
    spec = tree({"c": (None, 1.0)}, queues, [], pending, s.ConfigSpec(fair_sharing=fair))
    assert [a.workload for a in Twin(spec).run_cycle().admitted] == ["ns/new"]


def test_hierarchical_cohorts_order_by_how_far_up_an_entry_borrows() -> None:
    """HierarchicalCohorts: the classical order's first key is the borrowing level, the number of
    cohort levels up to the one whose subtree holds the request (``Assignment.Borrows``).
    root{mid{a: 1, b: 1}, c: 4}, c runs 2, so 4 of 6 are free. a's head (priority 10) asks 3:
    beyond mid's 2, borrowed from root (level 2); b's head (priority 0) asks 2: within mid (level
    1). b goes first although its priority is lower, and a no longer fits."""
    queues = {"a": Queue("mid", 1), "b": Queue("mid", 1), "c": Queue("root", 4)}
    running = [Job("c-running", "c", 2, at=1)]
    pending = [Job("a-head", "a", 3, priority=10, at=2), Job("b-head", "b", 2, priority=0, at=3)]
    cohorts = {"root": (None, 1.0), "mid": ("root", 1.0)}
    spec = tree(cohorts, queues, running, pending, s.ConfigSpec(fair_sharing=False))
    result = Twin(spec).run_cycle()
    assert [a.workload for a in result.admitted] == ["ns/b-head"]
    (a_head,) = [p for p in result.pending if p.workload == "ns/a-head"]
    assert a_head.message == "Workload no longer fits after processing another workload"


RECLAIMED = "status:\n  reclaimablePods: [{name: main, count: 3}]\n"


@pytest.mark.parametrize(("gates", "fits"), [("", True), ("featureGates: {ReclaimablePods: false}\n", False)])
def test_reclaimable_pods_free_their_quota(gates: str, fits: bool) -> None:
    """ReclaimablePods (``podSetsCountsAfterReclaim``): a's admitted 4-pod workload has 3 pods that
    finished for good, so it counts 1 GPU of a's 4; the 3-GPU head then fits. With the gate off
    all 4 count and it does not."""
    quotas = "{name: f1, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}"
    running = workload("running", "a", "{nvidia.com/gpu: 1}", at=1, count=4).replace(
        "---\n",
        RECLAIMED.replace("status:\n", "status:\n  admission: {clusterQueue: a, podSetAssignments: "
        "[{name: main, count: 4, flavors: {nvidia.com/gpu: f1}}]}\n") + "---\n",
    )  # fmt: skip
    text = (
        f"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n{gates}---\n"
        + FLAVORS
        + cluster_queue("a", quotas)
        + running
        + workload("head", "a", "{nvidia.com/gpu: 3}", at=2)
    )
    report = step([("gates.yaml", text)], 1)
    assert [a["workload"] for a in report["cycles"][0]["admitted"]] == (["ns/head"] if fits else [])
    assert report["clusterQueues"]["a"]["admittedWorkloads"] == (2 if fits else 1)


@pytest.mark.parametrize(("strategy", "admitted"), [("BlockUndeclared", False), ("IgnoreUndeclared", True)])
def test_quota_check_strategy(strategy: str, admitted: bool) -> None:
    """QuotaCheckStrategy (``IgnoreUndeclaredResources``): a ClusterQueue budgets GPUs only; a
    workload also asks for a resource no resource group covers. BlockUndeclared (the default):
    "resource example.com/nic unavailable in ClusterQueue"; IgnoreUndeclared: admitted."""
    quotas = "{name: f1, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}"
    text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        f"resources: {{quotaCheckStrategy: {strategy}}}\n---\n"
        + FLAVORS
        + cluster_queue("a", quotas)
        + workload("w", "a", "{nvidia.com/gpu: 2, example.com/nic: 1}", at=1)
    )
    report = step([("gates.yaml", text)], 1)
    cycle = report["cycles"][0]
    assert [a["workload"] for a in cycle["admitted"]] == (["ns/w"] if admitted else [])
    if not admitted:
        (pending,) = cycle["pending"]
        assert pending["reason"] == "NoMatchingFlavor"
        assert "resource example.com/nic unavailable in ClusterQueue" in pending["message"]


HELD_QUEUE = (
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {namespace: ns, name: held}\n"
    "spec: {clusterQueue: a, stopPolicy: Hold}\n---\n"
)


@pytest.mark.parametrize("observability", [False, True], ids=["gate-off", "gate-on"])
def test_the_reason_kueue_writes_follows_the_observability_gate(observability: bool) -> None:
    """UnadmittedWorkloadsObservability decides only the reason Kueue writes: granular with it on;
    with it off (v0.19.2's default) the scheduler writes ``Pending`` (``UnadmittedWorkloadReasonWithFallback``)
    and the workload controller ``Inadmissible`` for a stopped LocalQueue. The twin's own ``reason``
    stays granular either way."""
    quotas = "{name: f1, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}"
    gates = "featureGates: {UnadmittedWorkloadsObservability: true}\n" if observability else ""
    text = (
        f"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n{gates}---\n"
        + FLAVORS
        + HELD_QUEUE
        + cluster_queue("a", quotas)
        + workload("fits", "a", "{nvidia.com/gpu: 3}", at=1)
        + workload("waits", "a", "{nvidia.com/gpu: 2}", at=2)
        + workload("huge", "a", "{nvidia.com/gpu: 8}", at=3)
        + workload("nic", "a", "{example.com/nic: 1}", at=4)
        + workload("held", "held", "{nvidia.com/gpu: 1}", at=5)
    )
    report = step([("gates.yaml", text)], None)
    rows = {p["workload"]: p for p in report["cycles"][-1]["pending"]}
    granular = {
        "ns/waits": "WaitingForQuota",
        "ns/huge": "ExceedsMaxQuota",
        "ns/nic": "NoMatchingFlavor",
        "ns/held": "Suspended",
    }
    legacy = {"ns/waits": "Pending", "ns/huge": "Pending", "ns/nic": "Pending", "ns/held": "Inadmissible"}
    assert {w: p["reason"] for w, p in rows.items()} == granular
    assert {w: p["kueueReason"] for w, p in rows.items()} == (granular if observability else legacy)
