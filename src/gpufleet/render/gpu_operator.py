"""GPU Operator configuration: the MIG layouts (mig-parted format) and the time-slicing config.

The operator applies a layout to every node labelled ``nvidia.com/mig.config=<name>`` and a
device-plugin config to every node labelled ``nvidia.com/device-plugin.config=<key>``; the node
labels themselves come from ``node_labels``. The ClusterPolicy must point at these ConfigMaps
(``migManager.config.name``, ``devicePlugin.config.name``) and use ``mig.strategy: mixed``.
"""

from __future__ import annotations

import yaml

from gpufleet.policy.capacity import PoolCapacity
from gpufleet.policy.fleet import Fleet
from gpufleet.render.common import Obj, meta, obj

NAMESPACE = "gpu-operator"
MIG_CONFIGMAP = "gpufleet-mig-config"
TIMESLICING_CONFIGMAP = "gpufleet-time-slicing"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"


def mig_config_name(cap: PoolCapacity) -> str:
    """The operator's own name for a standard layout, otherwise one named after the pool."""
    return cap.decision.layout_name or f"gpufleet-{cap.name}"


def _dump(data: object) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def mig_configmap(fleet: Fleet) -> Obj | None:
    mig_pools = [p for p in fleet.pools.values() if p.decision.mode == "mig" and p.decision.layout]
    if not mig_pools:
        return None
    configs: dict[str, list[dict[str, object]]] = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    for cap in mig_pools:
        assert cap.decision.layout is not None
        configs[mig_config_name(cap)] = [
            {"devices": "all", "mig-enabled": True, "mig-devices": dict(cap.decision.layout)}
        ]
    data = {"version": "v1", "mig-configs": configs}
    return obj("v1", "ConfigMap", meta(MIG_CONFIGMAP, NAMESPACE), data={"config.yaml": _dump(data)})


def timeslicing_configmap(fleet: Fleet) -> Obj | None:
    pools = [p for p in fleet.pools.values() if p.decision.mode == "timeslice"]
    if not pools:
        return None
    data: dict[str, str] = {}
    for cap in pools:
        renamed = "nvidia.com/gpu.shared" in cap.units
        data[cap.name] = _dump(
            {
                "version": "v1",
                "flags": {"migStrategy": "none"},
                "sharing": {
                    "timeSlicing": {
                        "renameByDefault": renamed,
                        "failRequestsGreaterThanOne": True,
                        "resources": [{"name": "nvidia.com/gpu", "replicas": cap.decision.replicas}],
                    }
                },
            }
        )
    return obj("v1", "ConfigMap", meta(TIMESLICING_CONFIGMAP, NAMESPACE), data=data)


def node_labels(cap: PoolCapacity) -> dict[str, str]:
    """Labels a pool's nodes carry: the pool selector plus the operator's per-node config switch."""
    labels = {"gpufleet.io/pool": cap.name, **cap.pool.selector}
    if cap.decision.mode == "mig":
        labels[MIG_CONFIG_LABEL] = mig_config_name(cap)
    elif cap.decision.mode == "timeslice":
        labels[DEVICE_PLUGIN_CONFIG_LABEL] = cap.name
    elif cap.gpu.mig is not None:
        labels[MIG_CONFIG_LABEL] = "all-disabled"  # a MIG-capable card used whole: keep MIG off
    return labels
