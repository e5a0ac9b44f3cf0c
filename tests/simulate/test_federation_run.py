"""The federation folded into one run (``federation_run``): the figures ``tune`` measures a federated
trial with must be the federation's own (its dispatch summary, its workers' meters)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.simulate.federation import simulate_federation
from gpufleet.simulate.federation_run import ZoneReach, federated_run, merge_meters
from gpufleet.simulate.federation_summary import summary
from gpufleet.simulate.measures import measure
from gpufleet.simulate.meter import Meter
from gpufleet.trace.job import Job
from tests.simulate.test_federation import FED, FLEET, HAND, SCENARIOS, job
from tests.tune.cases import LIMITED


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


def test_a_job_dispatched_again_keeps_its_attempt_on_the_worker_that_evicted_it() -> None:
    """The hand-worked re-dispatch (tests/simulate/test_federation.py): j2 wins west at 101, is preempted
    there at 150 by the urgent j3, and runs on east from 201. The folded run holds both attempts in
    time order, the preemption, and the 49 s of west's GPUs it lost, ahead of east's whole run."""
    urgent = replace(job(3, "restricted", 150, 100), priority_class="urgent", termination_grace_s=0)
    jobs = [
        job(0, "restricted", 0, 100),
        job(1, "open", 0, 200),
        replace(job(2, "open", 10, 1000), termination_grace_s=0),
    ]
    run, fed = federated_run(FLEET, [*jobs, urgent], HAND)
    assert fed.redispatches == 1
    j2 = next(r for r in run.outcome.runs if r.key == "alpha/j2")
    assert [(a.number, a.queued, a.reserved, a.started, a.end_reason) for a in j2.attempts] == [
        (1, 10, 101, 101, "Preempted"),
        (2, 151, 201, 201, "Finished"),
    ]
    assert j2.preemptions == 1 and j2.gpu_seconds == 4 * (49 + 1000)


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


# (--compare word, the question in federation.json, the alternative world's name)
COMPARES = [("residency", "residency", "residency lifted"), ("one-cluster", "clusters", "one cluster")]


@pytest.mark.parametrize(("word", "question", "other"), COMPARES)
def test_simulate_compare_answers_one_question_from_two_runs(
    tmp_path: Path, word: str, question: str, other: str
) -> None:
    """Restricted j1 waits 596 s behind west in the federation; lifted or merged, east takes it at once."""
    trace = tmp_path / "trace.csv"
    rows = ["job_id,team,namespace,submit_s,duration_s,kind,gpus,data_class,priority_class"]
    rows += ["j0,alpha,alpha,0,600,training,4,restricted,normal", "j1,alpha,alpha,5,600,training,4,restricted,normal"]
    trace.write_text("\n".join(rows) + "\n")
    out = tmp_path / "sim"
    args = ["simulate", str(FED), "--trace", str(trace), "-o", str(out), "--compare", word]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    compared = json.loads((out / "federation.json").read_text())["compare"]
    assert compared["basis"] == "simulated" and compared["question"] == question
    waits = compared["teams"]["alpha"]["p95WaitSeconds"]
    assert waits[compared["worlds"][0]] == 597 and waits[other] == 0  # 1 s finish delay: the default config
    assert "(simulated; the same trace" in result.output


def test_simulate_compare_residency_on_one_cluster_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "job_id,team,namespace,submit_s,duration_s,kind,gpus,priority_class\nj0,a,a,0,60,training,1,batch\n"
    )
    policy = tmp_path / "one.yaml"
    policy.write_text(LIMITED)
    args = ["simulate", str(policy), "--trace", str(trace), "-o", str(tmp_path / "x"), "--compare", "residency"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--compare" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "x").exists()
