"""The arrival rates' half-life weighed by the history's own one-step predictions (``half_life``)."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.forecast.arrivals import DAY, HOUR, PRIOR_BURSTS, ArrivalModel
from gpufleet.forecast.half_life import CANDIDATES_S, log_score, weights
from gpufleet.trace.job import Job, JobKind


def job(team: str, n: int, t: int) -> Job:
    return Job(f"{team}-{n}", team, team, t, 600, JobKind.BATCH_EVAL)


@given(
    before=st.lists(st.integers(0, 12), min_size=1, max_size=30),
    exposure=st.floats(0.1, 5.0),
    half_life_h=st.sampled_from([3, 12, 96]),
)
def test_one_hours_predictive_is_a_distribution_with_the_posteriors_mean(
    before: list[int], exposure: float, half_life_h: int
) -> None:
    """The scored hour's negative binomial sums to 1 over its counts, and its mean is the discounted
    posterior's mean rate times the hour's exposure: the Gamma–Poisson mixture the samples draw from."""
    delta = 0.5 ** (1 / half_life_h)
    seen = sum(n * delta ** (len(before) - k) for k, n in enumerate(before))
    past = sum(delta ** (len(before) - k) for k in range(len(before)))  # each earlier hour's exposure is 1
    pmf = [
        math.exp(
            log_score([*before, n], [1.0] * len(before) + [exposure], half_life_h * HOUR, PRIOR_BURSTS, len(before))
        )
        for n in range(400)
    ]
    assert sum(pmf) == pytest.approx(1.0, abs=1e-6)
    mean = sum(n * p for n, p in enumerate(pmf))
    assert mean == pytest.approx((seen + PRIOR_BURSTS) / past * exposure, rel=1e-4)


def _hourly(team: str, hours: range, per_hour: int) -> list[Job]:
    return [job(team, h * 100 + k, h * HOUR + 60 + k * (HOUR // per_hour)) for h in hours for k in range(per_hour)]


@pytest.mark.parametrize(
    ("history", "expect"),
    [
        # a rate held for six days: the longer the half-life, the better it predicted the hours
        (_hourly("a", range(6 * 24), 4), "rising"),
        # five busy days, then a silent one (a weekend): the shortest half-life follows the drop
        (_hourly("a", range(5 * 24), 4), "shortest"),
        # a day and half an hour seen: the first day fills the filters, no whole hour is scored
        (_hourly("a", range(25), 4), "alike"),
    ],
    ids=["steady", "drop", "young"],
)
def test_the_history_weighs_the_half_lives_it_would_have_predicted_best(history: list[Job], expect: str) -> None:
    at = 6 * DAY if expect != "alike" else DAY + HOUR // 2
    model = ArrivalModel.of(history, at)
    halves = [h for h, _ in model.half_lives]
    shares = [w for _, w in model.half_lives]
    assert halves == list(CANDIDATES_S) and sum(shares) == pytest.approx(1.0)
    if expect == "rising":
        assert shares == sorted(shares) and shares[-1] > shares[0] * 1e3
    elif expect == "shortest":
        assert shares[0] > 0.99
        # the rate it reads is far below the 12 h one's (a quarter of four an hour, ``test_arrivals``)
        assert model.teams["a"] < 0.25 * ArrivalModel(at, model.window_s, model.bursts, model.profile).teams["a"]
    else:
        assert shares == pytest.approx([1 / len(CANDIDATES_S)] * len(CANDIDATES_S))


def test_each_sample_draws_its_half_life_by_the_weights() -> None:
    model = ArrivalModel.of(_hourly("a", range(6 * 24), 4), 6 * DAY)
    drawn = Counter(model.drawn(random.Random(k)).half_life_s for k in range(4000))
    for half, share in model.half_lives:
        assert drawn[half] / 4000 == pytest.approx(share, abs=0.03)
    one = model.drawn(random.Random(1))
    assert one.half_lives == () and one.drawn(random.Random(2)) is one  # a drawn model stays at its half-life


def test_teams_without_bursts_and_a_window_of_no_whole_hour_weigh_alike() -> None:
    assert weights({}, 0, 10 * DAY, lambda t: 1.0, PRIOR_BURSTS) == tuple((h, 1 / 6) for h in CANDIDATES_S)
    assert weights({"a": [5]}, 0, 1800, lambda t: 1.0, PRIOR_BURSTS) == tuple((h, 1 / 6) for h in CANDIDATES_S)
