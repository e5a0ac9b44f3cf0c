"""GPUs a node announces through DRA: the ResourceSlices NVIDIA's driver publishes, read as quota units.

A node of a DRA pool advertises no ``nvidia.com/*`` extended resource (the driver's kubelet plugin
publishes its devices instead), so a scan that read allocatable only would miss the pool. Each device
of driver ``gpu.nvidia.com`` counts as the unit gpufleet's quota gives it: a ``type: gpu`` device as
``nvidia.com/gpu``, a ``type: mig`` device as ``nvidia.com/mig-<profile>`` (a ``+me`` instance under its
base profile, as the device plugin and the quota count it). The attribute names are the driver's
(``cmd/gpu-kubelet-plugin/deviceinfo.go`` and ``mig.go``; see ``gpufleet.testbed.dra``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from gpufleet.policy.dra import DRIVER

GPU = "nvidia.com/gpu"


@dataclass
class NodeDevices:
    """One node's DRA GPUs: units per quota resource, and the physical cards they sit on."""

    units: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    cards: set[str] = field(default_factory=set)


def _attribute(device: dict[str, Any], name: str) -> str:
    value = (device.get("attributes") or {}).get(name) or {}
    return str(value.get("string", "")) if isinstance(value, dict) else ""


def node_devices(slices: list[dict[str, Any]]) -> dict[str, NodeDevices]:
    """Per node, the GPUs its slices of NVIDIA's driver announce (other drivers' devices are not GPUs here)."""
    out: dict[str, NodeDevices] = defaultdict(NodeDevices)
    for s in slices:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if spec.get("driver") != DRIVER or not isinstance(node, str):
            continue
        for device in spec.get("devices") or []:
            if not isinstance(device, dict):
                continue
            kind = _attribute(device, "type")
            if kind == "gpu":
                out[node].units[GPU] += 1
                out[node].cards.add(_attribute(device, "uuid") or str(device.get("name")))
            elif kind == "mig":
                profile = _attribute(device, "profile").removesuffix("+me")
                out[node].units[f"nvidia.com/mig-{profile}"] += 1
                out[node].cards.add(_attribute(device, "parentUUID"))
    return dict(out)
