"""Hypothesis strategies for manifests a team might apply: every governed kind, right and wrong values.

Right values are drawn more often than wrong ones, so the corpus holds admitted objects as well as
objects with one, two or many reasons to refuse them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from gpufleet.check.facts import PRIORITY_LABEL, QUEUE_LABEL, AdmissionFacts

KINDS = [
    ("batch/v1", "Job"),
    ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("kubeflow.org/v1", "PyTorchJob"),
    ("kubeflow.org/v2beta1", "MPIJob"),
    ("ray.io/v1", "RayJob"),
    ("ray.io/v1", "RayCluster"),
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("v1", "ConfigMap"),
]
COUNTS = [0, 1, 1, 2, 4, 8, 9, 16, "1", "2", "8", "500m", -1]


def _choice(draw: st.DrawFn, good: Any, *bad: Any, weight: int = 4) -> Any:
    return draw(st.sampled_from([good] * weight + list(bad)))


@st.composite
def pod_spec(draw: st.DrawFn, facts: AdmissionFacts, team_classes: tuple[str, ...]) -> dict[str, Any]:
    serving = facts.serving
    assert serving is not None
    resources = [*facts.gpu_resources, "nvidia.com/mig-7g.80gb"]

    def container(name: str) -> dict[str, Any]:
        c: dict[str, Any] = {"name": name, "image": "example/train:1"}
        parts = draw(st.sampled_from([(), ("limits",), ("requests",), ("requests", "limits")]))
        if parts:
            resource = draw(st.sampled_from(resources))
            count = draw(st.sampled_from(COUNTS))
            c["resources"] = {part: {resource: count, "cpu": "1"} for part in parts}
        return c

    spec: dict[str, Any] = {"containers": [container(f"c{i}") for i in range(draw(st.integers(1, 2)))]}
    if draw(st.integers(0, 5)) == 0:
        spec["initContainers"] = [container("init")]
    taint_key, taint_value, effect = serving.taints[0]
    toleration = draw(
        st.sampled_from(
            [
                None,
                None,
                None,
                {"key": taint_key, "operator": "Equal", "value": taint_value, "effect": effect},
                {"key": taint_key, "operator": "Equal", "value": "h100-train", "effect": effect},
                {"key": taint_key, "operator": "Exists"},
                {"operator": "Exists"},
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            ]
        )
    )
    if toleration is not None:
        spec["tolerations"] = [toleration]
    selector = draw(
        st.sampled_from(
            [
                None,
                None,
                None,
                dict(serving.selector),
                {"gpufleet.io/pool": "h100-train"},
                {"gpufleet.io/pool": "a100-mig"},
            ]
        )
    )
    if selector is not None:
        spec["nodeSelector"] = selector
    if draw(st.integers(0, 9)) == 0:
        spec["nodeName"] = draw(st.sampled_from([*serving.nodes, "gpu-h100-01"]))
    if draw(st.integers(0, 9)) == 0:
        key, value = next(iter(serving.selector.items()))
        term = {
            "matchExpressions": [{"key": key, "operator": draw(st.sampled_from(["In", "NotIn"])), "values": [value]}]
        }
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    priority = draw(
        st.sampled_from([None, None, None, None, serving.priority_class, "train-high", "batch", *team_classes])
    )
    if priority is not None:
        spec["priorityClassName"] = priority
    return spec


def _wrap(kind: str, specs: list[dict[str, Any]], template_labels: dict[str, str]) -> dict[str, Any]:
    first, rest = specs[0], specs[1:] or [specs[0]]
    if kind == "Job":
        return {"template": {"spec": first}}
    if kind == "JobSet":
        return {
            "replicatedJobs": [
                {"name": f"r{i}", "template": {"spec": {"template": {"spec": s}}}} for i, s in enumerate(specs)
            ]
        }
    if kind in ("PyTorchJob", "MPIJob"):
        key = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "mpiReplicaSpecs"
        return {
            key: {
                "Master": {"replicas": 1, "template": {"spec": first}},
                "Worker": {"replicas": 2, "template": {"spec": rest[0]}},
            }
        }
    cluster = {
        "headGroupSpec": {"template": {"spec": first}},
        "workerGroupSpecs": [{"groupName": "w", "template": {"spec": s}} for s in rest],
    }
    if kind == "RayJob":
        return {"entrypoint": "python train.py", "rayClusterSpec": cluster}
    if kind == "RayCluster":
        return cluster
    if kind == "Pod":
        return first
    if kind == "LeaderWorkerSet":
        return {
            "replicas": 1,
            "leaderWorkerTemplate": {"size": 2, "leaderTemplate": {"spec": first}, "workerTemplate": {"spec": rest[0]}},
        }
    return {"replicas": 1, "template": {"metadata": {"labels": template_labels}, "spec": first}}


@st.composite
def manifests(draw: st.DrawFn, facts: AdmissionFacts) -> tuple[dict[str, Any], str]:
    """A manifest and the namespace it is applied in."""
    serving = facts.serving
    assert serving is not None
    namespace = draw(st.sampled_from([*facts.team_namespaces] * 4 + [serving.namespace, serving.namespace, "default"]))
    team = facts.team_of(namespace) or facts.teams[0]
    other = next(t for t in facts.teams if t.name != team.name)
    api_version, kind = draw(st.sampled_from(KINDS))
    labels: dict[str, str] = {}
    values = {
        facts.team_label: _choice(draw, team.name, None, "", other.name),
        facts.model_label: _choice(draw, "llama-3-8b", None, ""),
        facts.data_class_label: _choice(
            draw, team.data_classes[0], None, "", "secret", *team.data_classes, *other.data_classes
        ),
        QUEUE_LABEL: _choice(draw, team.name, None, None, "", other.name, weight=3),
        PRIORITY_LABEL: _choice(draw, None, serving.priority_class, "train-high", *team.priority_classes, weight=3),
    }
    labels = {k: v for k, v in values.items() if v is not None}
    metadata: dict[str, Any] = {"name": f"w{draw(st.integers(0, 999))}"}
    if draw(st.booleans()):
        metadata["namespace"] = namespace
    if labels or draw(st.booleans()):
        metadata["labels"] = labels
    location = draw(
        st.sampled_from(
            [
                None,
                None,
                "s3://eu-central-1/ckpt/run",
                "s3://eu-central-1/confidential/run",
                "s3://us-east-1/run",
                "gs://europe-west4/x",
                "",
            ]
        )
    )
    if location is not None:
        metadata["annotations"] = {facts.checkpoint_annotation: location}
    if draw(st.integers(0, 14)) == 0:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Owner", "name": "o", "uid": "u", "controller": True}
        ]
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if kind != "ConfigMap":
        specs = [draw(pod_spec(facts, team.priority_classes)) for _ in range(draw(st.integers(1, 2)))]
        template_labels = {QUEUE_LABEL: team.name} if draw(st.integers(0, 4)) == 0 else {}
        obj["spec"] = _wrap(kind, specs, template_labels)
    else:
        obj["data"] = {"k": "v"}
    return obj, namespace
