"""The twin on what `gpufleet render` writes: the simulated queue is the rendered one.

The rendered Kueue Configuration excludes cpu and memory from quota (gpufleet budgets accelerators),
so a GPU job that also asks for CPU must still be admitted on its GPU quota.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpufleet.policy import load_policy, resolve
from gpufleet.render import render
from gpufleet.twin.step import step
from tests.support import EXAMPLES


def workload(ns: str, name: str, resource: str, per_pod: int, pods: int = 1, created: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": f"2026-11-30T00:00:{created:02d}Z"},
        "spec": {
            "queueName": ns if ns != "nlp-eval" else "nlp",
            "podSets": [
                {
                    "name": "main",
                    "count": pods,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "resources": {"requests": {resource: str(per_pod), "cpu": "8", "memory": "64Gi"}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }


def run(*workloads: dict[str, Any]) -> dict[str, Any]:
    bundle = render(resolve(load_policy(EXAMPLES / "fleet.yaml")))
    kinds = {
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "WorkloadPriorityClass",
        "Namespace",
        "Configuration",
    }
    objects = [o for o in bundle.objects(resources_only=False) if o["kind"] in kinds]
    text = yaml.safe_dump_all([*objects, *workloads])
    return step([("rendered.yaml", text)], cycles=None)


def admitted(result: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {a["workload"]: a["flavors"]["main"] for c in result["cycles"] for a in c["admitted"]}


@pytest.mark.parametrize(
    ("ns", "resource", "per_pod", "flavor"),
    [
        ("research", "nvidia.com/gpu", 8, "h100-train"),
        ("nlp-eval", "nvidia.com/mig-2g.20gb", 1, "a100-mig"),
        ("vision", "nvidia.com/gpu.shared", 1, "l40s-dev"),
    ],
)
def test_a_gpu_job_with_cpu_requests_is_admitted_on_its_pool(ns: str, resource: str, per_pod: int, flavor: str) -> None:
    result = run(workload(ns, "job", resource, per_pod))
    assert admitted(result) == {f"{ns}/job": {resource: flavor}}


def test_borrowing_up_to_the_limit_then_waiting() -> None:
    # research: nominal 8 + borrowingLimit 8 on 16 H100s; a third 8-GPU job has nowhere to go
    result = run(*(workload("research", f"j{i}", "nvidia.com/gpu", 8, created=i) for i in range(3)))
    assert set(admitted(result)) == {"research/j0", "research/j1"}
    pending = {p["workload"]: p for p in result["cycles"][-1]["pending"]}
    assert pending["research/j2"]["reason"] == "WaitingForQuota"
    assert result["clusterQueues"]["research"]["borrowed"]["h100-train/nvidia.com/gpu"] == 8


def test_the_serving_pool_is_never_offered() -> None:
    result = run(workload("research", "sneaky", "nvidia.com/gpu", 8, pods=3))
    assert admitted(result) == {}, "24 GPUs exceed the 16 queued H100s; the 8 serving H100s are not in any queue"
