"""The testbed's stand-in for NVIDIA's DRA driver, without the control plane (the e2e tests run it for real).

Every example policy is taken with DRA forced on: each DRA pool's slices must announce exactly the units
the pool yields, the device names must have the driver's shape, and the nodes of those pools must lose
the device plugin's resources while every other node keeps them.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from gpufleet.gpus import GpuModel, models
from gpufleet.kube import rest_plural
from gpufleet.policy import load_policy, resolve
from gpufleet.policy.fleet import Fleet
from gpufleet.policy.model import DraMode
from gpufleet.render import dra as render_dra
from gpufleet.testbed import dra, nodes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POLICIES = sorted(EXAMPLES.glob("*.yaml"))
# The driver's device names (cmd/gpu-kubelet-plugin/deviceinfo.go CanonicalName, mig.go ToCanonicalName).
GPU_NAME = re.compile(r"^gpu-\d+$")
MIG_NAME = re.compile(r"^gpu-\d+-mig-[a-z0-9-]+-\d+-\d+$")


def _fleet(path: Path, mode: DraMode) -> Fleet:
    policy = load_policy(path)
    cluster = policy.cluster.model_copy(update={"dra": mode, "kubernetes": "1.36"})
    return resolve(policy.model_copy(update={"cluster": cluster}))


@pytest.mark.parametrize("path", POLICIES, ids=[p.stem for p in POLICIES])
def test_slices_announce_exactly_each_dra_pools_units_in_the_drivers_shape(path: Path) -> None:
    fleet = _fleet(path, DraMode.ON)
    slices = dra.resource_slices(fleet)
    pools = {cap.pool.name: cap for cap in render_dra.dra_pools(fleet)}
    assert sorted(s["spec"]["nodeName"] for s in slices) == sorted(
        n for cap in pools.values() for n in nodes.node_names(cap)
    )
    announced: Counter[tuple[str, str]] = Counter()
    for s in slices:
        spec = s["spec"]
        assert spec["driver"] == "gpu.nvidia.com" and spec["pool"]["name"] == spec["nodeName"]
        names = [d["name"] for d in spec["devices"]]
        assert names == sorted(set(names))
        cap = pools[s["metadata"]["labels"]["gpufleet.io/pool"]]
        for device in spec["devices"]:
            attrs = device["attributes"]
            assert attrs["productName"]["string"].replace(" ", "-") == cap.gpu.product
            if attrs["type"]["string"] == "mig":
                assert MIG_NAME.match(device["name"]), device["name"]
                assert attrs["parentUUID"]["string"].startswith("GPU-") and attrs["uuid"]["string"].startswith("MIG-")
                base = attrs["profile"]["string"].removesuffix("+me")
                announced[(cap.pool.name, f"nvidia.com/mig-{base}")] += 1
            else:
                assert attrs["type"]["string"] == "gpu" and GPU_NAME.match(device["name"]), device["name"]
                assert device["capacity"]["memory"]["value"] == str(cap.gpu.memory_gib << 30)
                announced[(cap.pool.name, "nvidia.com/gpu")] += 1
    assert announced == Counter({(p, r): n for p, cap in pools.items() for r, n in cap.units.items()})


@pytest.mark.parametrize("path", POLICIES, ids=[p.stem for p in POLICIES])
@pytest.mark.parametrize("mode", [DraMode.ON, DraMode.OFF])
def test_only_dra_pool_nodes_lose_the_device_plugins_resources(path: Path, mode: DraMode) -> None:
    fleet = _fleet(path, mode)
    dra_pools = {cap.pool.name for cap in dra.dra_pools(fleet)}
    assert bool(dra_pools) == (mode is DraMode.ON and bool(render_dra.dra_pools(fleet)))
    assert dra.controllers(fleet) == (("resourceclaim-controller",) if mode is DraMode.ON else ())
    for node in nodes.fake_nodes(fleet):
        after = dra.without_device_plugin(node, fleet)
        gpus = [r for r in after["status"]["allocatable"] if r.startswith("nvidia.com/")]
        if node["metadata"]["labels"]["gpufleet.io/pool"] in dra_pools:
            assert not gpus and after["status"]["capacity"] == after["status"]["allocatable"]
        else:
            assert after == node


@pytest.mark.parametrize("model", models(), ids=lambda m: m.name)
def test_the_nvml_name_is_the_gfd_product_with_spaces(model: GpuModel) -> None:
    """GPU Feature Discovery writes NVML's name with spaces as dashes; the stand-in inverts that per card."""
    assert dra.product_name(model).replace(" ", "-") == model.product


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("ResourceSlice", "resourceslices"),
        ("DeviceClass", "deviceclasses"),
        ("ResourceClaimTemplate", "resourceclaimtemplates"),
    ],
)
def testrest_plural_the_applied_kinds(kind: str, plural: str) -> None:
    assert rest_plural(kind) == plural
