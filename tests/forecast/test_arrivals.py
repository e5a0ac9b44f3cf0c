"""Sampled arrivals: teams' bursts at the rate seen, shaped by the hour of the day, after the moment."""

from __future__ import annotations

import random

from gpufleet.forecast.arrivals import DAY, HOUR, ArrivalModel, daily_profile
from gpufleet.trace.job import Job, JobKind


def job(team: str, n: int, t: int) -> Job:
    return Job(f"{team}-{n}", team, team, t, 600, JobKind.BATCH_EVAL, gpus=1)


def test_jobs_seconds_apart_are_one_burst_and_the_rate_counts_bursts() -> None:
    seen = [job("a", i, 1000 + i * 5) for i in range(10)] + [job("a", 100 + i, 50_000 + i) for i in range(3)]
    seen += [job("b", i, 10_000 * (i + 1)) for i in range(4)]
    model = ArrivalModel.of(seen, 80_000)
    assert [len(b.jobs) for b in model.bursts["a"]] == [10, 3]
    assert model.bursts["a"][0].offsets == tuple(i * 5 for i in range(10))
    assert model.teams == {"a": 2 * 3600 / 80_000, "b": 4 * 3600 / 80_000}


def test_only_jobs_seen_by_the_moment_and_within_the_window_count() -> None:
    seen = [job("a", i, i * HOUR) for i in range(48)]
    model = ArrivalModel.of(seen, 30 * HOUR)
    assert len(model.bursts["a"]) == 24  # hours 7..30: the last day
    assert all(6 * HOUR < j.submit_s <= 30 * HOUR for b in model.bursts["a"] for j in b.jobs)


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
    seen += [job("a", 1000 + i, 89_000 + i * 20) for i in range(5)]  # one burst of five, 20 s apart
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
