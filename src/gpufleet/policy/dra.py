"""Which cards a fleet hands out through DRA, and the names every part of gpufleet gives them.

The renderer writes a DeviceClass and a ResourceClaimTemplate per GPU model and unit; the admission
rules judge a pod by the template names it uses; the twin counts a claim as Kueue's
``deviceClassMappings`` do. All three read the names from here, so a template the renderer writes is
the template the rules and the twin know, and none of those features imports another.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.policy.capacity import PoolCapacity
from gpufleet.policy.fleet import Fleet
from gpufleet.policy.model import DraMode

DRIVER = "gpu.nvidia.com"  # NVIDIA's DRA driver (k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin/main.go)
FIRST_DRA_MINOR = 34  # resource.k8s.io/v1 and DynamicResourceAllocation GA (Kubernetes 1.34)
#: Kueue v0.19.2 ``pkg/config/validation.go``: a deviceClassMapping names at most this many classes.
MAX_CLASSES_PER_MAPPING = 8


def kubernetes_minor(version: str) -> int:
    return int(version.split(".")[1])


def enabled(fleet: Fleet) -> bool:
    """DRA is used when the policy does not turn it off and the cluster serves ``resource.k8s.io/v1``."""
    cluster = fleet.policy.cluster
    if cluster.dra is DraMode.OFF:
        return False
    return kubernetes_minor(cluster.kubernetes) >= FIRST_DRA_MINOR


def dra_pools(fleet: Fleet) -> list[PoolCapacity]:
    """The pools whose cards are handed out through DRA: queued pools cut whole or into MIG instances."""
    # time-slicing through DRA needs per-request opaque config, which Kueue's DRA accounting does not support
    if not enabled(fleet):
        return []
    return [p for p in fleet.queued_pools() if p.decision.mode in ("full", "mig")]


def class_name(cap: PoolCapacity, resource: str) -> str:
    """The DeviceClass of ``resource`` (a quota unit) on this pool's card: one per GPU model and unit."""
    unit = resource.removeprefix("nvidia.com/").removeprefix("mig-")
    return f"gpufleet-{cap.gpu.name.lower()}-{unit.replace('.', '-')}"


def template_name(cap: PoolCapacity, resource: str) -> str:
    """The ResourceClaimTemplate (one device of the class) in each namespace of a team that reaches the pool."""
    return class_name(cap, resource).removeprefix("gpufleet-")


@dataclass(frozen=True)
class ClaimUnit:
    """One quota unit of one DRA pool as a claim: its DeviceClass, its template and the resource it counts as."""

    pool: str
    resource: str  # the quota resource Kueue maps the class to (nvidia.com/gpu, nvidia.com/mig-1g.10gb)
    device_class: str
    template: str
    per_node: int  # units of ``resource`` one node of the pool holds


def claim_units(fleet: Fleet) -> list[ClaimUnit]:
    """Every (pool, unit) handed out through DRA, in policy order, units sorted."""
    return [
        ClaimUnit(cap.name, r, class_name(cap, r), template_name(cap, r), cap.units_per_node(r))
        for cap in dra_pools(fleet)
        for r in sorted(cap.units)
    ]


def class_mappings(fleet: Fleet) -> dict[str, list[str]]:
    """Kueue's deviceClassMappings as a dict: quota resource -> its DeviceClass names, both sorted."""
    by_resource: dict[str, set[str]] = {}
    for unit in claim_units(fleet):
        by_resource.setdefault(unit.resource, set()).add(unit.device_class)
    return {r: sorted(names) for r, names in sorted(by_resource.items())}
