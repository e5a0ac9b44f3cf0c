"""A waiting Workload in Kueue's requeue backoff enters the replay's queue when Kueue requeues it
(``live.requeue_entry``), not at *now*.

Kueue v0.19.2 sets ``Requeued`` False on a Workload it evicted for its pods' readiness or by an
admission check, keeps it among its queue's inadmissible (``backoffWaitingTimeExpired``), and its
workload controller sets ``Requeued`` True at ``status.requeueState.requeueAt``. Entered at *now*,
the replay admitted such a Workload at once where quota was free (and declined its forecast as "the
replay differs"), or gave it quota a younger Workload gets on the cluster. Kueue's count of such
evictions (``status.requeueState.count``) carries into the replay, which backs off from it as Kueue
does (``live.requeue_count``). The cluster is why-fleet.yaml's (wf-alpha guaranteed 4 H100s, no borrowing), its Workloads built as in ``test_live``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from gpufleet.forecast.estimate import Settings
from gpufleet.forecast.live import (
    forecast_live,
    live_document,
    live_moment,
    live_state,
    requeue_count,
    requeue_entry,
)
from gpufleet.policy import Fleet, load_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from tests.forecast.test_live import NOW, POLICY, declaring, history, stamp, workload


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return resolve(load_policy(POLICY))


def backing_off(
    job: str, *, reason: str = "PodsReadyTimeout", due: float | None = -10, created: float = 30
) -> dict[str, Any]:
    """wf-alpha's 4-GPU Workload created ``created`` minutes before NOW, evicted for ``reason`` 20 min
    before NOW, ``Requeued`` False since, its ``requeueAt`` ``due`` minutes before NOW (negative:
    after; None: none written)."""
    wl = workload("wf-alpha", job, pods=1, gpus=4, created=created)
    wl["status"]["conditions"] += [
        {"type": "Evicted", "status": "True", "reason": reason, "lastTransitionTime": stamp(20)},
        {"type": "Requeued", "status": "False", "reason": reason, "message": "m", "lastTransitionTime": stamp(20)},
    ]
    if due is not None:
        wl["status"]["requeueState"] = {"count": 1, "requeueAt": stamp(due)}
    return wl


def requeued(status: str) -> dict[str, Any]:
    wl = backing_off("x")
    wl["status"]["conditions"][-1]["status"] = status
    return wl


@pytest.mark.parametrize(
    ("wl", "enters", "reason"),
    [
        (workload("wf-alpha", "x", pods=1, gpus=4, created=30), 0, ""),  # never evicted: in the queue
        (requeued("True"), 0, ""),  # its backoff is over: in the queue
        (backing_off("x"), 10, ""),  # in its backoff: at its requeueAt
        (backing_off("x", reason="AdmissionCheck"), 10, ""),
        (backing_off("x", due=5), 0, ""),  # due 5 min ago: the controller requeues it at once
        (backing_off("x", due=None), 0, ""),  # no backoff written: requeued at once
        (backing_off("x", reason="Inadmissible"), None, "Inadmissible"),  # a stopped or missing queue: out
    ],
)
def test_a_workload_enters_kueues_queue_when_kueue_requeues_it(
    wl: dict[str, Any], enters: int | None, reason: str
) -> None:
    at, why, message = requeue_entry(wl, NOW)
    assert why == reason
    if enters is None:
        assert at is None and "Requeued is False: Inadmissible (m)" in message
    else:
        assert at == NOW + timedelta(minutes=enters) and not message


def test_a_workload_in_its_backoff_is_forecast_from_its_requeue(fleet: Fleet) -> None:
    # wf-alpha's quota is free: entered at now, the replay admitted it at once and declined its forecast
    state = live_state([backing_off("old")], fleet, NOW)
    (w,) = state.workloads
    assert w.requeue_at == NOW + timedelta(minutes=10)
    assert w.job.submit_s == state.at + 600 and w.order_s == state.at - 20 * 60  # its place: the eviction
    report = forecast_live(state, fleet, history(12), Settings(samples=10, arrivals=False), SimulationConfig())
    (f,) = report.forecasts
    assert not f.declined and f.admitted == 10
    assert f.quantiles == {"p10": 600, "p50": 600, "p90": 600}
    assert f.waited_s == 20 * 60  # its wait is still the cluster's: since its eviction
    (doc,) = live_document(report, state, "why-fleet.yaml", "ledger")["workloads"]
    assert doc["requeueAt"] == "2026-12-05T09:10:00Z"
    assert doc["text"].endswith(
        "(waiting out Kueue's requeue backoff until 2026-12-05T09:10:00Z: it re-enters the queue then;"
        " Kueue evicted it once because its pods were not all ready in time: PodsReadyTimeout)"
    )
    assert doc["requeues"] == 1


def test_a_younger_workload_takes_the_quota_freed_during_the_backoff(fleet: Fleet) -> None:
    # running's 4 GPUs free in 5 min (it declared 15 min and has run 10). old stands ahead of young in
    # the queue (evicted 20 min ago, young created 15 min ago) but is out of it until 10 min from now:
    # young gets the quota, and old waits for young's end (runs of 20-40 min in the history)
    running = workload("wf-alpha", "running", pods=1, gpus=4, created=11, admitted=10)
    young = workload("wf-alpha", "young", pods=1, gpus=4, created=15)
    state = live_state([*declaring(running, "15m"), backing_off("old"), young], fleet, NOW)
    report = forecast_live(state, fleet, history(12), Settings(samples=10, arrivals=False), SimulationConfig())
    got = {f.workload: f for f in report.forecasts}
    assert not got["wf-alpha/young"].declined and not got["wf-alpha/old"].declined
    assert 5 * 60 <= got["wf-alpha/young"].quantiles["p10"] <= got["wf-alpha/young"].quantiles["p90"] <= 5 * 60 + 5  # type: ignore[operator]
    assert got["wf-alpha/old"].quantiles["p10"] >= 25 * 60  # type: ignore[operator]
    assert got["wf-alpha/old"].waits_for[0][0] == "wf-alpha/young"


def test_a_workload_kept_out_for_another_reason_is_named(fleet: Fleet) -> None:
    state = live_state([backing_off("old", reason="Inadmissible")], fleet, NOW)
    assert not state.workloads
    ((key, reason, message),) = state.skipped
    assert (key, reason) == ("wf-alpha/job-old-abcde", "Inadmissible") and "the listing does not tell" in message


def counted(count: Any) -> dict[str, Any]:
    wl = backing_off("x")
    wl["status"]["requeueState"]["count"] = count
    return wl


@pytest.mark.parametrize(
    ("wl", "count"),
    [
        (workload("wf-alpha", "x", pods=1, gpus=4, created=30), 0),  # never evicted: no requeueState
        (backing_off("x", due=None), 0),  # evicted, no requeueState written
        (counted(3), 3),
        (counted(0), 0),
        (counted("3"), 0),  # not an integer: Kueue writes an int32
        (counted(True), 0),
        (counted(-1), 0),
    ],
)
def test_kueues_requeue_count_is_read_from_the_workload(wl: dict[str, Any], count: int) -> None:
    assert requeue_count(wl) == count


@pytest.mark.parametrize(("count", "backoff_s"), [(0, 60), (1, 120), (3, 480)])
def test_the_replay_backs_off_from_kueues_count(fleet: Fleet, count: int, backoff_s: int) -> None:
    # wf-alpha and wf-beta each run a 3-GPU pod, one on each 4-card node; wf-beta's 2-GPU Workload,
    # evicted ``count`` times for its pods' readiness, re-enters at its requeueAt 10 min from now. Its
    # quota is free (wf-beta borrows), its pods find no node: the replay evicts it again at the
    # 30-minute timeout and backs off 60 s · 2^count (Kueue's ``UpdateRequeueState``), then admits it again
    alpha = workload("wf-alpha", "a", pods=1, gpus=3, created=11, admitted=10)
    beta = workload("wf-beta", "b", pods=1, gpus=3, created=11, admitted=10)
    wl = workload("wf-beta", "c", pods=1, gpus=2, created=30)
    wl["status"]["conditions"] += [
        {"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout", "lastTransitionTime": stamp(20)},
        {"type": "Requeued", "status": "False", "reason": "PodsReadyTimeout", "lastTransitionTime": stamp(20)},
    ]
    wl["status"]["requeueState"] = {"count": count, "requeueAt": stamp(-10)}
    state = live_state([*declaring(alpha, "3h"), *declaring(beta, "3h"), wl], fleet, NOW)
    assert {w.key: w.requeues for w in state.workloads}["wf-beta/c"] == count
    moment, differs = live_moment(state, fleet, history(12), SimulationConfig())
    assert not differs
    run = moment.simulation.by_key["wf-beta/c"]
    moment.simulation.advance(state.at + 600 + 30 * 60 + 480 + 10)  # past its second admission, before its next timeout
    first, second = run.attempts[-2:]
    assert first.reserved == state.at + 600 and first.started is None
    assert first.end_detail == "PodsReadyTimeout" and first.ended == first.reserved + 30 * 60
    assert second.reserved == first.ended + backoff_s
    assert run.requeues == count + 1


@pytest.mark.parametrize(
    ("count", "said"),
    [
        (None, None),  # never evicted: nothing said, 0 in --json
        (1, "(Kueue evicted it once because its pods were not all ready in time: PodsReadyTimeout)"),
        (4, "(Kueue evicted it 4 times because its pods were not all ready in time: PodsReadyTimeout)"),
    ],
)
def test_the_answer_says_how_often_kueue_evicted_it_for_its_pods(
    fleet: Fleet, count: int | None, said: str | None
) -> None:
    # requeued and back in the queue (its backoff over): the count is what is left of its evictions
    wl = workload("wf-alpha", "x", pods=1, gpus=4, created=30)
    if count is not None:
        wl["status"]["requeueState"] = {"count": count}
    state = live_state([wl], fleet, NOW)
    report = forecast_live(state, fleet, history(12), Settings(samples=4, arrivals=False), SimulationConfig())
    (doc,) = live_document(report, state, "why-fleet.yaml", "ledger")["workloads"]
    assert doc["requeues"] == (count or 0) and doc["requeueAt"] is None
    assert (said in doc["text"]) if said else ("evicted" not in doc["text"])
