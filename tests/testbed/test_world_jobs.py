"""A trace job as the Job the world differential creates: what the simulator assumes a user submits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpufleet.check.documents import Source
from gpufleet.check.facts import admission_facts
from gpufleet.check.gate import check
from gpufleet.policy import load_policy, resolve
from gpufleet.testbed.kwok import RUN_FOR_ANNOTATION
from gpufleet.testbed.world_jobs import PRODUCT_LABEL, RUN_LABEL, job_manifest
from gpufleet.trace.job import Job, JobKind

POLICY = Path(__file__).resolve().parents[1] / "e2e" / "world" / "small.yaml"
FLEET = resolve(load_policy(POLICY))
GANG = Job("g1", "alpha", "alpha", 3, 40, JobKind.TRAINING, pods=2, gpus=2, priority_class="high",
           termination_grace_s=5)  # fmt: skip


def test_a_gang_is_one_job_of_parallel_pods_that_run_for_its_duration() -> None:
    job = job_manifest(GANG, FLEET, "run-1")
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert (spec["parallelism"], spec["completions"], spec["backoffLimit"]) == (2, 2, 0)
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert pod["terminationGracePeriodSeconds"] == 5
    assert spec["template"]["metadata"]["annotations"] == {RUN_FOR_ANNOTATION: "40s"}
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "alpha"
    assert labels["kueue.x-k8s.io/priority-class"] == "high"
    assert labels[RUN_LABEL] == "run-1"
    assert "affinity" not in pod


def test_the_job_passes_the_policy_s_own_admission_rules() -> None:
    """The testbed enforces the rendered admission policy; gpufleet check is its twin."""
    (verdict,) = check(admission_facts(FLEET), [Source("world", 1, job_manifest(GANG, FLEET, "r"))])
    assert verdict.governed and verdict.denials == []
    assert verdict.cluster_queue == "alpha"


def test_gpu_models_become_required_affinity_on_gfd_s_product() -> None:
    pinned = job_manifest(replace(GANG, gpu_models=("H100-SXM5-80GB",)), FLEET, "r")
    terms = pinned["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": PRODUCT_LABEL, "operator": "In",
                               "values": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3-SHARED"]}]}
    ]  # fmt: skip


def test_a_job_without_gpus_is_refused() -> None:
    with pytest.raises(ValueError, match="asks for no GPU"):
        job_manifest(replace(GANG, gpus=0), FLEET, "r")
