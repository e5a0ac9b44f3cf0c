"""``trace from-prometheus`` against a real Prometheus backfilled with kube-state-metrics pod series.

The server and the backfill are the evidence tests' (``tests/evidence``): ``promtool tsdb
create-blocks-from openmetrics``, then ``prometheus`` over the blocks on loopback. The pods, worked out
by hand on the example fleet's nodes and namespaces:

- research/train-abc-0 and -1: one Job of two pods × 8 H100s, created +60 s, started +120 s, both
  completed +3,720 s: one training gang, submitted at 60 s, running 3,600 s.
- nlp-eval/eval-1: one 3g.40gb MIG instance on the A100 node, +300 s to +900 s: nlp's (nlp-eval is
  one of its namespaces), a dev job of 600 s.
- vision/nb-1: a shared L40S replica, started but never completed in the window: left out.
- serving/chat-0: four cards in the serving namespace, which no team owns: not a job.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.trace import JobKind, read_trace
from tests.evidence.conftest import _need_binaries, backfilled_prometheus
from tests.evidence.evidence_scenario import SLOTS, STEP, OpenMetrics
from tests.support import EXAMPLES

runner = CliRunner()
POLICY = EXAMPLES / "fleet.yaml"


@dataclass(frozen=True)
class Backfilled:
    url: str
    start: datetime
    end: datetime


def _pod(
    om: OpenMetrics,
    t0: datetime,
    ns: str,
    pod: str,
    node: str,
    resource: str,
    count: int,
    times: tuple[int, int, int | None],
    owner: str | None = None,
    priority: str = "",
) -> None:
    created, started, completed = times
    base = int(t0.timestamp())
    labels = {"namespace": ns, "pod": pod}
    om.add(
        "kube_pod_container_resource_requests",
        {**labels, "container": "main", "node": node, "resource": resource, "unit": "integer"},
        t0,
        count,
    )
    om.add("kube_pod_created", labels, t0, base + created)
    om.add("kube_pod_start_time", labels, t0, base + started)
    if completed is not None:
        om.add("kube_pod_completion_time", labels, t0, base + completed)
    if owner is not None:
        om.add(
            "kube_pod_owner", {**labels, "owner_kind": "Job", "owner_name": owner, "owner_is_controller": "true"}, t0, 1
        )
    om.add("kube_pod_info", {**labels, "node": node, "priority_class": priority}, t0, 1)


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backfilled]:
    _need_binaries()
    root = tmp_path_factory.mktemp("prometheus-ksm")
    t0 = datetime.fromtimestamp(int(time.time()) // 3600 * 3600, tz=UTC) - timedelta(hours=4)
    om = OpenMetrics()
    for i, node in enumerate(("gpu-h100-01", "gpu-h100-02")):
        _pod(
            om, t0, "research", f"train-abc-{i}", node, "nvidia_com_gpu", 8, (60, 120, 3720), "train-abc", "train-high"
        )
    _pod(om, t0, "nlp-eval", "eval-1", "gpu-a100-01", "nvidia_com_mig_3g_40gb", 1, (300, 300, 900), "eval-1")
    _pod(om, t0, "vision", "nb-1", "gpu-l40s-01", "nvidia_com_gpu_shared", 1, (0, 10, None))
    _pod(om, t0, "serving", "chat-0", "gpu-h100-serve-01", "nvidia_com_gpu", 4, (0, 5, None))
    with backfilled_prometheus(root, om.text()) as url:
        yield Backfilled(url, t0, t0 + timedelta(seconds=STEP * SLOTS))


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_pods_become_jobs_with_their_teams_gangs_and_times(backfilled: Backfilled, tmp_path: Path) -> None:
    out = tmp_path / "trace.csv"
    args = [
        "trace",
        "from-prometheus",
        backfilled.url,
        "--from",
        _iso(backfilled.start),
        "--to",
        _iso(backfilled.end),
        "--policy",
        str(POLICY),
        "-o",
        str(out),
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["pods"] == 5 and doc["leftOut"] == {"unfinished": 1, "otherNamespaces": 1}
    jobs = {j.job_id: j for j in read_trace(out)}
    assert set(jobs) == {"train-abc", "eval-1"}
    train, ev = jobs["train-abc"], jobs["eval-1"]
    assert (train.team, train.submit_s, train.duration_s, train.pods, train.gpus) == ("research", 60, 3600, 2, 8)
    assert train.kind is JobKind.TRAINING and train.gpu_models == ("H100-SXM5-80GB",)
    assert train.priority_class == "train-high"
    assert (ev.team, ev.namespace, ev.submit_s, ev.duration_s) == ("nlp", "nlp-eval", 300, 600)
    assert (ev.mig_profile, ev.gpus, ev.kind) == ("3g.40gb", 1, JobKind.DEV)
    assert ev.gpu_models == ("A100-SXM4-80GB",) and ev.priority_class == ""
    # the trace drives the simulator as it is
    sim = runner.invoke(app, ["simulate", str(POLICY), "--trace", str(out), "-o", str(tmp_path / "sim"), "--json"])
    assert sim.exit_code == 0, sim.output


def test_a_window_that_ends_before_it_starts_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "trace",
            "from-prometheus",
            "http://127.0.0.1:1",
            "--from",
            "2026-01-02",
            "--to",
            "2026-01-01",
            "--policy",
            str(POLICY),
            "-o",
            str(tmp_path / "t.csv"),
        ],
    )
    assert result.exit_code == 2 and "must be after" in result.output


def test_an_unreachable_prometheus_is_an_input_error(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "trace",
            "from-prometheus",
            "http://127.0.0.1:1",
            "--from",
            "2026-01-01",
            "--to",
            "2026-01-02",
            "--policy",
            str(POLICY),
            "-o",
            str(tmp_path / "t.csv"),
        ],
    )
    assert result.exit_code == 2 and "cannot reach Prometheus" in result.output
    assert not (tmp_path / "t.csv").exists()


def test_nodes_of_a_pool_given_as_a_count_carry_its_model() -> None:
    """A pool given as a count has nodes named ``<pool>-01…`` (``policy.node_shape``, as on the testbed
    and in the simulator); a pod Prometheus saw on one of them gets the pool's catalogue model."""
    from gpufleet.policy import load_policy, resolve
    from gpufleet.trace.from_prometheus import _node_models

    policy = load_policy(Path(__file__).resolve().parents[1] / "e2e" / "parity-fleet.yaml")
    counted = [p for p in policy.pools if not p.node_names]
    assert counted, "the parity fleet has a pool given as a count"
    models = _node_models(policy)
    for pool in counted:
        assert models[f"{pool.name}-01"] == resolve(policy).pools[pool.name].gpu.name
