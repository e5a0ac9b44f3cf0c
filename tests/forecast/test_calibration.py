"""The forecast's 80 % interval must hold about 80 % of the admissions that then happened.

On the bundled example's simulated week (the calibration bench's: its seeded moments, samples and
horizon), every workload waiting at a moment is forecast from what was known then and compared with
its admission in the same run; the diagnostics below use the shared two-day run. If the coverage leaves the 75–85 % band, the model is wrong: fix it,
do not widen the band (issue 34)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from gpufleet.demo import SEED, example_text, workload_spec
from gpufleet.forecast.arrivals import ArrivalModel
from gpufleet.forecast.calibration import Check, KnownArrivals, TraceEnd, checks_at, moments, over_moments, row
from gpufleet.forecast.estimate import Settings
from gpufleet.policy import parse_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.run import simulate
from gpufleet.trace import synthesize

from .conftest import World

DAY = 86_400
INF = math.inf


@pytest.mark.parametrize(
    ("p10", "p90", "actual", "verdict"),
    [
        (100, 500, 300, "covered"),
        (100, 500, 100, "covered"),  # the bounds belong to the interval
        (100, 500, 500, "covered"),
        (100, 500, 50, "late"),
        (100, 500, 600, "early"),
        (100, 500, INF, "early"),  # beyond the horizon, p90 within it: a known miss
        (100, INF, 600, "covered"),  # p90 beyond the horizon bounds any admission within it
        (100, INF, 50, "late"),
        (INF, INF, 600, "late"),  # not even p10 within the horizon, admitted within it
        (100, INF, INF, "censored"),  # both beyond: whether below the true p90 is unknown
        (INF, INF, INF, "censored"),
    ],
)
def test_a_check_is_judged_only_where_the_horizon_lets_it_be(
    p10: float, p90: float, actual: float, verdict: str
) -> None:
    c = Check("ns/w", "team", 0, p10, min(p10 * 2, p90), p90, actual)
    got = {"covered": c.covered, "early": c.early, "late": c.late, "censored": c.censored}
    assert got == {name: name == verdict for name in got}


def test_censored_checks_are_counted_apart_not_as_covered() -> None:
    checks = [
        Check("ns/a", "t", 0, 10, 20, 30, 25),  # covered
        Check("ns/b", "t", 0, 10, 20, 30, 40),  # early
        Check("ns/c", "t", 0, 10, 20, INF, INF),  # censored
        Check("ns/d", "t", 0, 10, 20, INF, INF),  # censored
    ]
    r = row("all", checks)
    assert (r.admissions, r.coverage, r.censored) == (2, 0.5, 2)
    assert r.median_error == pytest.approx((5 / 60 + 20 / 60) / 2)  # the judged only, floor of a minute
    assert math.isnan(row("none", checks[2:]).coverage)


def _at(moment: int, covered: int, missed: int) -> list[Check]:
    """``covered`` checks inside [10, 30] and ``missed`` after it, all made at ``moment``."""
    return [
        Check(f"ns/c{moment}-{i}", "t", moment, 10, 20, 30, 20 if i < covered else 40) for i in range(covered + missed)
    ]


@pytest.mark.parametrize(
    ("checks", "within", "width"),
    [
        # moments that agree: the interval is their coverage, however few
        (_at(0, 8, 2) + _at(1, 8, 2) + _at(2, 8, 2), (0.8, 0.8), 0.0),
        # moments that disagree: wide, however many checks each holds
        (_at(0, 1000, 0) + _at(1, 0, 1000) + _at(2, 500, 500) + _at(3, 1000, 0), (0.25, 1.0), 0.3),
        # a moment's weight is its checks: one missed check beside 199 covered barely moves it
        (_at(0, 99, 1) + _at(1, 0, 1) + _at(2, 100, 0), (0.95, 1.0), 0.0),
    ],
)
def test_the_coverage_interval_is_as_wide_as_its_moments_disagree(
    checks: list[Check], within: tuple[float, float], width: float
) -> None:
    r = row("all", checks)
    assert r.moments == len({c.at for c in checks})
    assert within[0] <= r.low <= r.coverage <= r.high <= within[1]
    assert r.high - r.low >= width


def test_the_same_second_of_two_runs_is_two_moments() -> None:
    # the testbed's runs probe at the same seconds from their starts: pooled, each run's probe is its own moment
    first, second = _at(150, 10, 0), [replace(c, run=1) for c in _at(150, 0, 10)]
    assert (row("one run", first).moments, row("two runs", first + second).moments) == (1, 2)
    pooled = row("two runs", first + second)
    assert (pooled.coverage, pooled.low, pooled.high) == (0.5, 0.0, 1.0)


def test_one_moment_gives_no_interval_and_the_bootstrap_repeats() -> None:
    one = row("all", _at(5, 70, 30))
    assert (one.moments, one.coverage) == (1, 0.7)
    assert math.isnan(one.low) and math.isnan(one.high)
    counts = [(3, 10), (9, 10), (5, 10), (10, 10)]
    assert over_moments(counts) == over_moments(counts)  # seeded: every report prints the same
    assert over_moments(counts, seed=1) != over_moments(counts, spread=0.5, seed=1)


def _checks(world: World, at: int, settings: Settings, **known: bool) -> list[Check]:
    """``checks_at`` on the two-day run at ``at`` (``known``: its diagnostics, as keywords)."""
    return checks_at(
        world.fleet,
        world.jobs,
        world.truth.outcome,
        world.truth.records,
        at,
        settings=settings,
        config=SimulationConfig(),
        **known,
    )


def test_the_sampled_arrivals_stop_at_the_end_of_the_trace(two_days: World) -> None:
    at = DAY + 3600
    model = ArrivalModel.of([j for j in two_days.jobs if j.submit_s <= at], at)
    until = max(j.submit_s for j in two_days.jobs)
    cut = TraceEnd(**vars(model), until=until)
    full = model.sample(random.Random(1), 2 * DAY, "x")
    got = list(cut.stream(random.Random(1), 2 * DAY, "x"))  # what a forecast's sample reads
    assert got == cut.sample(random.Random(1), 2 * DAY, "x")
    assert got and max(j.submit_s for j in full) > until + 3600  # the model alone goes on submitting
    assert max(j.submit_s for j in got) <= until + max(max(b.offsets) for bs in model.bursts.values() for b in bs)
    assert list(TraceEnd(**vars(model), until=at - 1).stream(random.Random(1), 2 * DAY, "x")) == []


def test_known_arrivals_are_the_runs_own_submissions_within_the_horizon(two_days: World) -> None:
    at = DAY + 3600
    model = ArrivalModel.of([j for j in two_days.jobs if j.submit_s <= at], at)
    known = KnownArrivals(**vars(model), future=tuple(j for j in two_days.jobs if j.submit_s > at))
    got = list(known.stream(random.Random(1), 6 * 3600, "x"))
    came = sorted((j for j in two_days.jobs if at < j.submit_s <= at + 6 * 3600), key=lambda j: (j.submit_s, j.job_id))
    assert got == came and got, "the known arrivals are the trace's next six hours, in arrival order"
    assert got == list(known.stream(random.Random(2), 6 * 3600, "y")), "no sample draws them differently"


@pytest.mark.parametrize("at", [DAY + 3600, DAY + 8 * 3600])
def test_with_the_true_runtimes_and_the_true_arrivals_the_forecast_is_the_run(two_days: World, at: int) -> None:
    """The forecast's state against the run's, in the middle of the trace: with every runtime and every
    arrival to come known, nothing is left to guess, so each interval must be the one admission that
    happened. A state the replay to the moment lost (a preemption's requeue, a fair-sharing usage, a
    pod's node) would show here as a sample that admits another way, not as noise."""
    checks = _checks(two_days, at, Settings(samples=2, horizon_s=HORIZON_S), known_runtimes=True, known_arrivals=True)
    assert len(checks) >= 10, "too few waiting workloads at the moment to hold the forecast to the run"
    assert any(j.submit_s > at for j in two_days.jobs), "no arrival after the moment: the test would not test them"
    wrong = [(c.workload, c.p10, c.p90, c.actual) for c in checks if not c.p10 == c.p90 == c.actual]
    assert not wrong, f"{len(wrong)} of {len(checks)} forecasts are not the run: {wrong[:10]}"


@pytest.fixture(scope="module")
def week() -> World:
    """The bundled example's simulated week, as ``gpufleet demo`` and the calibration bench run it."""
    fleet = resolve(parse_policy(example_text(), "fleet.yaml"))
    jobs = synthesize(workload_spec(fleet, days=7), SEED)
    return World(fleet, jobs, simulate(fleet, jobs, SimulationConfig()))


@pytest.mark.slow
def test_the_80_percent_interval_covers_75_to_85_percent_of_a_simulated_weeks_admissions(week: World) -> None:
    """The bench's headline figure (``python -m bench forecast_calibration``: the same week, moments,
    samples and horizon), held to the band in CI. About 600 CPU-s: the week's 12 moments, because
    the checks of one moment move together (a moment is mostly covered or mostly missed) and four
    moments of two days were a coin toss at the band's edges (50-96 % over moments)."""
    checks = []
    for at in moments(seed=1, count=WEEK_MOMENTS, start=DAY, end=7 * DAY):
        checks += _checks(week, at, Settings(samples=SAMPLES, horizon_s=6 * DAY))
    total = row("all", checks)
    for at in sorted({c.at for c in checks}):
        here = [c for c in checks if c.at == at]
        r = row(str(at), here)
        print(f"moment {at}: {r.admissions} judged, {r.coverage:.0%} covered, "
              f"{sum(c.early for c in here)} early, {sum(c.late for c in here)} late, {r.censored} censored")  # fmt: skip
    print(total)
    assert total.admissions >= 1000, "too few waiting workloads to judge a coverage"
    assert total.censored <= 0.05 * len(checks), "the horizon leaves too many checks unjudged"
    assert 0.75 <= total.coverage <= 0.85, total


WEEK_MOMENTS = 12
# 30 sampled futures per moment, as the bench takes. The interval's ends are the ranks a next draw
# stays within at least 80 % of the time (``interval_ranks``), so the figure is the model's, not the
# sample count's (the nearest-rank p10-p90 of 30 held 77 % at best).
SAMPLES = 30
# The run's longest wait from a moment of the two-day run's second day is 4.4 days: a horizon past it
# judges nearly every check (calibration.py: a check beyond the horizon with p90 beyond it too is
# censored). The samples stop once their waiting workloads are admitted, so the longer horizon costs
# only the drain of the deepest queues.
HORIZON_S = 5 * DAY


def test_with_the_true_runtimes_and_no_arrivals_to_come_the_forecast_is_the_run(two_days: World) -> None:
    """The diagnostic's ground: after the trace's last submission nothing more arrives, so a forecast
    given every job's true runtime has nothing left to guess. Every sample is the same future, and it
    is the run's own (the branch is the run: ``test_branch``), so each interval is one point, the
    admission that happened."""
    at = max(j.submit_s for j in two_days.jobs) + 1
    checks = _checks(two_days, at, Settings(samples=2, arrivals=False, horizon_s=HORIZON_S), known_runtimes=True)
    assert len(checks) >= 10, "too few waiting workloads at the moment to hold the forecast to the run"
    assert [(c.workload, c.p10, c.p90) for c in checks] == [(c.workload, c.actual, c.actual) for c in checks]
