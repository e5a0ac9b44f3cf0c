"""Fake GPU nodes for kwok: what a policy's pools look like once the GPU Operator has converged.

Each node carries what the real components would have put there: GPU Feature Discovery's labels
(``nvidia.com/gpu.product``, ``gpu.count``, ``gpu.memory``, ``mig.strategy``, per-profile MIG counts,
``gpu.sharing-strategy`` and ``gpu.replicas``), the MIG Manager's ``mig.config.state=success``, the
device plugin's extended resources in capacity and allocatable, and gpufleet's own pool labels and
taints exactly as ``gpufleet render`` writes them. kwok manages only nodes carrying ``KWOK_ANNOTATION``,
so a testbed never touches a real node.
"""

from __future__ import annotations

from gpufleet.policy.capacity import SHARED_GPU, PoolCapacity
from gpufleet.policy.fleet import Fleet
from gpufleet.render.common import Obj, pool_taints
from gpufleet.render.gpu_operator import node_labels

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_VALUE = "fake"
NODE_CPU = "64"
NODE_MEMORY = "512Gi"
NODE_PODS = "110"


def node_names(cap: PoolCapacity) -> tuple[str, ...]:
    """The pool's node names, or ``<pool>-<index>`` for a pool given as a count."""
    pool = cap.pool
    return pool.node_names or tuple(f"{pool.name}-{i}" for i in range(pool.node_count))


def gfd_labels(cap: PoolCapacity) -> dict[str, str]:
    """GPU Feature Discovery's and the MIG Manager's labels for one node of the pool."""
    gpu, decision, per_node = cap.gpu, cap.decision, cap.pool.gpusPerNode
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": gpu.product,
        "nvidia.com/gpu.count": str(per_node),
        "nvidia.com/gpu.memory": str(gpu.memory_gib * 1024),
        "nvidia.com/gpu.family": gpu.architecture.lower(),
        "nvidia.com/mig.capable": "true" if gpu.has_mig else "false",
        "nvidia.com/gpu.replicas": str(per_node),
        "nvidia.com/gpu.sharing-strategy": "none",
    }
    if decision.mode == "mig":
        labels["nvidia.com/mig.strategy"] = "mixed"
        labels["nvidia.com/mig.config.state"] = "success"
        for resource in cap.resources:
            labels[f"{resource}.count"] = str(cap.units_per_node(resource))
    elif decision.mode == "timeslice" and decision.replicas is not None:
        labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
        labels["nvidia.com/gpu.replicas"] = str(per_node * decision.replicas)
        if SHARED_GPU not in cap.units:  # not renamed: GFD marks the product as shared instead
            labels["nvidia.com/gpu.product"] = f"{gpu.product}-SHARED"
    elif gpu.has_mig:
        labels["nvidia.com/mig.config.state"] = "success"
    return labels


def capacity(cap: PoolCapacity) -> dict[str, str]:
    """What the node offers: generous CPU and memory, and the pool's GPU units for one node."""
    out = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS}
    for resource in cap.resources:
        out[resource] = str(cap.units_per_node(resource))
    return out


def fake_node(cap: PoolCapacity, name: str) -> Obj:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        **gfd_labels(cap),
        **node_labels(cap),
    }
    if cap.pool.region:
        labels["topology.kubernetes.io/region"] = cap.pool.region
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
