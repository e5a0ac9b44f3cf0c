"""The federation bundles: the manager's MultiKueue objects, each worker's narrowed bundle, Kueue's
limits, the CRDs, and the residency policy's decisions run offline as the API server runs CEL."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpufleet.check.offline import OfflinePolicy
from gpufleet.policy import parse_policy, resolve
from gpufleet.policy.fleet import Fleet
from gpufleet.policy.residency import project
from gpufleet.render import render
from gpufleet.render.check import check_bundle
from gpufleet.render.multikueue import (
    CONTROLLER,
    kueue_limits,
    manager_configuration,
    manager_files,
    render_federation,
    worker_bundle,
)
from gpufleet.render.residency import NAME as RESIDENCY
from gpufleet.validation import load_crds, validate
from tests.support import EXAMPLES

KUEUE_CRDS = Path(__file__).resolve().parents[2] / ".." / "shared" / "schemas" / "kueue-v0.19.2"
FLEET: Fleet = resolve(parse_policy((EXAMPLES / "federation.yaml").read_text(encoding="utf-8"), "federation.yaml"))


def _manager() -> list[dict[str, Any]]:
    return [o for f in manager_files(FLEET) if f.api for o in f.objects]


def _of(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"].get("namespace", "") + "/" + o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def test_one_multikueue_config_per_zone_lists_exactly_its_clusters() -> None:
    objects = _manager()
    configs = {k.strip("/"): o["spec"]["clusters"] for k, o in _of(objects, "MultiKueueConfig").items()}
    assert configs == {
        "public": ["aks-weu", "aks-eus", "onprem-fra"],
        "eu": ["aks-weu", "onprem-fra"],
        "confidential": ["onprem-fra"],
    }
    checks = _of(objects, "AdmissionCheck")
    assert {
        k.strip("/"): (c["spec"]["controllerName"], c["spec"]["parameters"]["name"]) for k, c in checks.items()
    } == {f"multikueue-{z}": (CONTROLLER, z) for z in configs}
    secrets = {
        k.strip("/"): c["spec"]["clusterSource"]["kubeConfig"] for k, c in _of(objects, "MultiKueueCluster").items()
    }
    assert secrets["onprem-fra"] == {"location": "onprem-fra-kubeconfig", "locationType": "Secret"}


def test_each_team_has_one_queue_per_zone_with_that_zone_check_only() -> None:
    objects = _manager()
    queues = {k.strip("/"): o for k, o in _of(objects, "ClusterQueue").items()}
    assert sorted(queues) == ["product-eu", "product-public", "research-confidential", "research-eu"]
    for name, cq in queues.items():
        zone = name.split("-", 1)[1]
        assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": f"multikueue-{zone}"}]}
    flavors = {f["name"] for g in queues["research-confidential"]["spec"]["resourceGroups"] for f in g["flavors"]}
    assert flavors == {"h100-fra"}  # the zone's pools only
    locals_ = {k: o["spec"]["clusterQueue"] for k, o in _of(objects, "LocalQueue").items()}
    assert locals_ == {
        f"{ns}/{q}": q
        for ns, q in [
            ("research", "research-eu"),
            ("research", "research-confidential"),
            ("product", "product-public"),
            ("product", "product-eu"),
        ]
    }
    config = next(o for f in manager_files(FLEET) if f.name == "kueue-configuration.yaml" for o in f.objects)
    assert config["multiKueue"] == {"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"}
    text = (EXAMPLES / "federation.yaml").read_text(encoding="utf-8")
    incremental = resolve(
        parse_policy(text.replace("dispatcher: AllAtOnce", "dispatcher: Incremental, stepSize: 2"), "f.yaml")
    )
    assert manager_configuration(incremental)["multiKueue"] == {
        "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
        "incrementalDispatcherConfig": {"stepSize": 2},  # Kueue's IncrementalDispatcherConfig, Beta and on in v0.19
    }


def test_a_worker_bundle_holds_its_own_pools_and_the_zone_queues_that_reach_it() -> None:
    weu = worker_bundle(FLEET, "aks-weu").objects(resources_only=False)
    assert sorted(_of(weu, "ResourceFlavor")) == ["/h100-weu"]
    zone_queues = {
        k: o["spec"]["clusterQueue"] for k, o in _of(weu, "LocalQueue").items() if o["metadata"]["name"].count("-")
    }
    assert zone_queues == {
        "research/research-eu": "research",
        "product/product-public": "product",
        "product/product-eu": "product",
    }
    fra = worker_bundle(FLEET, "onprem-fra")
    assert "serving.yaml" in [f.name for f in fra.files] and "nodes.yaml" in [f.name for f in fra.files]
    assert "admission-webhook.yaml" not in [f.name for f in fra.files]
    assert "serving.yaml" not in [f.name for f in worker_bundle(FLEET, "aks-eus").files]


def test_the_team_queue_rule_alone_gives_way_to_the_residency_rule() -> None:
    alone = resolve(project(FLEET.policy, {"aks-weu"}))  # the worker as a one-cluster fleet
    one_cluster = _of(render(alone).objects(), "ValidatingAdmissionPolicy")["/gpufleet-admission"]
    worker = _of(worker_bundle(FLEET, "aks-weu").objects(), "ValidatingAdmissionPolicy")
    kept = [v["messageExpression"][:40] for v in worker["/gpufleet-admission"]["spec"]["validations"]]
    before = [v["messageExpression"][:40] for v in one_cluster["spec"]["validations"]]
    assert [m for m in before if "WrongQueueName" not in m] == kept and len(kept) == len(before) - 1
    assert f"/{RESIDENCY}" in worker


def _job(ns: str, queue: str, data_class: str) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue, "gpufleet.io/data-class": data_class, "gpufleet.io/team": ns}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": ns, "labels": labels}}


def _residency(objects: list[dict[str, Any]]) -> OfflinePolicy:
    return OfflinePolicy(_of(objects, "ValidatingAdmissionPolicy")[f"/{RESIDENCY}"]["spec"])


# (where, namespace, queue, data class, expected reason or None for admitted)
DECISIONS = [
    ("manager", "research", "research-confidential", "confidential", None),
    ("manager", "research", "research-eu", "confidential", "ResidencyZoneQueue"),
    ("manager", "research", "research-eu", "internal", None),
    ("manager", "product", "product-public", "internal", "ResidencyZoneQueue"),
    ("manager", "product", "product-public", "public", None),
    ("aks-weu", "research", "research-confidential", "confidential", "ResidencyForbidden"),
    ("aks-weu", "research", "research-eu", "internal", None),
    ("aks-eus", "product", "product-eu", "internal", "ResidencyForbidden"),
    ("aks-eus", "product", "product-public", "public", None),
    ("onprem-fra", "research", "research", "confidential", "ResidencyZoneQueue"),
    ("onprem-fra", "research", "research-confidential", "confidential", None),
]


@pytest.mark.parametrize(("where", "ns", "queue", "data_class", "reason"), DECISIONS)
def test_residency_decisions_offline(where: str, ns: str, queue: str, data_class: str, reason: str | None) -> None:
    objects = _manager() if where == "manager" else worker_bundle(FLEET, where).objects()
    denials = _residency(objects).judge(_job(ns, queue, data_class), ns)
    if reason is None:
        assert denials == []
    else:
        assert len(denials) == 1 and denials[0].startswith(f"{reason}: "), denials
        assert data_class in denials[0]


def _limits_case(edit: str) -> list[dict[str, Any]]:
    objects = copy.deepcopy(_manager())
    cq = next(o for o in objects if o["kind"] == "ClusterQueue")
    config = next(o for o in objects if o["kind"] == "MultiKueueConfig")
    rules = cq["spec"]["admissionChecksStrategy"]["admissionChecks"]
    if edit == "two-checks":
        rules.append({"name": "multikueue-public" if rules[0]["name"] != "multikueue-public" else "multikueue-eu"})
    elif edit == "per-flavor":
        rules[0]["onFlavors"] = ["h100-weu"]
    elif edit == "21-clusters":
        config["spec"]["clusters"] = [f"c{i}" for i in range(21)]
    elif edit == "unknown-cluster":
        config["spec"]["clusters"] = ["aks-weu", "nowhere"]
    return objects


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("two-checks", "more than one MultiKueue AdmissionCheck"),
        ("per-flavor", "may not be limited to flavors"),
        ("21-clusters", "21 clusters; Kueue takes 1 to 20"),
        ("unknown-cluster", "no MultiKueueCluster nowhere"),
    ],
)
def test_kueue_limits_catch_what_kueue_would_refuse(edit: str, message: str) -> None:
    assert kueue_limits(_manager()) == []
    problems = kueue_limits(_limits_case(edit))
    assert any(message in p for p in problems), problems


def test_every_rendered_object_is_valid_against_kueue_crds_and_kubernetes() -> None:
    if not KUEUE_CRDS.is_dir():
        pytest.skip(f"Kueue CRDs not found at {KUEUE_CRDS} (the read-only 'shared' folder beside the repository)")
    bundle = render_federation(FLEET)
    report = check_bundle(bundle, kubernetes="1.34", crds=load_crds(KUEUE_CRDS))
    assert report.findings == []
    kinds = {o["kind"] for o in bundle.api_objects()}
    assert {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue", "LocalQueue"} <= kinds
    assert report.checked >= 100


def test_rendering_twice_gives_the_same_files() -> None:
    assert render_federation(FLEET).contents() == render_federation(FLEET).contents()


@pytest.mark.parametrize(
    ("kind", "valid"), [("MultiKueueConfig", True), ("multikueueconfig", True), ("9Config", False)]
)
def test_admission_check_kind_pattern_with_re2_inline_flag(kind: str, valid: bool) -> None:
    """Kueue's ``parameters.kind`` pattern is ``^(?i)[a-z]...``, an inline flag Python's ``re`` refuses
    mid-expression; the validator reads it as RE2 does (case-insensitive from the start)."""
    if not KUEUE_CRDS.is_dir():
        pytest.skip(f"Kueue CRDs not found at {KUEUE_CRDS}")
    check = copy.deepcopy(_of(_manager(), "AdmissionCheck")["/multikueue-eu"])
    check["spec"]["parameters"]["kind"] = kind
    findings = validate([check], kubernetes="1.34", crds=load_crds(KUEUE_CRDS))
    assert (findings == []) is valid, findings


def test_manager_flavors_place_nothing() -> None:
    """Kueue copies the manager's flavor node labels and tolerations into the Job MultiKueue sends to a
    worker; the manager's flavors must carry none, or the copy is pinned to the manager's pick."""
    flavors = _of(_manager(), "ResourceFlavor")
    assert sorted(flavors) == ["/a100-eus", "/h100-fra", "/h100-weu"]
    assert all(f["spec"] == {} for f in flavors.values())
