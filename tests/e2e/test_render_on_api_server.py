"""``gpufleet render`` output against the real API server: schemas, CRD validation, Kueue's webhooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent
POLICIES = [*sorted((HERE.parents[1] / "examples").glob("*.yaml")), HERE / "fleet.yaml"]


@pytest.mark.parametrize("policy", POLICIES, ids=[f"{p.parent.name}/{p.stem}" for p in POLICIES])
def test_every_rendered_object_passes_a_server_side_dry_run(cluster: Any, policy: Path, tmp_path: Path) -> None:
    bundle = cluster.render(policy, tmp_path / "manifests")
    cluster.prepare_namespaces(bundle)
    result = cluster.kubectl("apply", "--server-side", "--dry-run=server", f"--kustomize={bundle}", check=False)
    assert result.returncode == 0, result.stderr
    assert "(server dry run)" in result.stdout


def test_the_applied_kueue_objects_are_active(cluster: Any, applied: Path) -> None:
    for team in cluster.fleet.policy.teams:
        conditions = cluster.get("clusterqueue", team.name)["status"]["conditions"]
        active = next(c for c in conditions if c["type"] == "Active")
        assert active["status"] == "True", active
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
