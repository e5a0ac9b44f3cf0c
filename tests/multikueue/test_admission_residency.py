"""One judgement on every admission path of a federated fleet: ``gpufleet check`` and the webhook's
Python rules decide each Job exactly as the manager's and each worker's rendered ValidatingAdmissionPolicies
do (run offline as the API server runs CEL), reason for reason and word for word; a one-cluster policy
is judged as before."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.check.facts import QUEUE_LABEL, admission_facts
from gpufleet.check.mutation import patch
from gpufleet.check.offline import OfflinePolicy
from gpufleet.check.residency import cluster_facts, residency_of
from gpufleet.check.rules import judge
from gpufleet.cli import app
from gpufleet.policy import parse_policy, resolve
from gpufleet.policy.fleet import Fleet
from gpufleet.render.multikueue import manager_files, worker_bundle
from tests.support import EXAMPLES

FILE = EXAMPLES / "federation.yaml"
FLEET: Fleet = resolve(parse_policy(FILE.read_text(encoding="utf-8"), "federation.yaml"))
VIEWS = ["manager", "aks-weu", "aks-eus", "onprem-fra"]
runner = CliRunner()


def _policies(view: str) -> list[tuple[OfflinePolicy, list[str]]]:
    """The cluster's rendered admission policies, in the order their denials are reported, each with the
    namespaces its binding selects (the offline runner judges every object it is given)."""
    if view == "manager":
        objects = [o for f in manager_files(FLEET) if f.name == "admission-policy.yaml" for o in f.objects]
    else:
        objects = [o for f in worker_bundle(FLEET, view).files if f.name == "admission-policy.yaml" for o in f.objects]
    vaps = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
    assert [v["metadata"]["name"] for v in vaps] == ["gpufleet-admission", "gpufleet-residency"]
    selects = {
        o["spec"]["policyName"]: o["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"]
        for o in objects
        if o["kind"] == "ValidatingAdmissionPolicyBinding"
    }
    return [(OfflinePolicy(v["spec"]), selects[v["metadata"]["name"]]) for v in vaps]


def job(ns: str, queue: str | None, data_class: str | None, gpus: int = 1, **extra: Any) -> dict[str, Any]:
    labels = {"gpufleet.io/team": ns, "gpufleet.io/model": "llama"}
    if queue is not None:
        labels[QUEUE_LABEL] = queue
    if data_class is not None:
        labels["gpufleet.io/data-class"] = data_class
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
    out: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": ns, "labels": labels, **extra},
        "spec": {"template": {"spec": {"containers": [container], "restartPolicy": "Never"}}},
    }
    return out


def _jobset(ns: str, queue: str, data_class: str) -> dict[str, Any]:
    inner = job(ns, queue, data_class)
    labels = inner["metadata"]["labels"]
    template = {"spec": {"template": inner["spec"]["template"]}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": ns, "labels": labels},
        "spec": {"replicatedJobs": [{"name": "w", "template": template}]},
    }


# (name, object, {view: the reasons expected there}); every case also runs against all four views' CEL
CASES: list[tuple[str, dict[str, Any], dict[str, list[str]]]] = [
    (
        "zone queue of a public job",
        job("product", "product-public", "public"),
        {"manager": [], "aks-weu": [], "aks-eus": [], "onprem-fra": []},
    ),
    (
        "confidential job in its zone queue",
        job("research", "research-confidential", "confidential"),
        {"manager": [], "aks-weu": ["ResidencyForbidden"], "onprem-fra": []},
    ),
    (
        "confidential job in the eu queue",
        job("research", "research-eu", "confidential"),
        {"manager": ["ResidencyZoneQueue"], "onprem-fra": ["ResidencyZoneQueue"]},
    ),
    (
        "internal job on the east worker",
        job("product", "product-eu", "internal"),
        {"manager": [], "aks-eus": ["ResidencyForbidden"], "aks-weu": []},
    ),
    ("team-named queue", job("research", "research", "internal"), {"manager": ["ResidencyZoneQueue"]}),
    ("no queue label", job("research", None, "internal"), {"manager": ["MissingQueueName"]}),
    ("no data class", job("research", "research-eu", None), {"manager": ["MissingLabel"]}),
    (
        "a data class the team may not use",
        job("research", "research-public", "public"),
        {"manager": ["DataClassNotAllowed"], "aks-eus": ["DataClassNotAllowed"]},
    ),
    ("unknown data class", job("research", "anything", "secret"), {"manager": ["DataClassNotAllowed"]}),
    ("too many GPUs per pod", job("product", "product-public", "public", gpus=9), {"manager": ["GPURequestTooLarge"]}),
    (
        "a JobSet in the wrong zone",
        _jobset("research", "research-eu", "confidential"),
        {"manager": ["ResidencyZoneQueue"]},
    ),
    (
        "a job on its way out",
        job("research", "research-eu", "confidential", deletionTimestamp="2026-01-01T00:00:00Z"),
        {"manager": [], "aks-weu": []},
    ),
    ("outside the team namespaces", job("default", "x-eu", "confidential"), {"manager": [], "aks-weu": []}),
]


def _reasons(messages: list[str]) -> list[str]:
    return [m.split(":", 1)[0] for m in messages]


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize(("name", "obj", "expected"), CASES, ids=[c[0] for c in CASES])
def test_python_judges_as_the_rendered_policies(
    view: str, name: str, obj: dict[str, Any], expected: dict[str, list[str]]
) -> None:
    ns = obj["metadata"]["namespace"]
    facts = cluster_facts(FLEET, None if view == "manager" else view)
    python = [d.message for d in judge(facts, obj, ns)]
    cel = [m for policy, namespaces in _policies(view) if ns in namespaces for m in policy.judge(obj, ns)]
    assert python == cel
    if view in expected:
        assert _reasons(python) == expected[view], python


def test_the_residency_messages_name_the_zone_the_queue_and_the_clusters() -> None:
    facts = cluster_facts(FLEET, "aks-weu")
    (zone_queue, forbidden) = judge(facts, job("research", "research-eu", "confidential"), "research")
    assert zone_queue.message == (
        "ResidencyZoneQueue: data class confidential runs only in residency zone confidential (clusters onprem-fra): "
        f"set {QUEUE_LABEL} to research-confidential, not research-eu"
    )
    assert forbidden.message == (
        "ResidencyForbidden: data class confidential may not run on cluster aks-weu; its zone confidential "
        "allows only onprem-fra"
    )


def test_a_one_cluster_policy_keeps_the_team_queue_rule() -> None:
    fleet = resolve(parse_policy((EXAMPLES / "fleet.yaml").read_text(encoding="utf-8"), "fleet.yaml"))
    facts = admission_facts(fleet)
    assert residency_of(facts) is None and residency_of(cluster_facts(fleet)) is None
    team = facts.teams[0]
    obj = job(team.namespaces[0], f"{team.name}-eu", team.data_classes[0])
    assert "WrongQueueName" in [d.reason for d in judge(facts, obj, team.namespaces[0])]


@pytest.mark.parametrize(
    ("view", "data_class", "filled"),
    [
        ("manager", "confidential", "research-confidential"),
        ("aks-weu", "internal", "research-eu"),
        ("manager", None, None),
    ],
)
def test_the_webhook_fills_in_the_zone_queue(view: str, data_class: str | None, filled: str | None) -> None:
    facts = cluster_facts(FLEET, None if view == "manager" else view)
    ops = [op for op in patch(facts, job("research", None, data_class), "research") if "queue-name" in op["path"]]
    assert [op["value"] for op in ops] == ([filled] if filled else [])


def _manifest(tmp_path: Path, *objects: dict[str, Any]) -> str:
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all([copy.deepcopy(o) for o in objects]))
    return str(path)


def test_check_judges_as_the_manager_or_as_a_named_worker(tmp_path: Path) -> None:
    files = _manifest(tmp_path, job("research", "research-confidential", "confidential"))
    manager = runner.invoke(app, ["check", str(FILE), files, "--json"])
    assert manager.exit_code == 0, manager.stdout
    (verdict,) = json.loads(manager.stdout)["objects"]
    assert (verdict["localQueue"], verdict["clusterQueue"], verdict["flavors"]) == (
        "research-confidential",
        "research-confidential",
        ["h100-fra"],
    )
    assert verdict["filled"] == []  # a federation's clusters run no mutating webhook
    worker = runner.invoke(app, ["check", str(FILE), files, "--cluster", "aks-weu"])
    assert worker.exit_code == 1
    assert "ResidencyForbidden: data class confidential may not run on cluster aks-weu" in worker.stdout
    fra = runner.invoke(app, ["check", str(FILE), files, "--cluster", "onprem-fra", "--json"])
    (verdict,) = json.loads(fra.stdout)["objects"]
    assert fra.exit_code == 0 and (verdict["localQueue"], verdict["clusterQueue"]) == (
        "research-confidential",
        "research",
    )


@pytest.mark.parametrize("policy", [FILE, EXAMPLES / "fleet.yaml"])
def test_an_unknown_cluster_is_a_located_error(tmp_path: Path, policy: Path) -> None:
    result = runner.invoke(
        app, ["check", str(policy), _manifest(tmp_path, job("research", None, None)), "--cluster", "nowhere"]
    )
    assert result.exit_code == 2
    assert "--cluster" in result.output and "no cluster 'nowhere'" in result.output


@pytest.mark.parametrize(
    ("view", "data_class", "queue", "allowed", "reason"),
    [
        ("manager", "confidential", "research-confidential", True, None),
        ("aks-weu", "confidential", "research-confidential", False, "ResidencyForbidden"),
        ("onprem-fra", "confidential", "research-eu", False, "ResidencyZoneQueue"),
    ],
)
def test_the_webhook_answers_a_review_as_the_cluster_it_serves(
    view: str, data_class: str, queue: str, allowed: bool, reason: str | None
) -> None:
    from gpufleet.webhook.app import create_app
    from gpufleet.webhook.telemetry import Metrics

    app = create_app(cluster_facts(FLEET, None if view == "manager" else view), Metrics())
    obj = job("research", queue, data_class)
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "u-1", "namespace": "research", "operation": "CREATE", "object": obj}})  # fmt: skip
    reply = app.reviews["/validate"](body.encode(), 0.0)
    answer = json.loads(reply.body)["response"]
    assert answer["allowed"] is allowed
    if reason is not None:
        assert answer["status"]["message"].startswith(f"{reason}: ")
