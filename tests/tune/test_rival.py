"""A candidate against first apply on held-out weeks (``rival``), and which judged candidate is preferred."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpufleet.policy import resolve
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.measures import Measures, TeamMeasures, common_window, measure
from gpufleet.simulate.run import simulate
from gpufleet.tune.feasibility import Infeasible
from gpufleet.tune.judge import Figures, Judged, Verdict, not_beaten, pick
from gpufleet.tune.recommend import Candidate
from gpufleet.tune.rival import Rival, Slower, against, finished_all, on_serving_gpu_h, preference
from tests.tune.cases import HOUR, LIMITED, a_alone, policy


def _team(name: str, p95_h: float | None) -> TeamMeasures:
    p95 = None if p95_h is None else round(p95_h * HOUR)
    return TeamMeasures(name, 1.0, 1, 1, 0.0, p95, p95, p95, p95, 0)


def _measures(goodput: float, **p95_h: float | None) -> Measures:
    teams = tuple(_team(t, h) for t, h in p95_h.items())
    return Measures("x", (0, 10 * HOUR), 0.0, goodput, 0.0, 0.0, {}, None, teams, 1.0, 0.0, 0, 0)


@pytest.mark.parametrize(
    ("tuned", "first", "beats", "slower"),
    [
        # a tie on goodput counts: first apply's goodput is all the work when it finished every job
        (_measures(100.0, a=1.0, b=2.0), _measures(100.0, a=1.0, b=2.0), True, []),
        (_measures(101.0, a=0.5, b=2.0), _measures(100.0, a=1.0, b=2.0), True, []),
        (_measures(99.9, a=0.5, b=0.5), _measures(100.0, a=1.0, b=2.0), False, []),  # short of goodput
        (_measures(120.0, a=1.0, b=2.5), _measures(100.0, a=1.0, b=2.0), False, ["b"]),  # b waits longer
        (_measures(120.0, a=3.0, b=2.5), _measures(100.0, a=1.0, b=2.0), False, ["a", "b"]),
        # a team with no countable job in one world is not compared
        (_measures(100.0, a=None, b=1.0), _measures(100.0, a=1.0, b=2.0), True, []),
        (_measures(100.0, a=5.0, b=1.0), _measures(100.0, a=None, b=2.0), True, []),
    ],
)
def test_beating_first_apply_is_goodput_at_least_its_and_no_longer_p95(
    tuned: Measures, first: Measures, beats: bool, slower: list[str]
) -> None:
    r = against("w", first, tuned)
    assert r.beats is beats
    assert [s.team for s in r.slower] == slower
    assert r.gap_gpu_h == round(tuned.goodput_gpu_h - first.goodput_gpu_h, 3)
    assert r.describe().startswith("w: beats first apply" if beats else "w: short of first apply")


def _rival(gap: float, slower_h: float = 0.0) -> Rival:
    slow = (Slower("v", round((1 + slower_h) * HOUR), HOUR),) if slower_h else ()
    return Rival("w", 100.0 + gap, 100.0, slow)


@pytest.mark.parametrize(
    ("holds", "rivals", "order", "key"),
    [
        (True, [_rival(0), _rival(5)], 0, (0, -2, 0.0, 0.0, 0)),
        (True, [_rival(-10), _rival(0, 2.0)], 3, (0, 0, 10.0, 2.0, 3)),
        (False, [_rival(0)], 1, (1, -1, 0.0, 0.0, 1)),
        (True, [_rival(-1.5, 0.5), _rival(-2.5, 1.0)], 2, (0, 0, 4.0, 1.5, 2)),
    ],
)
def test_preference_key(holds: bool, rivals: list[Rival], order: int, key: tuple[object, ...]) -> None:
    assert preference(holds, rivals, order) == key


def _judged(number: int, holds: bool, rivals: list[Rival]) -> Judged:
    m = _measures(0.0)
    violations = (0.0,) if holds else (1.0,)
    verdicts = tuple(Verdict(r.week, Figures("tuned", m, 0, 0), violations, r) for r in rivals)
    return Judged(Candidate(number, {}, 0.0, 0.0, violations, {}, "search"), verdicts)


@pytest.mark.parametrize(
    ("judged", "picked"),
    [
        ([], None),
        ([_judged(1, False, [_rival(10)])], None),  # meets no constraint everywhere: nothing to pick
        ([_judged(1, True, [_rival(-5)]), _judged(2, True, [_rival(-1)])], 2),  # the smaller shortfall
        ([_judged(1, True, [_rival(-5), _rival(0)]), _judged(2, True, [_rival(-1), _rival(-1)])], 1),  # more weeks
        ([_judged(1, False, [_rival(5)]), _judged(2, True, [_rival(-50)])], 2),  # constraints come first
        ([_judged(1, True, [_rival(0)]), _judged(2, True, [_rival(0)])], 1),  # a tie: the judging order
        ([_judged(1, True, [_rival(-1, 3.0)]), _judged(2, True, [_rival(-1, 1.0)])], 2),  # fewer p95 hours over
    ],
)
def test_pick_prefers_the_candidate_that_beats_first_apply_on_most_weeks(
    judged: list[Judged], picked: int | None
) -> None:
    best = pick(judged)
    assert (None if best is None else best.candidate.number) == picked


@pytest.mark.parametrize(
    ("rivals", "needed"),
    [
        ([_rival(0), _rival(3)], None),
        ([_rival(0), _rival(-248, 17.0)], "more goodput and shorter p95 waits for v: more trials"),
        ([_rival(-1)], "more goodput: more trials"),
        ([_rival(2, 1.0)], "shorter p95 waits for v: more trials"),
        ([replace(_rival(-5), first_done=True)], "finishing every job by first apply's end"),
        ([replace(_rival(-5), first_on_serving_gpu_h=310.0)], "ran up to 310 GPU-h of training on the serving pool"),
    ],
)
def test_a_recommendation_short_of_first_apply_is_a_finding_with_its_figures(
    rivals: list[Rival], needed: str | None
) -> None:
    why = not_beaten([_judged(4, True, rivals)])
    if needed is None:
        assert why is None
        return
    assert isinstance(why, Infeasible) and why.reason == "FirstApplyNotBeaten" and not why.blocks
    beaten = sum(r.beats for r in rivals)
    assert f"on {beaten} of {len(rivals)} held-out week(s)" in why.message
    assert needed in why.needed
    assert [e.split(": ")[1] for e in why.evidence] == [
        "beats first apply" if r.beats else "short of first apply" for r in rivals
    ]


SERVE_TWO = LIMITED.replace("nodes: [s1], gpusPerNode: 1", "nodes: [s1], gpusPerNode: 2")


def test_first_apply_runs_training_on_the_serving_pool_and_the_queue_world_does_not() -> None:
    """Two serving cards, one chat replica: first apply places one of a's one-card jobs on the free
    serving card each hour, so it finishes the eight jobs sooner than four training cards could; the
    queue world keeps training off the serving pool."""
    fleet = resolve(policy(SERVE_TWO))
    config = SimulationConfig()
    first = simulate(fleet, a_alone(), replace(config, mode=Mode.FIRST_APPLY))
    queue = simulate(fleet, a_alone(), replace(config, mode=Mode.QUEUE))
    window = common_window([first, queue])
    assert window[1] == first.outcome.end
    assert finished_all(first, window)
    assert not finished_all(queue, window)  # a's borrowingLimit 0: two cards, four rounds
    served = on_serving_gpu_h(first, fleet, window)
    assert served >= 1.0  # at least one one-hour job ran on the serving card
    assert on_serving_gpu_h(queue, fleet, window) == 0.0
    first_m = measure(first, fleet, window)
    r = against("w", first_m, measure(queue, fleet, window), first_done=True, first_on_serving_gpu_h=served)
    assert not r.beats and r.gap_gpu_h < 0
    assert "its goodput is the most any world counts" in r.describe()
    assert (
        f"{served:,.0f} GPU-h of it on the serving pool, {first_m.goodput_gpu_h - served:,.0f} off it" in r.describe()
    )
