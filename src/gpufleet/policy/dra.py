"""Which cards a fleet hands out through DRA, and the names every part of gpufleet gives them.

The renderer writes a DeviceClass and a ResourceClaimTemplate per GPU model and unit; the admission
rules judge a pod by the template names it uses; the twin counts a claim as Kueue's
``deviceClassMappings`` do. All three read the names from here, so a template the renderer writes is
the template the rules and the twin know, and none of those features imports another.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpufleet.policy.capacity import PoolCapacity, limit_value, nominal
from gpufleet.policy.fleet import Fleet
from gpufleet.policy.model import DraMode, FleetPolicy, Team

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


def _guaranteed(team: Team, cap: PoolCapacity, resource: str) -> int:
    quota = team.quota.get(cap.name)
    return nominal(quota, cap).get(resource, 0) if quota else 0


def usable(fleet: Fleet, team: Team, cap: PoolCapacity, resource: str) -> bool:
    """Whether the team's ClusterQueue can ever be admitted ``resource`` on the pool: its own quota, or
    borrowing (its limit not 0) what another team of the cohort guarantees there and lends (not 0)."""
    if _guaranteed(team, cap, resource) > 0:
        return True
    own = team.quota.get(cap.name)
    if own is not None and limit_value(own.borrowingLimit) == 0:
        return False
    return any(
        _guaranteed(t, cap, resource) > 0 and limit_value(t.quota[cap.name].lendingLimit) != 0
        for t in fleet.policy.teams
        if t.name != team.name
    )


def team_units(fleet: Fleet, team: Team) -> list[ClaimUnit]:
    """The claim units a team gets a ResourceClaimTemplate for: pools it may use and can be admitted on.

    A template for a pool where the team has no quota and nothing to borrow would hand its users a
    claim Kueue never admits; gpufleet writes none, and the admission rules refuse such a claim."""
    return [
        u
        for u in claim_units(fleet)
        if fleet.reachable(team.name, fleet.pools[u.pool].pool) and usable(fleet, team, fleet.pools[u.pool], u.resource)
    ]


Finding = tuple[tuple[str | int, ...], str]


def findings(policy: FleetPolicy, capacity: dict[str, PoolCapacity]) -> Iterator[Finding]:
    """What a policy asks of DRA that the cluster or Kueue cannot give, located at the field to change."""
    minor = kubernetes_minor(policy.cluster.kubernetes)
    if policy.cluster.dra is DraMode.ON and minor < FIRST_DRA_MINOR:
        yield (
            ("cluster", "dra"),
            f"DRA (resource.k8s.io/v1) needs Kubernetes 1.{FIRST_DRA_MINOR} or later, and cluster.kubernetes is "
            f"{policy.cluster.kubernetes}; set dra: off (or auto), or kubernetes to 1.{FIRST_DRA_MINOR}+",
        )
        return
    if policy.cluster.dra is DraMode.OFF or minor < FIRST_DRA_MINOR:
        return
    serving = policy.serving.pool if policy.serving else None
    classes: dict[str, list[str]] = {}
    for i, pool in enumerate(policy.pools):
        cap = capacity.get(pool.name)
        if cap is None or pool.name == serving or cap.decision.mode not in ("full", "mig"):
            continue
        for resource in sorted(cap.units):
            names = classes.setdefault(resource, [])
            klass = class_name(cap, resource)
            if klass in names:
                continue
            names.append(klass)
            if len(names) == MAX_CLASSES_PER_MAPPING + 1:
                yield (
                    ("pools", i, "gpu"),
                    f"DRA: Kueue maps at most {MAX_CLASSES_PER_MAPPING} DeviceClasses to one resource "
                    f"(deviceClassMappings), and {resource} would need one per GPU model: {', '.join(names)}; "
                    "use at most 8 GPU models for it, or set cluster.dra: off",
                )
