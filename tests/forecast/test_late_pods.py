"""A Workload holding quota whose pods started after its admission (``live.pods_started_late``): its
runtime is drawn from its pods' start, as Kueue's ``PodsReady`` says, not from the admission.

On the testbed a preempted Workload's pods hold their nodes for their grace period, so the next
Workload's pods wait 10-30 compressed seconds after its admission (docs/forecast-notebook.md, "On
the testbed, as it was measured"); counted from the admission, its elapsed time was that much too long. The cluster is
why-fleet.yaml's, built as in ``test_live``: wf-beta's big Job (admitted 10 min ago) holds the quota
wf-alpha's wait needs, and its finished runs took 20-40 min."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from gpufleet.forecast.estimate import Settings
from gpufleet.forecast.live import PODS_READY_LATENCY_S, forecast_live, live_state, pods_started_late
from gpufleet.policy import Fleet, load_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from tests.forecast.test_live import BIG, NOW, POLICY, WAIT, history, stamp

ADMITTED = NOW - timedelta(minutes=10)  # BIG's QuotaReserved


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return resolve(load_policy(POLICY))


def ready(status: str | None, minutes_ago: float = 0) -> dict[str, Any]:
    """BIG with Kueue's PodsReady condition (None: without it, as Kueue without waitForPodsReady)."""
    conditions = list(BIG["status"]["conditions"])
    if status is not None:
        conditions.append({"type": "PodsReady", "status": status, "lastTransitionTime": stamp(minutes_ago)})
    return {**BIG, "status": {**BIG["status"], "conditions": conditions}}


CASES = [
    (ready(None), 0),  # no condition: from the admission, as before
    (ready("True", 10 - 1 / 60), 0),  # its pods started in the admission's second; Kueue saw them a second later
    (ready("True", 4), 6 * 60 - PODS_READY_LATENCY_S),  # started 6 min after the admission
    (ready("False", 10), 10 * 60),  # not all started yet: no earlier than now
]


@pytest.mark.parametrize(("big", "late"), CASES)
def test_the_pods_start_is_read_from_kueues_pods_ready(big: dict[str, Any], late: int) -> None:
    assert pods_started_late(big, ADMITTED, NOW) == late


def _wait(big: dict[str, Any], fleet: Fleet) -> dict[str, int | None]:
    settings, config = Settings(samples=20, seed=5, arrivals=False), SimulationConfig()
    (found,) = forecast_live(live_state([big, WAIT], fleet, NOW), fleet, history(12), settings, config).forecasts
    assert found.workload == "wf-alpha/wait" and not found.declined
    return found.quantiles


@pytest.mark.parametrize(("big", "late"), CASES[:3])
def test_a_late_start_moves_the_end_of_the_run_and_the_wait_behind_it(
    fleet: Fleet, big: dict[str, Any], late: int
) -> None:
    """Every run took 20-40 min, longer than big has run either way, so each sample draws the same
    runtime whichever elapsed time it is conditioned on: the wait behind big moves by the late start."""
    before, after = _wait(BIG, fleet), _wait(big, fleet)
    assert {q: v + late for q, v in before.items() if v is not None} == after


def test_pods_not_started_yet_run_their_whole_runtime_from_now(fleet: Fleet) -> None:
    """Big's pods wait (PodsReady False): its 20-40 min run starts no earlier than now, where counted
    from its admission 10 min ago it would end 10-30 min from now. (Not the exact shift of the cases
    above: a run not yet started is no censored run of the history, so the bootstrap draws differ.)"""
    before, after = _wait(BIG, fleet)["p10"], _wait(CASES[3][0], fleet)["p10"]
    assert before is not None and after is not None and before < 20 * 60 <= after
