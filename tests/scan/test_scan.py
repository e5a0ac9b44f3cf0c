"""Scan analysis on fake fleets: pools recovered from node labels, pods by team, risks, starter policy.

The nodes are the testbed's fake nodes for the bundled example policies, so the scan is checked
against what the policy says the pools are, not against numbers written into the test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.policy import load_policy, parse_policy, resolve
from gpufleet.policy.fleet import Fleet
from gpufleet.render import render
from gpufleet.scan import Snapshot, analyse
from gpufleet.scan.quantity import count
from gpufleet.testbed.nodes import fake_nodes, node_names

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POLICIES = sorted(EXAMPLES.glob("*.yaml"))


def fleet_of(path: Path) -> Fleet:
    return resolve(load_policy(path))


def pod(
    ns: str,
    name: str,
    node: str | None,
    gpus: dict[str, int],
    *,
    labels: dict[str, str] | None = None,
    image: str = "trainer:1",
    phase: str = "Running",
    job: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    if job:
        meta["ownerReferences"] = [{"kind": "Job", "name": job, "apiVersion": "batch/v1", "uid": "x"}]
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": image, "resources": {"limits": {k: str(v) for k, v in gpus.items()}}}]
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def kueue_objects(fleet: Fleet) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for o in render(fleet).objects():
        if o["apiVersion"].startswith("kueue.x-k8s.io/"):
            out.setdefault(o["kind"], []).append(o)
    return out


@pytest.mark.parametrize("path", POLICIES, ids=[p.stem for p in POLICIES])
def test_pools_are_recovered_from_the_node_labels(path: Path) -> None:
    fleet = fleet_of(path)
    report = analyse(Snapshot(nodes=fake_nodes(fleet), pods=[]))
    assert {p.name: p.units for p in report.pools} == {name: cap.units for name, cap in fleet.pools.items()}
    for p in report.pools:
        cap = fleet.pools[p.name]
        assert p.model == cap.gpu.name
        assert p.nodes == tuple(sorted(node_names(cap)))
        assert p.gpus_per_node == cap.pool.gpusPerNode
        assert p.sharing == cap.decision.mode
        assert p.replicas == cap.decision.replicas
        assert f"gpufleet.io/pool={p.name}:NoSchedule" in p.taints


@pytest.mark.parametrize("path", POLICIES, ids=[p.stem for p in POLICIES])
def test_starter_policy_from_a_fake_fleet_loads_and_yields_the_same_units(path: Path) -> None:
    fleet = fleet_of(path)
    serving = fleet.policy.serving
    pods = []
    if serving is not None:
        node = node_names(fleet.pools[serving.pool])[0]
        pods.append(pod("serving", "chat-0", node, {"nvidia.com/gpu": 1}, image="vllm/vllm-openai:v0.11.0"))
    report = analyse(Snapshot(nodes=fake_nodes(fleet), pods=pods))
    starter = resolve(parse_policy(report.starter_policy()))
    assert {n: c.units for n, c in starter.pools.items()} == {n: c.units for n, c in fleet.pools.items()}
    if serving is not None:
        assert starter.policy.serving is not None and starter.policy.serving.pool == serving.pool


def test_pods_are_grouped_by_team_with_namespace_labels_and_job_queues() -> None:
    fleet = fleet_of(EXAMPLES / "fleet.yaml")
    h100 = node_names(fleet.pools["h100-train"])[0]
    snapshot = Snapshot(
        nodes=fake_nodes(fleet),
        namespaces=[{"metadata": {"name": "nlp", "labels": {"gpufleet.io/team": "nlp"}}}],
        jobs=[{"metadata": {"name": "train", "namespace": "nlp", "labels": {"kueue.x-k8s.io/queue-name": "nlp"}}}],
        pods=[
            pod("nlp", "train-abc", h100, {"nvidia.com/gpu": 4}, job="train"),
            pod("research", "adhoc", h100, {"nvidia.com/gpu": 2}, labels={"gpufleet.io/team": "research"}),
            pod("scratch", "notebook", None, {"nvidia.com/gpu": 1}, phase="Pending"),
            pod("scratch", "done", h100, {"nvidia.com/gpu": 1}, phase="Succeeded"),
            pod("scratch", "cpu-only", h100, {}),
            pod("serving", "chat", h100, {"nvidia.com/gpu": 1}, image="vllm/vllm-openai:v0.11.0"),
        ],
    )
    report = analyse(snapshot)
    teams = {team: [(p.name, p.queue, p.pool) for p in pods] for team, pods in report.by_team().items()}
    assert teams == {
        "nlp": [("train-abc", "nlp", "h100-train")],
        "research": [("adhoc", None, "h100-train")],
        "(serving)": [("chat", None, "h100-train")],
        "(no team label)": [("notebook", None, None)],
    }


def _risks(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], kueue: dict[str, list[dict[str, Any]]] | None
) -> set[tuple[str, str]]:
    snapshot = Snapshot(nodes=nodes, pods=pods, kueue_installed=kueue is not None, kueue=kueue or {})
    return {(r.reason, r.subject) for r in analyse(snapshot).risks}


FLEET = fleet_of(EXAMPLES / "fleet.yaml")
H100 = node_names(FLEET.pools["h100-train"])[0]
SERVE = node_names(FLEET.pools["h100-serve"])[0]
TEAM = {"gpufleet.io/team": "research"}
QUEUED = {**TEAM, "kueue.x-k8s.io/queue-name": "research"}
VLLM = "vllm/vllm-openai:v0.11.0"


@pytest.mark.parametrize(
    ("pods", "with_kueue", "expected"),
    [
        ([], False, {("KueueMissing", "cluster")}),
        ([], True, {("PoolWithoutQuota", "pool/h100-serve")}),
        ([pod("serving", "chat", SERVE, {"nvidia.com/gpu": 4}, image=VLLM)], True, set()),
        (
            [
                pod("serving", "chat", H100, {"nvidia.com/gpu": 4}, image=VLLM),
                pod("research", "t", H100, {"nvidia.com/gpu": 4}, labels=QUEUED),
            ],
            True,
            {("ServingBesideTraining", f"node/{H100}"), ("ServingBesideTraining", "pool/h100-train")},
        ),
        (
            [pod("research", "t", H100, {"nvidia.com/gpu": 2}, labels=TEAM)],
            True,
            {("GpuOutsideQueue", "namespace/research")},
        ),
        (
            [pod("misc", "t", H100, {"nvidia.com/gpu": 2}, labels={"kueue.x-k8s.io/queue-name": "q"})],
            True,
            {("MissingTeamLabel", "namespace/misc")},
        ),
    ],
    ids=[
        "no-kueue",
        "idle-pool-no-queue-covers",
        "serving-on-its-pool",
        "serving-beside-training",
        "outside-queue",
        "no-team",
    ],
)
def test_risks(pods: list[dict[str, Any]], with_kueue: bool, expected: set[tuple[str, str]]) -> None:
    kueue = kueue_objects(FLEET) if with_kueue else None
    if pods:  # the serving pool is recognised by its serving pods
        pods = [*pods, pod("serving", "chat-main", SERVE, {"nvidia.com/gpu": 1}, image=VLLM)]
    assert _risks(fake_nodes(FLEET), pods, kueue) == expected


def test_a_pool_no_queue_covers_is_flagged() -> None:
    kueue = kueue_objects(FLEET)
    kueue["ResourceFlavor"] = [f for f in kueue["ResourceFlavor"] if f["metadata"]["name"] != "l40s-dev"]
    assert ("PoolWithoutQuota", "pool/l40s-dev") in _risks(fake_nodes(FLEET), [], kueue)


def test_a_mig_layout_being_applied_is_flagged() -> None:
    nodes = fake_nodes(FLEET)
    for node in nodes:
        if "nvidia.com/mig.config.state" in node["metadata"]["labels"]:
            node["metadata"]["labels"]["nvidia.com/mig.config.state"] = "pending"
    assert ("MigNotConverged", "pool/a100-mig") in _risks(nodes, [], kueue_objects(FLEET))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8", 8), ("0", 0), ("2k", 2000), ("1Ki", 1024), ("500m", 0), ("", 0)],
    ids=["plain", "zero", "kilo", "kibi", "milli-is-not-a-device", "empty"],
)
def test_device_quantities_count_whole_units(text: str, expected: int) -> None:
    assert count(text) == expected


def test_json_report_round_trips() -> None:
    report = analyse(Snapshot(nodes=fake_nodes(FLEET), pods=[]))
    data = yaml.safe_load(yaml.safe_dump(report.as_dict()))
    assert [p["name"] for p in data["pools"]] == sorted(FLEET.pools)


DRA_POLICIES = [EXAMPLES / "fleet.yaml", Path(__file__).resolve().parents[1] / "e2e" / "fleet.yaml"]


@pytest.mark.parametrize("path", DRA_POLICIES, ids=[p.parent.name + "-" + p.stem for p in DRA_POLICIES])
def test_a_dra_cluster_is_read_from_its_resource_slices_and_the_starter_says_dra_on(path: Path) -> None:
    """The testbed's DRA nodes (no nvidia.com/* allocatable) and the slices its stand-in for NVIDIA's driver
    publishes: the scan finds every pool with its units, marks the DRA ones, and the starter policy asks
    for DRA and yields the same units."""
    from gpufleet.testbed import dra as testbed_dra

    text = path.read_text(encoding="utf-8").replace("dra: off", "dra: on")
    assert "dra: on" in text
    fleet = resolve(parse_policy(text, str(path)))
    nodes = [testbed_dra.without_device_plugin(n, fleet) for n in fake_nodes(fleet)]
    dra_pools = {cap.pool.name for cap in testbed_dra.dra_pools(fleet)}
    assert dra_pools, "the fleet hands nothing out through DRA"
    snapshot = Snapshot(nodes=nodes, pods=[], resource_slices=testbed_dra.resource_slices(fleet))
    report = analyse(snapshot)
    assert {p.name: p.units for p in report.pools} == {name: cap.units for name, cap in fleet.pools.items()}
    assert {p.name for p in report.pools if p.dra} == dra_pools
    for p in report.pools:
        assert p.gpus_per_node == fleet.pools[p.name].pool.gpusPerNode
    assert analyse(Snapshot(nodes=nodes, pods=[])).pools != report.pools  # the slices are what found them
    starter = resolve(parse_policy(report.starter_policy()))
    assert starter.policy.cluster.dra.value == "on"
    assert {n: c.units for n, c in starter.pools.items()} == {n: c.units for n, c in fleet.pools.items()}
