"""The federation folded into one run (``federation_run``): the figures ``tune`` measures a federated
trial with must be the federation's own (its dispatch summary, its workers' meters)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.simulate.federation import simulate_federation
from gpufleet.simulate.federation_run import ZoneReach, federated_run, merge_meters
from gpufleet.simulate.federation_summary import summary
from gpufleet.simulate.measures import measure
from gpufleet.simulate.meter import Meter
from gpufleet.trace.job import Job
from tests.simulate.test_federation import FLEET, HAND, SCENARIOS, job


@pytest.mark.parametrize(("name", "jobs", "expected"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_the_one_run_has_the_federations_waits_and_gpu_hours(
    name: str, jobs: list[Job], expected: dict[str, tuple[str, int]]
) -> None:
    run, fed = federated_run(FLEET, jobs, HAND)
    doc = summary(fed)
    m = measure(run, FLEET, (0, run.outcome.end))
    (alpha,) = m.teams
    assert alpha.wait_p95_s == doc["fleet"]["p95WaitSeconds"], name
    assert alpha.goodput_gpu_h == doc["fleet"]["gpuHours"], name  # every job finished: all its GPU-hours are goodput
    assert [r.key for r in run.outcome.runs] == sorted(
        (d.key for d in fed.dispatches), key=lambda k: next(j.submit_s for j in jobs if k.endswith(j.job_id))
    )
    started = {r.key.split("/")[1]: r.attempts[-1].started for r in run.outcome.runs}
    assert started == {k: v[1] for k, v in expected.items()}, name


def test_a_job_no_zone_cluster_can_hold_is_never_admissible_and_not_waited_for() -> None:
    jobs = [job(0, "restricted", 0, gpus=8), job(1, "open", 0)]  # 8 cards: more than west's 4
    run, fed = federated_run(FLEET, jobs, HAND)
    never = {r.key: r.never for r in run.outcome.runs}
    assert never == {"alpha/j0": True, "alpha/j1": False}
    assert ZoneReach(FLEET).admissible_on(jobs[1]) == ["west", "east"] and ZoneReach(FLEET).admissible_on(jobs[0]) == []
    assert {d.key: d.cluster for d in fed.dispatches}["alpha/j0"] is None
    (alpha,) = measure(run, FLEET, (0, run.outcome.end)).teams
    assert alpha.never_admissible == 1 and alpha.wait_p95_s == 0


def test_the_same_trace_gives_the_same_figures() -> None:
    jobs = SCENARIOS[-1][1]
    a, b = federated_run(FLEET, jobs, HAND)[0], federated_run(FLEET, jobs, HAND)[0]
    window = (0, a.outcome.end)
    assert measure(a, FLEET, window) == measure(b, FLEET, window)
    assert [d.cluster for d in simulate_federation(FLEET, jobs, HAND).dispatches] == [
        r.attempts[-1].flavor.removeprefix("train-") for r in a.outcome.runs
    ]


# Each worker's series: (instant, rate) changes; merged, every window's integral is the sum of theirs.
steps = st.lists(st.tuples(st.integers(0, 500), st.integers(-3, 3)), max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(steps, min_size=1, max_size=3), st.integers(0, 600), st.integers(0, 600))
def test_merged_meters_integrate_to_the_sum_of_the_workers(
    workers: list[list[tuple[int, int]]], a: int, b: int
) -> None:
    meters = []
    for changes in workers:
        m = Meter(60)
        m.log("x")
        for t, delta in sorted(changes):
            m.advance(t)
            m.add("x", float(delta))
        meters.append(m)
    end = max([m.now for m in meters] + [600])
    merged = merge_meters(meters, end)
    start, stop = min(a, b), max(a, b)
    assert merged.integral("x", start, stop) == pytest.approx(sum(m.integral("x", start, stop) for m in meters))
    assert merged.total("x") == pytest.approx(sum(m.total("x") for m in meters))
