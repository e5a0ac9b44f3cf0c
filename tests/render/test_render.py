"""Rendering: each kind of object, the cohort arithmetic, determinism and the atomic write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.policy import load_policy, parse_policy, resolve
from gpufleet.render import Bundle, RenderedFile, describe, render, write_bundle
from tests.support import EXAMPLES, shared_path

Obj = dict[str, Any]


def bundle_for(name: str) -> Bundle:
    return render(resolve(load_policy(EXAMPLES / name)))


def find(bundle: Bundle, kind: str, name: str, namespace: str | None = None) -> Obj:
    for o in bundle.objects(resources_only=False):
        m = o["metadata"]
        if o["kind"] == kind and m["name"] == name and m.get("namespace") == namespace:
            return o
    raise AssertionError(f"{kind}/{name} not rendered")


def quotas(cq: Obj) -> dict[tuple[str, str], Obj]:
    """(flavor, resource) -> the quota entry, across every resource group."""
    return {
        (f["name"], r["name"]): r for g in cq["spec"]["resourceGroups"] for f in g["flavors"] for r in f["resources"]
    }


FLEET = bundle_for("fleet.yaml")

# (id, flavor, resource, expected entry) for ClusterQueue research in examples/fleet.yaml
RESEARCH = [
    ("h100", "h100-train", "nvidia.com/gpu", {"nominalQuota": 8, "borrowingLimit": 8, "lendingLimit": 4}),
    ("1g", "a100-mig", "nvidia.com/mig-1g.10gb", {"nominalQuota": 4}),
    ("2g-none", "a100-mig", "nvidia.com/mig-2g.20gb", {"nominalQuota": 0}),
    ("3g", "a100-mig", "nvidia.com/mig-3g.40gb", {"nominalQuota": 4}),
    ("shared", "l40s-dev", "nvidia.com/gpu.shared", {"nominalQuota": 4}),
]


@pytest.mark.parametrize(("flavor", "resource", "expected"), [c[1:] for c in RESEARCH], ids=[c[0] for c in RESEARCH])
def test_cluster_queue_quota_entries(flavor: str, resource: str, expected: Obj) -> None:
    entry = quotas(find(FLEET, "ClusterQueue", "research"))[(flavor, resource)]
    assert {k: v for k, v in entry.items() if k != "name"} == expected


def test_cluster_queue_shape() -> None:
    spec = find(FLEET, "ClusterQueue", "nlp")["spec"]
    assert spec["cohortName"] == "gpufleet"
    assert spec["namespaceSelector"]["matchExpressions"][0]["values"] == ["nlp", "nlp-eval"]
    assert spec["fairSharing"] == {"weight": "1"}
    assert spec["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    groups = [(g["coveredResources"], [f["name"] for f in g["flavors"]]) for g in spec["resourceGroups"]]
    assert groups == [
        (["nvidia.com/gpu"], ["h100-train"]),
        (["nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"], ["a100-mig"]),
        (["nvidia.com/gpu.shared"], ["l40s-dev"]),
    ]
    assert "h100-serve" not in str(spec), "the serving pool is never in a queue"


@pytest.mark.parametrize(
    ("resource", "unassigned"),
    [
        ("nvidia.com/gpu", 0),
        ("nvidia.com/mig-1g.10gb", 4),
        ("nvidia.com/mig-2g.20gb", 2),
        ("nvidia.com/mig-3g.40gb", 2),
        ("nvidia.com/gpu.shared", 2),
    ],
)
def test_cohort_holds_what_no_team_is_guaranteed(resource: str, unassigned: int) -> None:
    cohort = find(FLEET, "Cohort", "gpufleet")
    amounts = {
        r["name"]: r["nominalQuota"]
        for g in cohort["spec"]["resourceGroups"]
        for f in g["flavors"]
        for r in f["resources"]
    }
    assert amounts[resource] == unassigned


def test_flavors_steer_onto_their_pool_and_past_its_taint() -> None:
    flavor = find(FLEET, "ResourceFlavor", "a100-mig")
    assert flavor["spec"]["nodeLabels"] == {"gpufleet.io/pool": "a100-mig"}
    assert flavor["spec"]["tolerations"] == [
        {"key": "gpufleet.io/pool", "operator": "Equal", "value": "a100-mig", "effect": "NoSchedule"}
    ]
    kinds = [o["metadata"]["name"] for o in FLEET.objects() if o["kind"] == "ResourceFlavor"]
    assert kinds == ["h100-train", "a100-mig", "l40s-dev"]


def test_local_queues_in_every_team_namespace() -> None:
    lqs = [
        (o["metadata"]["namespace"], o["metadata"]["name"], o["spec"]["clusterQueue"])
        for o in FLEET.objects()
        if o["kind"] == "LocalQueue"
    ]
    assert lqs == [
        ("research", "research", "research"),
        ("nlp", "nlp", "nlp"),
        ("nlp-eval", "nlp", "nlp"),
        ("vision", "vision", "vision"),
    ]


def test_workload_priority_classes() -> None:
    wpcs = {o["metadata"]["name"]: o["value"] for o in FLEET.objects() if o["kind"] == "WorkloadPriorityClass"}
    assert wpcs == {"train-high": 1000, "batch": 100, "dev": 10}


def test_mig_configmap_in_mig_parted_format() -> None:
    cm = find(FLEET, "ConfigMap", "gpufleet-mig-config", "gpu-operator")
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config["version"] == "v1"
    assert config["mig-configs"]["all-balanced"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}
    ]
    assert config["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]


def test_timeslicing_configmap_per_pool() -> None:
    cm = find(FLEET, "ConfigMap", "gpufleet-time-slicing", "gpu-operator")
    sharing = yaml.safe_load(cm["data"]["l40s-dev"])["sharing"]["timeSlicing"]
    assert sharing["renameByDefault"] is True
    assert sharing["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]


@pytest.mark.parametrize(
    ("node", "label", "value"),
    [
        ("gpu-a100-01", "nvidia.com/mig.config", "all-balanced"),
        ("gpu-h100-01", "nvidia.com/mig.config", "all-disabled"),
        ("gpu-l40s-01", "nvidia.com/device-plugin.config", "l40s-dev"),
        ("gpu-h100-serve-01", "gpufleet.io/pool", "h100-serve"),
    ],
)
def test_node_patches_carry_only_gpufleet_fields(node: str, label: str, value: str) -> None:
    patch = find(FLEET, "Node", node)
    assert patch["metadata"]["labels"][label] == value
    assert set(patch) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(patch["spec"]) == {"taints"}
    assert set(patch["metadata"]) == {"name", "labels"}


def test_serving_deployment_is_outside_the_queue_on_the_reserved_pool() -> None:
    dep = find(FLEET, "Deployment", "chat", "serving")
    pod = dep["spec"]["template"]
    assert "kueue.x-k8s.io/queue-name" not in pod["metadata"]["labels"]
    assert pod["spec"]["nodeSelector"] == {"gpufleet.io/pool": "h100-serve"}
    assert pod["spec"]["tolerations"][0]["value"] == "h100-serve"
    assert pod["spec"]["priorityClassName"] == "gpufleet-serving"
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert container["args"][container["args"].index("--tensor-parallel-size") + 1] == "4"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert find(FLEET, "Service", "chat", "serving")["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert find(FLEET, "PriorityClass", "gpufleet-serving")["value"] == 1000000


def test_dra_objects_only_when_the_cluster_supports_it() -> None:
    assert not any(o["kind"] == "DeviceClass" for o in FLEET.objects())
    aks = bundle_for("aks.yaml")
    classes = {o["metadata"]["name"]: o for o in aks.objects() if o["kind"] == "DeviceClass"}
    assert set(classes) == {
        "gpufleet-h100-sxm5-80gb-gpu",
        "gpufleet-a100-pcie-80gb-1g-10gb",
        "gpufleet-a100-pcie-80gb-2g-20gb",
        "gpufleet-a100-pcie-80gb-3g-40gb",
    }
    expression = classes["gpufleet-a100-pcie-80gb-1g-10gb"]["spec"]["selectors"][0]["cel"]["expression"]
    assert 'profile in ["1g.10gb", "1g.10gb+me"]' in expression and 'type == "mig"' in expression
    config = next(o for o in aks.objects(resources_only=False) if o["kind"] == "Configuration")
    mappings = {m["name"]: m["deviceClassNames"] for m in config["resources"]["deviceClassMappings"]}
    assert mappings["nvidia.com/gpu"] == ["gpufleet-h100-sxm5-80gb-gpu"]
    templates = [o for o in aks.objects() if o["kind"] == "ResourceClaimTemplate"]
    assert {o["metadata"]["namespace"] for o in templates} == {"platform-ml", "analytics"}


def test_kueue_configuration_turns_fair_sharing_on_and_is_not_a_resource() -> None:
    contents = FLEET.contents()
    config = yaml.safe_load(contents["kueue-configuration.yaml"])
    assert config["fairSharing"]["preemptionStrategies"] == ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
    kustomization = yaml.safe_load(contents["kustomization.yaml"])
    assert "kueue-configuration.yaml" not in kustomization["resources"]
    separate = {"kustomization.yaml", "kueue-configuration.yaml", "admission-webhook.yaml"}
    top_level = {name for name in contents if "/" not in name}  # monitoring/ has its own kustomization
    assert set(kustomization["resources"]) == top_level - separate
    assert contents["admission-webhook.yaml"].startswith("# The admission webhook"), "it says how to apply it"


def test_kueue_configuration_carries_the_policys_preemption_strategies() -> None:
    text = (
        (EXAMPLES / "fleet.yaml")
        .read_text()
        .replace("queueing:", "queueing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare]", 1)
    )
    assert "preemptionStrategies" in text, "the example has a queueing section"
    config = render(resolve(parse_policy(text, "fleet.yaml"))).contents()["kueue-configuration.yaml"]
    assert yaml.safe_load(config)["fairSharing"] == {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]}


def test_pools_sharing_a_resource_share_a_group_in_preference_order() -> None:
    text = (
        (EXAMPLES / "tiny.yaml")
        .read_text()
        .replace(
            "  - {name: box-serve",
            "  - {name: box2, gpu: L40S, nodes: [ws3], gpusPerNode: 1, role: training}\n  - {name: box-serve",
        )
    )
    cq = find(render(resolve(parse_policy(text))), "ClusterQueue", "alice")
    (group,) = cq["spec"]["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["box", "box2"]


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_object_is_labelled_managed_by_gpufleet(example: Path) -> None:
    for o in render(resolve(load_policy(example))).objects():
        assert o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpufleet", describe(o)


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_rerendering_is_byte_identical(example: Path, tmp_path: Path) -> None:
    first = {p.name: p.read_bytes() for p in write_bundle(render(resolve(load_policy(example))), tmp_path / "a")}
    second = {p.name: p.read_bytes() for p in write_bundle(render(resolve(load_policy(example))), tmp_path / "a")}
    assert first == second


def test_render_replaces_its_earlier_output_whole(tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    earlier = Bundle(files=[RenderedFile("stale.yaml", [{"kind": "ConfigMap"}]), *FLEET.files])
    write_bundle(earlier, out)
    assert (out / "stale.yaml").exists()
    write_bundle(FLEET, out)
    assert not (out / "stale.yaml").exists()
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert [f for f in files if f != ".gpufleet-output"] == sorted(FLEET.contents())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifests"], "no staging folders left behind"


def test_bad_policy_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "fleet.yaml"
    bad.write_text((EXAMPLES / "tiny.yaml").read_text().replace("gpu: L40S", "gpu: L41S"))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["render", str(bad), "-o", str(out)])
    assert result.exit_code == 2
    assert not out.exists()


def test_render_cli_lists_the_files(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["render", str(EXAMPLES / "fleet.yaml"), "-o", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    assert "kueue-clusterqueues.yaml" in result.output
    assert (tmp_path / "m" / "kustomization.yaml").exists()


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_rendered_object_validates_against_kubernetes_and_kueue(example: Path, tmp_path: Path) -> None:
    crds = shared_path("schemas", "kueue-v0.19.2")
    result = CliRunner().invoke(
        app, ["render", str(example), "-o", str(tmp_path / "m"), "--check", "--crds", str(crds)]
    )
    assert result.exit_code == 0, result.output
    assert "all valid" in result.output


def test_check_failure_names_object_and_field_and_writes_nothing(tmp_path: Path) -> None:
    """A CRD folder whose ClusterQueue schema caps cohortName at 3 characters makes every ClusterQueue fail."""
    source = shared_path("schemas", "kueue-v0.19.2")
    crds = tmp_path / "crds"
    crds.mkdir()
    for crd in source.glob("*.yaml"):
        text = crd.read_text()
        if crd.name == "clusterqueues.yaml":
            doc = yaml.safe_load(text)
            for version in doc["spec"]["versions"]:
                props = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
                key = "cohortName" if "cohortName" in props else "cohort"
                props[key]["maxLength"] = 3
            text = yaml.safe_dump(doc)
        (crds / crd.name).write_text(text)
    out = tmp_path / "m"
    result = CliRunner().invoke(
        app, ["render", str(EXAMPLES / "tiny.yaml"), "-o", str(out), "--check", "--crds", str(crds)]
    )
    assert result.exit_code == 1
    assert "ClusterQueue/alice" in result.output and "spec.cohortName" in result.output
    assert not out.exists()


def test_check_without_crds_says_what_to_pass(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["render", str(EXAMPLES / "tiny.yaml"), "-o", str(tmp_path / "m"), "--check"])
    assert result.exit_code == 2
    assert "pass --crds DIR" in result.output


def test_the_recorder_runs_in_gpufleets_namespace_with_least_privilege() -> None:
    namespaces = [o["metadata"]["name"] for o in FLEET.objects() if o["kind"] == "Namespace"]
    assert "gpufleet-system" in namespaces, "applied with the kustomization, before the recorder"
    deployment = find(FLEET, "Deployment", "gpufleet-recorder", "gpufleet-system")
    assert deployment["spec"]["replicas"] == 1, "a SQLite ledger has one writer"
    assert find(FLEET, "PersistentVolumeClaim", "gpufleet-recorder", "gpufleet-system")
    role = find(FLEET, "ClusterRole", "gpufleet-recorder")
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} == {"get", "list", "watch"}
