"""The live path's conversion: Workloads as the API server returns them (plain dicts) into the
replay the forecast runs forward, and the forecast on it (``gpufleet.forecast.live``).

The cluster is why-fleet.yaml's (tests/e2e): wf-alpha guaranteed 4 H100s and may not borrow, wf-beta
guaranteed 4 and may borrow 4, nobody preempts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpufleet.forecast.estimate import Settings
from gpufleet.forecast.live import forecast_live, live_moment, live_state
from gpufleet.ledger.records import Allocation, EndReason
from gpufleet.policy import Fleet, load_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.jobs import State
from tests.ledger.ledger_factories import allocation

POLICY = Path(__file__).parents[1] / "e2e" / "why-fleet.yaml"
NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return resolve(load_policy(POLICY))


def stamp(minutes_ago: float) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload(
    namespace: str,
    job: str,
    *,
    pods: int,
    gpus: int,
    created: float,
    admitted: float | None = None,
    resource: str = GPU,
    pod_sets: int = 1,
) -> dict[str, Any]:
    """A Workload as Kueue writes it for a Job (``created``/``admitted``: minutes before NOW)."""
    template = {"spec": {"containers": [{"name": "main", "resources": {"requests": {resource: str(gpus)}}}]}}
    conditions: list[dict[str, Any]] = []
    status: dict[str, Any] = {"conditions": conditions}
    if admitted is not None:
        conditions.append({"type": "QuotaReserved", "status": "True", "lastTransitionTime": stamp(admitted)})
        conditions.append({"type": "Admitted", "status": "True", "lastTransitionTime": stamp(admitted)})
        status["admission"] = {"clusterQueue": namespace, "podSetAssignments": []}
    else:
        conditions.append({"type": "QuotaReserved", "status": "False", "lastTransitionTime": stamp(created)})
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{job}-abcde",
            "namespace": namespace,
            "creationTimestamp": stamp(created),
            "ownerReferences": [{"kind": "Job", "name": job}],
        },
        "spec": {
            "queueName": namespace,
            "priorityClassName": "wf-normal",
            "podSets": [{"name": f"ps{i}", "count": pods, "template": template} for i in range(pod_sets)],
        },
        "status": status,
    }


def history(runs: int, minutes: tuple[int, ...] = (20, 25, 30, 35, 40)) -> list[Allocation]:
    """wf-beta's finished 6-GPU runs, before NOW."""
    out = []
    for i in range(runs):
        start = NOW - timedelta(days=1, hours=i)
        out.append(
            allocation(
                workload_uid=f"uid-{i}", namespace="wf-beta", name=f"old-{i}", team="wf-beta", model=None,
                gpu_count=6, started=start, finished=start + timedelta(minutes=minutes[i % len(minutes)]),
                end_reason=EndReason.FINISHED,
            )
        )  # fmt: skip
    return out


BIG = workload("wf-beta", "big", pods=3, gpus=2, created=11, admitted=10)
WAIT = workload("wf-alpha", "wait", pods=1, gpus=4, created=15)  # created before big's admission


def test_holding_enter_at_admission_and_waiting_after_the_last(fleet: Fleet) -> None:
    state = live_state([BIG, WAIT, workload("wf-beta", "early", pods=1, gpus=1, created=30)], fleet, NOW)
    by_key = {w.key: w for w in state.workloads}
    assert set(by_key) == {"wf-beta/big", "wf-alpha/wait", "wf-beta/early"}
    # the origin is the earliest instant: early's creation 30 min ago
    assert state.origin == NOW - timedelta(minutes=30) and state.at == 30 * 60
    assert by_key["wf-beta/big"].holding and by_key["wf-beta/big"].job.submit_s == 20 * 60
    # both waiting ones were created before big was admitted, but enter the replay after it, in creation order
    assert by_key["wf-beta/early"].job.submit_s == 20 * 60 + 1
    assert by_key["wf-alpha/wait"].job.submit_s == 20 * 60 + 2
    big = by_key["wf-beta/big"].job
    assert (big.team, big.pods, big.gpus, big.priority_class) == ("wf-beta", 3, 2, "wf-normal")


