"""Where a runtime comes from: declared, the finest level of history that answers, coarser levels,
or no figure at all; conditioned on the time already run."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.forecast.runtimes import (
    BEYOND,
    DEADLINE,
    DECLARED,
    LARGER,
    MIN_RUNS,
    Declared,
    RuntimeHistory,
    Shape,
    _resampled,
)

GPU = "nvidia.com/gpu"
A1 = Shape("alpha", "llama", GPU, 1)
A8 = Shape("alpha", "llama", GPU, 8)
B1 = Shape("beta", "bert", GPU, 1)
T1 = Shape("beta", "bert", GPU, 1, "training")
T16 = Shape("alpha", "llama", GPU, 16, "training")
E8 = Shape("beta", "bert", GPU, 8, "batch-eval")
E1 = Shape("alpha", "llama", GPU, 1, "batch-eval")


def history(*groups: tuple[Shape, list[int]], running: tuple[tuple[Shape, int], ...] = ()) -> RuntimeHistory:
    return RuntimeHistory.of(((s, v) for s, values in groups for v in values), running)


def draws(h: RuntimeHistory, shape: Shape, elapsed: int = 0, n: int = 400, declared: Declared | None = None) -> list:  # type: ignore[type-arg]
    rng = random.Random(7)
    return [h.draw(shape, elapsed, rng, declared) for _ in range(n)]


@pytest.mark.parametrize(
    ("groups", "shape", "source"),
    [
        ([(A1, list(range(100, 120)))], A1, "alpha · llama · 1×gpu"),
        ([(Shape("alpha", "other", GPU, 1), list(range(100, 120)))], A1, "alpha · 1×gpu"),
        ([(B1, list(range(100, 120)))], A1, "1×gpu"),
        ([(B1, list(range(100, 120))), (Shape("beta", "bert", GPU, 16), list(range(5000, 5020)))], A8, "≥8×gpu"),
        ([(B1, list(range(100, 120)))], A8, "fleet-wide"),
        # a job's kind before its size: big training jobs, few of them finished, are drawn from the
        # training runs of every size, not from the fleet's short evaluations
        ([(T1, list(range(5000, 5020))), (E8, list(range(100, 120)))], T16, "training · any size"),
        ([(T1, list(range(5000, 5020))), (E8, list(range(100, 120)))], E1, "batch-eval · any size"),
        # the ledger records no kind: no kind level, the size stands for it
        ([(B1, list(range(100, 120)))], Shape("alpha", "llama", GPU, 1, ""), "1×gpu"),
    ],
)
def test_the_finest_level_with_enough_runs_answers_and_is_named(groups, shape, source) -> None:  # type: ignore[no-untyped-def]
    h = history(*groups)
    got = draws(h, shape)
    assert {d.source for d in got} == {source}


def test_too_little_history_gives_no_figure() -> None:
    h = history((A1, list(range(100, 100 + MIN_RUNS - 1))))
    assert draws(h, A1, n=5) == [None] * 5
    assert "too little history" in h.describe(A1)


def test_a_draw_without_censoring_is_the_empirical_distribution_above_the_elapsed_time() -> None:
    h = history((A1, [10 * i for i in range(1, 21)]))
    got = {d.runtime_s for d in draws(h, A1, elapsed=105)}
    assert got == {10 * i for i in range(11, 21)}


def test_runs_still_going_push_the_distribution_longer() -> None:
    """Leaving the running workloads out biases short: with ten runs still going past the longest
    finished one, a fresh draw lands beyond history about a third of the time (Kaplan–Meier)."""
    finished = (A1, [100 + i for i in range(20)])
    plain = draws(history(finished), A1, n=2000)
    censored = draws(history(finished, running=tuple((A1, 500) for _ in range(10))), A1, n=2000)
    assert all(d.source != BEYOND for d in plain)
    beyond = sum(d.source == BEYOND for d in censored) / len(censored)
    assert 0.25 < beyond < 0.42  # 10 of 30 at risk never finished: mass 1/3
    assert all(d.runtime_s > 119 for d in censored if d.source == BEYOND)  # longer than any finished


def test_the_answer_counts_the_runs_a_workload_beyond_history_has_outlived() -> None:
    h = history((A1, list(range(100, 120))))  # 20 runs of 100..119 s
    assert h.describe(A1, elapsed=117).startswith("beyond history (it has run longer than 18 of ")
    assert h.describe(A1, elapsed=117).endswith("'s 20 runs)")
    assert h.describe(A1, elapsed=105).endswith("(n=14)")  # 106..119: enough to draw from


def test_a_declared_runtime_is_taken_until_the_workload_runs_past_it() -> None:
    h = history((A1, list(range(100, 120))))
    assert {(d.runtime_s, d.source) for d in draws(h, A1, declared=Declared(expected_s=3600))} == {(3600, DECLARED)}
    past = draws(h, A1, elapsed=4000, declared=Declared(expected_s=3600))
    assert all(d.source == BEYOND and d.runtime_s > 4000 for d in past)


def test_an_active_deadline_bounds_the_draw() -> None:
    h = history((A1, list(range(100, 200))))
    got = draws(h, A1, declared=Declared(deadline_s=150))
    assert max(d.runtime_s for d in got) == 150
    assert {d.source for d in got} == {DEADLINE}
    # beyond history too (it has run past all but a few like it), and a declaration past the deadline
    beyond = draws(h, A1, elapsed=198, declared=Declared(deadline_s=250))
    assert {d.source for d in beyond} == {DEADLINE} and max(d.runtime_s for d in beyond) == 250
    over = draws(h, A1, declared=Declared(expected_s=3600, deadline_s=1800))
    assert {(d.runtime_s, d.source) for d in over} == {(1800, DECLARED)}
    # a deadline already passed bounds nothing: the draw is history's
    assert all(d.source == BEYOND for d in draws(h, A1, elapsed=400, declared=Declared(deadline_s=300)))


@given(
    values=st.lists(st.integers(1, 10_000), min_size=MIN_RUNS, max_size=60),
    running=st.lists(st.integers(1, 10_000), max_size=20),
    elapsed=st.integers(0, 12_000),
    seed=st.integers(0, 2**32),
)
def test_a_running_workload_never_draws_a_runtime_it_has_already_passed(values, running, elapsed, seed) -> None:  # type: ignore[no-untyped-def]
    h = history((A1, values), running=tuple((A1, r) for r in running))
    d = h.draw(A1, elapsed, random.Random(seed))
    assert d is not None
    assert d.runtime_s > elapsed or (elapsed == 0 and d.runtime_s >= 1)


@given(st.lists(st.integers(1, 10**6), min_size=1, max_size=300), st.integers(0, 2**32))
def test_a_bootstrap_picks_as_randrange_would(values: list[int], seed: int) -> None:
    # ``_resampled`` inlines CPython's ``randrange``: the same picks, and the generator left in the
    # same state, so a forecast's answer does not move with the speed-up
    ours, theirs = random.Random(seed), random.Random(seed)
    assert _resampled(values, ours) == [values[theirs.randrange(len(values))] for _ in values]
    assert ours.getstate() == theirs.getstate()


def test_a_bootstrap_resamples_every_level_but_size_or_larger() -> None:
    h = history((A1, list(range(100, 140))), running=((A1, 50),))
    h.runtimes((LARGER, GPU, 1))  # gathered at first use
    resampled = h.bootstrap(random.Random(1))
    assert set(resampled.by_key) == {k for k in h.by_key if k[0] != LARGER}
    assert set(resampled.censored) == {k for k in h.censored if k[0] != LARGER}
    for key, values in resampled.by_key.items():
        assert values == sorted(values) and len(values) == len(h.by_key[key]) and set(values) <= set(h.by_key[key])
    assert resampled.by_key != {k: v for k, v in h.by_key.items() if k[0] != LARGER}  # drawn, not copied


def product_limit(done: list[int], going: list[int], elapsed: int) -> tuple[list[int], list[float]]:
    """The textbook Kaplan–Meier estimate beyond ``elapsed``: at each finish time, the share of the
    runs still at risk (finished or censored no earlier) that finish then; the oracle for the table."""
    times, cum, survival = [], [], 1.0
    for t in sorted({x for x in done if x > elapsed}):
        at_risk = sum(1 for x in done + going if x >= t)
        finished = done.count(t)
        for _ in range(finished):  # one step per run, as the table lists each finish
            survival_before = survival
            survival -= survival_before / at_risk
            at_risk -= 1
            times.append(t)
            cum.append(1.0 - survival)
    return times, cum


@given(
    st.lists(st.integers(1, 60), min_size=1, max_size=40),
    st.lists(st.integers(1, 60), max_size=20),
    st.lists(st.integers(0, 70), min_size=1, max_size=5),
)
def test_the_kaplan_meier_table_is_the_product_limit_estimate(
    done: list[int], going: list[int], asks: list[int]
) -> None:
    # one history asked from several elapsed times, in any order (the timeline is sorted once)
    h = history((A1, done), running=tuple((A1, g) for g in going))
    key = A1.lookups()[0]
    for elapsed in asks:
        times, cum = h.kaplan_meier(key, elapsed)
        want_times, want_cum = product_limit(done, going, elapsed)
        assert times == want_times
        assert cum == pytest.approx(want_cum, abs=1e-12)
