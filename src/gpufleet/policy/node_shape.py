"""What one node of a pool is, as the scheduler sees it: its name, allocatable resources and labels.

The one source of truth for both worlds that run a policy's pools without real machines: the
simulator's nodes (``simulate.nodes``) and the testbed's kwok nodes (``testbed.nodes``). Before, each
had its own (64 CPU / 512Gi on the testbed whatever the card count, ``(gpus + 1) × 16`` CPU in the
simulator, different names, the GPU-model label on one side only), so the same pod could fit or score
differently on the two sides of a differential.

The policy says nothing about CPU and memory, so every node gets room for ``CPU_PER_GPU_MILLI`` and
``MEMORY_PER_GPU`` per card plus one card's worth for the system: GPU jobs are limited by their GPUs,
as in the fleets gpufleet is made for. The labels are what the real components put on a converged
node (GPU Feature Discovery's ``nvidia.com/*`` labels, the kubelet's ``kubernetes.io/*`` ones) and
``GPU_MODEL_LABEL``, the catalogue name of the card, on which a trace's ``gpu_models`` become required
node affinity. gpufleet's own pool labels and taints are ``render``'s (``render.gpu_operator``,
``render.common``), which both worlds add on top.
"""

from __future__ import annotations

from gpufleet.policy.capacity import SHARED_GPU, PoolCapacity

CPU_PER_GPU_MILLI = 16_000
MEMORY_PER_GPU = 128 << 30  # bytes
PODS_PER_NODE = 110  # the kubelet's default maxPods
GPU_MODEL_LABEL = "gpufleet.io/gpu"  # the catalogue name of the node's cards (trace gpu_models pin on it)
GIB = 1 << 30


def node_names(cap: PoolCapacity) -> tuple[str, ...]:
    """The policy's node names, or ``<pool>-01…`` where it gives a count."""
    pool = cap.pool
    return pool.node_names or tuple(f"{pool.name}-{i:02d}" for i in range(1, pool.node_count + 1))


def cpu_milli(cap: PoolCapacity) -> int:
    return (cap.pool.gpusPerNode + 1) * CPU_PER_GPU_MILLI


def memory(cap: PoolCapacity) -> int:
    """Bytes, a whole number of GiB."""
    return (cap.pool.gpusPerNode + 1) * MEMORY_PER_GPU


def allocatable(cap: PoolCapacity) -> dict[str, int]:
    """One node's allocatable: CPU in milli, memory in bytes, pods, and its GPU units per resource."""
    out = {"cpu": cpu_milli(cap), "memory": memory(cap), "pods": PODS_PER_NODE}
    for resource in cap.resources:
        out[resource] = cap.units_per_node(resource)
    return out


def quantities(amounts: dict[str, int]) -> dict[str, str]:
    """``allocatable`` as a Node's status writes it (``80``, ``640Gi``, counts as they are)."""
    out = {}
    for resource, n in amounts.items():
        if resource == "cpu":
            out[resource] = str(n // 1000) if n % 1000 == 0 else f"{n}m"
        elif resource == "memory":
            out[resource] = f"{n // GIB}Gi" if n % GIB == 0 else str(n)
        else:
            out[resource] = str(n)
    return out


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


def labels(cap: PoolCapacity, name: str) -> dict[str, str]:
    """One node's labels, but for ``render``'s pool labels: the kubelet's, GFD's and the GPU model."""
    out = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **gfd_labels(cap),
        GPU_MODEL_LABEL: cap.gpu.name,
    }
    if cap.pool.region:
        out["topology.kubernetes.io/region"] = cap.pool.region
    return out
