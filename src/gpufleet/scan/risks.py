"""The risks a first look at a GPU cluster should flag, each with a machine reason and a message.

- ``KueueMissing``: no Kueue API, so nothing queues: whoever applies first holds the card.
- ``ServingBesideTraining``: a vLLM pod shares a node with other GPU work (latency suffers), or
  runs on a pool Kueue hands out (a queued job can land beside it).
- ``GpuOutsideQueue``: GPU pods that no LocalQueue admitted (serving is meant to be outside; the rest is not).
- ``MissingTeamLabel``: GPU pods whose team nobody can tell (no label on the pod or its namespace).
- ``PoolWithoutQuota``: a batch pool that no ClusterQueue or Cohort gives quota, so queued work never
  reaches it.
- ``MigNotConverged``: the MIG Manager has not (yet) applied the requested layout.

Risks are ordered by reason, then subject: one sort key.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from gpufleet.policy.slicing import SlicingMode
from gpufleet.scan.fleet import GpuPod, NodePool
from gpufleet.scan.quantity import count
from gpufleet.scan.snapshot import Snapshot, labels, name


@dataclass(frozen=True)
class Risk:
    reason: str
    subject: str
    message: str


def _flavor_pools(snapshot: Snapshot, pools: list[NodePool]) -> dict[str, set[str]]:
    """ResourceFlavor name -> the pools all of whose nodes carry the flavor's node labels."""
    node_labels = {name(n): labels(n) for n in snapshot.nodes}
    out: dict[str, set[str]] = {}
    for flavor in snapshot.kueue_objects("ResourceFlavor"):
        wanted = (flavor.get("spec") or {}).get("nodeLabels") or {}
        out[name(flavor)] = {
            p.name
            for p in pools
            if all(all(node_labels.get(n, {}).get(k) == v for k, v in wanted.items()) for n in p.nodes)
        }
    return out


def pool_quota(snapshot: Snapshot, pools: list[NodePool]) -> dict[str, int]:
    """Nominal quota, in the pool's own units, that ClusterQueues and Cohorts hold on each pool."""
    targets = _flavor_pools(snapshot, pools)
    units = {p.name: set(p.units) for p in pools}
    quota: dict[str, int] = defaultdict(int)
    for holder in [*snapshot.kueue_objects("ClusterQueue"), *snapshot.kueue_objects("Cohort")]:
        for group in (holder.get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for pool in targets.get(str(flavor.get("name")), set()):
                    for resource in flavor.get("resources") or []:
                        if resource.get("name") in units[pool]:
                            quota[pool] += count(resource.get("nominalQuota", 0))
    return {p.name: quota.get(p.name, 0) for p in pools}


def serving_pools(pools: list[NodePool], pods: list[GpuPod]) -> set[str]:
    """Pools where GPU pods run and every one of them is a serving pod."""
    kinds: dict[str, set[bool]] = defaultdict(set)
    for pod in pods:
        if pod.pool:
            kinds[pod.pool].add(pod.serving)
    return {p.name for p in pools if kinds.get(p.name) == {True}}


def _by_namespace(pods: list[GpuPod]) -> dict[str, list[GpuPod]]:
    out: dict[str, list[GpuPod]] = defaultdict(list)
    for pod in pods:
        out[pod.namespace].append(pod)
    return out


def _gpus(pods: list[GpuPod]) -> str:
    total: dict[str, int] = defaultdict(int)
    for pod in pods:
        for resource, n in pod.requests.items():
            total[resource] += n
    return ", ".join(f"{n}× {r.removeprefix('nvidia.com/')}" for r, n in sorted(total.items()))


def _risks(snapshot: Snapshot, pools: list[NodePool], pods: list[GpuPod]) -> Iterator[Risk]:
    if not snapshot.kueue_installed:
        yield Risk("KueueMissing", "cluster", "Kueue is not installed: GPUs go to whoever applies a manifest first")
    quota = pool_quota(snapshot, pools) if snapshot.kueue_installed else {}
    serving = serving_pools(pools, pods)

    by_node: dict[str, list[GpuPod]] = defaultdict(list)
    for pod in pods:
        if pod.node:
            by_node[pod.node].append(pod)
    for node, here in by_node.items():
        if any(p.serving for p in here) and not all(p.serving for p in here):
            others = sorted(f"{p.namespace}/{p.name}" for p in here if not p.serving)
            yield Risk("ServingBesideTraining", f"node/{node}", f"serving shares the node with {', '.join(others)}")
    for pool in pools:
        if quota.get(pool.name, 0) > 0 and any(p.serving and p.pool == pool.name for p in pods):
            yield Risk(
                "ServingBesideTraining",
                f"pool/{pool.name}",
                f"serving runs on a pool Kueue hands out ({quota[pool.name]} units of quota): queued jobs can land beside it",
            )

    for ns, here in _by_namespace([p for p in pods if not p.serving and p.queue is None]).items():
        yield Risk("GpuOutsideQueue", f"namespace/{ns}", f"{len(here)} pod(s) hold {_gpus(here)} without a queue")
    for ns, here in _by_namespace([p for p in pods if p.team is None and not p.serving]).items():
        yield Risk(
            "MissingTeamLabel", f"namespace/{ns}", f"{len(here)} GPU pod(s) carry no team label (pod or namespace)"
        )

    if snapshot.kueue_installed:
        for pool in pools:
            if pool.name not in serving and quota.get(pool.name, 0) == 0:
                yield Risk(
                    "PoolWithoutQuota",
                    f"pool/{pool.name}",
                    "no ClusterQueue or Cohort gives quota on this pool: queued work never lands here",
                )
    for pool in pools:
        if pool.sharing is SlicingMode.MIG and pool.mig_state not in (None, "success"):
            yield Risk(
                "MigNotConverged", f"pool/{pool.name}", f"mig.config.state is {pool.mig_state} for {pool.mig_config}"
            )


def find_risks(snapshot: Snapshot, pools: list[NodePool], pods: list[GpuPod]) -> list[Risk]:
    return sorted(_risks(snapshot, pools, pods), key=lambda r: (r.reason, r.subject, r.message))
