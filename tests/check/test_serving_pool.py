"""The serving-pool rules on a fleet whose serving nodes share labels and taints with other pools.

On AKS every GPU pool may carry ``nvidia.com/gpu:NoSchedule`` and the OS label; tolerating or selecting
those must not count as reaching for the serving pool. Only tolerating all of the serving pool's taints
(its own ``gpufleet.io/pool`` taint included) or pinning all of its labels does.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.check.facts import AdmissionFacts, admission_facts
from gpufleet.check.manifests import validating_admission_policy
from gpufleet.check.offline import OfflinePolicy
from gpufleet.check.rules import judge
from gpufleet.policy import parse_policy, resolve

POLICY = """
apiVersion: gpufleet.io/v1alpha1
kind: FleetPolicy
cluster: {provider: aks, dra: off}
pools:
  - name: train
    gpu: H100-SXM5-80GB
    nodes: 2
    gpusPerNode: 8
    role: training
    slicing: {mode: full}
    nodeLabels: {kubernetes.azure.com/agentpool: train, kubernetes.io/os: linux}
    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  - name: serve
    gpu: H100-SXM5-80GB
    nodes: 1
    gpusPerNode: 8
    role: serving
    nodeLabels: {kubernetes.azure.com/agentpool: serve, kubernetes.io/os: linux}
    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
teams:
  - {name: ml, namespaces: [ml], quota: {train: {gpus: 8}}, dataClasses: [internal]}
dataClasses: [{name: internal}]
serving: {pool: serve}
"""
LABELS = {
    "gpufleet.io/team": "ml",
    "gpufleet.io/model": "m",
    "gpufleet.io/data-class": "internal",
    "kueue.x-k8s.io/queue-name": "ml",
}
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SERVE_TAINT = {"key": "gpufleet.io/pool", "operator": "Equal", "value": "serve", "effect": "NoSchedule"}
SERVE_LABELS = {"kubernetes.azure.com/agentpool": "serve", "kubernetes.io/os": "linux"}


def job(**pod: Any) -> dict[str, Any]:
    spec = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}], **pod}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "labels": LABELS},
        "spec": {"template": {"spec": spec}},
    }


def pinned(*expressions: dict[str, Any]) -> dict[str, Any]:
    terms = [{"matchExpressions": list(expressions)}]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


@pytest.fixture(scope="module")
def facts() -> AdmissionFacts:
    return admission_facts(resolve(parse_policy(POLICY)))


@pytest.fixture(scope="module")
def offline() -> OfflinePolicy:
    return OfflinePolicy(validating_admission_policy(resolve(parse_policy(POLICY)))[0]["spec"])


CASES = [
    ("shared-gpu-taint-only", job(tolerations=[GPU_TAINT]), []),
    ("serving-taint-but-not-the-gpu-taint", job(tolerations=[SERVE_TAINT]), []),
    ("every-serving-taint", job(tolerations=[GPU_TAINT, SERVE_TAINT]), ["ServingPoolToleration"]),
    ("tolerate-everything", job(tolerations=[{"operator": "Exists"}]), ["ServingPoolToleration"]),
    ("shared-os-label", job(nodeSelector={"kubernetes.io/os": "linux"}), []),
    ("all-serving-labels", job(nodeSelector=SERVE_LABELS), ["ServingPoolNodeSelection", "GPUResourceNotOffered"]),
    (
        "affinity-on-one-label",
        job(affinity=pinned({"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]})),
        [],
    ),
    (
        "affinity-on-every-label",
        job(
            affinity=pinned(
                {"key": "kubernetes.azure.com/agentpool", "operator": "In", "values": ["serve", "train"]},
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            )
        ),
        ["ServingPoolNodeSelection"],
    ),
]


@pytest.mark.parametrize(("obj", "reasons"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_only_reaching_for_the_serving_pool_itself_is_refused(
    facts: AdmissionFacts, offline: OfflinePolicy, obj: dict[str, Any], reasons: list[str]
) -> None:
    denials = judge(facts, obj, "ml")
    assert [d.reason for d in denials] == reasons
    assert offline.judge(obj, "ml") == [d.message for d in denials]