@pytest.mark.parametrize(
    ("wl", "reason"),
    [
        (workload("elsewhere", "x", pods=1, gpus=1, created=1), "NamespaceNotInPolicy"),
        (workload("wf-alpha", "x", pods=1, gpus=1, created=1, pod_sets=2), "PodSetsNotModelled"),
        (workload("wf-alpha", "x", pods=1, gpus=0, created=1), "PodSetsNotModelled"),
        (workload("wf-alpha", "x", pods=1, gpus=2, created=1, resource="nvidia.com/gpu.shared"), "PodSetsNotModelled"),
    ],
)
def test_workloads_the_replay_cannot_model_are_named(fleet: Fleet, wl: dict[str, Any], reason: str) -> None:
    state = live_state([BIG, wl], fleet, NOW)
    assert [w.key for w in state.workloads] == ["wf-beta/big"]
    assert [(k, r) for k, r, _ in state.skipped] == [(f"{wl['metadata']['namespace']}/job-x-abcde", reason)]


def test_a_second_workload_of_one_job_is_left_out(fleet: Fleet) -> None:
    again = workload("wf-beta", "big", pods=1, gpus=1, created=1)
    again["metadata"]["name"] = "job-big-fghij"
    state = live_state([BIG, again], fleet, NOW)
    assert [w.workload for w in state.workloads] == ["wf-beta/job-big-abcde"]
    assert [(k, r) for k, r, _ in state.skipped] == [("wf-beta/job-big-fghij", "JobOwnsSeveral")]


def test_finished_and_deactivated_workloads_are_not_state(fleet: Fleet) -> None:
    finished = workload("wf-beta", "f", pods=1, gpus=1, created=50, admitted=49)
    finished["status"]["conditions"].append({"type": "Finished", "status": "True"})
    inactive = workload("wf-alpha", "d", pods=1, gpus=1, created=5)
    inactive["spec"]["active"] = False
    assert [w.key for w in live_state([BIG, finished, inactive], fleet, NOW).workloads] == ["wf-beta/big"]


def test_the_replay_reproduces_the_cluster_at_now(fleet: Fleet) -> None:
    state = live_state([BIG, WAIT], fleet, NOW)
    moment, differs = live_moment(state, fleet, history(12), SimulationConfig())
    assert differs == {}
    runs = moment.simulation.by_key
    assert runs["wf-alpha/wait"].state is State.PENDING
    assert runs["wf-beta/big"].state is State.RUNNING
    assert moment.history.runs == 12


def test_a_waiting_workload_the_policy_would_admit_is_not_given_a_figure(fleet: Fleet) -> None:
    small = workload("wf-alpha", "small", pods=1, gpus=2, created=3)  # alpha's 2 unborrowed GPUs are free
    report = forecast_live(
        live_state([BIG, small], fleet, NOW), fleet, history(12), Settings(samples=5), SimulationConfig()
    )
    (f,) = report.forecasts
    assert f.workload == "wf-alpha/small" and not f.quantiles
    assert f.declined.startswith("the replay differs: it waits on the cluster")


def test_the_waiting_workload_starts_when_the_borrower_ends(fleet: Fleet) -> None:
    settings = Settings(samples=20, seed=3, arrivals=False)
    report = forecast_live(live_state([BIG, WAIT], fleet, NOW), fleet, history(12), settings, SimulationConfig())
    (f,) = report.forecasts
    assert f.workload == "wf-alpha/wait" and f.waited_s == 15 * 60 and not f.declined
    p10, p50, p90 = (f.quantiles[q] for q in ("p10", "p50", "p90"))
    assert p10 is not None and p50 is not None and p90 is not None
    # big has run 10 min of runs that take 20-40 min: it ends 10-30 min from now, wait a second or so later
    assert 10 * 60 <= p10 <= p50 <= p90 <= 30 * 60 + 60
    assert f.waits_for[0][0] == "wf-beta/big" and f.admitted == 20
    assert report.basis.history_runs == 12 and not report.basis.arrivals


@pytest.mark.parametrize("runs", [0, 9])
def test_too_little_history_declines(fleet: Fleet, runs: int) -> None:
    report = forecast_live(
        live_state([BIG, WAIT], fleet, NOW), fleet, history(runs), Settings(samples=5), SimulationConfig()
    )
    (f,) = report.forecasts
    assert not f.quantiles and f.declined.startswith("too little history")
    assert report.basis.declined.startswith(f"too little history: {runs} finished runs")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--at", "1d"], "--at is a moment of a trace"),
        (["--trace", "week.csv", "--at", "1d", "--ledger", "x.db"], "--trace needs --at, and takes neither"),
        (["--trace", "week.csv"], "--trace needs --at"),
        (["--ledger", "/nonexistent/ledger.db"], "ledger.db"),
    ],
)
def test_bad_live_input_exits_2_before_asking_the_cluster(args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from gpufleet.cli import app

    # no cluster at this kubeconfig: each refusal comes before the cluster is asked anything
    result = CliRunner().invoke(app, ["forecast", "--policy", str(POLICY), "--kubeconfig", "/nonexistent", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
