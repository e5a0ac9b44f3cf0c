"""Each rule, one case at a time: the reasons Python gives, and that the compiled CEL gives the same words."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpufleet.check.facts import AdmissionFacts
from gpufleet.check.offline import OfflinePolicy
from gpufleet.check.rules import judge

GOOD_LABELS = {
    "gpufleet.io/team": "research",
    "gpufleet.io/model": "llama-3-8b",
    "gpufleet.io/data-class": "internal",
    "kueue.x-k8s.io/queue-name": "research",
}


def job(labels: dict[str, str] | None = None, pod: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    spec = pod if pod is not None else {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "labels": dict(GOOD_LABELS if labels is None else labels), **metadata},
        "spec": {"template": {"spec": spec}},
    }


def without(key: str) -> dict[str, str]:
    return {k: v for k, v in GOOD_LABELS.items() if k != key}


def gpus(resource: str, count: Any, **extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "resources": {"limits": {resource: count}}}], **extra}


def deployment(namespace_labels: dict[str, str], pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labels": namespace_labels},
        "spec": {"template": {"metadata": {"labels": {}}, "spec": pod}},
    }


def leader_worker_set(labels: dict[str, str], leader: dict[str, Any], worker: dict[str, Any]) -> dict[str, Any]:
    """Multi-host serving: the leader's pod and its workers' are two templates of one object."""
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm-70b", "labels": labels},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {"size": 2, "leaderTemplate": {"spec": leader}, "workerTemplate": {"spec": worker}},
        },
    }


SERVING_TOLERATION = {"key": "gpufleet.io/pool", "operator": "Equal", "value": "h100-serve", "effect": "NoSchedule"}
CASES: list[tuple[str, dict[str, Any], str, list[str]]] = [
    ("admitted", job(), "research", []),
    ("missing-model", job(without("gpufleet.io/model")), "research", ["MissingLabel"]),
    ("empty-team", job({**GOOD_LABELS, "gpufleet.io/team": ""}), "research", ["MissingLabel"]),
    ("no-labels-at-all", job({}), "research", ["MissingLabel", "MissingLabel", "MissingLabel", "MissingQueueName"]),
    ("wrong-team", job({**GOOD_LABELS, "gpufleet.io/team": "nlp"}), "research", ["WrongTeam"]),
    (
        "data-class-of-another-team",
        job({**GOOD_LABELS, "gpufleet.io/data-class": "public"}),
        "research",
        ["DataClassNotAllowed"],
    ),
    ("missing-queue", job(without("kueue.x-k8s.io/queue-name")), "research", ["MissingQueueName"]),
    ("wrong-queue", job({**GOOD_LABELS, "kueue.x-k8s.io/queue-name": "nlp"}), "research", ["WrongQueueName"]),
    (
        "serving-toleration",
        job(pod=gpus("nvidia.com/gpu", 1, tolerations=[SERVING_TOLERATION])),
        "research",
        ["ServingPoolToleration"],
    ),
    (
        "tolerate-everything",
        job(pod=gpus("nvidia.com/gpu", 1, tolerations=[{"operator": "Exists"}])),
        "research",
        ["ServingPoolToleration"],
    ),
    (
        "other-pool-toleration",
        job(pod=gpus("nvidia.com/gpu", 1, tolerations=[{**SERVING_TOLERATION, "value": "h100-train"}])),
        "research",
        [],
    ),
    (
        "serving-node-selector",
        job(pod=gpus("nvidia.com/gpu", 1, nodeSelector={"gpufleet.io/pool": "h100-serve"})),
        "research",
        ["ServingPoolNodeSelection", "GPUResourceNotOffered"],
    ),
    (
        "serving-node-name",
        job(pod=gpus("nvidia.com/gpu", 1, nodeName="gpu-h100-serve-01")),
        "research",
        ["ServingPoolNodeSelection"],
    ),
    (
        "serving-affinity",
        job(
            pod=gpus(
                "nvidia.com/gpu",
                1,
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "gpufleet.io/pool", "operator": "In", "values": ["h100-serve"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            )
        ),
        "research",
        ["ServingPoolNodeSelection"],
    ),
    (
        "serving-priority-label",
        job({**GOOD_LABELS, "kueue.x-k8s.io/priority-class": "gpufleet-serving"}),
        "research",
        ["ServingPriorityClass"],
    ),
    (
        "serving-priority-pod",
        job(pod=gpus("nvidia.com/gpu", 1, priorityClassName="gpufleet-serving")),
        "research",
        ["ServingPriorityClass"],
    ),
    (
        "priority-of-another-team",
        job(
            {
                **GOOD_LABELS,
                "kueue.x-k8s.io/queue-name": "nlp",
                "gpufleet.io/team": "nlp",
                "kueue.x-k8s.io/priority-class": "train-high",
            }
        ),
        "nlp",
        ["PriorityClassNotAllowed"],
    ),
    (
        "pod-priority-not-allowed",
        job(
            {**GOOD_LABELS, "kueue.x-k8s.io/queue-name": "nlp", "gpufleet.io/team": "nlp"},
            gpus("nvidia.com/gpu", 1, priorityClassName="train-high"),
        ),
        "nlp",
        ["PriorityClassNotAllowed"],
    ),
    (
        "checkpoint-allowed",
        job(annotations={"gpufleet.io/checkpoint": "s3://eu-central-1/research/run-1"}),
        "research",
        [],
    ),
    (
        "checkpoint-elsewhere",
        job(annotations={"gpufleet.io/checkpoint": "s3://us-east-1/run-1"}),
        "research",
        ["CheckpointLocationNotAllowed"],
    ),
    (
        "confidential-needs-its-prefix",
        job(
            {**GOOD_LABELS, "gpufleet.io/data-class": "confidential"},
            annotations={"gpufleet.io/checkpoint": "s3://eu-central-1/run-1"},
        ),
        "research",
        ["CheckpointLocationNotAllowed"],
    ),
    ("fractional-gpu", job(pod=gpus("nvidia.com/gpu", "500m")), "research", ["InvalidGPUCount"]),
    ("unknown-mig-profile", job(pod=gpus("nvidia.com/mig-7g.80gb", 1)), "research", ["GPUResourceNotOffered"]),
    ("too-many-per-pod", job(pod=gpus("nvidia.com/gpu", 9)), "research", ["GPURequestTooLarge"]),
    ("eight-fits-a-node", job(pod=gpus("nvidia.com/gpu", 8)), "research", []),
    ("mig-slice", job(pod=gpus("nvidia.com/mig-1g.10gb", "2")), "research", []),
    ("shared-on-dev-pool", job(pod=gpus("nvidia.com/gpu.shared", 1)), "research", []),
    (
        "selector-rules-out-the-pool",
        job(pod=gpus("nvidia.com/gpu", 1, nodeSelector={"gpufleet.io/pool": "l40s-dev"})),
        "research",
        ["GPUResourceNotOffered"],
    ),
    (
        "init-container-counts-as-max",
        job(
            pod={
                "containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 4}}}],
                "initContainers": [{"name": "i", "resources": {"requests": {"nvidia.com/gpu": 9}}}],
            }
        ),
        "research",
        ["GPURequestTooLarge"],
    ),
    (
        "containers-add-up",
        job(
            pod={
                "containers": [
                    {"name": "a", "resources": {"limits": {"nvidia.com/gpu": 4}}},
                    {"name": "b", "resources": {"limits": {"nvidia.com/gpu": 5}}},
                ]
            }
        ),
        "research",
        ["GPURequestTooLarge"],
    ),
    ("not-a-team-namespace", job({}), "default", []),
    (
        "owned-job-is-not-judged-as-batch",
        job(
            {},
            ownerReferences=[
                {
                    "kind": "JobSet",
                    "name": "x",
                    "controller": True,
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "uid": "u",
                }
            ],
        ),
        "research",
        [],
    ),
    ("being-deleted", job({}, deletionTimestamp="2026-01-01T00:00:00Z"), "research", []),
    (
        "cpu-pod-is-not-batch",
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}},
        "research",
        [],
    ),
    (
        "gpu-pod-is-batch",
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": gpus("nvidia.com/gpu", 1)},
        "research",
        ["MissingLabel", "MissingLabel", "MissingLabel", "MissingQueueName"],
    ),
    (
        "team-deployment-on-serving-nodes",
        deployment({}, gpus("nvidia.com/gpu", 1, tolerations=[SERVING_TOLERATION])),
        "research",
        ["ServingPoolToleration"],
    ),
    (
        "serving-deployment-tolerates",
        deployment({}, gpus("nvidia.com/gpu", 1, tolerations=[SERVING_TOLERATION])),
        "serving",
        [],
    ),
    (
        "serving-deployment-with-queue",
        deployment({"kueue.x-k8s.io/queue-name": "research"}, gpus("nvidia.com/gpu", 1)),
        "serving",
        ["ServingQueueName"],
    ),
    (
        "team-leader-worker-set-whose-workers-tolerate-serving",
        leader_worker_set({}, gpus("nvidia.com/gpu", 4), gpus("nvidia.com/gpu", 4, tolerations=[SERVING_TOLERATION])),
        "research",
        ["ServingPoolToleration"],
    ),
    (
        "team-leader-worker-set-on-its-own-pools",
        leader_worker_set({}, gpus("nvidia.com/gpu", 4), gpus("nvidia.com/gpu", 4)),
        "research",
        [],
    ),
    (
        "serving-leader-worker-set-tolerates",
        leader_worker_set(
            {},
            gpus("nvidia.com/gpu", 4, tolerations=[SERVING_TOLERATION]),
            gpus("nvidia.com/gpu", 4, tolerations=[SERVING_TOLERATION]),
        ),
        "serving",
        [],
    ),
    (
        "serving-leader-worker-set-with-queue",
        leader_worker_set(
            {"kueue.x-k8s.io/queue-name": "research"}, gpus("nvidia.com/gpu", 4), gpus("nvidia.com/gpu", 4)
        ),
        "serving",
        ["ServingQueueName"],
    ),
    ("configmap-ignored", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, "research", []),
]


@pytest.mark.parametrize(("obj", "namespace", "reasons"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_python_rules_give_the_expected_reasons(
    facts: AdmissionFacts, obj: dict[str, Any], namespace: str, reasons: list[str]
) -> None:
    assert [d.reason for d in judge(facts, obj, namespace)] == reasons


@pytest.mark.parametrize(("obj", "namespace"), [c[1:3] for c in CASES], ids=[c[0] for c in CASES])
def test_compiled_cel_gives_the_same_messages(
    facts: AdmissionFacts, offline: OfflinePolicy, obj: dict[str, Any], namespace: str
) -> None:
    assert offline.judge(obj, namespace) == [d.message for d in judge(facts, obj, namespace)]


def test_a_denial_says_how_to_fix_it(facts: AdmissionFacts) -> None:
    (denial,) = judge(facts, job(without("gpufleet.io/model")), "research")
    assert denial.message == (
        "MissingLabel: label gpufleet.io/model is required on Jobs in namespace research "
        "(the model this job trains or serves)"
    )


def test_judging_does_not_change_the_object(facts: AdmissionFacts) -> None:
    obj = job({})
    before = copy.deepcopy(obj)
    judge(facts, obj, "research")
    assert obj == before
