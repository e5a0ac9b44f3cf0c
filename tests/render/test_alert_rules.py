"""The rendered alerts and recording rules, judged by Prometheus' own promtool.

``promtool check rules`` parses every rendered rule file (each PrometheusRule's ``spec.groups``);
``promtool test rules`` evaluates each alert over hand-worked input series: it must fire with the
labels and summary written below, and stay silent when the condition does not hold. The policy is
tests/render/monitoring-fleet.yaml (maxWaitMinutes 60, idleWhileQueuedMinutes 15, the defaults
otherwise: recorder lag 300 s, checkpoint 90 min, webhook p99 0.25 s). promtool's clock starts at
the Unix epoch, so ``time()`` at eval_time 100m is 6000.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from gpufleet.evidence import allocation, tracks
from gpufleet.forecast.estimate import Settings
from gpufleet.forecast.exporter import ADMISSION, DECLINED, Figure, ForecastExporter, Round
from gpufleet.policy import parse_policy, resolve
from gpufleet.recorder.metrics import Metrics as RecorderMetrics
from gpufleet.render import promql
from gpufleet.render.dashboards import dashboards
from gpufleet.webhook.telemetry import Metrics as WebhookMetrics
from tests.render.monitoring_support import MONITORING_FLEET, PROMTOOL, alert_rules, fleet_of, need, write_rules_file
from tests.support import EXAMPLES

SETUP = ".ci/setup.d/prometheus.sh"
FLEET = fleet_of()
RULES = {r["alert"] + str(r["labels"].get("team", r["labels"].get("pool", ""))): r for r in alert_rules(FLEET)}
REPO = Path(__file__).resolve().parents[2]

REC = 'job="gpufleet-recorder", instance="10.0.0.7:9090"'
HOOK = 'job="gpufleet-webhook", instance="10.0.0.8:8443"'
PLATFORM = {"severity": "warning", "gpufleet_impact": "platform"}
BATCH = {"severity": "warning", "gpufleet_impact": "batch"}
SERVING = {"severity": "critical", "gpufleet_impact": "serving"}
ALLOCATABLE_OTHERS = [
    ('kube_node_status_allocatable{node="node-b", resource="nvidia_com_mig_1g_10gb"}', "2x20"),
    ('kube_node_status_allocatable{node="node-b", resource="nvidia_com_mig_2g_20gb"}', "1x20"),
    ('kube_node_status_allocatable{node="node-b", resource="nvidia_com_mig_3g_40gb"}', "1x20"),
    ('kube_node_status_allocatable{node="node-c", resource="nvidia_com_gpu_shared"}', "4x20"),
    ('kube_node_status_allocatable{node="node-s", resource="nvidia_com_gpu"}', "2x20"),
    ('kube_node_info{node="node-a"}', "1x20"),
]

# (id, rule key, input series, eval time, [(extra labels, summary)] — empty: must stay silent)
CASES: list[tuple[str, str, list[tuple[str, str]], str, list[tuple[dict[str, str], str]]]] = [
    (
        "recorder-scrape-down",
        "GpufleetRecorderDown",
        [(f"up{{{REC}}}", "0x20")],
        "10m",
        [(PLATFORM, "the gpufleet recorder in gpufleet-system is down or holds no Lease: nothing writes the ledger")],
    ),
    (
        "recorder-only-a-follower",
        "GpufleetRecorderDown",
        [(f"up{{{REC}}}", "1x20"), (f"gpufleet_recorder_leader{{{REC}}}", "0x20")],
        "10m",
        [(PLATFORM, "the gpufleet recorder in gpufleet-system is down or holds no Lease: nothing writes the ledger")],
    ),
    (
        "recorder-leading",
        "GpufleetRecorderDown",
        [(f"up{{{REC}}}", "1x20"), (f"gpufleet_recorder_leader{{{REC}}}", "1x20")],
        "10m",
        [],
    ),
    (
        "recorder-ten-minutes-behind",
        "GpufleetRecorderLagging",
        [(f"gpufleet_recorder_lag_seconds{{{REC}}}", "600x20")],
        "12m",
        [(PLATFORM, "the gpufleet recorder is 10m 0s behind the API server")],
    ),
    ("recorder-current", "GpufleetRecorderLagging", [(f"gpufleet_recorder_lag_seconds{{{REC}}}", "30x20")], "12m", []),
    (
        "checkpoint-never-since-epoch",
        "GpufleetLedgerCheckpointStale",
        [(f"gpufleet_recorder_last_checkpoint_timestamp_seconds{{{REC}}}", "0x110")],
        "100m",
        [(PLATFORM, "the gpufleet ledger's newest checkpoint is 1h 40m 0s old")],
    ),
    (
        "checkpoint-every-minute",
        "GpufleetLedgerCheckpointStale",
        [(f"gpufleet_recorder_last_checkpoint_timestamp_seconds{{{REC}}}", "0+60x110")],
        "100m",
        [],
    ),
    (
        "webhook-bad-requests",
        "GpufleetWebhookErrors",
        [(f'gpufleet_webhook_reviews_total{{{HOOK}, endpoint="validate", outcome="bad_request"}}', "0+6x20")],
        "10m",
        [({**PLATFORM, "endpoint": "validate"}, "the gpufleet admission webhook fails on validate")],
    ),
    (
        "apiserver-cannot-call-webhook",
        "GpufleetWebhookErrors",
        [
            (
                'apiserver_admission_webhook_rejection_count{name="validate.gpufleet.io", type="validating", '
                'operation="CREATE", error_type="calling_webhook_error", rejection_code="0"}',
                "0+3x20",
            )
        ],
        "10m",
        [
            (
                {**PLATFORM, "endpoint": "validate.gpufleet.io"},
                "the gpufleet admission webhook fails on validate.gpufleet.io",
            )
        ],
    ),
    (
        "webhook-answers-well",
        "GpufleetWebhookErrors",
        [
            (f'gpufleet_webhook_reviews_total{{{HOOK}, endpoint="validate", outcome="allowed"}}', "0+60x20"),
            (f'gpufleet_webhook_reviews_total{{{HOOK}, endpoint="validate", outcome="bad_request"}}', "2x20"),
        ],
        "10m",
        [],
    ),
    (
        # every review lands in (0.25, 1] s: p99 = 0.25 + 0.99 × 0.75 = 0.9925 s
        "webhook-slow",
        "GpufleetWebhookSlow",
        [
            (f'gpufleet_webhook_review_seconds_bucket{{{HOOK}, endpoint="validate", le="0.005"}}', "0x20"),
            (f'gpufleet_webhook_review_seconds_bucket{{{HOOK}, endpoint="validate", le="0.25"}}', "0x20"),
            (f'gpufleet_webhook_review_seconds_bucket{{{HOOK}, endpoint="validate", le="1.0"}}', "0+60x20"),
            (f'gpufleet_webhook_review_seconds_bucket{{{HOOK}, endpoint="validate", le="+Inf"}}', "0+60x20"),
        ],
        "15m",
        [({**PLATFORM, "endpoint": "validate"}, "the gpufleet admission webhook's p99 on validate is 992.5ms")],
    ),
    (
        "webhook-fast",
        "GpufleetWebhookSlow",
        [
            (f'gpufleet_webhook_review_seconds_bucket{{{HOOK}, endpoint="validate", le="0.005"}}', "0+60x20"),
            (f'gpufleet_webhook_review_seconds_bucket{{{HOOK}, endpoint="validate", le="0.25"}}', "0+60x20"),
            (f'gpufleet_webhook_review_seconds_bucket{{{HOOK}, endpoint="validate", le="1.0"}}', "0+60x20"),
            (f'gpufleet_webhook_review_seconds_bucket{{{HOOK}, endpoint="validate", le="+Inf"}}', "0+60x20"),
        ],
        "15m",
        [],
    ),
    (
        # 5 denials a minute: 50 in 10 minutes
        "policy-denial-burst",
        "GpufleetAdmissionDenialBurst",
        [
            (
                'apiserver_validating_admission_policy_check_total{policy="gpufleet-admission", '
                'policy_binding="gpufleet-admission", error_type="no_error", enforcement_action="deny"}',
                "0+5x30",
            )
        ],
        "20m",
        [(BATCH, "the admission policy denied 50 requests in 10 minutes")],
    ),
    (
        "policy-denies-a-few",
        "GpufleetAdmissionDenialBurst",
        [
            (
                'apiserver_validating_admission_policy_check_total{policy="gpufleet-admission", '
                'policy_binding="gpufleet-admission", error_type="no_error", enforcement_action="deny"}',
                "0+1x30",
            )
        ],
        "20m",
        [],
    ),
    (
        "research-waited-an-hour",
        "GpufleetTeamWaitTooLongresearch",
        [
            ('kueue_pending_workloads{cluster_queue="research", status="active", replica_role="leader"}', "3x90"),
            ('kueue_pending_workloads{cluster_queue="research", status="active", replica_role="follower"}', "9x90"),
            ('kueue_admitted_workloads_total{cluster_queue="research", replica_role="leader"}', "5x90"),
        ],
        "70m",
        [({**BATCH, "team": "research"}, "team research: 3 workloads pending for over 60 min, none admitted")],
    ),
    (
        "research-queue-moves",
        "GpufleetTeamWaitTooLongresearch",
        [
            ('kueue_pending_workloads{cluster_queue="research", status="active", replica_role="leader"}', "3x90"),
            ('kueue_admitted_workloads_total{cluster_queue="research", replica_role="leader"}', "5+1x90"),
        ],
        "70m",
        [],
    ),
    (
        "research-queue-emptied-within-the-hour",
        "GpufleetTeamWaitTooLongresearch",
        [
            ('kueue_pending_workloads{cluster_queue="research", status="active"}', "3x40 0x10 3x40"),
            ('kueue_admitted_workloads_total{cluster_queue="research"}', "5x90"),
        ],
        "70m",
        [],
    ),
    (
        "train-idle-while-nlp-waits",
        "GpufleetGpusIdleWhileQueuedtrain",
        [
            ('DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="node-a", gpu="0", modelName="NVIDIA H100 80GB HBM3"}', "0x30"),
            ('DCGM_FI_PROF_GR_ENGINE_ACTIVE{hostname="node-a", gpu="1", modelName="NVIDIA H100 80GB HBM3"}', "0.01x30"),
            ('kueue_pending_workloads{cluster_queue="nlp", status="inadmissible"}', "1x30"),
        ],
        "20m",
        [({**BATCH, "pool": "train"}, "pool train: 2 GPUs idle while workloads of research, nlp, vision wait")],
    ),
    (
        "train-one-card-idle-while-nlp-waits",
        "GpufleetGpusIdleWhileQueuedtrain",
        [
            ('DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="node-a", gpu="0"}', "0x30"),
            ('DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="node-a", gpu="1"}', "0.9x30"),
            ('kueue_pending_workloads{cluster_queue="nlp", status="inadmissible"}', "1x30"),
        ],
        "20m",
        [({**BATCH, "pool": "train"}, "pool train: 1 GPUs idle while workloads of research, nlp, vision wait")],
    ),
    (
        "train-idle-nobody-waits",
        "GpufleetGpusIdleWhileQueuedtrain",
        [
            ('DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="node-a", gpu="0"}', "0x30"),
            ('DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="node-a", gpu="1"}', "0x30"),
            ('kueue_pending_workloads{cluster_queue="nlp", status="inadmissible"}', "0x30"),
        ],
        "20m",
        [],
    ),
    (
        "training-pod-on-the-serving-pool",
        "GpufleetBatchOnServingPoolserve",
        [
            (
                'kube_pod_container_resource_requests{namespace="research", pod="train-x", container="main", '
                'node="node-s", resource="nvidia_com_gpu", unit="integer"}',
                "1x10",
            ),
            ('kube_pod_status_phase{namespace="research", pod="train-x", phase="Running"}', "1x10"),
        ],
        "5m",
        [
            (
                {**SERVING, "pool": "serve", "namespace": "research", "pod": "train-x"},
                "research/train-x holds a GPU on the serving pool serve",
            )
        ],
    ),
    (
        "serving-pod-on-the-serving-pool",
        "GpufleetBatchOnServingPoolserve",
        [
            (
                'kube_pod_container_resource_requests{namespace="serving", pod="chat-0", container="vllm", '
                'node="node-s", resource="nvidia_com_gpu", unit="integer"}',
                "1x10",
            ),
            ('kube_pod_status_phase{namespace="serving", pod="chat-0", phase="Running"}', "1x10"),
        ],
        "5m",
        [],
    ),
    (
        "chat-replica-down",
        "GpufleetServingReplicasUnavailableserve",
        [('kube_deployment_status_replicas_unavailable{namespace="serving", deployment="chat"}', "1x10")],
        "6m",
        [
            (
                {**SERVING, "pool": "serve", "namespace": "serving", "deployment": "chat"},
                "serving deployment chat in serving: 1 replicas unavailable",
            )
        ],
    ),
    (
        "chat-all-up",
        "GpufleetServingReplicasUnavailableserve",
        [('kube_deployment_status_replicas_unavailable{namespace="serving", deployment="chat"}', "0x10")],
        "6m",
        [],
    ),
    (
        "mig-manager-failed",
        "GpufleetMigReconfigFailedmig",
        [('kube_node_labels{node="node-b", label_nvidia_com_mig_config_state="failed"}', "1x10")],
        "6m",
        [({**BATCH, "pool": "mig", "node": "node-b"}, "node node-b of pool mig: MIG reconfiguration failed")],
    ),
    (
        "mig-manager-succeeded",
        "GpufleetMigReconfigFailedmig",
        [('kube_node_labels{node="node-b", label_nvidia_com_mig_config_state="success"}', "1x10")],
        "6m",
        [],
    ),
    (
        "a-card-of-train-gone",
        "GpufleetGpusMissingtrain",
        [('kube_node_status_allocatable{node="node-a", resource="nvidia_com_gpu"}', "1x20"), *ALLOCATABLE_OTHERS],
        "12m",
        [
            (
                {**BATCH, "pool": "train", "resource": "nvidia.com/gpu"},
                "pool train advertises 1 of its 2 nvidia.com/gpu",
            )
        ],
    ),
    (
        "every-card-there",
        "GpufleetGpusMissingtrain",
        [('kube_node_status_allocatable{node="node-a", resource="nvidia_com_gpu"}', "2x20"), *ALLOCATABLE_OTHERS],
        "12m",
        [],
    ),
]


def _expected(rule: dict[str, Any], labels: dict[str, str], summary: str) -> dict[str, Any]:
    annotations = {**rule["annotations"], "summary": summary}  # description and runbook carry no template
    return {"exp_labels": labels, "exp_annotations": annotations}


@pytest.mark.parametrize(("key", "series", "at", "fires"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_promtool_evaluates_each_alert(
    key: str, series: list[tuple[str, str]], at: str, fires: list[tuple[dict[str, str], str]], tmp_path: Path
) -> None:
    promtool = need(PROMTOOL, SETUP)
    rule = RULES[key]
    write_rules_file(FLEET, tmp_path / "rules.yml")
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": rule["alert"],
                        "exp_alerts": [_expected(rule, labels, summary) for labels, summary in fires],
                    }
                ],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", "test.yml"], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_firing_and_a_silent_case() -> None:
    fired = {RULES[c[1]]["alert"] for c in CASES if c[4]}
    silent = {RULES[c[1]]["alert"] for c in CASES if not c[4]}
    every = {r["alert"] for r in alert_rules(FLEET)}
    assert every == fired, sorted(every - fired)
    assert every == silent, sorted(every - silent)


@pytest.mark.parametrize("policy", [*sorted(EXAMPLES.glob("*.yaml")), MONITORING_FLEET], ids=lambda p: p.name)
def test_promtool_checks_every_rendered_rule_file(policy: Path, tmp_path: Path) -> None:
    promtool = need(PROMTOOL, SETUP)
    rules = write_rules_file(fleet_of(policy), tmp_path / "rules.yml")
    result = subprocess.run(
        [promtool, "check", "rules", str(rules)], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"SUCCESS: \d+ rules found", result.stdout)


def test_every_alert_names_its_runbook_severity_and_impact() -> None:
    for rule in alert_rules(FLEET):
        name = rule["alert"]
        assert rule["annotations"]["runbook_url"].endswith(f"/docs/runbooks/{name}.md")
        assert (REPO / "docs" / "runbooks" / f"{name}.md").is_file(), f"no runbook page for {name}"
        assert rule["labels"]["severity"] in ("critical", "warning")
        assert rule["labels"]["gpufleet_impact"] in ("serving", "batch", "platform")
        assert (rule["labels"]["severity"] == "critical") == (rule["labels"]["gpufleet_impact"] == "serving")


def _exposed(registry_text: bytes) -> set[str]:
    names = set()
    for line in registry_text.decode().splitlines():
        if line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def _forecast_exposed() -> set[str]:
    """The forecast exporter's names, with one round's figures of each kind served."""
    exporter = ForecastExporter(FLEET, lambda: ([], None), list, Settings())
    exporter.last = Round(0.0, 1.0, (Figure(ADMISSION, ("a",) * 6, 60.0), Figure(DECLINED, ("a",) * 6, 1.0)))
    exporter.failures["InputRefused"] = 1
    registry = CollectorRegistry()
    registry.register(exporter)
    return _exposed(generate_latest(registry))


def test_gpufleet_metric_names_are_the_ones_the_recorder_webhook_and_forecast_expose() -> None:
    """Exercise the real metric objects once so every labelled series appears, then compare names."""
    recorder, webhook = RecorderMetrics(), WebhookMetrics()
    recorder.events.labels("pods", "ADDED").inc()
    recorder.records.labels("allocation").inc()
    recorder.restarts.labels("pods", "expired").inc()
    webhook.reviews.labels("validate", "allowed").inc()
    webhook.denials.labels("MissingLabel").inc()
    webhook.latency.labels("validate").observe(0.001)
    exposed = _exposed(generate_latest(recorder.registry)) | _exposed(generate_latest(webhook.registry))
    exposed |= _forecast_exposed()
    used = {
        name
        for text in (yaml.safe_dump(alert_rules(FLEET)),)
        for name in re.findall(r"\b(gpufleet_[a-z_]+)\b", text)
        if name not in ("gpufleet_impact",)
    }
    queries = [p.expr for board in dashboards(FLEET) for p in board.panels]
    used |= {n for e in queries for n in re.findall(r"\b(gpufleet_[a-z_]+)\b", e)}
    assert "gpufleet_recorder_last_checkpoint_timestamp_seconds" in used  # the stale-checkpoint alert
    assert used <= exposed, sorted(used - exposed)


def test_the_series_read_are_the_ones_evidence_reads() -> None:
    assert (promql.ENGINE, promql.GPU_UTIL, promql.FB_USED, promql.FB_FREE) == (
        tracks.ENGINE,
        tracks.GPU_UTIL,
        tracks.FB_USED,
        tracks.FB_FREE,
    )
    assert promql.REQUESTS == allocation.REQUESTS
    assert "kube_pod_status_phase" in allocation.REQUESTS_RUNNING


COUNT_POOL = """\
apiVersion: gpufleet.io/v1alpha1
kind: FleetPolicy
cluster: {provider: aks, kubernetes: "1.34", dra: off}
pools:
  - {name: train, gpu: H100-SXM5-80GB, nodes: 2, gpusPerNode: 2, role: training,
     nodeLabels: {kubernetes.azure.com/agentpool: gpupool}}
