"""scheduling.nodeScoring: MostAllocated renders kube-scheduler's --config profile, outside kustomize and --check;
LeastAllocated (kube-scheduler's default) renders nothing new."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpufleet.policy import parse_policy, resolve
from gpufleet.render import Bundle, render
from gpufleet.render.check import check_bundle
from tests.support import EXAMPLES, kueue_crds

FILE = "kube-scheduler-configuration.yaml"
# the example's pools: full H100s, an A100 cut all-balanced, time-sliced L40S (nvidia.com/gpu.shared)
EXAMPLE_GPU_RESOURCES = [
    "nvidia.com/gpu",
    "nvidia.com/gpu.shared",
    "nvidia.com/mig-1g.10gb",
    "nvidia.com/mig-2g.20gb",
    "nvidia.com/mig-3g.40gb",
]


def rendered(example: str, scheduling: str) -> Bundle:
    text = (EXAMPLES / example).read_text() + (f"scheduling: {scheduling}\n" if scheduling else "")
    return render(resolve(parse_policy(text, example)))


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
@pytest.mark.parametrize("scheduling", ["{}", "{nodeScoring: LeastAllocated}"], ids=["empty", "least-allocated"])
def test_kube_schedulers_default_renders_exactly_what_it_did(example: str, scheduling: str) -> None:
    assert rendered(example, scheduling).contents() == rendered(example, "").contents()
    assert FILE not in rendered(example, scheduling).contents()


def test_most_allocated_renders_a_scheduler_profile_that_packs_the_gpus() -> None:
    bundle = rendered("fleet.yaml", "{nodeScoring: MostAllocated}")
    contents = contents_of(bundle)
    assert contents["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert contents["kind"] == "KubeSchedulerConfiguration"
    (profile,) = contents["profiles"]
    assert profile["schedulerName"] == "default-scheduler"
    (plugin,) = profile["pluginConfig"]
    assert plugin["name"] == "NodeResourcesFit"
    strategy = plugin["args"]["scoringStrategy"]
    assert strategy["type"] == "MostAllocated"
    weights = {r["name"]: r["weight"] for r in strategy["resources"]}
    # weight 1 each, as the simulator's MostAllocated scores (gpufleet.placement.scoring)
    assert weights == dict.fromkeys([*EXAMPLE_GPU_RESOURCES, "cpu", "memory"], 1)


def test_the_scheduler_profile_is_neither_applied_nor_validated_as_an_api_object() -> None:
    least = rendered("fleet.yaml", "")
    most = rendered("fleet.yaml", "{nodeScoring: MostAllocated}")
    assert set(most.contents()) - set(least.contents()) == {FILE}
    kustomization = yaml.safe_load(most.contents()["kustomization.yaml"])
    assert FILE not in kustomization["resources"]
    assert not [o for o in most.objects() if o["kind"] == "KubeSchedulerConfiguration"]  # what apply -k applies
    assert not [o for o in most.api_objects() if o["kind"] == "KubeSchedulerConfiguration"]
    before, after = (check_bundle(b, kubernetes="1.34", crds=kueue_crds()) for b in (least, most))
    assert (after.checked, after.findings, after.unchecked) == (before.checked, before.findings, before.unchecked)
    assert most.contents()[FILE].startswith("# kube-scheduler's node scoring")  # says what it is and where it goes


def test_the_profile_names_only_the_resources_the_fleet_yields() -> None:
    contents = contents_of(rendered("tiny.yaml", "{nodeScoring: MostAllocated}"))
    strategy = contents["profiles"][0]["pluginConfig"][0]["args"]["scoringStrategy"]
    assert [r["name"] for r in strategy["resources"]] == ["nvidia.com/gpu", "cpu", "memory"]


def contents_of(bundle: Bundle) -> Any:
    return yaml.safe_load(bundle.contents()[FILE])


@pytest.mark.parametrize(
    ("scheduling", "carried"),
    [("", False), ("{nodeScoring: LeastAllocated}", False), ("{nodeScoring: MostAllocated}", True)],
    ids=["absent", "default-said", "most-allocated"],
)
def test_the_webhooks_policy_copy_reads_back_as_the_policy(scheduling: str, carried: bool) -> None:
    """The webhook's ConfigMap leaves a default scheduling block out (as before the field existed)."""
    bundle = rendered("fleet.yaml", scheduling)
    (config_map,) = [
        o
        for o in bundle.objects(resources_only=False)
        if o["kind"] == "ConfigMap" and "fleet.yaml" in o.get("data", {})
    ]
    text = config_map["data"]["fleet.yaml"]
    assert ("scheduling:" in text) is carried
    source = (EXAMPLES / "fleet.yaml").read_text() + (f"scheduling: {scheduling}\n" if scheduling else "")
    assert parse_policy(text, "webhook") == parse_policy(source, "fleet.yaml")
