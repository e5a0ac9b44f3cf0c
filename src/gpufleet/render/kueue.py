"""Kueue objects (``kueue.x-k8s.io/v1beta2``): flavors, the cohort, a ClusterQueue per team, LocalQueues,
WorkloadPriorityClasses, and the Configuration fragment that turns fair sharing on.

One ResourceFlavor per queued pool: its node labels steer admitted pods onto the pool and its
tolerations (injected by Kueue at admission) let them past the pool's taint, so the queue is the only
way onto a queued pool. Capacity that no team is guaranteed is given to the cohort itself, where every
team can borrow it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gpufleet.policy.capacity import PoolCapacity, limit_value, nominal
from gpufleet.policy.fleet import Fleet
from gpufleet.policy.model import Preemption, Team
from gpufleet.render.common import Obj, meta, obj, tolerations_for

API = "kueue.x-k8s.io/v1beta2"
CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
# gpufleet budgets accelerators; CPU and memory stay with the Kubernetes scheduler, so Kueue must not
# require a ClusterQueue to cover them (a request for an uncovered resource is never admitted).
EXCLUDED_RESOURCE_PREFIXES = ["cpu", "memory", "ephemeral-storage", "hugepages-"]


def resource_groups(pools: Sequence[PoolCapacity]) -> list[list[PoolCapacity]]:
    """Group pools that share a resource name: Kueue lets a resource be covered by one group only."""
    groups: list[list[PoolCapacity]] = []
    for pool in pools:
        touching = [g for g in groups if any(set(pool.units) & set(other.units) for other in g)]
        merged = [pool]
        for group in touching:
            merged = group + merged
            groups.remove(group)
        groups.append(sorted(merged, key=pools.index))
    return sorted(groups, key=lambda g: pools.index(g[0]))


def _quantity_entries(
    covered: list[str], amounts: dict[str, int], limits: dict[str, dict[str, int | None]]
) -> list[Obj]:
    entries: list[Obj] = []
    for resource in covered:
        entry: Obj = {"name": resource, "nominalQuota": amounts.get(resource, 0)}
        for key in ("borrowingLimit", "lendingLimit"):
            value = limits.get(key, {}).get(resource)
            if value is not None:
                entry[key] = value
        entries.append(entry)
    return entries


def _groups(
    pools: Sequence[PoolCapacity],
    amounts_for: Any,
    limits_for: Any,
) -> list[Obj]:
    out: list[Obj] = []
    for group in resource_groups(pools):
        covered = sorted({r for p in group for r in p.units})
        flavors = [
            {"name": p.name, "resources": _quantity_entries(covered, amounts_for(p), limits_for(p))} for p in group
        ]
        out.append({"coveredResources": covered, "flavors": flavors})
    return out


def resource_flavors(fleet: Fleet) -> list[Obj]:
    return [
        obj(
            API,
            "ResourceFlavor",
            meta(p.name, labels={"gpufleet.io/pool": p.name}),
            spec={"nodeLabels": p.pool.selector, "tolerations": tolerations_for(p.pool)},
        )
        for p in fleet.queued_pools()
    ]


def _team_limits(team: Team, cap: PoolCapacity) -> dict[str, dict[str, int | None]]:
    quota = team.quota.get(cap.name)
    guaranteed = nominal(quota, cap) if quota else dict.fromkeys(cap.units, 0)
    borrowing = limit_value(quota.borrowingLimit) if quota else None
    lending = limit_value(quota.lendingLimit) if quota else None
    return {
        "borrowingLimit": dict.fromkeys(cap.units, borrowing),
        # a lending limit only means something where there is quota to lend
        "lendingLimit": {
            r: (min(lending, n) if lending is not None and n > 0 else None) for r, n in guaranteed.items()
        },
    }


def _preemption(p: Preemption) -> Obj:
    """A ClusterQueue's ``spec.preemption`` (the team's overrides over the fleet's); ``borrowWithinCohort``
    only when not Kueue's default (``{policy: Never}``), so a policy without it renders what it always did."""
    out: Obj = {"withinClusterQueue": p.withinClusterQueue, "reclaimWithinCohort": p.reclaimWithinCohort}
    borrow = p.borrowWithinCohort
    if borrow.policy != "Never":
        out["borrowWithinCohort"] = {"policy": borrow.policy}
        if borrow.maxPriorityThreshold is not None:
            out["borrowWithinCohort"]["maxPriorityThreshold"] = borrow.maxPriorityThreshold
    return out