teams:
  - {name: research, namespaces: [research], quota: {train: {gpus: 2}}}
"""


def test_a_pool_given_as_a_count_is_found_by_its_node_labels(tmp_path: Path) -> None:
    """Without node names the rules join kube_node_labels on the pool's selector (kube-state-metrics)."""
    promtool = need(PROMTOOL, SETUP)
    fleet = resolve(parse_policy(COUNT_POOL, "fleet.yaml"))
    write_rules_file(fleet, tmp_path / "rules.yml")
    ours, other = "aks-gpupool-0", "aks-other-0"
    series = [
        (f'kube_node_labels{{node="{ours}", label_kubernetes_azure_com_agentpool="gpupool"}}', "1x10"),
        (f'kube_node_labels{{node="{other}", label_kubernetes_azure_com_agentpool="other"}}', "1x10"),
        (f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{Hostname="{ours}", gpu="0"}}', "0.5x10"),
        (f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{hostname="{ours}", gpu="1"}}', "0.25x10"),
        (f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{Hostname="{other}", gpu="0"}}', "0.9x10"),
        (
            f'kube_pod_container_resource_requests{{namespace="research", pod="a", node="{ours}", '
            'resource="nvidia_com_gpu"}',
            "1x10",
        ),
        (
            f'kube_pod_container_resource_requests{{namespace="research", pod="b", node="{other}", '
            'resource="nvidia_com_gpu"}',
            "1x10",
        ),
        ('kube_pod_status_phase{namespace="research", pod="a", phase="Running"}', "1x10"),
        ('kube_pod_status_phase{namespace="research", pod="b", phase="Running"}', "1x10"),
    ]
    expect = [
        ('gpufleet:pool_gpus_busy{pool="train"}', 0.75),
        ('gpufleet:pool_gpus_allocated{pool="train"}', 1),
        ('gpufleet:team_gpus_allocated{pool="train", team="research"}', 1),
    ]
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "promql_expr_test": [
                    {"expr": expr, "eval_time": "5m", "exp_samples": [{"labels": expr, "value": value}]}
                    for expr, value in expect
                ],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", "test.yml"], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
