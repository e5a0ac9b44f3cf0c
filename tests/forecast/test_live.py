"""The live path's conversion: Workloads as the API server returns them (plain dicts) into the
replay the forecast runs forward, and the forecast on it (``gpufleet.forecast.live``).

The cluster is why-fleet.yaml's (tests/e2e): wf-alpha guaranteed 4 H100s and may not borrow, wf-beta
guaranteed 4 and may borrow 4, nobody preempts."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpufleet.forecast.arrivals import PRIOR_BURSTS
from gpufleet.forecast.estimate import Settings
from gpufleet.forecast.live import forecast_live, live_moment, live_state, priority_class
from gpufleet.forecast.submissions import live_arrivals
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
    priority: tuple[str, int] = ("wf-normal", 100),
) -> dict[str, Any]:
    """A Workload as Kueue v1beta2 writes it for a Job (``created``/``admitted``: minutes before NOW;
    ``priority``: its WorkloadPriorityClass and value)."""
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
            "priority": priority[1],
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": priority[0]},
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
    # both waiting ones were created before big was admitted, but enter the replay together at now,
    # after it, each keeping its creation's place in the queue
    assert by_key["wf-beta/early"].job.submit_s == by_key["wf-alpha/wait"].job.submit_s == 30 * 60
    assert (by_key["wf-beta/early"].order_s, by_key["wf-alpha/wait"].order_s) == (0, 15 * 60)
    assert by_key["wf-beta/big"].order_s == 20 * 60
    big = by_key["wf-beta/big"].job
    assert (big.team, big.pods, big.gpus, big.priority_class) == ("wf-beta", 3, 2, "wf-normal")


def test_many_waiting_workloads_leave_the_replays_now_at_now(fleet: Fleet) -> None:
    # entered one a second after the last admission, 100 waiting Workloads behind one admitted a
    # minute ago put the replay's now 41 s past the cluster's, and the running ones ran that much longer
    running = workload("wf-beta", "running", pods=3, gpus=2, created=2, admitted=1)
    waiting = [workload("wf-alpha", f"w{i:03d}", pods=1, gpus=4, created=30 - i / 10) for i in range(100)]
    state = live_state([running, *waiting], fleet, NOW)
    assert state.at == (NOW - state.origin).total_seconds() == 30 * 60
    moment, _ = live_moment(state, fleet, history(12), SimulationConfig())
    started = moment.simulation.by_key["wf-beta/running"].attempt.started
    assert started is not None and moment.at - started == 60


GANG = Path(__file__).parents[1] / "e2e" / "world" / "gang.yaml"  # alpha and beta, 6 + 6 borrowable; high 1000, low 100


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"priority": 1000, "priorityClassRef": {"kind": "WorkloadPriorityClass", "name": "high"}}, "high"),  # v1beta2
        ({"priority": 100, "priorityClassName": "low"}, "low"),  # v1beta1
        ({"priorityClassName": "low"}, "low"),  # no value: the name
        ({"priority": 1000, "priorityClassRef": {"name": "urgent"}}, "high"),  # a class the policy lacks: its value's
        ({"priority": 100, "priorityClassRef": {"name": "high"}}, "low"),  # the value is what Kueue orders by
        ({"priority": 1000}, "high"),
        ({"priorityClassRef": {"name": "urgent"}}, ""),
        ({"priority": 5, "priorityClassRef": {"name": "low"}}, ""),  # no class of that value: the default
        ({}, ""),
    ],
)
def test_a_workloads_priority_class_is_the_policys_of_its_value(spec: dict[str, Any], want: str) -> None:
    assert priority_class(spec, resolve(load_policy(GANG))) == want


def test_a_later_high_priority_workload_is_forecast_before_an_earlier_low_one() -> None:
    # found on the testbed's gang scenario: the live path read v1beta1's priorityClassName only, so
    # every Workload the API server served (v1beta2) lost its priority, and the forecast admitted the
    # low-priority gang first, which the real Kueue admitted after every high one
    gang = resolve(load_policy(GANG))
    running = workload("beta", "running", pods=2, gpus=4, created=12, admitted=10, priority=("low", 100))
    low = workload("beta", "low", pods=3, gpus=4, created=30, priority=("low", 100))
    high = workload("alpha", "high", pods=3, gpus=4, created=5, priority=("high", 1000))
    runs = [replace(r, namespace=r.team.replace("wf-", ""), team="beta", gpu_count=8) for r in history(12)]
    report = forecast_live(
        live_state([running, low, high], gang, NOW),
        gang,
        runs,
        Settings(samples=10, arrivals=False),
        SimulationConfig(),
    )
    p50 = {f.workload: f.quantiles["p50"] for f in report.forecasts}
    assert p50["alpha/high"] is not None and p50["beta/low"] is not None
    assert p50["alpha/high"] < p50["beta/low"]
    assert dict(next(f for f in report.forecasts if f.workload == "beta/low").waits_for)["alpha/high"] >= 0.25


def test_quota_freed_at_now_goes_to_the_workload_kueue_orders_first() -> None:
    # found on the testbed's gang scenario: a gang finished as the listing was taken, freeing the
    # cards; the waiting Workloads entered the replay one a second in creation order, so the oldest,
    # a low-priority gang, took them at its entry, where the real Kueue admitted a high one
    gang = resolve(load_policy(GANG))
    low = workload("beta", "low", pods=3, gpus=4, created=30, priority=("low", 100))
    high = workload("alpha", "high", pods=3, gpus=4, created=5, priority=("high", 1000))
    after = workload("alpha", "after", pods=3, gpus=4, created=4, priority=("high", 1000))  # its name sorts first
    state = live_state([low, after, high], gang, NOW)
    moment, differs = live_moment(state, gang, history(12), SimulationConfig())
    runs = moment.simulation.by_key
    assert runs["alpha/high"].state is State.RUNNING  # high priority first, then the earlier creation
    assert runs["alpha/high"].attempt.reserved == moment.at  # admitted at now: it has run nothing
    assert runs["alpha/after"].state is State.PENDING and runs["beta/low"].state is State.PENDING
    assert set(differs) == {"alpha/high"}
    assert "finished" not in differs["alpha/high"]  # nothing finished: the policy may be another


@pytest.mark.parametrize(("seconds_ago", "named"), [(1, True), (5, True), (6, False), (600, False)])
def test_a_workload_the_replay_admits_at_once_names_quota_freed_as_the_cluster_was_read(
    seconds_ago: int, named: bool
) -> None:
    gang = resolve(load_policy(GANG))
    done = workload("alpha", "done", pods=3, gpus=4, created=20, admitted=19, priority=("high", 1000))
    ended = (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    done["status"]["conditions"].append({"type": "Finished", "status": "True", "lastTransitionTime": ended})
    high = workload("beta", "high", pods=3, gpus=4, created=5, priority=("high", 1000))
    report = forecast_live(
        live_state([done, high], gang, NOW), gang, history(12), Settings(samples=5), SimulationConfig()
    )
    (f,) = report.forecasts
    assert f.declined.startswith("the replay differs: it waits on the cluster") and not f.quantiles
    clause = f"alpha/job-done-abcde finished {seconds_ago} s before now: Kueue may be admitting it"
    assert (clause in f.declined) is named


@pytest.mark.parametrize(
    ("wl", "reason"),
    [
        (workload("elsewhere", "x", pods=1, gpus=1, created=1), "NamespaceNotInPolicy"),
        (workload("wf-alpha", "x", pods=1, gpus=0, created=1), "PodSetsNotModelled"),
        (workload("wf-alpha", "x", pods=1, gpus=2, created=1, resource="nvidia.com/gpu.shared"), "PodSetsNotModelled"),
    ],
)
def test_workloads_the_replay_cannot_model_are_named(fleet: Fleet, wl: dict[str, Any], reason: str) -> None:
    state = live_state([BIG, wl], fleet, NOW)
    assert [w.key for w in state.workloads] == ["wf-beta/big"]
    assert [(k, r) for k, r, _ in state.skipped] == [(f"{wl['metadata']['namespace']}/job-x-abcde", reason)]


def test_pod_sets_asking_alike_are_replayed_as_one() -> None:
    # a PyTorchJob's master and two workers, each pod 4 cards: Kueue's quota sums them, 12 cards
    gang = resolve(load_policy(GANG))
    wl = workload("alpha", "torch", pods=2, gpus=4, created=3, pod_sets=2, priority=("high", 1000))
    wl["spec"]["podSets"][0]["count"] = 1
    (w,) = live_state([wl], gang, NOW).workloads
    assert (w.job.pods, w.job.gpus) == (3, 4)


def test_pod_sets_asking_differently_are_named(fleet: Fleet) -> None:
    wl = workload("wf-alpha", "x", pods=1, gpus=1, created=1, pod_sets=2)
    wl["spec"]["podSets"][1] = workload("wf-alpha", "x", pods=2, gpus=4, created=1)["spec"]["podSets"][0]
    state = live_state([BIG, wl], fleet, NOW)
    assert [w.key for w in state.workloads] == ["wf-beta/big"]
    ((key, reason, message),) = state.skipped
    assert (key, reason) == ("wf-alpha/job-x-abcde", "PodSetsNotModelled")
    assert "ask differently per pod (1 nvidia.com/gpu, 4 nvidia.com/gpu)" in message


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


def declaring(wl: dict[str, Any], note: str | None = None, deadline: int | None = None) -> list[dict[str, Any]]:
    """``wl`` and its Job, the Job carrying what its owner declared (Kueue copies neither to the Workload)."""
    meta = wl["metadata"]
    name = meta["ownerReferences"][0]["name"]
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "main"}]}}}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    annotations = {} if note is None else {"gpufleet.io/expected-runtime": note}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": meta["namespace"],
           "annotations": annotations}, "spec": spec}  # fmt: skip
    return [wl, job]


@pytest.mark.parametrize(
    ("note", "deadline", "low", "high", "source"),
    [
        (None, None, 10 * 60, 30 * 60 + 60, "wf-beta · - · 6×gpu"),  # history: 20-40 min runs, 10 min in
        ("15m", None, 5 * 60, 5 * 60 + 5, "declared"),  # it said 15 min and has run 10
        ("900", None, 5 * 60, 5 * 60 + 5, "declared"),
        (None, 12 * 60, 2 * 60, 2 * 60 + 5, "history ≤ deadline"),  # the Job is killed at 12 min
        ("5m", 25 * 60, 10 * 60, 15 * 60 + 60, "history ≤ deadline"),  # run past its declaration: history, bounded
    ],
)
def test_a_declared_runtime_of_the_borrower_moves_the_waiting_forecast(
    fleet: Fleet, note: str | None, deadline: int | None, low: int, high: int, source: str
) -> None:
    objects = [*declaring(BIG, note, deadline), WAIT]
    settings = Settings(samples=20, seed=3, arrivals=False)
    report = forecast_live(live_state(objects, fleet, NOW), fleet, history(12), settings, SimulationConfig())
    (f,) = report.forecasts
    assert not f.declined and f.admitted == 20
    assert low <= f.quantiles["p10"] <= f.quantiles["p90"] <= high  # type: ignore[operator]
    assert report.basis.sources.get(source, 0) >= 20  # big's draw, in every sample


def owned(wl: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """``wl`` as Kueue writes it for an owner of ``kind`` (its one controller reference) of the same name."""
    name = wl["metadata"]["ownerReferences"][0]["name"]
    ref = {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}
    return {**wl, "metadata": {**wl["metadata"], "ownerReferences": [ref]}}


def of_kind(api_version: str, kind: str, spec: dict[str, Any], note: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "big", "namespace": "wf-beta"}
    if note is not None:
        meta["annotations"] = {"gpufleet.io/expected-runtime": note}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


TWELVE_MIN = {"replicatedJobs": [{"name": "w", "template": {"spec": {"activeDeadlineSeconds": 12 * 60}}}]}


@pytest.mark.parametrize(
    ("kind", "objects", "low", "high", "source"),
    [
        # the JobSet's replicated Job is failed at 12 min, and with it the JobSet
        (
            ("jobset.x-k8s.io/v1alpha2", "JobSet"),
            [of_kind("jobset.x-k8s.io/v1alpha2", "JobSet", TWELVE_MIN)],
            2 * 60,
            2 * 60 + 5,
            "history ≤ deadline",
        ),
        (("ray.io/v1", "RayJob"), [of_kind("ray.io/v1", "RayJob", {}, note="15m")], 5 * 60, 5 * 60 + 5, "declared"),
        # a Job of the same name is not the owner: what it declares is not big's
        (("ray.io/v1", "RayJob"), declaring(BIG, "15m")[1:], 10 * 60, 30 * 60 + 60, "wf-beta · - · 6×gpu"),
    ],
    ids=["jobset-deadline", "rayjob-runtime", "same-name-job"],
)
def test_the_owner_of_another_kind_declares_for_its_workload(
    fleet: Fleet, kind: tuple[str, str], objects: list[dict[str, Any]], low: int, high: int, source: str
) -> None:
    big = owned(BIG, *kind)
    state = live_state([big, *objects, WAIT], fleet, NOW)
    assert {w.key for w in state.workloads} == {"wf-beta/big", "wf-alpha/wait"}  # named by the owner
    report = forecast_live(state, fleet, history(12), Settings(samples=20, seed=3, arrivals=False), SimulationConfig())
    (f,) = report.forecasts
    assert not f.declined and f.admitted == 20
    assert low <= f.quantiles["p10"] <= f.quantiles["p90"] <= high  # type: ignore[operator]
    assert report.basis.sources.get(source, 0) >= 20  # big's draw, in every sample


def test_a_malformed_declaration_declines_its_own_answer_only(fleet: Fleet) -> None:
    from gpufleet.forecast.live import live_document

    bad_wait = declaring(WAIT, "soon")
    state = live_state([BIG, *bad_wait], fleet, NOW)
    report = forecast_live(state, fleet, history(12), Settings(samples=5, arrivals=False), SimulationConfig())
    (f,) = report.forecasts
    assert not f.quantiles
    assert f.declined == (
        "MalformedDeclaredRuntime: annotation gpufleet.io/expected-runtime on Job wf-alpha/wait: "
        "expected seconds or a duration such as 2h30m, greater than 0, got 'soon'"
    )
    # on the one holding quota, the declaration is not read and its runtime drawn from history instead
    state = live_state([*declaring(BIG, "about an hour"), WAIT], fleet, NOW)
    report = forecast_live(state, fleet, history(12), Settings(samples=5, arrivals=False), SimulationConfig())
    (f,) = report.forecasts
    assert f.quantiles and not f.declined
    doc = live_document(report, state, "why-fleet.yaml", "sqlite:///ledger.db")
    assert [(m["workload"], m["reason"]) for m in doc["malformed"]] == [
        ("wf-beta/job-big-abcde", "MalformedDeclaredRuntime")
    ]


def submitted(team: str, count: int, within: timedelta) -> list[Allocation]:
    """``count`` workloads of ``team`` created evenly over ``within`` before NOW, an hour apart or more."""
    step = within / count
    return [
        allocation(
            workload_uid=f"{team}-new-{i}", namespace=team, name=f"new-{i}", team=team, priority=100,
            gpu_count=2, created=NOW - step * (i + 1), quota_reserved=None, admitted=None, started=None,
        )
        for i in range(count)
    ]  # fmt: skip


@pytest.mark.parametrize("arrivals", [True, False])
def test_arrivals_are_sampled_from_the_ledgers_submissions(fleet: Fleet, arrivals: bool) -> None:
    records = [
        *history(12),
        *submitted("wf-beta", 12, timedelta(hours=12)),
        *submitted("wf-alpha", 6, timedelta(days=3)),
    ]
    settings = Settings(samples=10, seed=1, arrivals=arrivals)
    report = forecast_live(live_state([BIG, WAIT], fleet, NOW), fleet, records, settings, SimulationConfig())
    assert report.basis.arrivals is arrivals
    if arrivals:
        # each burst weighs half as much 12 h further back, over one exposure both teams share: wf-beta's
        # 12 of the last 12 h and big (11 min ago) against wf-alpha's one every 12 h for 3 days and wait
        # (15 min ago); each count plus the Gamma prior's half
        def weight(hours: float) -> float:
            return float(0.5 ** (hours / 12))

        beta = sum(weight(h) for h in range(1, 13)) + weight(11 / 60) + PRIOR_BURSTS
        alpha = sum(weight(12 * k) for k in range(1, 7)) + weight(15 / 60) + PRIOR_BURSTS
        rates = report.basis.arrival_rates
        assert set(rates) == {"wf-beta", "wf-alpha"}
        assert rates["wf-beta"] / rates["wf-alpha"] == pytest.approx(beta / alpha, rel=1e-3)
    else:
        assert report.basis.arrival_rates == {}


def test_a_ledger_on_another_clock_declines_with_the_offset(fleet: Fleet) -> None:
    big, wait = (dict(w, metadata={**w["metadata"], "uid": f"uid-{n}"}) for n, w in (("big", BIG), ("wait", WAIT)))
    state = live_state([big, wait], fleet, NOW)
    ahead = timedelta(minutes=20)  # the ledger's copy of both Workloads, stamped on a clock 20 min ahead
    copies = [
        allocation(workload_uid=w.uid, namespace=w.job.namespace, name=w.job.job_id, created=w.created + ahead,
                   quota_reserved=None, admitted=None, started=None)
        for w in state.workloads if w.created is not None
    ]  # fmt: skip
    report = forecast_live(state, fleet, [*history(12), *copies], Settings(samples=5), SimulationConfig())
    (f,) = report.forecasts
    assert not f.quantiles and f.declined.startswith("LedgerClockSkew: the ledger's clock is 20 min ahead of")
    assert "offset +1200 s" in f.declined and report.basis.declined == f.declined
    agreeing = [replace(c, created=c.created - ahead) for c in copies]
    report = forecast_live(state, fleet, [*history(12), *agreeing], Settings(samples=5), SimulationConfig())
    assert report.forecasts[0].quantiles and not report.basis.declined


@pytest.mark.parametrize("ledger", ["foreign", "postgresql://gpufleet:secret@127.0.0.1:1/ledger", "missing"])
def test_a_foreign_unreachable_or_missing_ledger_exits_2_and_creates_nothing(tmp_path: Path, ledger: str) -> None:
    import sqlite3

    from typer.testing import CliRunner

    from gpufleet.cli import app

    foreign = tmp_path / "other.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE jobs (id TEXT)")
    url = {"foreign": f"sqlite:///{foreign}", "missing": f"sqlite:///{tmp_path / 'none.db'}"}.get(ledger, ledger)
    result = CliRunner().invoke(
        app, ["forecast", "--policy", str(POLICY), "--kubeconfig", "/nonexistent", "--ledger", url]
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert {
        "foreign": "not a gpufleet ledger: it holds other tables (jobs)",
        "missing": "no such ledger file (a reading command never creates one)",
    }.get(ledger, "cannot open the ledger: connection failed") in text
    assert "secret" not in text and "Traceback" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]  # nothing created
    with sqlite3.connect(foreign) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["jobs"]  # nothing written


def test_ledger_submissions_become_jobs_that_fit_the_policys_nodes(fleet: Fleet) -> None:
    from gpufleet.forecast.submissions import ledger_jobs

    zero = NOW - timedelta(days=1)
    records = [
        allocation(workload_uid="a", attempt=2, namespace="wf-beta", name="six", gpu_count=6, priority=100,
                   created=NOW - timedelta(hours=2)),
        allocation(workload_uid="a", attempt=1, namespace="wf-beta", name="six", gpu_count=6, priority=100,
                   created=NOW - timedelta(hours=2)),
        allocation(workload_uid="b", namespace="wf-alpha", name="seven", gpu_count=7, priority=5,
                   created=NOW - timedelta(hours=1)),
        allocation(workload_uid="c", namespace="elsewhere", name="x", gpu_count=1, created=NOW - timedelta(hours=1)),
        allocation(workload_uid="d", namespace="wf-alpha", name="old", gpu_count=1, created=zero - timedelta(seconds=1)),
        allocation(workload_uid="e", namespace="wf-alpha", name="later", gpu_count=1, created=NOW),
        allocation(workload_uid="f", namespace="wf-alpha", name="", gpu_count=1, created=NOW - timedelta(hours=1)),
    ]  # fmt: skip
    jobs = ledger_jobs(records, fleet, zero, NOW)
    assert sorted(jobs) == ["a", "b"]  # once per workload; in the policy, in the window, named
    six, seven = jobs["a"], jobs["b"]
    # why-fleet's nodes carry 4 cards: 6 as 2 pods of 3, 7 (prime) as 7 pods of 1
    assert (six.team, six.pods, six.gpus, six.priority_class, six.submit_s) == ("wf-beta", 2, 3, "wf-normal", 22 * 3600)
    assert (seven.team, seven.pods, seven.gpus, seven.priority_class) == ("wf-alpha", 7, 1, "")


def test_the_ledgers_weeks_give_the_calendars_weekend_its_own_rate(fleet: Fleet) -> None:
    """Four weeks of a team that submits six workloads a weekday and one a weekend day: the model's
    day 0 is a Monday, so its Saturday and Sunday (days 5 and 6) carry the quiet, whatever day now is."""
    days = [NOW - timedelta(days=d) for d in range(1, 29)]
    records = [
        allocation(
            workload_uid=f"u-{day:%m%d}-{i}", namespace="wf-alpha", name=f"j-{day:%m%d}-{i}", team="wf-alpha",
            priority=100, gpu_count=1, created=day.replace(hour=8 + i, minute=0), quota_reserved=None,
            admitted=None, started=None,
        )
        for day in days
        for i in range(6 if day.weekday() < 5 else 1)
    ]  # fmt: skip
    model = live_arrivals(NOW, 0, [], fleet, records)
    assert max(model.week[5:]) < 0.4 < 1.0 < min(model.week[:5])
