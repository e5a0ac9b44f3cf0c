"""Every dashboard panel's query, answered by a real Prometheus, checked against hand-worked values.

The Prometheus holds the evidence tests' DCGM and kube-state-metrics series (tests/evidence:
``generate``, backfilled with ``promtool tsdb create-blocks-from openmetrics``, served by the same
helper) plus, in the "after" window, Kueue's, the recorder's, the webhook's and the API server's
series written below. The rendered recording rules are backfilled over both windows with
``promtool tsdb create-blocks-from rules`` against that server, then the server is restarted with
the new blocks, so dashboard panels read the recorded series the way they would in a cluster.

Queries are evaluated 75 minutes into the "after" window (slot 150 of 240), where every device of
the scenario reports and an hour of counters lies behind. Values there, by hand (policy: tests/render/monitoring-fleet.yaml):
train 0.8 + 0.6 (GPU_UTIL 60 % stands in) busy of 2 cards; mig 3/7·0.5 + 2/7·0.5 + 1/7·0 + 1/7·1.0
= 0.5 of 1; dev 0.75 of 1 (time-sliced, whole card).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.render.dashboards import dashboards
from gpufleet.render.recording import recording_groups
from tests.evidence.conftest import PROMTOOL, _need_binaries, _serve
from tests.evidence.evidence_scenario import SLOTS, STEP, OpenMetrics, Windows, generate, windows
from tests.render.monitoring_support import MONITORING_FLEET, fleet_of

FLEET = fleet_of()
AT_SLOT = 150


def _linear(om: OpenMetrics, metric: str, labels: dict[str, str], start: datetime, per_step: float) -> None:
    """A counter rising by ``per_step`` each scrape over the window (``OpenMetrics.add`` writes constants)."""
    om.add(metric, labels, start, 0.0)
    t0 = int(start.timestamp())
    om.families[metric].series[tuple(sorted(labels.items()))][-SLOTS:] = [
        (t0 + k * STEP, k * per_step) for k in range(SLOTS)
    ]


def operations_series(w: Windows) -> str:
    """Kueue, recorder, webhook, API server and serving series for the "after" window."""
    om = OpenMetrics()
    a = w.after_start
    leader = {"replica_role": "leader"}
    for cq, status, value in [("research", "active", 3), ("research", "inadmissible", 1), ("nlp", "active", 0)]:
        om.add("kueue_pending_workloads", {"cluster_queue": cq, "status": status, **leader}, a, value)
    om.add(
        "kueue_pending_workloads", {"cluster_queue": "research", "status": "active", "replica_role": "follower"}, a, 7
    )
    # one admission per scrape, every one waited between 160 and 320 s: p90 = 160 + 0.9 × 160 = 304 s
    for le in ("1", "2.5", "5", "10", "20", "40", "80", "160"):
        om.add("kueue_admission_wait_time_seconds_bucket", {"cluster_queue": "research", "le": le, **leader}, a, 0)
    for le in ("320", "640", "+Inf"):
        _linear(om, "kueue_admission_wait_time_seconds_bucket", {"cluster_queue": "research", "le": le, **leader}, a, 1)
    om.add("kueue_admitted_active_workloads", {"cluster_queue": "research", **leader}, a, 2)
    om.add("kueue_admitted_active_workloads", {"cluster_queue": "nlp", **leader}, a, 1)
    quota = [
        ("research", "train", "nvidia.com/gpu", 1, 1),
        ("nlp", "train", "nvidia.com/gpu", 2, 1),
        ("vision", "mig", "nvidia.com/mig-1g.10gb", 1, 2),
        ("vision", "train", "nvidia.com/gpu", 0, 0),
    ]
    for cq, flavor, resource, used, nominal in quota:
        labels = {"cohort": "gpufleet", "cluster_queue": cq, "flavor": flavor, "resource": resource, **leader}
        om.add("kueue_cluster_queue_resource_usage", labels, a, used)
        om.add("kueue_cluster_queue_nominal_quota", labels, a, nominal)
    # one preemption and one eviction every 20 scrapes (10 min): 6 an hour
    _linear(
        om,
        "kueue_preempted_workloads_total",
        {"preempting_cluster_queue": "research", "reason": "InCohortReclamation", **leader},
        a,
        1 / 20,
    )
    _linear(om, "kueue_evicted_workloads_total", {"cluster_queue": "nlp", "reason": "Preempted", **leader}, a, 1 / 20)
    # serving: one replica of chat down, a research pod on the serving node
    om.add("kube_deployment_status_replicas_available", {"namespace": "serving", "deployment": "chat"}, a, 1)
    om.add("kube_deployment_status_replicas_unavailable", {"namespace": "serving", "deployment": "chat"}, a, 1)
    om.add(
        "kube_pod_container_resource_requests",
        {
            "namespace": "research",
            "pod": "sneaky",
            "container": "main",
            "node": "node-s",
            "resource": "nvidia_com_gpu",
            "unit": "integer",
        },
        a,
        1,
    )
    om.add("kube_pod_status_phase", {"namespace": "research", "pod": "sneaky", "phase": "Running"}, a, 1)
    om.add("kube_node_labels", {"node": "node-b", "label_nvidia_com_mig_config_state": "failed"}, a, 1)
    # the recorder: leading, 12 s behind, a checkpoint 10 minutes old at every scrape
    rec = {"job": "gpufleet-recorder", "instance": "10.0.0.7:9090"}
    om.add("gpufleet_recorder_leader", rec, a, 1)
    om.add("gpufleet_recorder_lag_seconds", rec, a, 12)
    om.add("gpufleet_recorder_last_checkpoint_timestamp_seconds", rec, a, 0)
    checkpoints = om.families["gpufleet_recorder_last_checkpoint_timestamp_seconds"].series[tuple(sorted(rec.items()))]
    checkpoints[:] = [(t, t - 600) for t, _ in checkpoints]
    _linear(om, "gpufleet_recorder_records_written_total", {**rec, "kind": "allocation"}, a, 3)  # 0.1 per second
    _linear(om, "gpufleet_recorder_watch_restarts_total", {**rec, "resource": "pods", "cause": "expired"}, a, 1 / 20)
    # the webhook: 0.5 allowed and 0.1 denied reviews per second, all answered within 5 ms
    hook = {"job": "gpufleet-webhook", "instance": "10.0.0.8:8443"}
    _linear(om, "gpufleet_webhook_reviews_total", {**hook, "endpoint": "validate", "outcome": "allowed"}, a, 15)
    _linear(om, "gpufleet_webhook_reviews_total", {**hook, "endpoint": "validate", "outcome": "denied"}, a, 3)
    _linear(om, "gpufleet_webhook_denials_total", {**hook, "reason": "MissingLabel"}, a, 3)
    for le in ("0.005", "0.25", "+Inf"):
        _linear(om, "gpufleet_webhook_review_seconds_bucket", {**hook, "endpoint": "validate", "le": le}, a, 18)
    # the forecast exporter: research's job-a expected in 25 min (p50), nlp's job-b in 5 min, but Kueue
    # counts no pending workload in nlp (admitted since the round): the panel shows job-a only
    fc = {"job": "gpufleet-forecast", "instance": "10.0.0.9:9091"}
    for ns, job, cq, q, value in [
        ("research", "job-a", "research", "0.5", 1500),
        ("research", "job-a", "research", "0.9", 4000),
        ("nlp", "job-b", "nlp", "0.5", 300),
    ]:
        labels = {**fc, "namespace": ns, "workload": f"{job}-x1y2z", "job_name": job, "team": ns, "cluster_queue": cq}
        om.add("gpufleet_forecast_admission_seconds", {**labels, "quantile": q}, a, value)
    for ns, job, reason in [("research", "job-c", "TooLittleHistory"), ("research", "job-d", "TooLittleHistory")]:
        labels = {**fc, "namespace": ns, "workload": f"{job}-x1y2z", "job_name": job, "cluster_queue": ns}
        om.add("gpufleet_forecast_declined", {**labels, "reason": reason}, a, 1)
    om.add("gpufleet_forecast_round_timestamp_seconds", fc, a, 0)
    rounds = om.families["gpufleet_forecast_round_timestamp_seconds"].series[tuple(sorted(fc.items()))]
    rounds[:] = [(t, t - 90) for t, _ in rounds]  # each round 90 s before the scrape
    # the API server: the admission policy denies one request per scrape, 20 in 10 minutes
    _linear(
        om,
        "apiserver_validating_admission_policy_check_total",
        {
            "policy": "gpufleet-admission",
            "policy_binding": "gpufleet-admission",
            "error_type": "no_error",
            "enforcement_action": "deny",
        },
        a,
        1,
    )
    return om.text()


@dataclass(frozen=True)
class Loaded:
    url: str
    windows: Windows

    @property
    def at(self) -> datetime:
        return self.windows.after_start + timedelta(seconds=AT_SLOT * STEP)

    def query(self, expr: str, at: datetime | None = None) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant query: each series' labels (without the metric name) → its value."""
        moment = (at or self.at).timestamp()
        reply = httpx2.get(f"{self.url}/api/v1/query", params={"query": expr, "time": str(moment)}, timeout=30)
        body = reply.json()
        assert body["status"] == "success", body
        return {
            tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")): float(r["value"][1])
            for r in body["data"]["result"]
        }


