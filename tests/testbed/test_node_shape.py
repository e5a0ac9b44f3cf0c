"""The testbed's kwok nodes and the simulator's nodes are the same nodes (``policy.node_shape``).

Regression for issue 32: the testbed offered 64 CPU / 512Gi on every node and named count pools
``<pool>-0``, the simulator ``(gpus + 1) × 16`` CPU and ``<pool>-01``, and only the simulator's nodes
carried ``gpufleet.io/gpu``, on which a trace's ``gpu_models`` pin jobs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.policy import load_policy, resolve
from gpufleet.simulate.nodes import fleet_nodes
from gpufleet.testbed import nodes
from gpufleet.twin.resources import parse_quantity

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
E2E = Path(__file__).resolve().parents[1] / "e2e"
POLICIES = sorted(EXAMPLES.glob("*.yaml")) + sorted(E2E.glob("*fleet*.yaml"))


@pytest.mark.parametrize("path", POLICIES, ids=[p.stem for p in POLICIES])
def test_testbed_and_simulated_nodes_offer_the_same_resources_and_labels(path: Path) -> None:
    fleet = resolve(load_policy(path))
    fake = {n["metadata"]["name"]: n for n in nodes.fake_nodes(fleet)}
    simulated = {n.name: n for pool in fleet_nodes(fleet, tainted=True).values() for n in pool.nodes}
    assert sorted(fake) == sorted(simulated)
    for name, node in fake.items():
        spec = simulated[name]
        labels = dict(node["metadata"]["labels"])
        assert labels.pop("type") == "kwok"
        assert labels == spec.label_map(), name
        offered = {r: parse_quantity(q, r) for r, q in node["status"]["allocatable"].items()}
        assert offered.pop("pods") == 110
        assert offered == spec.allocatable(), name
        taints = [{"key": t.key, "value": t.value, "effect": t.effect.value} for t in spec.taints]
        assert node["spec"]["taints"] == taints, name


def test_a_pinned_model_is_on_the_testbed_nodes_under_its_catalogue_name() -> None:
    fleet = resolve(load_policy(EXAMPLES / "fleet.yaml"))
    models = {n["metadata"]["labels"]["gpufleet.io/gpu"] for n in nodes.fake_nodes(fleet)}
    assert models == {cap.gpu.name for cap in fleet.pools.values()}
