"""The real Kueue, fed gpufleet's rendered objects, admits, holds and lends GPUs as the policy says.

Train pool: 8 H100s. alpha is guaranteed 4 and may not borrow; beta is guaranteed 4 and may borrow 4.
Pods run on kwok nodes and succeed after their ``run-for`` annotation. Each test deletes its Jobs, so
quota is free again for the next one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpufleet.testbed.kwok import RUN_FOR_ANNOTATION
from tests.e2e.batch_jobs import batch_job

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def job(name: str, team: str, *, pods: int, per_pod: dict[str, int], run_for: str = "1h") -> dict[str, Any]:
    limits = {resource: str(n) for resource, n in per_pod.items()}
    labels = {
        QUEUE_LABEL: team,
        "gpufleet.io/team": team,
        "gpufleet.io/model": "tiny",
        "gpufleet.io/data-class": "internal",
    }
    pod = {"labels": labels, "annotations": {RUN_FOR_ANNOTATION: run_for}}
    return batch_job(name, team, labels, pods=pods, limits=limits, requests=limits, pod_metadata=pod)


def workload_of(cluster: Any, namespace: str, job_name: str) -> dict[str, Any] | None:
    for wl in cluster.get("workloads", f"--namespace={namespace}")["items"]:
        if any(o.get("kind") == "Job" and o.get("name") == job_name for o in wl["metadata"].get("ownerReferences", [])):
            return wl  # type: ignore[no-any-return]
    return None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    if obj is None:
        return None
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def admitted(cluster: Any, namespace: str, job_name: str) -> dict[str, Any] | None:
    wl = workload_of(cluster, namespace, job_name)
    c = condition(wl, "Admitted")
    return wl if c and c["status"] == "True" else None


def running_pods(cluster: Any, namespace: str, job_name: str) -> list[dict[str, Any]]:
    pods = cluster.get("pods", f"--namespace={namespace}", f"--selector=job-name={job_name}")["items"]
    return [p for p in pods if p["status"].get("phase") == "Running"]


@pytest.fixture
def teams(cluster: Any, applied: Path) -> Iterator[Any]:
    yield cluster
    for team in ("alpha", "beta"):
        cluster.kubectl(
            "delete", "jobs", "--all", f"--namespace={team}", "--cascade=foreground", "--wait=true", "--timeout=60s"
        )
        cluster.eventually(
            lambda team=team: not cluster.get("workloads", f"--namespace={team}")["items"], f"{team}'s workloads to go"
        )


def test_a_job_within_quota_is_admitted_placed_on_its_pool_and_completes(teams: Any) -> None:
    cluster = teams
    cluster.apply([job("fits", "alpha", pods=1, per_pod={"nvidia.com/gpu": 4}, run_for="5s")])
    wl = cluster.eventually(lambda: admitted(cluster, "alpha", "fits"), "Kueue to admit alpha's job")
    assignment = wl["status"]["admission"]["podSetAssignments"][0]
    assert assignment["flavors"] == {"nvidia.com/gpu": "train"}
    pods = cluster.eventually(lambda: running_pods(cluster, "alpha", "fits"), "the pod to run")
    node = cluster.get("node", pods[0]["spec"]["nodeName"])
    assert node["metadata"]["labels"]["gpufleet.io/pool"] == "train"
    assert {"key": "gpufleet.io/pool", "operator": "Equal", "value": "train", "effect": "NoSchedule"} in pods[0][
        "spec"
    ]["tolerations"]
    cluster.eventually(
        lambda: (condition(cluster.get("job", "fits", "--namespace=alpha"), "Complete") or {}).get("status") == "True",
        "the job to complete after its run-for",
    )
    cluster.eventually(
        lambda: (condition(workload_of(cluster, "alpha", "fits"), "Finished") or {}).get("status") == "True",
        "the workload to finish",
    )


def test_a_job_beyond_the_quota_waits_with_kueues_reason_until_quota_frees(teams: Any) -> None:
    cluster = teams
    cluster.apply([job("first", "alpha", pods=1, per_pod={"nvidia.com/gpu": 4})])
    cluster.eventually(lambda: admitted(cluster, "alpha", "first"), "the first job to be admitted")
    cluster.apply([job("second", "alpha", pods=1, per_pod={"nvidia.com/gpu": 2})])

    def pending() -> dict[str, Any] | None:
        c = condition(workload_of(cluster, "alpha", "second"), "QuotaReserved")
        return c if c and c["status"] == "False" and c.get("message") else None

    reserved = cluster.eventually(pending, "Kueue to report why the second job waits")
    assert reserved["reason"] == "Pending"
    assert "nvidia.com/gpu" in reserved["message"]
    assert running_pods(cluster, "alpha", "second") == []
    cluster.kubectl(
        "delete", "job", "first", "--namespace=alpha", "--cascade=foreground", "--wait=true", "--timeout=60s"
    )
    cluster.eventually(lambda: admitted(cluster, "alpha", "second"), "the second job to be admitted once quota frees")


def test_a_team_borrows_what_the_cohort_lends(teams: Any) -> None:
    cluster = teams
    cluster.apply([job("big", "beta", pods=3, per_pod={"nvidia.com/gpu": 2})])
    cluster.eventually(lambda: admitted(cluster, "beta", "big"), "beta's 6-GPU job to be admitted by borrowing")

    def borrowed() -> int:
        usage = cluster.get("clusterqueue", "beta").get("status", {}).get("flavorsUsage", [])
        return sum(int(r.get("borrowed", 0)) for f in usage if f["name"] == "train" for r in f["resources"])

    assert cluster.eventually(borrowed, "beta's ClusterQueue to report borrowing") == 2
    pods = cluster.eventually(
        lambda: len(running_pods(cluster, "beta", "big")) == 3 and running_pods(cluster, "beta", "big"),
        "three running pods",
    )
    assert {cluster.get("node", p["spec"]["nodeName"])["metadata"]["labels"]["gpufleet.io/pool"] for p in pods} == {
        "train"
    }


def test_alpha_cannot_borrow_past_its_limit(teams: Any) -> None:
    cluster = teams
    cluster.apply([job("greedy", "alpha", pods=3, per_pod={"nvidia.com/gpu": 2})])
    cluster.eventually(
        lambda: (condition(workload_of(cluster, "alpha", "greedy"), "QuotaReserved") or {}).get("reason") == "Pending",
        "alpha's 6-GPU job to wait (borrowingLimit 0)",
    )
    assert admitted(cluster, "alpha", "greedy") is None


def test_a_mig_job_gets_a_mig_slice_on_the_mig_pool(teams: Any) -> None:
    cluster = teams
    cluster.apply([job("eval", "alpha", pods=2, per_pod={"nvidia.com/mig-1g.10gb": 1})])
    wl = cluster.eventually(lambda: admitted(cluster, "alpha", "eval"), "the MIG job to be admitted")
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"nvidia.com/mig-1g.10gb": "mig"}
    pods = cluster.eventually(
        lambda: len(running_pods(cluster, "alpha", "eval")) == 2 and running_pods(cluster, "alpha", "eval"),
        "two running pods",
    )
    assert {p["spec"]["nodeName"] for p in pods} == {"e2e-a100-0"}


@pytest.mark.parametrize("component", ["kube-apiserver", "kueue"])
def test_quota_and_admissions_survive_a_restart(teams: Any, component: str) -> None:
    cluster = teams
    cluster.apply([job("holder", "alpha", pods=1, per_pod={"nvidia.com/gpu": 4})])
    before = cluster.eventually(lambda: admitted(cluster, "alpha", "holder"), "the holder to be admitted")
    cluster.bed.restart(component)
    after = admitted(cluster, "alpha", "holder")
    assert after is not None and after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["status"]["admission"] == before["status"]["admission"]
    # the restarted component still accounts the held quota: more work waits, and is admitted once it frees
    cluster.apply([job("after", "alpha", pods=1, per_pod={"nvidia.com/gpu": 1})])
    cluster.eventually(
        lambda: (condition(workload_of(cluster, "alpha", "after"), "QuotaReserved") or {}).get("reason") == "Pending",
        f"the new job to wait after the {component} restart",
    )
    cluster.kubectl(
        "delete", "job", "holder", "--namespace=alpha", "--cascade=foreground", "--wait=true", "--timeout=60s"
    )
    cluster.eventually(lambda: admitted(cluster, "alpha", "after"), "the new job to be admitted once quota frees")
