"""``gpufleet render`` output against the real API server: schemas, CRD validation, Kueue's webhooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import eventually

HERE = Path(__file__).resolve().parent
POLICIES = [*sorted((HERE.parents[1] / "examples").glob("*.yaml")), HERE / "fleet.yaml"]


@pytest.mark.parametrize("policy", POLICIES, ids=[f"{p.parent.name}/{p.stem}" for p in POLICIES])
def test_every_rendered_object_passes_a_server_side_dry_run(cluster: Any, policy: Path, tmp_path: Path) -> None:
    rendered = cluster.render(policy, tmp_path / "manifests")
    # a federated policy renders manager/ and workers/<cluster>/, each a bundle of its own (docs/multikueue.md)
    bundles = (
        [rendered / "manager", *sorted((rendered / "workers").iterdir())]
        if (rendered / "manager").is_dir()
        else [rendered]
    )
    for bundle in bundles:
        cluster.prepare_namespaces(bundle)
        result = cluster.kubectl("apply", "--server-side", "--dry-run=server", f"--kustomize={bundle}", check=False)
        assert result.returncode == 0, f"{bundle.name}: {result.stderr}"
        assert "(server dry run)" in result.stdout


def test_the_applied_kueue_objects_are_active(cluster: Any, applied: Path) -> None:
    def active(name: str) -> dict[str, Any] | None:
        conditions = cluster.get("clusterqueue", name).get("status", {}).get("conditions", [])
        condition = next((c for c in conditions if c["type"] == "Active"), None)
        return condition if condition and condition["status"] == "True" else None

    # Kueue may first report FlavorNotFound if it sees a ClusterQueue before its flavors; it must settle
    for team in cluster.fleet.policy.teams:
        eventually(lambda name=team.name: active(name), f"ClusterQueue {team.name} to become Active", timeout_s=60)
    flavors = {f["metadata"]["name"] for f in cluster.get("resourceflavors")["items"]}
    assert flavors == {"train", "mig"}


def test_kueue_rejects_an_invalid_cluster_queue(cluster: Any, applied: Path) -> None:
    bad = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "bad"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "train", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": -1}]}],
                }
            ]
        },
    }
    result = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "--filename=-", stdin=yaml.safe_dump(bad), check=False
    )
    assert result.returncode != 0
    assert "nominalQuota" in result.stderr
