"""Fake GPU nodes for kwok: what a policy's pools look like once the GPU Operator has converged.

Each node carries what the real components would have put there: GPU Feature Discovery's labels
(``nvidia.com/gpu.product``, ``gpu.count``, ``gpu.memory``, ``mig.strategy``, per-profile MIG counts,
``gpu.sharing-strategy`` and ``gpu.replicas``), the MIG Manager's ``mig.config.state=success``, the
device plugin's extended resources in capacity and allocatable, and gpufleet's own pool labels and
taints exactly as ``gpufleet render`` writes them. Names, CPU, memory and every label but kwok's own
``type`` come from ``policy.node_shape``, as the simulator's nodes do, so both worlds offer the same. kwok manages only nodes carrying ``KWOK_ANNOTATION``,
so a testbed never touches a real node.
"""

from __future__ import annotations

from gpufleet.policy import node_shape
from gpufleet.policy.capacity import PoolCapacity
from gpufleet.policy.fleet import Fleet
from gpufleet.render.common import Obj, pool_taints
from gpufleet.render.gpu_operator import node_labels

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_VALUE = "fake"
node_names = node_shape.node_names
gfd_labels = node_shape.gfd_labels


def capacity(cap: PoolCapacity) -> dict[str, str]:
    """What one node offers (``policy.node_shape``, the simulator's nodes too), as Node quantities."""
    return node_shape.quantities(node_shape.allocatable(cap))


def fake_node(cap: PoolCapacity, name: str) -> Obj:
    labels = {"type": "kwok", **node_shape.labels(cap, name), **node_labels(cap)}
    resources = capacity(cap)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {KWOK_ANNOTATION: KWOK_VALUE}},
        "spec": {"taints": pool_taints(cap.pool)},
        "status": {"capacity": resources, "allocatable": dict(resources)},
    }


def fake_nodes(fleet: Fleet) -> list[Obj]:
    """Every node of every pool, in policy order."""
    return [fake_node(cap, name) for cap in fleet.pools.values() for name in node_names(cap)]
