"""The recorder's rendered objects: valid Kubernetes 1.34 (strict schemas) and least privilege."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import typer

from gpufleet.cli import app
from gpufleet.cli.commands import LazyGroup
from gpufleet.recorder.manifests import recorder_objects


@pytest.mark.parametrize("ledger_url", [None, "postgresql://ledger@db/ledger"], ids=["sqlite", "postgresql"])
def test_every_object_validates_against_the_kubernetes_schema(ledger_url: str | None) -> None:
    for obj in recorder_objects("gpufleet-system", "ghcr.io/example/gpufleet:0.1.0", ledger_url):
        kubernetes_validate.validate(obj, "1.34.0", strict=True)


def _kinds(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objects}


def test_cluster_wide_it_may_only_read_and_in_its_namespace_write_leases_and_one_configmap() -> None:
    rendered = recorder_objects("gpufleet-system", "img", None)
    objects = _kinds(rendered)
    roles = {o["metadata"]["name"]: o for o in rendered if o["kind"] == "Role"}
    cluster_verbs = {v for rule in objects["ClusterRole"]["rules"] for v in rule["verbs"]}
    assert cluster_verbs == {"get", "list", "watch"}
    read = {(g, r) for rule in objects["ClusterRole"]["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert read == {("kueue.x-k8s.io", "workloads"), ("batch", "jobs"), ("", "pods"), ("", "nodes")}
    (lease_rule,) = roles["gpufleet-recorder-leases"]["rules"]
    assert lease_rule["resources"] == ["leases"]
    (configmap_rule,) = roles["gpufleet-recorder-checkpoint"]["rules"]
    assert configmap_rule == {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": ["gpufleet-ledger-checkpoint"],  # that one ConfigMap, which the bundle creates
        "verbs": ["get", "update"],
    }
    assert {r["metadata"]["namespace"] for r in roles.values()} == {"gpufleet-system"}
    assert (
        objects["ConfigMap"]["metadata"]["name"] == "gpufleet-ledger-checkpoint" and "data" not in objects["ConfigMap"]
    )


@pytest.mark.parametrize(
    ("ledger_url", "replicas", "has_pvc"),
    [(None, 1, True), ("postgresql://ledger@db/ledger", 2, False)],
    ids=["sqlite-single-writer", "postgresql-with-standby"],
)
def test_sqlite_gets_a_volume_and_one_replica_postgresql_a_secret_and_a_standby(
    ledger_url: str | None, replicas: int, has_pvc: bool
) -> None:
    objects = recorder_objects("ns", "img", ledger_url)
    kinds = _kinds(objects)
    deployment = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == replicas
    assert ("PersistentVolumeClaim" in kinds) == has_pvc
    rendered = str(objects)
    assert "postgresql://" not in rendered  # a URL may carry a password: it stays in a Secret


@pytest.mark.parametrize("ledger_url", [None, "postgresql://ledger@db/ledger"], ids=["sqlite", "postgresql"])
def test_the_recorder_signs_checkpoints_with_the_secret_key_and_the_cli_takes_its_arguments(
    ledger_url: str | None,
) -> None:
    """The monitoring's GpufleetLedgerCheckpointStale alert needs a recorder that publishes checkpoints."""
    pod = _kinds(recorder_objects("ns", "img", ledger_url))["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    key = args[args.index("--checkpoint-key") + 1]
    assert args[args.index("--checkpoint-to") + 1] == "log"
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert key == f"{mounts['ledger-key']['mountPath']}/key" and mounts["ledger-key"]["readOnly"]
    assert volumes["ledger-key"]["secret"] == {"secretName": "gpufleet-ledger-key", "defaultMode": 0o440}
    root = typer.main.get_command(app)
    assert isinstance(root, LazyGroup)
    root.load(args[0])  # the root lists commands by name until one runs: build this one
    record = root.commands[args[0]]
    argv = [a.replace("$(LEDGER_URL)", "postgresql://x@db/l") for a in args[1:]]
    context = record.make_context(args[0], argv)  # parses, runs nothing: every option exists
    assert str(context.params["checkpoint_key"]) == key
    assert context.params["checkpoint_to"] == ["log", "configmap:ns/gpufleet-ledger-checkpoint"]
