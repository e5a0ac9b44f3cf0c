"""Recording rules: the figures ``gpufleet evidence`` reports, recorded continuously for dashboards.

Evidence integrates these over a window (busy GPU-hours are the mean of ``gpufleet:pool_gpus_busy``
times the window's hours); dashboards show them now. Both read the same series the same way
(``gpufleet.render.promql``), so the dashboard and the report agree. Every rule reads raw series
only, never another recording rule, so ``promtool tsdb create-blocks-from rules`` can backfill them
in one pass.
"""

from __future__ import annotations

from typing import Any

from gpufleet.policy.fleet import Fleet
from gpufleet.render import promql

Rule = dict[str, Any]

POOL_CAPACITY = "gpufleet:pool_gpus_capacity"
POOL_BUSY = "gpufleet:pool_gpus_busy"
POOL_ALLOCATED = "gpufleet:pool_gpus_allocated"
POOL_IDLE = "gpufleet:pool_gpus_idle"
POOL_MEMORY_HEADROOM = "gpufleet:pool_memory_headroom:ratio"
TEAM_BUSY = "gpufleet:team_gpus_busy"
TEAM_ALLOCATED = "gpufleet:team_gpus_allocated"
TEAM_PENDING = "gpufleet:team_pending_workloads"
TEAM_WAIT_P90 = "gpufleet:team_admission_wait_seconds:p90_1h"
TEAM_ADMITTED_ACTIVE = "gpufleet:team_admitted_active_workloads"


def _rule(record: str, expr: str, labels: dict[str, str]) -> Rule:
    return {"record": record, "expr": expr, "labels": labels}


def team_namespaces(fleet: Fleet) -> dict[str, tuple[str, ...]]:
    """Team → namespaces, the serving namespace as team ``serving`` (evidence's mapping)."""
    teams = {t.name: tuple(t.namespaces) for t in fleet.policy.teams}
    serving = fleet.policy.serving
    if serving is not None and serving.namespace not in {ns for nss in teams.values() for ns in nss}:
        teams.setdefault("serving", (serving.namespace,))
    return teams


def pool_rules(fleet: Fleet) -> list[Rule]:
    """Per pool: capacity, busy, allocated and idle GPUs (in whole cards), memory headroom."""
    rules: list[Rule] = []
    for cap in fleet.pools.values():
        labels = {"pool": cap.name}
        rules += [
            _rule(POOL_CAPACITY, f"vector({cap.pool.gpu_count})", labels),
            _rule(POOL_BUSY, promql.busy(cap), labels),
            _rule(POOL_ALLOCATED, promql.allocated(cap), labels),
            _rule(POOL_IDLE, promql.idle(cap), labels),
            _rule(POOL_MEMORY_HEADROOM, promql.memory_headroom(cap), labels),
        ]
    return rules


def team_rules(fleet: Fleet) -> list[Rule]:
    """Per team and pool: busy and allocated GPUs. Time-sliced pools get no team busy figure: DCGM
    measures the whole shared card and cannot say which container used it (evidence says
    TimeSlicedNoAttribution)."""
    rules: list[Rule] = []
    for team, namespaces in team_namespaces(fleet).items():
        for cap in fleet.pools.values():
            labels = {"pool": cap.name, "team": team}
            if cap.decision.mode != "timeslice":
                rules.append(_rule(TEAM_BUSY, promql.busy(cap, namespaces), labels))
            rules.append(_rule(TEAM_ALLOCATED, promql.allocated(cap, namespaces), labels))
    return rules


def queue_rules(fleet: Fleet) -> list[Rule]:
    """Kueue's figures per team: its ClusterQueue carries the team's name (gpufleet renders it so)."""
    rules: list[Rule] = []
    for team in fleet.policy.teams:
        cq = f'cluster_queue="{team.name}", {promql.KUEUE_LEADER}'
        labels = {"team": team.name}
        rules += [
            _rule(TEAM_PENDING, f"sum by (status) (kueue_pending_workloads{{{cq}}})", labels),
            _rule(
                TEAM_WAIT_P90,
                f"histogram_quantile(0.9, sum by (le) (rate(kueue_admission_wait_time_seconds_bucket{{{cq}}}[1h])))",
                labels,
            ),
            _rule(TEAM_ADMITTED_ACTIVE, f"sum(kueue_admitted_active_workloads{{{cq}}})", labels),
        ]
    return rules


def recording_groups(fleet: Fleet) -> list[dict[str, Any]]:
    return [
        {"name": "gpufleet.pools", "interval": "30s", "rules": pool_rules(fleet)},
        {"name": "gpufleet.teams", "interval": "30s", "rules": team_rules(fleet)},
        {"name": "gpufleet.queues", "interval": "30s", "rules": queue_rules(fleet)},
    ]
