"""The forecast's samples run in several processes (``Settings.workers``) with the same answer: each
sample's generator is its own (seed and number), so neither the answer nor its basis depends on how
many processes ran them. Checked on a simulated run with arrivals (the bundled example's two days)
and on a live state, and between seeds (the check is not vacuous: another seed answers otherwise).
Likewise one workload's forecast alone (``Settings.only``, what ``why`` and ``--workload`` ask) is its
entry in everyone's. With one worker each sample runs on an unpickled copy of the paused run; with
more, each in a process forked for it, on the parent's run itself (copy-on-write): the same answer,
and the parent's run untouched."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from gpufleet.forecast import estimate
from gpufleet.forecast.estimate import Report, Settings, forecast
from gpufleet.forecast.live import forecast_live, live_state
from gpufleet.forecast.simulated import forecast_trace, moment_at
from gpufleet.policy import load_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from tests.forecast.conftest import World
from tests.forecast.test_live import BIG, NOW, POLICY, WAIT, history

AT = 36 * 3600  # a moment of the two days with workloads waiting


@pytest.mark.parametrize("workers", [2, 3])
def test_a_simulated_forecast_is_the_same_in_any_number_of_processes(two_days: World, workers: int) -> None:
    settings = Settings(samples=3, seed=5, arrivals=True)

    def report(s: Settings) -> Report:
        return forecast_trace(two_days.fleet, two_days.jobs, AT, settings=s, config=SimulationConfig())

    alone = report(settings)
    assert alone.forecasts and any(f.quantiles for f in alone.forecasts)
    assert report(replace(settings, workers=workers)) == alone
    assert report(replace(settings, seed=6, workers=workers)) != alone


def test_a_live_forecast_is_the_same_in_two_processes() -> None:
    fleet = resolve(load_policy(POLICY))
    state = live_state([BIG, WAIT], fleet, NOW)
    settings = Settings(samples=20, seed=3)
    alone = forecast_live(state, fleet, history(12), settings, SimulationConfig())
    assert forecast_live(state, fleet, history(12), replace(settings, workers=2), SimulationConfig()) == alone


def test_one_workloads_forecast_is_its_entry_in_everyones(two_days: World) -> None:
    """``Settings.only`` stops each sample at that workload's admission: its answer is unchanged."""
    settings = Settings(samples=3, seed=5, arrivals=True)
    full = forecast_trace(two_days.fleet, two_days.jobs, AT, settings=settings, config=SimulationConfig())
    given = [f for f in full.forecasts if f.quantiles and f.quantiles["p50"] is not None]
    assert len(full.forecasts) > 1 and given
    for f in (given[0], given[-1]):
        one = replace(settings, only=frozenset({f.workload}))
        alone = forecast_trace(two_days.fleet, two_days.jobs, AT, settings=one, config=SimulationConfig())
        assert alone.forecasts == (f,) and alone.basis == full.basis


def test_forked_samples_leave_the_paused_run_as_it_was(two_days: World) -> None:
    """The forked samples run on the parent's paused run, each in its own process: the parent's stays
    the moment's, so the same moment forecast again, forked or in this process, answers the same."""
    moment = moment_at(two_days.fleet, two_days.jobs, two_days.truth.records, AT, config=SimulationConfig())
    before = [(r.key, r.state, r.job.duration_s, len(r.attempts)) for r in moment.simulation.runs]
    settings = Settings(samples=3, seed=5, arrivals=True, workers=2)
    forked = forecast(moment, settings)
    assert [(r.key, r.state, r.job.duration_s, len(r.attempts)) for r in moment.simulation.runs] == before
    assert forecast(moment, settings) == forked == forecast(moment, replace(settings, workers=1))


def _square_or_fail(k: int) -> estimate._Sampled:
    if k == 3:
        raise ValueError("sample three cannot")
    return estimate._Sampled((("w", float(k * k), frozenset()),), Counter())


def test_forked_samples_come_back_in_order_and_a_failure_names_its_sample() -> None:
    got = estimate._forked(3, 2, _square_or_fail)
    assert [s.waiting[0][1] for s in got] == [0.0, 1.0, 4.0]
    with pytest.raises(RuntimeError, match=r"(?s)forecast sample 3 failed.*sample three cannot"):
        estimate._forked(5, 2, _square_or_fail)
