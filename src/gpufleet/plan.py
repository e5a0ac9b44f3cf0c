"""The plan: how each pool is sliced and why, what it yields, and whether the quotas fit.

A plan is a value (frozen dataclasses, JSON-ready through ``as_dict``) so the CLI prints it and
tests read it without parsing text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from gpufleet.policy.capacity import PoolCapacity, limit_value, nominal
from gpufleet.policy.fleet import Fleet
from gpufleet.policy.residency import ClusterPlan, ZonePlan, cluster_plans, zone_plans
from gpufleet.policy.slicing import TABLE
from gpufleet.render.nodes import nodepool_arguments


@dataclass(frozen=True)
class PlanWarning:
    reason: str
    message: str


@dataclass(frozen=True)
class PoolPlan:
    name: str
    gpu: str
    nodes: int
    gpus: int
    role: str
    mode: str
    layout: dict[str, int] | None
    layout_name: str | None
    replicas: int | None
    reason: str
    message: str
    declared: bool
    flagged: bool
    flag_message: str
    sizing: str
    units: dict[str, int]
    node_setup: str  # how to label and taint the nodes when they are given as a count


@dataclass(frozen=True)
class TeamQuota:
    team: str
    nominal: int
    borrowing_limit: int | None  # None: unlimited
    lending_limit: int | None
    reach: int  # the most the team can hold if every other team idles (nominal + what it may borrow)


@dataclass(frozen=True)
class ResourceQuota:
    """One (pool, resource): what it yields and how the teams share it."""

    pool: str
    resource: str
    capacity: int
    guaranteed: int
    unassigned: int  # held by the cohort, free for any team to borrow
    teams: list[TeamQuota]


@dataclass(frozen=True)
class ServingPlan:
    pool: str
    namespace: str
    capacity: dict[str, int]
    reserved: dict[str, int]  # what the deployments' replicas hold
    latency_goal_ms: int | None


@dataclass(frozen=True)
class Plan:
    pools: list[PoolPlan]
    quotas: list[ResourceQuota]
    serving: ServingPlan | None
    warnings: list[PlanWarning] = field(default_factory=list)
    table: list[dict[str, Any]] = field(default_factory=list)
    clusters: list[ClusterPlan] = field(default_factory=list)  # with clusters: the fleet per worker cluster
    zones: list[ZonePlan] = field(default_factory=list)  # with clusters: the residency zones

    def as_dict(self) -> dict[str, Any]:
        """JSON- and YAML-ready: the slicing mode as its word."""
        return asdict(self, dict_factory=lambda items: {k: (v.value if isinstance(v, Enum) else v) for k, v in items})


def _pool_plan(fleet: Fleet, cap: PoolCapacity) -> PoolPlan:
    d = cap.decision
    named = bool(cap.pool.node_names)
    return PoolPlan(
        name=cap.name,
        gpu=cap.gpu.name,
        nodes=cap.pool.node_count,
        gpus=cap.pool.gpu_count,
        role=cap.pool.role.value,
        mode=d.mode,
        layout=dict(d.layout) if d.layout else None,
        layout_name=d.layout_name,
        replicas=d.replicas,
        reason=d.reason,
        message=d.message,
        declared=d.declared,
        flagged=d.flagged,
        flag_message=d.flag_message,
        sizing=d.sizing,
        units=dict(cap.units),
        node_setup="" if named else nodepool_arguments(cap, fleet.policy.cluster.provider.value),
    )


def _quotas(fleet: Fleet, cap: PoolCapacity) -> list[ResourceQuota]:
    out: list[ResourceQuota] = []
    teams = [t for t in fleet.policy.teams if fleet.reachable(t.name, cap.pool)]
    for resource, capacity in cap.units.items():
        rows: list[tuple[str, int, int | None, int | None]] = []
        for team in teams:
            quota = team.quota.get(cap.name)
            amount = nominal(quota, cap)[resource] if quota else 0
            borrowing = limit_value(quota.borrowingLimit) if quota else None
            lending = limit_value(quota.lendingLimit) if quota else None
            rows.append((team.name, amount, borrowing, lending))
        guaranteed = sum(r[1] for r in rows)
        unassigned = capacity - guaranteed
        team_quotas = []
        for name, amount, borrowing, lending in rows:
            lendable_by_others = sum(a if lnd is None else min(a, lnd) for n, a, _, lnd in rows if n != name)
            could_borrow = unassigned + lendable_by_others
            reach = amount + (could_borrow if borrowing is None else min(borrowing, could_borrow))
            team_quotas.append(TeamQuota(name, amount, borrowing, lending, reach))
        out.append(ResourceQuota(cap.name, resource, capacity, guaranteed, unassigned, team_quotas))
    return out


def _warnings(fleet: Fleet, pools: list[PoolPlan]) -> list[PlanWarning]:
    warnings: list[PlanWarning] = []
    for p in pools:
        if p.flagged:
            warnings.append(PlanWarning("ContradictsTable", f"pool {p.name}: {p.flag_message}"))
        if p.reason == "IsolationWithoutMIG":
            warnings.append(PlanWarning("IsolationWithoutMIG", f"pool {p.name}: {p.message}"))
        if p.node_setup:
            warnings.append(
                PlanWarning(
                    "NodesNotNamed",
                    f"pool {p.name} is given as {p.nodes} nodes: no Node patches are rendered; set labels and "
                    f"taints on the node pool: {p.node_setup}",
                )
            )
    serving = fleet.policy.serving.pool if fleet.policy.serving else None
    for cap in fleet.pools.values():
        if cap.pool.role.value == "serving" and cap.name != serving:
            warnings.append(PlanWarning("ServingPoolUnused", f"pool {cap.name} has role serving but serves nothing"))
    for team in fleet.policy.teams:
        if not any(team.quota.values()):
            warnings.append(
                PlanWarning("NoGuaranteedQuota", f"team {team.name} has no quota: it only runs on borrowed capacity")
            )
    return warnings


def _serving(fleet: Fleet) -> ServingPlan | None:
    serving = fleet.policy.serving
    if serving is None:
        return None
    cap = fleet.pools[serving.pool]
    reserved: dict[str, int] = {}
    for dep in serving.deployments:
        if dep.migProfile:
            key = f"nvidia.com/mig-{dep.migProfile}"
            reserved[key] = reserved.get(key, 0) + dep.replicas
        else:
            reserved["nvidia.com/gpu"] = reserved.get("nvidia.com/gpu", 0) + dep.replicas * (dep.gpusPerReplica or 0)
    return ServingPlan(cap.name, serving.namespace, dict(cap.units), reserved, serving.latencyGoalMs)


def make_plan(fleet: Fleet) -> Plan:
    pools = [_pool_plan(fleet, cap) for cap in fleet.pools.values()]
    quotas = [q for cap in fleet.queued_pools() for q in _quotas(fleet, cap)]
    table = [{"reason": r.reason, "when": r.when, "accepts": list(r.accepts), "prefers": r.prefers} for r in TABLE]
    return Plan(
        pools=pools,
        quotas=quotas,
        serving=_serving(fleet),
        warnings=_warnings(fleet, pools),
        table=table,
        clusters=cluster_plans(fleet),
        zones=zone_plans(fleet),
    )
