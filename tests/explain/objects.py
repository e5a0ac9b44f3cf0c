"""Hand-written Kueue objects, shaped as the API server returns them, for the explanation tests.

Every quantity is small enough to work out by hand: one flavor ``train`` of ``nvidia.com/gpu``,
ClusterQueues with a nominal quota and optional borrowing limit and preemption policy.
"""

from __future__ import annotations

from typing import Any

API = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
FLAVOR = "train"
Obj = dict[str, Any]


def flavor(name: str = FLAVOR) -> Obj:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def cluster_queue(
    name: str,
    nominal: int,
    *,
    cohort: str | None = "pool",
    borrowing_limit: int | None = None,
    within: str = "Never",
    reclaim: str = "Never",
    reserved: int | None = None,
) -> Obj:
    quota: Obj = {"name": GPU, "nominalQuota": nominal}
    if borrowing_limit is not None:
        quota["borrowingLimit"] = borrowing_limit
    spec: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": FLAVOR, "resources": [quota]}]}],
        "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": reclaim},
    }
    if cohort:
        spec["cohortName"] = cohort
    obj: Obj = {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}
    if reserved is not None:
        obj["status"] = {
            "flavorsReservation": [
                {"name": FLAVOR, "resources": [{"name": GPU, "total": str(reserved), "borrowed": "0"}]}
            ]
        }
    return obj


def local_queue(namespace: str, cq: str) -> Obj:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": cq, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def priority_class(name: str, value: int) -> Obj:
    return {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def workload(
    namespace: str,
    name: str,
    *,
    pods: int,
    gpus: int,
    queue: str | None = None,
    admitted_to: str | None = None,
    priority: str | None = None,
    created: str = "2026-12-01T10:00:00Z",
    message: str | None = None,
    job: str | None = None,
    finished: bool = False,
) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "creationTimestamp": created, "uid": f"uid-{name}"}
    if job:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": f"job-{job}"}]
    spec: Obj = {
        "queueName": queue or namespace,
        "podSets": [
            {
                "name": "main",
                "count": pods,
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}},
            }
        ],
    }
    if priority:
        spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": priority}
    status: Obj = {"conditions": []}
    if admitted_to:
        status["admission"] = {
            "clusterQueue": admitted_to,
            "podSetAssignments": [{"name": "main", "count": pods, "flavors": {GPU: FLAVOR}}],
        }
        status["conditions"] += [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": created},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": created},
        ]
        if finished:
            status["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    elif message is not None:
        status["conditions"].append(
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message}
        )
    return {"apiVersion": API, "kind": "Workload", "metadata": meta, "spec": spec, "status": status}


def short(n: int, flavor_name: str = FLAVOR) -> str:
    """Kueue's pending message for a one-pod-set Workload ``n`` GPUs short."""
    return (
        "couldn't assign flavors to pod set main: insufficient unused quota for "
        f"{GPU} in flavor {flavor_name}, {n} more needed"
    )


def team_setup(alpha: Obj, beta: Obj) -> list[Obj]:
    """A flavor, two teams' ClusterQueues (given) in cohort ``pool``, their namespaces and LocalQueues."""
    return [
        flavor(),
        alpha,
        beta,
        namespace("alpha"),
        namespace("beta"),
        local_queue("alpha", alpha["metadata"]["name"]),
        local_queue("beta", beta["metadata"]["name"]),
        priority_class("low", 10),
        priority_class("high", 1000),
    ]
