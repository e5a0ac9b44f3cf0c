"""A forecast branches from a paused simulation: the pause must rebuild the run's state exactly, from
what was known then, and the branch must run on with the simulator's own loop."""

from __future__ import annotations

import pytest

from gpufleet.forecast.estimate import WAITING, admission
from gpufleet.forecast.simulated import UNKNOWN_S, moment_at
from gpufleet.ledger.records import to_plain
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.queue_world import QueueWorld
from gpufleet.simulate.records import ledger_records

from .conftest import World

MOMENTS = [30_000, 61_234, 100_000, 140_000]


@pytest.mark.parametrize("at", MOMENTS)
def test_a_run_paused_and_resumed_is_the_run(two_days: World, at: int) -> None:
    world = QueueWorld(two_days.fleet, two_days.jobs, SimulationConfig())
    assert world.advance(at) is True
    assert world.advance() is False
    resumed = [to_plain(r) for r in ledger_records(world.outcome(), "queue")]
    assert resumed == [to_plain(r) for r in two_days.truth.records]


@pytest.mark.parametrize("at", MOMENTS)
def test_the_true_runtimes_and_arrivals_from_the_moment_on_give_back_the_run(two_days: World, at: int) -> None:
    """Given the future exactly (true runtimes for every unfinished job, the real later arrivals), the
    branch admits every waiting workload when the run did: the state at the moment is the run's, and
    nothing of the future was in it (unfinished jobs carried no runtime)."""
    moment = moment_at(two_days.fleet, two_days.jobs, two_days.truth.records, at, config=SimulationConfig())
    sim = moment.simulation
    true = {f"{j.namespace}/{j.job_id}": j for j in two_days.jobs}
    unfinished = [r for r in sim.runs if r.state.value not in ("Finished", "Deactivated")]
    assert all(r.job.duration_s == UNKNOWN_S for r in unfinished)
    waiting = {r.key: len(r.attempts) - 1 for r in sim.runs if r.state in WAITING}
    assert waiting, "a moment with nobody waiting tests nothing"
    sim.retime(at, {r.key: true[r.key].duration_s for r in unfinished})
    sim.join([j for j in two_days.jobs if j.submit_s > at])
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
