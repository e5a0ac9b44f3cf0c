"""Which nodes and GPUs a workload's Pods hold: what an allocation records as its placements.

Pods are read as the API server returns them (plain mappings); an attempt owns the pods created
between its reservation and its end, because the watch streams of Pods and Workloads may lag each
other while it runs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from gpufleet.ledger.records import Allocation, Placement, parse_time

GPU_PREFIX = "nvidia.com/"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"


def quantity(value: Any) -> int:
    """GPU and MIG quantities are whole numbers; anything else counts as 0."""
    try:
        return int(str(value))
    except ValueError:
        return 0


def pod_gpus(pod: Mapping[str, Any]) -> tuple[str, int]:
    """(GPU resource, count) a pod asks for, summed over its containers; ("", 0) for none."""
    totals: dict[str, int] = {}
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        merged = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
        for name, value in merged.items():
            if name.startswith(GPU_PREFIX):
                totals[name] = totals.get(name, 0) + quantity(value)
    if not totals:
        return "", 0
    name = min(totals, key=lambda n: (n != "nvidia.com/gpu", n))  # whole GPUs first, then by name
    return name, totals[name]


def placements(
    pods: Iterable[Mapping[str, Any]], node_models: Mapping[str, str], since: datetime, until: datetime | None
) -> tuple[tuple[Placement, ...], datetime | None]:
    """Per-node GPUs of the bound pods created within an attempt, and the earliest pod start."""
    per_node: dict[str, int] = {}
    started: datetime | None = None
    for pod in pods:
        meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
        created = meta.get("creationTimestamp")
        if not spec.get("nodeName") or created is None:
            continue
        born = parse_time(created)
        if born < since or (until is not None and born >= until):
            continue
        per_node[spec["nodeName"]] = per_node.get(spec["nodeName"], 0) + pod_gpus(pod)[1]
        if status.get("startTime"):
            start = parse_time(status["startTime"])
            started = start if started is None else min(started, start)
    result = tuple(Placement(node, n, (), node_models.get(node, "")) for node, n in sorted(per_node.items()))
    return result, started


def merge_placements(old: tuple[Placement, ...], new: tuple[Placement, ...]) -> tuple[Placement, ...]:
    """Nodes once seen stay recorded (pods are deleted when a job ends); newer counts win."""
    merged = {p.node: p for p in old}
    merged.update({p.node: p for p in new})
    return tuple(merged[n] for n in sorted(merged))


def settle(allocation: Allocation, pods: Collection[Mapping[str, Any]], node_models: Mapping[str, str]) -> Allocation:
    """Once an attempt has ended, its pods are exactly those created within it.

    While it runs, watch streams may lag each other, so a pod of the next attempt can be counted
    on an open one; the end time settles that. Without its pods at hand (they were seen before a
    restart), the nodes already recorded stay.
    """
    if allocation.quota_reserved is None or allocation.finished is None:
        return allocation
    found, started = placements(pods, node_models, allocation.quota_reserved, allocation.finished)
    if not found:
        return allocation
    return replace(allocation, placements=found, started=started or allocation.started)


def with_pods(allocation: Allocation, pods: Iterable[Mapping[str, Any]], node_models: Mapping[str, str]) -> Allocation:
    """The allocation with the nodes its pods were bound to (pods of that attempt only)."""
    if allocation.quota_reserved is None:
        return allocation
    found, started = placements(pods, node_models, allocation.quota_reserved, allocation.finished)
    return replace(
        allocation,
        placements=merge_placements(allocation.placements, found),
        started=allocation.started or started,
    )
