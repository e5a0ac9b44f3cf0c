"""Node labels and taints as server-side-apply patches, or node-pool arguments where nodes are a count.

A rendered Node holds only the fields gpufleet owns (labels and taints), so ``kubectl apply
--server-side --field-manager=gpufleet`` changes nothing else on the node.
"""

from __future__ import annotations

from gpufleet.policy.capacity import PoolCapacity
from gpufleet.policy.fleet import Fleet
from gpufleet.render.common import MANAGED_BY, Obj, obj, pool_taints
from gpufleet.render.gpu_operator import node_labels


def node_patches(fleet: Fleet) -> list[Obj]:
    out: list[Obj] = []
    for cap in fleet.pools.values():
        for name in cap.pool.node_names:
            out.append(
                obj(
                    "v1",
                    "Node",
                    {"name": name, "labels": {**MANAGED_BY, **node_labels(cap)}},
                    spec={"taints": pool_taints(cap.pool)},
                )
            )
    return out


def nodepool_arguments(cap: PoolCapacity, provider: str) -> str:
    """The labels and taints as the cloud's node-pool flags, for pools given as a node count."""
    labels = {k: v for k, v in node_labels(cap).items() if k not in cap.pool.nodeLabels}
    taints = pool_taints(cap.pool)
    label_text = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    taint_text = ",".join(f"{t['key']}={t['value']}:{t['effect']}" for t in taints)
    if provider == "aks":
        return f"az aks nodepool update --labels {label_text}  # taints at creation: --node-taints {taint_text}"
    if provider == "eks":
        return f"eksctl nodegroup: labels {label_text}; taints {taint_text}"
    if provider == "gke":
        return f"gcloud container node-pools create ... --node-labels={label_text} --node-taints={taint_text}"
    return f"kubectl label node <each node> {label_text.replace(',', ' ')}; kubectl taint node <each node> {taint_text}"
