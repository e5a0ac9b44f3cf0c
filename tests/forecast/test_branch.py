"""A forecast branches from a paused simulation: the pause must rebuild the run's state exactly, from
what was known then, and the branch must run on with the simulator's own loop."""

from __future__ import annotations

import random

import pytest

from gpufleet.forecast.estimate import WAITING, admission, ran_at_least, shape_of
from gpufleet.forecast.runtimes import MIN_RUNS
from gpufleet.forecast.simulated import UNKNOWN_S, moment_at
from gpufleet.ledger.records import to_plain
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.jobs import Attempt, JobRun
from gpufleet.simulate.queue_world import QueueWorld
from gpufleet.simulate.records import ledger_records
from gpufleet.simulate.requests import Ask
from tests.simulate.fleets import job

from .conftest import World

MOMENTS = [30_000, 61_234, 100_000, 140_000]


@pytest.mark.parametrize("at", MOMENTS)
def test_a_run_paused_and_resumed_is_the_run(two_days: World, at: int) -> None:
    world = QueueWorld(two_days.fleet, two_days.jobs, SimulationConfig())
    assert world.advance(at) is True
    assert world.advance() is False
    resumed = [to_plain(r) for r in ledger_records(world.outcome(), "queue")]
    assert resumed == [to_plain(r) for r in two_days.truth.records]


@pytest.mark.parametrize("read", ["joined", "streamed"])
@pytest.mark.parametrize("at", MOMENTS)
def test_the_true_runtimes_and_arrivals_from_the_moment_on_give_back_the_run(
    two_days: World, at: int, read: str
) -> None:
    """Given the future exactly (true runtimes for every unfinished job, the real later arrivals), the
    branch admits every waiting workload when the run did: the state at the moment is the run's, and
    nothing of the future was in it (unfinished jobs carried no runtime). The arrivals joined at once
    or streamed (``Simulation.stream``, read one at a time as a forecast's sample reads them)."""
    moment = moment_at(two_days.fleet, two_days.jobs, two_days.truth.records, at, config=SimulationConfig())
    sim = moment.simulation
    true = {f"{j.namespace}/{j.job_id}": j for j in two_days.jobs}
    unfinished = [r for r in sim.runs if r.state.value not in ("Finished", "Deactivated")]
    assert all(r.job.duration_s == UNKNOWN_S for r in unfinished)
    waiting = {r.key: len(r.attempts) - 1 for r in sim.runs if r.state in WAITING}
    assert waiting, "a moment with nobody waiting tests nothing"
    sim.retime(at, {r.key: true[r.key].duration_s for r in unfinished})
    later = sorted((j for j in two_days.jobs if j.submit_s > at), key=lambda j: (j.submit_s, j.job_id))
    if read == "joined":
        sim.join(later)
    else:
        sim.stream(iter(later))
    sim.advance()
    actual = {r.key: r for r in two_days.truth.outcome.runs}
    assert {k: admission(sim.by_key[k], i) for k, i in waiting.items()} == {
        k: admission(actual[k], i) for k, i in waiting.items()
    }


def test_the_state_at_a_moment_knows_only_the_jobs_submitted_by_then(two_days: World) -> None:
    at = 61_234
    moment = moment_at(two_days.fleet, two_days.jobs, two_days.truth.records, at, config=SimulationConfig())
    assert max(r.job.submit_s for r in moment.simulation.runs) <= at
    assert len(moment.simulation.runs) == sum(1 for j in two_days.jobs if j.submit_s <= at)


def _run(*attempts: tuple[int | None, int | None]) -> JobRun:
    """A job whose attempts started and ended at the given seconds (None: not yet)."""
    run = JobRun(job("j", "t", 0, 60), Ask("nvidia.com/gpu", 1), 0)
    run.attempts = [Attempt(i, 0, started=s, ended=e) for i, (s, e) in enumerate(attempts)]
    return run


@pytest.mark.parametrize(
    ("attempts", "known"),
    [
        pytest.param([(None, None)], 0, id="never-started"),
        pytest.param([(100, None)], 400, id="running-since-100"),
        pytest.param([(100, 350), (None, None)], 250, id="victim-waiting-again"),
        pytest.param([(100, 400), (450, None)], 300, id="victim-running-again-shorter-so-far"),
        pytest.param([(100, 200), (300, None)], 200, id="victim-running-again-longer-now"),
        pytest.param([(600, None)], 0, id="starts-after-the-moment"),
    ],
)
def test_a_job_is_known_to_run_longer_than_any_attempt_it_did_not_finish(
    attempts: list[tuple[int | None, int | None]], known: int
) -> None:
    """A preempted job starts again from the beginning: its runtime is longer than its longest attempt.
    The forecast conditions its draw on that, and counts it once, censored there, in the history."""
    assert ran_at_least(_run(*attempts), 500) == known


def test_the_victims_waiting_again_are_in_the_history_as_censored_runs(two_days: World) -> None:
    for at in MOMENTS:
        moment = moment_at(two_days.fleet, two_days.jobs, two_days.truth.records, at, config=SimulationConfig())
        victims = [
            r for r in moment.simulation.runs if r.state in WAITING and any(a.started is not None for a in r.attempts)
        ]
        if victims and moment.history.runs >= MIN_RUNS:
            break
    else:
        pytest.fail("no moment with history and a preempted job waiting again: the test checks nothing")
    censored = moment.history.censored[("fleet",)]
    for r in victims:
        assert ran_at_least(r, at) in censored, r.key
        for _ in range(20):
            draw = moment.history.draw(shape_of(r), ran_at_least(r, at), random.Random(_))
            assert draw is not None and draw.runtime_s > ran_at_least(r, at)
