"""The recorder's /metrics and /healthz endpoint."""

from __future__ import annotations

import time

import pytest
from starlette.testclient import TestClient

from gpufleet.recorder.metrics import Metrics


@pytest.mark.parametrize(
    ("leader", "idle_s", "status"),
    [(False, 1_000.0, 200), (True, 0.0, 200), (True, 1_000.0, 503)],
    ids=["follower-waits", "leader-progressing", "leader-stuck"],
)
def test_healthz_fails_only_for_a_leader_that_stopped_making_progress(
    leader: bool, idle_s: float, status: int
) -> None:
    metrics = Metrics(stale_after_s=120.0)
    metrics.set_leader(leader)
    metrics.last_progress = time.monotonic() - idle_s
    response = TestClient(metrics.app()).get("/healthz")
    assert response.status_code == status and response.json()["leader"] is leader


def test_metrics_exposes_events_records_lag_restarts_and_leadership() -> None:
    metrics = Metrics()
    metrics.events.labels("workloads", "MODIFIED").inc()
    metrics.records.labels("Allocation").inc(3)
    metrics.restarts.labels("pods", "Gone").inc()
    metrics.lag.set(2.5)
    metrics.set_leader(True)
    text = TestClient(metrics.app()).get("/metrics").text
    for line in (
        'gpufleet_recorder_events_total{resource="workloads",type="MODIFIED"} 1.0',
        'gpufleet_recorder_records_written_total{kind="Allocation"} 3.0',
        'gpufleet_recorder_watch_restarts_total{cause="Gone",resource="pods"} 1.0',
        "gpufleet_recorder_lag_seconds 2.5",
        "gpufleet_recorder_leader 1.0",
    ):
        assert line in text