def _backfill(promtool: str, root: Path, name: str, text: str, data: Path) -> None:
    (root / name).write_text(text, encoding="utf-8")
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(root / name), str(data)],
        check=True,
        capture_output=True,
        timeout=300,
    )


def _ready(url: str) -> None:
    deadline = time.monotonic() + 60
    while httpx2.get(f"{url}/-/ready", timeout=1).status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError("prometheus never became ready")
        time.sleep(0.2)


@contextmanager
def loaded_prometheus(root: Path) -> Iterator[Loaded]:
    """Backfill the series, then the recording rules over them, and serve the result."""
    _need_binaries()
    promtool = str(PROMTOOL)
    span = windows(datetime.now(UTC))
    data = root / "data"
    _backfill(promtool, root, "dcgm.om", generate(span), data)
    _backfill(promtool, root, "operations.om", operations_series(span), data)
    rules = root / "recording.yml"
    rules.write_text(yaml.safe_dump({"groups": recording_groups(FLEET)}, sort_keys=False), encoding="utf-8")
    end = span.after_start + timedelta(seconds=SLOTS * STEP)
    with _serve(root, data) as url:
        _ready(url)
        subprocess.run(
            [
                promtool,
                "tsdb",
                "create-blocks-from",
                "rules",
                f"--url={url}",
                "--eval-interval=30s",
                f"--start={int(span.before_start.timestamp())}",
                f"--end={int(end.timestamp())}",
                f"--output-dir={root / 'recorded'}",
                "--quiet",
                str(rules),
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
    for block in (root / "recorded").iterdir():
        shutil.move(str(block), data / block.name)
    with _serve(root, data) as url:
        _ready(url)
        yield Loaded(url=url, windows=span)


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    root = tmp_path_factory.mktemp("dashboards")
    try:
        with loaded_prometheus(root) as loaded:
            yield loaded
    finally:
        shutil.rmtree(root, ignore_errors=True)


def L(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


# (dashboard, panel title) → {labels: value} at 75 minutes into the "after" window
EXPECTED: dict[tuple[str, str], dict[tuple[tuple[str, str], ...], float]] = {
    ("gpufleet-queue", "Pending workloads per team"): {
        L(team="research", status="active"): 3,  # the follower's 7 is not counted
        L(team="research", status="inadmissible"): 1,
        L(team="nlp", status="active"): 0,
    },
    ("gpufleet-queue", "Expected admission per pending workload (forecast median, from its round)"): {
        L(
            namespace="research",
            workload="job-a-x1y2z",
            job_name="job-a",
            team="research",
            cluster_queue="research",
            quantile="0.5",
            job="gpufleet-forecast",
            instance="10.0.0.9:9091",
        ): 1500,
    },
    ("gpufleet-queue", "Pending workloads the forecast gives no figure, by reason"): {
        L(cluster_queue="research", reason="TooLittleHistory"): 2
    },
    ("gpufleet-queue", "Admission wait, 90th percentile (1 h)"): {L(team="research"): 304},
    ("gpufleet-queue", "Admitted active workloads per team"): {L(team="research"): 2, L(team="nlp"): 1},
    ("gpufleet-queue", "Quota used / nominal per team and flavor"): {
        L(cluster_queue="research", flavor="train", resource="nvidia.com/gpu"): 1.0,
        L(cluster_queue="nlp", flavor="train", resource="nvidia.com/gpu"): 2.0,  # borrowing
        L(cluster_queue="vision", flavor="mig", resource="nvidia.com/mig-1g.10gb"): 0.5,
    },
    ("gpufleet-queue", "Preemptions per hour (by the preempting team)"): {
        L(preempting_cluster_queue="research", reason="InCohortReclamation"): 6
    },
    ("gpufleet-queue", "Evictions per hour"): {L(cluster_queue="nlp", reason="Preempted"): 6},
    ("gpufleet-gpus", "Utilization per pool (busy / capacity)"): {
        L(pool="train"): 1.4 / 2,
        L(pool="mig"): 0.5,
        L(pool="dev"): 0.75,
    },
    ("gpufleet-gpus", "Busy GPUs per pool"): {L(pool="train"): 1.4, L(pool="mig"): 0.5, L(pool="dev"): 0.75},
    ("gpufleet-gpus", "Allocated GPUs per pool"): {
        L(pool="train"): 2,  # train-2 and ft-1
        L(pool="mig"): 5 / 7,  # a 3g and a 2g instance
        L(pool="dev"): 3 / 4,  # 1 + 2 of 4 replicas
        L(pool="serve"): 1,  # the research pod on node-s
    },
    ("gpufleet-gpus", "Idle GPUs per pool (engine activity < 5 %)"): {
        L(pool="train"): 0,
        L(pool="mig"): 1 / 7,  # the 1g instance at 0.0
        L(pool="dev"): 0,
    },
    ("gpufleet-gpus", "Busy GPUs per team and pool"): {
        L(team="research", pool="train"): 0.8,
        L(team="nlp", pool="train"): 0.6,  # GPU_UTIL 60 %; MIG series carry no namespace after the change
    },
    ("gpufleet-gpus", "Allocated GPUs per team and pool"): {
        L(team="research", pool="train"): 1,
        L(team="nlp", pool="train"): 1,
        L(team="research", pool="mig"): 3 / 7,
        L(team="nlp", pool="mig"): 2 / 7,
        L(team="research", pool="dev"): 1 / 4,
        L(team="nlp", pool="dev"): 2 / 4,  # nlp-eval is nlp's
        L(team="research", pool="serve"): 1,
    },
    ("gpufleet-gpus", "GPU memory headroom per pool"): {L(pool="train"): (20480 + 40960) / (2 * 81920)},
    ("gpufleet-operations", "Serving replicas available"): {L(namespace="serving", deployment="chat"): 1},
    ("gpufleet-operations", "Serving replicas unavailable"): {L(namespace="serving", deployment="chat"): 1},
    ("gpufleet-operations", "Non-serving pods holding GPUs on serve"): {L(): 1},
    ("gpufleet-operations", "Recorder replicas holding the Lease"): {L(): 1},
    ("gpufleet-operations", "Recorder lag behind the API server"): {L(): 12},
    ("gpufleet-operations", "Age of the newest ledger checkpoint"): {L(): 600},
    ("gpufleet-operations", "Age of the last forecast round"): {L(): 90},
    ("gpufleet-operations", "Ledger records written per second"): {L(kind="allocation"): 0.1},
    ("gpufleet-operations", "Recorder watch restarts per hour"): {L(resource="pods", cause="expired"): 6},
    ("gpufleet-operations", "Webhook reviews per second"): {
        L(endpoint="validate", outcome="allowed"): 0.5,
        L(endpoint="validate", outcome="denied"): 0.1,
    },
    ("gpufleet-operations", "Webhook answer time, 99th percentile"): {L(endpoint="validate"): 0.99 * 0.005},
    ("gpufleet-operations", "Webhook denials per second by reason"): {L(reason="MissingLabel"): 0.1},
    ("gpufleet-operations", "Admission policy denials (10 min)"): {L(): 20},
    ("gpufleet-operations", "Nodes whose MIG reconfiguration failed"): {L(): 1},
}
PANELS = {(board.uid, p.title): p for board in dashboards(FLEET) for p in board.panels}


def test_every_panel_has_an_expected_answer() -> None:
    assert set(PANELS) == set(EXPECTED)


def test_the_forecast_sits_beside_kueues_pending_count() -> None:
    """The forecast panel reads the exporter's metric joined to Kueue's pending count, and Grafana
    lays it out in the pending count's row (two panels a row)."""
    from gpufleet.forecast.exporter import ADMISSION
    from gpufleet.render.dashboards import grafana_json, queue_dashboard

    board = grafana_json(queue_dashboard(FLEET))
    by_title = {p["title"]: p for p in board["panels"]}
    forecast = by_title["Expected admission per pending workload (forecast median, from its round)"]
    pending = by_title["Pending workloads per team"]
    expr = forecast["targets"][0]["expr"]
    assert ADMISSION in expr and "kueue_pending_workloads" in expr
    assert forecast["gridPos"]["y"] == pending["gridPos"]["y"] and forecast["gridPos"]["x"] != pending["gridPos"]["x"]
    assert forecast["fieldConfig"]["defaults"]["unit"] == "s"


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: f"{k[0]}:{k[1]}")
def test_panel_query_answers(prom: Loaded, key: tuple[str, str]) -> None:
    got = prom.query(PANELS[key].expr)
    assert got == pytest.approx(EXPECTED[key], rel=1e-9, abs=1e-9), PANELS[key].expr


HOURS = SLOTS * STEP / 3600
# (pool, figure) of the evidence report's "after" window that rest on complete series, the recorded
# series whose mean over the window is that figure, and the factor between the two
AGREE = [
    ("train", "busy", "gpufleet:pool_gpus_busy", HOURS),
    ("train", "allocated", "gpufleet:pool_gpus_allocated", HOURS),
    ("train", "memory_headroom", "gpufleet:pool_memory_headroom:ratio", 100),
    ("mig", "allocated", "gpufleet:pool_gpus_allocated", HOURS),
    ("dev", "busy", "gpufleet:pool_gpus_busy", HOURS),
]


@pytest.fixture(scope="module")
def report(prom: Loaded, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``gpufleet evidence`` run against the same Prometheus, with the same policy."""
    out = tmp_path_factory.mktemp("evidence") / "out"
    w = prom.windows
    args = ["evidence", "--prometheus", prom.url, "--before", w.before, "--after", w.after]
    result = CliRunner().invoke(app, [*args, "--policy", str(MONITORING_FLEET), "-o", str(out)])
    assert result.exit_code == 0, result.output
    loaded: dict[str, Any] = json.loads((out / "evidence.json").read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize(("pool", "figure", "record", "scale"), AGREE, ids=[f"{a[0]}-{a[1]}" for a in AGREE])
def test_recorded_figures_agree_with_the_evidence_report(
    prom: Loaded, report: dict[str, Any], pool: str, figure: str, record: str, scale: float
) -> None:
    row = next(r for r in report["windows"]["after"]["rows"] if r["pool"] == pool and r["team"] is None)
    cell = row["figures"][figure]
    assert cell["value"] is not None, cell
    end = prom.windows.after_start + timedelta(seconds=SLOTS * STEP - 1)
    got = prom.query(f'avg_over_time({record}{{pool="{pool}"}}[{SLOTS * STEP}s])', at=end)
    assert got == {L(pool=pool): pytest.approx(cell["value"] / scale, rel=1e-6)}