def cluster_queue(fleet: Fleet, team: Team) -> Obj:
    q = fleet.policy.queueing
    reachable = [p for p in fleet.queued_pools() if fleet.reachable(team.name, p.pool)]

    def amounts(cap: PoolCapacity) -> dict[str, int]:
        quota = team.quota.get(cap.name)
        return nominal(quota, cap) if quota else {}

    spec: Obj = {
        "cohortName": q.cohort,
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(team.namespaces)}
            ]
        },
        "queueingStrategy": (team.queueingStrategy or q.queueingStrategy).value,
        "resourceGroups": _groups(reachable, amounts, lambda cap: _team_limits(team, cap)),
        "preemption": _preemption(fleet.policy.preemption_of(team)),
    }
    if q.fairSharing:
        spec["fairSharing"] = {"weight": str(team.weight.normalize())}
    return obj(API, "ClusterQueue", meta(team.name, labels={"gpufleet.io/team": team.name}), spec=spec)


def cohort(fleet: Fleet) -> Obj:
    """The cohort holds each pool's capacity that no team is guaranteed, for every team to borrow."""

    def unassigned(cap: PoolCapacity) -> dict[str, int]:
        left = dict(cap.units)
        for team in fleet.policy.teams:
            quota = team.quota.get(cap.name)
            if quota is not None:
                for resource, n in nominal(quota, cap).items():
                    left[resource] -= n
        return left

    spec: Obj = {"resourceGroups": _groups(fleet.queued_pools(), unassigned, lambda cap: {})}
    return obj(API, "Cohort", meta(fleet.policy.queueing.cohort), spec=spec)


def local_queues(fleet: Fleet) -> Iterable[Obj]:
    for team in fleet.policy.teams:
        for namespace in team.namespaces:
            yield obj(
                API,
                "LocalQueue",
                meta(team.name, namespace, labels={"gpufleet.io/team": team.name}),
                spec={"clusterQueue": team.name},
            )


def priority_classes(fleet: Fleet) -> list[Obj]:
    out = []
    for pc in fleet.policy.priorityClasses:
        body: dict[str, Any] = {"value": pc.value}
        if pc.description:
            body["description"] = pc.description
        out.append(obj(API, "WorkloadPriorityClass", meta(pc.name), **body))
    return out


def go_duration(seconds: int) -> str:
    """Seconds as Go's ``time.ParseDuration`` reads them, in the largest units: 600 → ``10m``, 5400 → ``1h30m``."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n)
    return text or "0s"


def configuration(fleet: Fleet, device_class_mappings: list[Obj]) -> Obj:
    """The fields of Kueue's manager Configuration that gpufleet relies on (merge into kueue-manager-config)."""
    config: Obj = {
        "apiVersion": CONFIG_API,
        "kind": "Configuration",
        "resources": {"excludeResourcePrefixes": EXCLUDED_RESOURCE_PREFIXES},
    }
    if device_class_mappings:
        config["resources"]["deviceClassMappings"] = device_class_mappings
    if fleet.policy.queueing.fairSharing:
        config["fairSharing"] = {"preemptionStrategies": list(fleet.policy.queueing.preemptionStrategies)}
    if fleet.policy.queueing.prioritizePreemptorWorkloads:
        # the API's featureGates map; Kueue refuses it together with the manager's --feature-gates flag
        config["featureGates"] = {"PrioritizePreemptorWorkloads": True}
    timeout = fleet.policy.queueing.waitForPodsReady.timeoutSeconds
    if timeout is not None:  # unset: Kueue's own 30 minutes, so the Configuration stays as it was
        config["waitForPodsReady"] = {"timeout": go_duration(timeout)}
    if fleet.policy.monitoring.enabled:
        # the quota panel and kueue_cluster_queue_nominal_quota exist only with this switch on
        config["metrics"] = {"enableClusterQueueResources": True}
    return config
