"""A starter policy from what a scan found: the pools as they are, the teams as they run today.

Each pool keeps its nodes, card, slicing (a MIG layout by its GPU Operator name when it is a standard
one, else the per-card counts read from the node labels) and node-pool label. A pool whose pods are
all serving becomes the serving pool. Each team seen gets, as its first quota, what it uses today on
each pool. Pools whose card the catalogue does not know are left out, and the header says so. The
result passes ``gpufleet plan``'s checks or this module raises: a starter that does not load would
only move the problem.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import yaml

from gpufleet.gpus import lookup, standard_layouts
from gpufleet.policy import parse_policy
from gpufleet.policy.slicing import SlicingMode
from gpufleet.scan.fleet import GPU_PREFIX, GpuPod, NodePool, slug

PROVIDER_LABELS = (
    ("kubernetes.azure.com/agentpool", "aks"),
    ("eks.amazonaws.com/nodegroup", "eks"),
    ("cloud.google.com/gke-nodepool", "gke"),
)


def _provider(pools: list[NodePool]) -> str:
    selectors = {p.selector[0] for p in pools if p.selector}
    return next((provider for label, provider in PROVIDER_LABELS if label in selectors), "onprem")


def _mig_layout(pool: NodePool) -> str | dict[str, int]:
    model = lookup(pool.model or "")
    if model is not None and pool.mig_config in standard_layouts(model):
        return str(pool.mig_config)
    cards = max(1, pool.gpus_per_node * len(pool.nodes))
    return {
        resource.removeprefix(f"{GPU_PREFIX}mig-"): n // cards
        for resource, n in pool.units.items()
        if resource.startswith(f"{GPU_PREFIX}mig-") and n // cards
    }


def _pool_entry(pool: NodePool, role: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": pool.name,
        "gpu": pool.model,
        "nodes": list(pool.nodes),
        "gpusPerNode": pool.gpus_per_node,
        "role": role,
    }
    if pool.selector and pool.selector[0] != "gpufleet.io/pool":
        entry["nodeLabels"] = {pool.selector[0]: pool.selector[1]}
    if role == "serving":
        return entry
    if pool.sharing is SlicingMode.MIG:
        entry["slicing"] = {"mode": "mig", "layout": _mig_layout(pool)}
    elif pool.sharing is SlicingMode.TIMESLICE and pool.replicas and pool.replicas >= 2:
        entry["slicing"] = {"mode": "timeslice", "replicas": pool.replicas}
    else:
        entry["slicing"] = {"mode": "full"}
    return entry


def _quota(pool: NodePool, used: dict[str, int]) -> dict[str, Any]:
    if pool.sharing is SlicingMode.MIG:
        return {"mig": {r.removeprefix(f"{GPU_PREFIX}mig-"): n for r, n in sorted(used.items()) if r in pool.units}}
    return {"gpus": sum(n for r, n in used.items() if r in pool.units)}


def starter_policy(pools: list[NodePool], pods: list[GpuPod], serving: set[str], team_label: str) -> str:
    known = [p for p in pools if p.model is not None]
    skipped = [p for p in pools if p.model is None]
    usage: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    namespaces: dict[str, set[str]] = defaultdict(set)
    for pod in pods:
        if pod.team and not pod.serving:
            team = slug(pod.team)
            namespaces[team].add(pod.namespace)
            if pod.pool:
                for resource, n in pod.requests.items():
                    usage[team][pod.pool][resource] += n
    serving_pool = next((p for p in known if p.name in serving), None)
    policy: dict[str, Any] = {
        "apiVersion": "gpufleet.io/v1alpha1",
        "kind": "FleetPolicy",
        "cluster": {"provider": _provider(pools), "labels": {"team": team_label}}
        | ({"dra": "on"} if any(p.dra for p in known) else {}),
        "pools": [_pool_entry(p, "serving" if p is serving_pool else "training") for p in known],
        "teams": [
            {
                "name": team,
                "namespaces": sorted(namespaces[team]),
                "quota": {
                    pool.name: _quota(pool, usage[team][pool.name])
                    for pool in known
                    if pool is not serving_pool and usage[team].get(pool.name)
                },
            }
            for team in sorted(namespaces)
        ],
    }
    if serving_pool is not None:
        ns = sorted({p.namespace for p in pods if p.serving and p.pool == serving_pool.name})
        policy["serving"] = {"pool": serving_pool.name, "namespace": ns[0] if ns else "serving"}
    header = ["# Starter policy written by `gpufleet scan`: today's pools, and today's use as each team's quota."]
    header += [
        f"# Left out: pool {p.name} ({p.product or 'no product label'} is not in the GPU catalogue)." for p in skipped
    ]
    text = "\n".join(header) + "\n" + yaml.safe_dump(policy, sort_keys=False, default_flow_style=None)
    parse_policy(text, "<starter policy>")
    return text
