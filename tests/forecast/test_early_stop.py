"""A forecast's sample stops right after the instant its last watched workload was admitted, and
records nothing only a run's report reads (``Simulation.unrecorded``): both to save its cost, neither
may change the answer. Checked against samples that record everything and run on to the horizon, as
they did before, at moments of the bundled example's two days with sampled arrivals."""

from __future__ import annotations

import math

import pytest

from gpufleet.forecast import estimate
from gpufleet.forecast.estimate import DONE, Settings, admission, forecast
from gpufleet.forecast.simulated import moment_at
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.engine import Simulation
from gpufleet.simulate.jobs import JobRun
from gpufleet.simulate.queue_world import QueueWorld

from .conftest import World

# moments of the second day at which some samples admit every waiting workload within the horizon
# (at most others the deep queue holds one past it, and the sample runs on to the horizon); 128 800 s
# was one until the arrival model drew each team's rate per sample (2026-12-05), and 136 000 s until
# bursts were 10 s (2026-12-06, fifth session): its four samples then all held one past the horizon
MOMENTS = [132_000, 140_000]


def _attempts(runs: list[JobRun]) -> dict[str, list[tuple[object, ...]]]:
    return {
        r.key: [(a.queued, a.reserved, a.started, a.ended, a.released, a.end_reason, a.flavor) for a in r.attempts]
        for r in runs
    }


@pytest.mark.pure  # a spy on the samples, which run in this process only from source (compiled, they fork)
@pytest.mark.parametrize("only", [False, True], ids=["every-waiting-workload", "one-workload"])
@pytest.mark.parametrize("at", MOMENTS)
def test_a_sample_stopped_at_the_last_admission_answers_as_one_run_on(
    two_days: World, at: int, only: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    moment = moment_at(two_days.fleet, two_days.jobs, two_days.truth.records, at, config=SimulationConfig())
    settings = Settings(samples=4, seed=7, arrivals=True)
    if only:  # the one the run admitted next
        truth = {r.key: r for r in two_days.truth.outcome.runs}
        waiting = [r for r in moment.simulation.runs if r.state in estimate.WAITING and not r.never]
        first = min(waiting, key=lambda r: (admission(truth[r.key], len(r.attempts) - 1) or math.inf, r.key))
        settings = Settings(samples=4, seed=7, arrivals=True, only=frozenset({first.key}))
    stopped: list[bool] = []
    real = estimate._run_until_admitted

    def watched(sim: Simulation, end: int, keys: set[str]) -> None:
        real(sim, end, keys)
        stopped.append(not sim.over and sim.heap[0][0] <= end)  # events left before the horizon

    monkeypatch.setattr(estimate, "_run_until_admitted", watched)
    early = forecast(moment, settings)

    def run_on(sim: Simulation, end: int, keys: set[str]) -> None:
        sim.recording = True  # as before: every metric and reason recorded, the sample run to its horizon
        sim.advance(end)

    monkeypatch.setattr(estimate, "_run_until_admitted", run_on)
    assert any(stopped), "no sample stopped before its horizon: the test compares nothing"
    assert any(f.quantiles for f in early.forecasts)
    assert forecast(moment, settings) == early


def test_a_run_that_records_nothing_for_its_report_decides_the_same(two_days: World) -> None:
    """Its metrics and the scheduler's reasons go unrecorded; every attempt is the same."""
    world = QueueWorld(two_days.fleet, two_days.jobs, SimulationConfig())
    world.unrecorded()
    world.advance()
    assert _attempts(world.runs) == _attempts(two_days.truth.outcome.runs)
    assert any(r.state in DONE for r in world.runs)
    assert any(a.unschedulable for r in two_days.truth.outcome.runs for a in r.attempts)  # what it leaves out
    assert not any(a.unschedulable for r in world.runs for a in r.attempts)


def test_a_stop_pauses_the_run_after_the_instant_and_it_resumes_as_the_run(two_days: World) -> None:
    world = QueueWorld(two_days.fleet, two_days.jobs, SimulationConfig())
    log: list[JobRun] = []
    world.reservations = log
    assert world.advance(None, lambda: len(log) >= 50) is True
    paused_at = max(a.reserved for r in log for a in r.attempts if a.reserved is not None)
    assert world.heap[0][0] > paused_at  # nothing of a later instant ran
    world.reservations = None
    world.advance()
    assert _attempts(world.runs) == _attempts(two_days.truth.outcome.runs)
