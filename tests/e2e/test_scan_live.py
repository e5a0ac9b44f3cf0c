"""``gpufleet scan`` against the testbed: it finds the policy's pools and the work on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.policy import load_policy, resolve


def test_scan_reports_the_fake_fleet(cluster: Any, applied: Path, tmp_path: Path) -> None:
    serving = cluster.fleet.policy.serving
    cluster.eventually(
        lambda: [
            p
            for p in cluster.get("pods", f"--namespace={serving.namespace}")["items"]
            if p["status"].get("phase") == "Running"
        ],
        "the serving deployment's pod to run",
    )
    rogue = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "rogue", "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 0,  # kwok honours grace periods: the clean-up need not wait
            "nodeSelector": {"gpufleet.io/pool": "train"},
            "tolerations": [{"key": "gpufleet.io/pool", "operator": "Exists"}],
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }
    cluster.apply([rogue])
    try:
        policy_file = tmp_path / "starter.yaml"
        args = ["scan", "--kubeconfig", cluster.kubeconfig, "--json", "--write-policy", str(policy_file)]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
    finally:
        cluster.kubectl("delete", "pod", "rogue", "--namespace=default", "--wait=true")

    pools = {p["name"]: p for p in report["pools"]}
    assert {name: p["units"] for name, p in pools.items()} == {n: c.units for n, c in cluster.fleet.pools.items()}
    assert pools["mig"]["mig_config"] == "all-balanced" and pools["mig"]["mig_state"] == "success"
    assert report["servingPools"] == [serving.pool]
    assert report["kueue"]["installed"] is True
    assert set(report["kueue"]["objects"]["ClusterQueue"]) == {t.name for t in cluster.fleet.policy.teams}
    risks = {(r["reason"], r["subject"]) for r in report["risks"]}
    assert ("GpuOutsideQueue", "namespace/default") in risks
    assert ("MissingTeamLabel", "namespace/default") in risks
    starter = resolve(load_policy(policy_file))
    assert {n: c.units for n, c in starter.pools.items()} == {n: c.units for n, c in cluster.fleet.pools.items()}


def test_init_from_cluster_writes_a_policy_that_plans(cluster: Any, applied: Path, tmp_path: Path) -> None:
    target = tmp_path / "fleet.yaml"
    result = CliRunner().invoke(app, ["init", str(target), "--from-cluster", "--kubeconfig", cluster.kubeconfig])
    assert result.exit_code == 0, result.output
    fleet = resolve(load_policy(target))
    assert {n: c.units for n, c in fleet.pools.items()} == {n: c.units for n, c in cluster.fleet.pools.items()}
    again = CliRunner().invoke(app, ["init", str(target), "--from-cluster", "--kubeconfig", cluster.kubeconfig])
    assert again.exit_code == 2 and "already exists" in again.output
