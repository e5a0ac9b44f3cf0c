"""Grafana dashboards as ConfigMaps for the Grafana sidecar (label ``grafana_dashboard: "1"``).

Each panel's query is a recording rule of ``gpufleet.render.recording`` or plain PromQL over the
series the alerts read; the tests run every one of them against a real Prometheus. Panels are kept
as data (:class:`Panel`) so the tests and the JSON come from one list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpufleet.check.manifests import NAME as ADMISSION_POLICY
from gpufleet.policy.fleet import Fleet
from gpufleet.recorder.manifests import NAME as RECORDER
from gpufleet.render import promql, recording
from gpufleet.render.alerts import CHECKPOINT_METRIC, MIG_STATE, WEBHOOK_JOB
from gpufleet.render.common import Obj, meta, obj

SIDECAR_LABEL = {"grafana_dashboard": "1"}
LEADER = promql.KUEUE_LEADER
FORECAST = "gpufleet-forecast"  # the forecast exporter's job (``gpufleet forecast --serve``)


@dataclass(frozen=True)
class Panel:
    title: str
    expr: str
    legend: str = ""
    unit: str = "short"


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    panels: tuple[Panel, ...]


def queue_dashboard(fleet: Fleet) -> Dashboard:
    r = recording
    return Dashboard(
        "gpufleet-queue",
        "gpufleet / Queue and quota",
        (
            Panel("Pending workloads per team", f"sum by (team, status) ({r.TEAM_PENDING})", "{{team}} {{status}}"),
            # beside the pending count: when each of them is expected to start (the forecast's median),
            # only while Kueue still counts its ClusterQueue's workloads as pending, so an admission
            # since the exporter's last round does not leave a stale figure on the panel
            Panel(
                "Expected admission per pending workload (forecast median, from its round)",
                f'gpufleet_forecast_admission_seconds{{quantile="0.5"}} and on (cluster_queue) '
                f"(sum by (cluster_queue) (kueue_pending_workloads{{{LEADER}}}) > 0)",
                "{{namespace}}/{{job_name}}",
                "s",
            ),
            Panel(
                "Pending workloads the forecast gives no figure, by reason",
                "sum by (cluster_queue, reason) (gpufleet_forecast_declined)",
                "{{cluster_queue}} {{reason}}",
            ),
            Panel("Admission wait, 90th percentile (1 h)", r.TEAM_WAIT_P90, "{{team}}", "s"),
            Panel("Admitted active workloads per team", r.TEAM_ADMITTED_ACTIVE, "{{team}}"),
            Panel(
                "Quota used / nominal per team and flavor",
                f"sum by (cluster_queue, flavor, resource) (kueue_cluster_queue_resource_usage{{{LEADER}}}) / "
                f"sum by (cluster_queue, flavor, resource) (kueue_cluster_queue_nominal_quota{{{LEADER}}} > 0)",
                "{{cluster_queue}} {{flavor}} {{resource}}",
                "percentunit",
            ),
            Panel(
                "Preemptions per hour (by the preempting team)",
                f"sum by (preempting_cluster_queue, reason) (increase(kueue_preempted_workloads_total{{{LEADER}}}[1h]))",
                "{{preempting_cluster_queue}} {{reason}}",
            ),
            Panel(
                "Evictions per hour",
                f"sum by (cluster_queue, reason) (increase(kueue_evicted_workloads_total{{{LEADER}}}[1h]))",
                "{{cluster_queue}} {{reason}}",
            ),
        ),
    )


def gpu_dashboard(fleet: Fleet) -> Dashboard:
    r = recording
    return Dashboard(
        "gpufleet-gpus",
        "gpufleet / GPU activity per pool and team",
        (
            Panel(
                "Utilization per pool (busy / capacity)",
                f"{r.POOL_BUSY} / on (pool) {r.POOL_CAPACITY}",
                "{{pool}}",
                "percentunit",
            ),
            Panel("Busy GPUs per pool", r.POOL_BUSY, "{{pool}}"),
            Panel("Allocated GPUs per pool", r.POOL_ALLOCATED, "{{pool}}"),
            Panel("Idle GPUs per pool (engine activity < 5 %)", r.POOL_IDLE, "{{pool}}"),
            Panel("Busy GPUs per team and pool", r.TEAM_BUSY, "{{team}} on {{pool}}"),
            Panel("Allocated GPUs per team and pool", r.TEAM_ALLOCATED, "{{team}} on {{pool}}"),
            Panel("GPU memory headroom per pool", r.POOL_MEMORY_HEADROOM, "{{pool}}", "percentunit"),
        ),
    )


def operations_dashboard(fleet: Fleet) -> Dashboard:
    recorder = f'job="{RECORDER}"'
    webhook = f'job="{WEBHOOK_JOB}"'
    panels: list[Panel] = []
    serving = fleet.policy.serving
    if serving is not None:
        cap = fleet.pools[serving.pool]
        names = "|".join(d.name for d in serving.deployments) or ".+"
        sel = f'namespace="{serving.namespace}", deployment=~"{names}"'
        outsiders = promql.requests(cap, [f'namespace!="{serving.namespace}"'])
        panels += [
            Panel(
                "Serving replicas available", f"kube_deployment_status_replicas_available{{{sel}}}", "{{deployment}}"
            ),
            Panel(
                "Serving replicas unavailable",
                f"kube_deployment_status_replicas_unavailable{{{sel}}}",
                "{{deployment}}",
            ),
            Panel(f"Non-serving pods holding GPUs on {cap.name}", f"count(({outsiders}) > 0) or vector(0)"),
        ]
    panels += [
        Panel("Recorder replicas holding the Lease", f"sum(gpufleet_recorder_leader{{{recorder}}})"),
        Panel("Recorder lag behind the API server", f"max(gpufleet_recorder_lag_seconds{{{recorder}}})", unit="s"),
        Panel("Age of the newest ledger checkpoint", f"time() - max({CHECKPOINT_METRIC}{{{recorder}}})", unit="s"),
        Panel(
            "Age of the last forecast round",
            f'time() - max(gpufleet_forecast_round_timestamp_seconds{{job="{FORECAST}"}})',
            unit="s",
        ),
        Panel(
            "Ledger records written per second",
            f"sum by (kind) (rate(gpufleet_recorder_records_written_total{{{recorder}}}[5m]))",
            "{{kind}}",
        ),
        Panel(
            "Recorder watch restarts per hour",
            f"sum by (resource, cause) (increase(gpufleet_recorder_watch_restarts_total{{{recorder}}}[1h]))",
            "{{resource}} {{cause}}",
        ),
        Panel(
            "Webhook reviews per second",
            f"sum by (endpoint, outcome) (rate(gpufleet_webhook_reviews_total{{{webhook}}}[5m]))",
            "{{endpoint}} {{outcome}}",
        ),
        Panel(
            "Webhook answer time, 99th percentile",
            f"histogram_quantile(0.99, sum by (le, endpoint) (rate(gpufleet_webhook_review_seconds_bucket{{{webhook}}}[5m])))",
            "{{endpoint}}",
            "s",
        ),
        Panel(
            "Webhook denials per second by reason",
            f"sum by (reason) (rate(gpufleet_webhook_denials_total{{{webhook}}}[5m]))",
            "{{reason}}",
        ),
        Panel(
            "Admission policy denials (10 min)",
            f'sum(increase(apiserver_validating_admission_policy_check_total{{policy="{ADMISSION_POLICY}", '
            'enforcement_action="deny"}[10m]))',
        ),
        Panel(
            "Nodes whose MIG reconfiguration failed", f'count(kube_node_labels{{{MIG_STATE}="failed"}}) or vector(0)'
        ),
    ]
    return Dashboard("gpufleet-operations", "gpufleet / Serving, recorder and admission health", tuple(panels))


def dashboards(fleet: Fleet) -> list[Dashboard]:
    return [queue_dashboard(fleet), gpu_dashboard(fleet), operations_dashboard(fleet)]


def grafana_json(board: Dashboard) -> dict[str, Any]:
    """Grafana's dashboard model: one time-series panel per query, two per row, a datasource variable."""
    datasource = {"type": "prometheus", "uid": "${datasource}"}
    panels = [
        {
            "id": k + 1,
            "type": "timeseries",
            "title": p.title,
            "datasource": datasource,
            "gridPos": {"h": 8, "w": 12, "x": 12 * (k % 2), "y": 8 * (k // 2)},
            "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
            "targets": [{"refId": "A", "datasource": datasource, "expr": p.expr, "legendFormat": p.legend}],
        }
        for k, p in enumerate(board.panels)
    ]
    return {
        "uid": board.uid,
        "title": board.title,
        "tags": ["gpufleet"],
        "schemaVersion": 39,
        "time": {"from": "now-24h", "to": "now"},
        "refresh": "1m",
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]
        },
        "panels": panels,
    }


def dashboard_configmaps(fleet: Fleet) -> list[Obj]:
    namespace = fleet.policy.monitoring.dashboardNamespace
    return [
        obj(
            "v1",
            "ConfigMap",
            meta(board.uid, namespace, labels=SIDECAR_LABEL),
            data={f"{board.uid}.json": json.dumps(grafana_json(board), indent=2, sort_keys=True) + "\n"},
        )
        for board in dashboards(fleet)
    ]
