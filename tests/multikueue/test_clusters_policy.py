"""The ``clusters:`` section: residency zones from data classes, and a located error for every contradiction.

Each case edits the bundled two-region example (``examples/federation.yaml``) in one place and expects
the loader to name the field, its line, and what is wrong; the CLI exits 2 and writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.errors import InputError
from gpufleet.plan import make_plan
from gpufleet.policy import parse_policy, resolve
from gpufleet.policy.residency import queue_name, team_zones, zones
from tests.support import EXAMPLES

FEDERATION = (EXAMPLES / "federation.yaml").read_text(encoding="utf-8")


def _line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def test_zones_list_exactly_the_clusters_each_data_class_allows() -> None:
    policy = parse_policy(FEDERATION, "federation.yaml")
    found = {z.name: (z.clusters, z.data_classes) for z in zones(policy)}
    assert found == {
        "public": (("aks-weu", "aks-eus", "onprem-fra"), ("public",)),
        "eu": (("aks-weu", "onprem-fra"), ("internal",)),
        "confidential": (("onprem-fra",), ("confidential",)),
    }
    assert [z.name for z in team_zones(policy, "research")] == ["eu", "confidential"]
    assert [z.name for z in team_zones(policy, "product")] == ["public", "eu"]
    assert queue_name("research", "eu") == "research-eu"


def test_plan_shows_the_fleet_per_cluster_and_the_zones() -> None:
    plan = make_plan(resolve(parse_policy(FEDERATION, "federation.yaml")))
    per_cluster = {c.name: (c.region, c.pools, c.units, c.zones) for c in plan.clusters}
    assert per_cluster == {
        "aks-weu": ("westeurope", ["h100-weu"], {"nvidia.com/gpu": 16}, ["public", "eu"]),
        "aks-eus": ("eastus", ["a100-eus"], {"nvidia.com/gpu": 8}, ["public"]),
        "onprem-fra": (
            "eu-central",
            ["h100-fra", "l40s-fra"],
            {"nvidia.com/gpu": 12},
            ["public", "eu", "confidential"],
        ),
    }
    assert {z.name: z.queues for z in plan.zones} == {
        "public": ["product-public"],
        "eu": ["research-eu", "product-eu"],
        "confidential": ["research-confidential"],
    }
    result = CliRunner().invoke(app, ["plan", str(EXAMPLES / "federation.yaml")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Residency zones" in result.output and "research-confidential" in result.output


def test_a_policy_without_clusters_plans_no_clusters_and_no_zones() -> None:
    plan = make_plan(resolve(parse_policy((EXAMPLES / "fleet.yaml").read_text(), "fleet.yaml")))
    assert plan.clusters == [] and plan.zones == []


SECRET = "kubeconfigSecret: aks-eus-kubeconfig"
# (id, old text, new text, expected path, line holding this fragment of the new text, message fragment)
CASES = [
    (
        "pool-in-undeclared-cluster",
        "cluster: aks-eus, gpu: A100",
        "cluster: aks-usw, gpu: A100",
        "pools[1].cluster",
        "aks-usw",
        "is in cluster 'aks-usw', which the policy does not declare",
    ),
    (
        "pool-without-cluster",
        "cluster: aks-eus, gpu: A100",
        "gpu: A100",
        "pools[1]",
        "name: a100-eus",
        "names no cluster",
    ),
    ("invalid-secret-name", SECRET, "kubeconfigSecret: AKS_eus", "clusters[1].kubeconfigSecret", "AKS_eus", "pattern"),
    (
        "shared-secret",
        SECRET,
        "kubeconfigSecret: aks-weu-kubeconfig",
        "clusters[1].kubeconfigSecret",
        "name: aks-eus",
        "already cluster 'aks-weu'",
    ),
    (
        "data-class-without-cluster",
        "{name: confidential, clusters: [onprem-fra],",
        "{name: confidential,",
        "dataClasses[2]",
        "name: confidential,",
        "has no cluster where its work may run",
    ),
    (
        "data-class-unknown-cluster",
        "clusters: [onprem-fra]",
        "clusters: [onprem-muc]",
        "dataClasses[2].clusters[0]",
        "onprem-muc",
        "unknown cluster 'onprem-muc'",
    ),
    (
        "data-class-region-without-cluster",
        "regions: [westeurope, eu-central]",
        "regions: [westeurope, northeurope]",
        "dataClasses[1].regions[1]",
        "northeurope",
        "no declared cluster is in region 'northeurope'",
    ),
    (
        "quota-on-a-pool-no-allowed-cluster-has",
        "h100-fra: {gpus: 4}",
        "h100-fra: {gpus: 4}\n      a100-eus: {gpus: 2}",
        "teams[0].quota.a100-eus",
        "a100-eus: {gpus: 2}",
        "pool 'a100-eus' is in cluster 'aks-eus', where none of team 'research''s data classes",
    ),
    (
        "cluster-in-a-zone-residency-forbids",
        "{name: confidential, clusters: [onprem-fra],",
        "{name: confidential, zone: eu, clusters: [onprem-fra],",
        "dataClasses[2].zone",
        "zone: eu, clusters: [onprem-fra]",
        "zone 'eu' would list cluster(s) aks-weu",
    ),
    (
        "pool-region-differs",
        "cluster: onprem-fra, gpu: H100-SXM5-80GB,",
        "cluster: onprem-fra, region: westeurope, gpu: H100-SXM5-80GB,",
        "pools[2].region",
        "region: westeurope, gpu",
        "its cluster 'onprem-fra' is in 'eu-central'",
    ),
    (
        "team-without-data-class",
        "dataClasses: [public, internal]",
        "dataClasses: []",
        "teams[1].dataClasses",
        "dataClasses: []",
        "no residency zone",
    ),
    (
        "step-size-without-incremental",
        "multiKueue: {dispatcher: AllAtOnce}",
        "multiKueue: {dispatcher: AllAtOnce, stepSize: 1}",
        "multiKueue.stepSize",
        "multiKueue:",
        "applies to the Incremental dispatcher only",
    ),
    (
        "queue-name-too-long",
        "zone: eu,",
        "zone: " + "e" * 60 + ",",
        "teams[0].name",
        "name: research",
        "is 69 characters",
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "path", "line_of", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_contradiction_is_a_located_error(old: str, new: str, path: str, line_of: str, message: str) -> None:
    assert old in FEDERATION
    text = FEDERATION.replace(old, new, 1)
    with pytest.raises(InputError) as caught:
        parse_policy(text, "federation.yaml")
    problems = {p.path: p for p in caught.value.problems}
    assert path in problems, caught.value.summary()
    assert message in problems[path].message
    assert problems[path].file == "federation.yaml"
    assert problems[path].line == _line_of(text, line_of)


def test_naming_a_cluster_without_clusters_is_an_error() -> None:
    text = (EXAMPLES / "tiny.yaml").read_text(encoding="utf-8")
    text = text.replace("role: training, workloads", "cluster: box, role: training, workloads")
    text = text.replace("{name: internal,", "{name: internal, regions: [home],")
    with pytest.raises(InputError) as caught:
        parse_policy(text, "tiny.yaml")
    paths = {p.path: p.message for p in caught.value.problems}
    assert "declares no clusters" in paths["pools[0].cluster"]
    assert "declares no clusters" in paths["dataClasses[0].regions"]


def test_the_cli_exits_2_and_writes_nothing_on_a_contradiction(tmp_path: Path) -> None:
    policy = tmp_path / "bad.yaml"
    policy.write_text(
        FEDERATION.replace("cluster: aks-eus, gpu: A100", "cluster: nowhere, gpu: A100"), encoding="utf-8"
    )
    out = tmp_path / "manifests"
    result = CliRunner().invoke(app, ["render", str(policy), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "pools[1].cluster" in result.output and "nowhere" in result.output
    assert not out.exists()
