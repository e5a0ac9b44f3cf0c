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


def test_the_forecast_exporters_role_lets_it_list_what_the_forecast_reads_and_write_nothing(cluster: Any) -> None:
    """The rendered exporter's ServiceAccount, asked of the API server's own authorizer (a
    SubjectAccessReview: it answers for kinds whose CRD is not installed too, where ``kubectl auth
    can-i`` cannot resolve the name): it may list every kind ``gpufleet forecast`` lists, the
    Workloads' owners included (a Job's or a JobSet's declarations are read from them:
    ``forecast.declared``), and may write none of them."""
    import json

    from gpufleet.kube.live import LIVE_KINDS, OWNER_PLURALS
    from tests.forecast.test_exporter_manifests import POSTGRES, rendered

    bundle = rendered(POSTGRES)["forecast-exporter.yaml"]
    objects = [o for o in bundle if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    account = next(o["metadata"] for o in bundle if o["kind"] == "ServiceAccount")

    def allowed(verb: str, group: str, resource: str) -> bool:
        namespace = account["namespace"]
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{namespace}:{account['name']}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
                "resourceAttributes": {"verb": verb, "group": group, "resource": resource},
            },
        }
        done = cluster.kubectl("create", "--filename=-", "--output=json", stdin=json.dumps(review))
        return bool(json.loads(done.stdout)["status"].get("allowed"))

    cluster.apply(objects)
    try:
        listed = [(a.rpartition("/")[0], plural) for a, _, plural, _ in LIVE_KINDS] + [
            (group, plural) for (group, _), plural in OWNER_PLURALS.items()
        ]
        asked = [("list", g, r, True) for g, r in listed] + [
            (verb, g, r, False) for verb, g, r in (("create", "kueue.x-k8s.io", "workloads"), ("delete", "batch", "jobs"),
                                                   ("patch", "jobset.x-k8s.io", "jobsets"), ("list", "", "secrets"))
        ]  # fmt: skip
        answers = {(verb, g, r): allowed(verb, g, r) for verb, g, r, _ in asked}
        assert answers == {(verb, g, r): want for verb, g, r, want in asked}
    finally:
        cluster.kubectl("delete", "--filename=-", "--ignore-not-found", stdin=yaml.safe_dump_all(objects))
