"""Sampled arrivals: teams' bursts, each team at its recent rate drawn from its posterior, shaped by
the hour of the day, after the moment."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.forecast.arrivals import (
    DAY,
    HALF_LIFE_S,
    HOUR,
    PRIOR_BURSTS,
    WEEK,
    WINDOW_S,
    ArrivalModel,
    daily_profile,
    weekly_factors,
)
from gpufleet.trace.job import Job, JobKind

FOREVER = 10**12  # a half-life no window reaches: every burst weighs 1


def job(team: str, n: int, t: int, gpus: int = 1) -> Job:
    return Job(f"{team}-{n}", team, team, t, 600, JobKind.BATCH_EVAL, gpus=gpus)


def test_jobs_seconds_apart_are_one_burst_and_the_rate_counts_bursts() -> None:
    seen = [job("a", i, 1000 + i * 5) for i in range(10)] + [job("a", 100 + i, 50_000 + i) for i in range(3)]
    seen += [job("b", i, 10_000 * (i + 1)) for i in range(4)]
    model = ArrivalModel.of(seen, 80_000)
    assert [len(b.jobs) for b in model.bursts["a"]] == [10, 3]
    assert [b.start_s for b in model.bursts["a"]] == [1000, 50_000]
    assert model.bursts["a"][0].offsets == tuple(i * 5 for i in range(10))
    flat = ArrivalModel(model.at, model.window_s, model.bursts, half_life_s=FOREVER)
    # the posterior mean: (bursts + the prior's half) over the window, per hour
    assert flat.teams == pytest.approx({"a": 2.5 * 3600 / 80_000, "b": 4.5 * 3600 / 80_000})


@pytest.mark.parametrize(
    ("ago_s", "weight"),
    [(0, 1.0), (12 * HOUR, 0.5), (24 * HOUR, 0.25), (36 * HOUR, 0.125), (6 * HOUR, math.sqrt(0.5))],
)
def test_a_burst_weighs_half_as_much_a_half_life_further_back(ago_s: int, weight: float) -> None:
    at = 3 * DAY
    model = ArrivalModel.of([job("a", 0, at - ago_s)], at)
    assert model.half_life_s == 12 * HOUR
    assert model.weights["a"] == pytest.approx(weight)


@given(
    at=st.integers(1, 10 * DAY),
    window_days=st.integers(1, 7),
    half_life_h=st.integers(1, 200),
)
def test_with_a_flat_profile_the_exposure_is_the_decayed_windows_integral(
    at: int, window_days: int, half_life_h: int
) -> None:
    window = min(at, window_days * DAY)
    model = ArrivalModel(at, window, {}, half_life_s=half_life_h * HOUR)
    lam = math.log(2) / (half_life_h * HOUR)
    assert model.exposure_s == pytest.approx(max((1 - math.exp(-lam * window)) / lam, 1.0), rel=1e-9)


@given(
    hours=st.lists(st.floats(0.1, 5.0), min_size=24, max_size=24),
    days=st.integers(1, 7),
    offset_h=st.integers(0, 23),
)
def test_over_whole_days_without_decay_the_exposure_is_the_windows_seconds(
    hours: list[float], days: int, offset_h: int
) -> None:
    """The profile's mean is 1, so whole days of it weigh as many seconds as they hold, wherever in
    the day the moment falls: the rate is bursts per second at a profile of 1."""
    mean = sum(hours) / 24
    profile = tuple(h / mean for h in hours)
    at = 8 * DAY + offset_h * HOUR + 1234
    model = ArrivalModel(at, days * DAY, {}, profile, half_life_s=FOREVER)
    assert model.exposure_s == pytest.approx(days * DAY, rel=1e-6)


def test_a_morning_after_a_quiet_night_is_not_a_low_rate() -> None:
    """The same bursts in the last 12 hours read as a higher rate when those hours were the quiet
    ones of the profile: the exposure weighs each hour by its share of the day's arrivals (and its
    decay: the quiet half-day weighs 1 to 1/2, the busy one before it 1/2 to 1/4, and so on back,
    0.69 half-lives against 1.19 the other way round)."""
    night = tuple(0.2 if h < 12 else 1.8 for h in range(24))
    seen = [job("a", i, 5 * DAY + 12 * HOUR - 100 * (i + 1)) for i in range(3)]
    at = 5 * DAY + 12 * HOUR
    quiet = ArrivalModel(at, 5 * DAY, ArrivalModel.of(seen, at).bursts, night)
    busy = ArrivalModel(at, 5 * DAY, quiet.bursts, tuple(reversed(night)))
    assert quiet.teams["a"] / busy.teams["a"] == pytest.approx(1.19 / 0.69, rel=0.02)


def test_the_pool_holds_every_burst_of_the_window_and_a_rare_one_is_drawn() -> None:
    """One 16-card gang five days back, among hourly 1-card jobs: a sample copies it now and then
    (a pool of the last day never could), and nothing older than the window is copied."""
    at = 6 * DAY
    seen = [job("a", i, i * HOUR + 7) for i in range(6 * 24)] + [job("a", 999, DAY + 1800, gpus=16)]
    model = ArrivalModel.of(seen, at)
    assert model.window_s == WINDOW_S - DAY  # since the start: less than the window seen
    copied = [j for k in range(40) for j in model.sample(random.Random(k), DAY, str(k))]
    assert any(j.gpus == 16 for j in copied) and len([j for j in copied if j.gpus == 16]) < len(copied) / 20
    short = ArrivalModel.of(seen, at, window_s=2 * DAY)
    assert all(j.gpus == 1 for k in range(40) for j in short.sample(random.Random(k), DAY, str(k)))


def test_the_rate_follows_a_drop_within_hours() -> None:
    """A team that stopped submitting a day ago: two half-lives on, the bursts it submitted hold a
    quarter of the weighted exposure, so its rate reads a quarter of what it was (a weekend after a
    week of work); without the decay it would read five sixths."""
    at = 6 * DAY
    seen = [job("a", i, i * 600 + 1) for i in range(5 * 24 * 6)]  # every 10 min for five days, then nothing
    model = ArrivalModel.of(seen, at)
    assert model.teams["a"] == pytest.approx(6 / 4, rel=0.05)
    flat = ArrivalModel(model.at, model.window_s, model.bursts, model.profile, half_life_s=FOREVER)
    assert flat.teams["a"] == pytest.approx((5 * 24 * 6 + PRIOR_BURSTS) / 6 / 24, rel=1e-6)


def test_a_busy_teams_separate_jobs_are_not_one_burst() -> None:
    """A team that submits a job every 45 s on weekdays, one by one, then every 90 s at the weekend:
    its jobs are independent, so the next six hours bring the weekend's jobs (weighted as the rate
    weighs them), not the weekend's submissions times the weekdays' jobs per burst. A gap of a
    minute merged the weekdays' jobs three or four to a burst, and the samples drew nearly twice
    the jobs that came (the 1,000-GPU fleet's Sunday evening, docs/forecast-notebook.md)."""
    rng, t = random.Random(5), 0.0
    seen: list[Job] = []
    while t < 7 * DAY:
        t += rng.expovariate(1 / (45 if t < 5 * DAY else 90))
        seen.append(job("a", len(seen), int(t)))
    at = 7 * DAY
    model = replace(ArrivalModel.of(seen, at), profile=(1.0,) * 24, week=(1.0,) * 7)  # the rate as weighed
    weighted = sum(0.5 ** ((at - j.submit_s) / HALF_LIFE_S) for j in seen if j.submit_s > at - WINDOW_S)
    expected = weighted / model.exposure_s * 6 * HOUR  # the jobs' own weighted rate, six hours of it
    counts = [len(model.sample(random.Random(k), 6 * HOUR, str(k))) for k in range(200)]
    assert statistics.mean(counts) == pytest.approx(expected, rel=0.1)


def test_few_bursts_seen_spread_the_samples_wider_than_one_poisson_rate() -> None:
    """Each sample draws its own rate from the posterior: two bursts seen in two days give four
    days' count a variance well above its mean (a Poisson process at one rate has them equal; the
    Gamma's negative binomial has mean + mean²/2.5, three times it)."""
    seen = [job("a", 0, 20_000), job("a", 1, 100_000)]
    model = ArrivalModel(2 * DAY, 2 * DAY, ArrivalModel.of(seen, 2 * DAY).bursts, half_life_s=FOREVER)
    counts = [len(model.sample(random.Random(k), 4 * DAY, str(k))) for k in range(600)]
    mean = 4 * (2 + PRIOR_BURSTS) / 2  # bursts in four days, the posterior mean
    assert statistics.mean(counts) == pytest.approx(mean, rel=0.15)
    assert statistics.variance(counts) > 2 * statistics.mean(counts)


def test_further_ahead_the_rate_keeps_its_mean_and_spreads() -> None:
    """The evidence for a rate halves every half-life into the future as into the past: two days on,
    a steady team's six-hour count has the mean of the next six hours' and several times their
    variance (the posterior's shape a day ahead is a quarter of today's)."""
    at = 5 * DAY
    seen = [job("a", i, i * 600 + 1) for i in range(5 * 24 * 6)]  # every 10 min for five days
    model = ArrivalModel.of(seen, at)
    soon, later = [], []
    for k in range(600):
        times = [j.submit_s - at for j in model.sample(random.Random(k), 2 * DAY, str(k))]
        soon.append(sum(t <= 6 * HOUR for t in times))
        later.append(sum(t > 2 * DAY - 6 * HOUR for t in times))
    assert statistics.mean(later) == pytest.approx(statistics.mean(soon), rel=0.15)
    assert statistics.variance(later) > 2.5 * statistics.variance(soon)
    steady = ArrivalModel(model.at, model.window_s, model.bursts, model.profile, half_life_s=FOREVER)
    fixed = [len(steady.sample(random.Random(k), 6 * HOUR, str(k))) for k in range(300)]
    assert statistics.variance(fixed) < 2 * statistics.mean(fixed)  # an endless half-life: the rate stays


def test_only_jobs_seen_by_the_moment_and_within_the_window_count() -> None:
    seen = [job("a", i, i * HOUR) for i in range(10 * 24)]
    model = ArrivalModel.of(seen, 9 * DAY + 6 * HOUR)
    assert len(model.bursts["a"]) == 7 * 24  # the last seven days to the moment
    assert all(2 * DAY + 6 * HOUR < j.submit_s <= 9 * DAY + 6 * HOUR for b in model.bursts["a"] for j in b.jobs)


def test_samples_come_after_the_moment_under_fresh_names_and_repeat_with_the_seed() -> None:
    seen = [job("a", i, i * 600) for i in range(300)]
    model = ArrivalModel.of(seen, 300 * 600)
    first = model.sample(random.Random(3), DAY, "0")
    assert first == model.sample(random.Random(3), DAY, "0")
    assert first and all(300 * 600 < j.submit_s <= 300 * 600 + DAY + 1 for j in first)
    assert len({j.job_id for j in first}) == len(first) and all(j.job_id.startswith("fc0-") for j in first)


def test_a_stream_read_part_way_is_the_start_of_the_whole_in_arrival_order() -> None:
    """A forecast's sample reads its arrivals only as far as it runs: what it read must be what a
    longer read begins with (the same jobs, names and times), and in the order they arrive."""
    seen = [job(team, i, i * 300 + (7 if team == "b" else 0)) for team in ("a", "b") for i in range(300)]
    seen += [job("a", 1000 + i, 89_000 + i * 5) for i in range(5)]  # one burst of five, 5 s apart
    model = ArrivalModel.of(seen, 300 * 300)
    whole = model.sample(random.Random(4), 2 * DAY, "3")
    assert len({j.team for j in whole}) == 2 and any(j.job_id.endswith("-a-1004") for j in whole)
    assert [(j.submit_s, j.job_id) for j in whole] == sorted((j.submit_s, j.job_id) for j in whole)
    for n in (0, 1, 17, len(whole) // 2):
        stream = model.stream(random.Random(4), 2 * DAY, "3")
        assert [next(stream) for _ in range(n)] == whole[:n]


def test_the_day_profile_follows_the_hours_jobs_arrived_in() -> None:
    seen = [job("a", d * 100 + i, d * DAY + 14 * HOUR + i * 120) for d in range(3) for i in range(20)]
    profile = daily_profile(seen, 3 * DAY)
    assert profile[14] == max(profile) > 10 * profile[2]  # smoothed over 13:00-15:59
    assert abs(sum(profile) / 24 - 1) < 1e-9
    assert daily_profile(seen, DAY - 1) == (1.0,) * 24  # less than a day seen: flat


def _weeks(count: int, weekday: int, weekend: int, start: int = 0) -> list[Job]:
    """A team's bursts, ``weekday`` a day Monday to Friday and ``weekend`` on Saturday and Sunday, evenly
    spread over each day, for ``count`` weeks from ``start``; day 0 a Monday."""
    out = []
    for day in range(start // DAY, start // DAY + 7 * count):
        per = weekday if day % 7 < 5 else weekend
        out += [job("a", day * 100 + i, day * DAY + int((i + 0.5) * DAY / per)) for i in range(per)]
    return out


@pytest.mark.parametrize(
    ("weeks", "start", "saturday"),
    [
        (1, 3 * DAY, 1.0),  # a ledger begun on a Thursday, a week ago: no whole week, every day alike
        (1, 0, (1 + 1) / ((5 * 12 + 2 * 1) * 1 / 7 + 1)),  # one whole week: the weekend's own count
        (2, 0, (2 + 1) / ((5 * 12 + 2 * 1) * 2 / 7 + 1)),
        (3, 0, (3 + 1) / ((5 * 12 + 2 * 1) * 3 / 7 + 1)),
        (2, 3 * DAY, (1 + 1) / ((5 * 12 + 2 * 1) * 1 / 7 + 1)),  # begun on a Thursday: its first week is not whole
    ],
)
def test_a_day_of_the_week_has_its_own_rate_once_a_whole_week_shows_it(weeks: int, start: int, saturday: float) -> None:
    seen = _weeks(weeks, 12, 1, start)
    at = start + weeks * WEEK
    factors = weekly_factors(seen, at)
    assert sum(factors) == pytest.approx(7)
    assert factors[5] == pytest.approx(saturday, rel=1e-6) and factors[5] == factors[6]


def test_on_a_friday_evening_the_weekend_is_expected_quiet_and_monday_busy_again() -> None:
    """A week of ten bursts a weekday and two a weekend day: at Friday 20:00 of the second week the
    sampled Saturday holds a fraction of Friday's bursts, and the Monday after is a weekday again.
    Less than a whole week of history (no rhythm to learn) expects Saturday as busy as Friday."""
    seen = _weeks(1, 10, 2) + _weeks(1, 10, 2, WEEK)[:50]  # the second week to Friday evening
    at = WEEK + 4 * DAY + 20 * HOUR
    model = ArrivalModel.of(seen, at)
    assert model.week[5] < 0.35 < 1.1 < model.week[4]
    saturday, monday = [], []
    for k in range(300):
        times = [j.submit_s for j in model.sample(random.Random(k), 3 * DAY, str(k))]
        saturday.append(sum(WEEK + 5 * DAY <= t < WEEK + 6 * DAY for t in times))
        monday.append(sum(2 * WEEK <= t < 2 * WEEK + DAY for t in times))
    assert statistics.mean(saturday) < 0.4 * statistics.mean(monday)
    young = ArrivalModel.of([j for j in seen if j.submit_s > 3 * DAY], at)
    assert young.week == (1.0,) * 7
