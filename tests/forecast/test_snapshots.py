"""A live forecast's inputs kept at a moment, forecast afterwards and checked against the run's final
ledger (``gpufleet.forecast.snapshots``); on the testbed, ``tests/e2e/test_world_differential.py``.

The cluster is why-fleet.yaml's, its Workloads built as in ``test_live``: wf-beta's big Job borrows,
wf-alpha's waits for it."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import pytest

from gpufleet.forecast.calibration import MIN_WAIT_S
from gpufleet.forecast.estimate import Settings
from gpufleet.forecast.snapshots import Snapshot, hindsight, next_admission
from gpufleet.ledger.records import Allocation, EndReason
from gpufleet.policy import Fleet, load_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from tests.forecast.test_live import BIG, NOW, POLICY, WAIT, history, workload
from tests.ledger.ledger_factories import allocation

ORIGIN = NOW - timedelta(minutes=30)


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return resolve(load_policy(POLICY))


def attempt(job: str, reserved: datetime, finished: datetime | None = None, namespace: str = "wf-alpha") -> Allocation:
    """One attempt of ``job``'s Workload as the recorder writes it (Kueue's workload name)."""
    return allocation(
        namespace=namespace, name=f"job-{job}-abcde", quota_reserved=reserved, admitted=reserved, started=reserved,
        finished=finished, end_reason=None if finished is None else EndReason.PREEMPTED,
    )  # fmt: skip


LISTED = NOW.replace(microsecond=400_000)


@pytest.mark.parametrize(
    ("attempts", "expected"),
    [
        ([], None),  # never reserved in the run
        ([attempt("wait", NOW + timedelta(seconds=40))], NOW + timedelta(seconds=40)),
        ([attempt("other", NOW + timedelta(seconds=5)), attempt("wait", NOW + timedelta(seconds=40))],
         NOW + timedelta(seconds=40)),  # another Job's attempt is not this one's
        ([attempt("wait", NOW + timedelta(seconds=5), namespace="wf-beta")], None),  # nor another namespace's
        # the attempt it waited after (reserved and ended before the listing), then the next one
        ([attempt("wait", NOW - timedelta(seconds=60), NOW - timedelta(seconds=10)),
          attempt("wait", NOW + timedelta(seconds=40))], NOW + timedelta(seconds=40)),
        # reserved just after the listing, in its second: Kueue's condition time is truncated to it
        ([attempt("wait", NOW), attempt("wait", NOW + timedelta(seconds=90))], NOW),
    ],
)  # fmt: skip
def test_the_next_admission_is_the_first_attempt_after_the_listing(
    attempts: list[Allocation], expected: datetime | None
) -> None:
    assert next_admission(attempts, "wf-alpha/wait", LISTED) == expected


def snap(objects: list[dict[str, Any]], records: list[Allocation]) -> Snapshot:
    return Snapshot(tuple(records), NOW, tuple(objects), NOW)


def test_a_waiting_workload_is_checked_against_its_real_admission(fleet: Fleet) -> None:
    # big has run 10 min of runs that take 20-40 min: the forecast says 10-30 min; Kueue admitted at 20
    final = [*history(12), attempt("wait", NOW + timedelta(minutes=20))]
    found = hindsight([snap([BIG, WAIT], history(12))], fleet, final, ORIGIN, settings=Settings(samples=20, seed=3),
                      config=SimulationConfig())  # fmt: skip
    (check,) = found.checks
    assert found.declined == ()
    assert (check.workload, check.team, check.at, check.actual) == ("wf-alpha/wait", "wf-alpha", 30 * 60, 1200.0)
    assert check.covered and check.p10 <= check.p50 <= check.p90 < math.inf
    assert check.min_wait_s == MIN_WAIT_S


def test_no_admission_in_the_run_counts_as_never(fleet: Fleet) -> None:
    found = hindsight([snap([BIG, WAIT], history(12))], fleet, history(12), ORIGIN, settings=Settings(samples=10),
                      config=SimulationConfig(), time_factor=10)  # fmt: skip
    (check,) = found.checks
    assert check.actual == math.inf and not check.covered  # its interval is bounded above
    assert check.min_wait_s == MIN_WAIT_S / 10  # a 10x compressed trace's floor of the wait


def test_waiting_workloads_without_a_figure_keep_their_reason(fleet: Fleet) -> None:
    elsewhere = workload("elsewhere", "x", pods=1, gpus=1, created=1)
    found = hindsight(
        [snap([BIG, WAIT], history(9)), snap([BIG, WAIT, elsewhere], history(12))],
        fleet, history(12), ORIGIN, settings=Settings(samples=5), config=SimulationConfig(),
    )  # fmt: skip
    reasons = sorted((d.workload, d.reason.split(":")[0]) for d in found.declined)
    assert reasons == [("elsewhere/job-x-abcde", "NamespaceNotInPolicy"), ("wf-alpha/wait", "too little history")]
    assert [c.workload for c in found.checks] == ["wf-alpha/wait"]  # the second snapshot's figure


@pytest.mark.parametrize(
    ("server", "local", "expected"),
    [
        # the CLI's now is the API server's Date, whole seconds as Kueue's stamps: the wait is theirs
        (NOW, NOW + timedelta(milliseconds=700), 1200.0),
        (NOW + timedelta(seconds=1), NOW + timedelta(milliseconds=1_100), 1199.0),
        # no Date from the server: this machine's clock stands in, as in the CLI
        (None, NOW + timedelta(milliseconds=700), 1199.3),
    ],
)  # fmt: skip
def test_the_wait_is_measured_from_the_api_servers_second_as_the_forecast_is(
    fleet: Fleet, server: datetime | None, local: datetime, expected: float
) -> None:
    """The forecast counts from the server's second (the replay reads whole-second stamps only); the real
    wait measured from this machine's clock, a fraction past it, came out short of it by that fraction
    at every check, all one way (the testbed's misses before p10, docs/forecast-notebook.md)."""
    final = [*history(12), attempt("wait", NOW + timedelta(minutes=20))]
    taken = Snapshot(tuple(history(12)), local, (BIG, WAIT), local, server)
    (check,) = hindsight([taken], fleet, final, ORIGIN, settings=Settings(samples=5), config=SimulationConfig()).checks
    assert check.actual == pytest.approx(expected)
    assert check.at == int((local - ORIGIN).total_seconds())  # the probe keeps its label, this machine's second
