"""Held-out weeks: a recommendation must meet the constraints on weeks it was not tuned on too."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.simulate.config import DAY
from gpufleet.tune.holdout import Week, bootstrap
from gpufleet.tune.judge import pick
from gpufleet.tune.objectives import Constraints
from gpufleet.tune.study import StudySpec
from gpufleet.tune.tuning import tune
from tests.tune.cases import HOUR, a_alone, b_comes_back, job, policy

RECLAIM = "queueing.reclaimWithinCohort"
CALM = Constraints(max_preemptions=0, min_jain=0.0)


def _spec(tmp_path: Path, trials: int) -> StudySpec:
    return StudySpec(str(tmp_path / "s.journal"), trials=trials)


def test_a_policy_that_preempts_on_the_next_week_is_not_recommended(tmp_path: Path) -> None:
    """Tuned on a alone, lifting a's limit is best and preempts nobody; on the held-out week b comes
    back and reclaims its cards (preempting a's jobs) unless reclaim is Never. So the simplest best
    trial fails there on preemptions, and the recommendation is one that also stops reclaim."""
    week = Week("b-returns", tuple(b_comes_back()))
    t = tune(policy(), a_alone(), _spec(tmp_path, 6), constraints=CALM, holdout=[week], holdout_candidates=6)
    first = t.judged[0]
    assert not first.holds and first.candidate.params[RECLAIM] != "Never"
    (verdict,) = first.verdicts
    assert verdict.week == "b-returns" and [f.split(" ")[0] for f in verdict.failing()] == ["preemptions"]
    assert verdict.tuned.measures.preemptions_max > 0
    assert t.recommended is not None and t.judged[-1].holds and t.judged[-1].candidate == t.recommended
    assert t.recommended.params[RECLAIM] == "Never"
    rows = t.heldout_table()
    assert [r["world"] for r in rows] == ["first-apply", "input", "tuned"]
    assert rows[2]["meetsConstraints"] is True and rows[2]["preemptionsMax"] == 0
    assert set(rows[2]["p95WaitSeconds"]) == {"a", "b"}  # type: ignore[arg-type]


def test_when_no_candidate_holds_it_says_which_constraint_fails_where(tmp_path: Path) -> None:
    week = Week("b-returns", tuple(b_comes_back()))
    t = tune(policy(), a_alone(), _spec(tmp_path, 3), constraints=CALM, holdout=[week], holdout_candidates=1)
    assert t.recommended is None
    (why,) = t.infeasible
    assert why.reason == "HeldOutConstraintFails" and why.constraint == "preemptions"
    assert "preemptions +" in why.message and "on b-returns" in why.message


jobs_strategy = st.lists(
    st.tuples(st.sampled_from("abc"), st.integers(0, 3 * DAY - 1), st.integers(1, 4 * HOUR)), min_size=1, max_size=30
)


@settings(max_examples=40, deadline=None)
@given(spec=jobs_strategy, seed=st.integers(0, 10))
def test_a_bootstrap_week_is_whole_team_days_of_the_trace(spec: list[tuple[str, int, int]], seed: int) -> None:
    jobs = [job(f"{team}-{i}", team, submit, duration) for i, (team, submit, duration) in enumerate(spec)]
    days = max(j.submit_s for j in jobs) // DAY + 1
    weeks = bootstrap(jobs, 2, seed)
    assert weeks == bootstrap(jobs, 2, seed)  # reproducible
    for w in weeks:
        assert len({j.job_id for j in w.jobs}) == len(w.jobs)
        assert [j.submit_s for j in w.jobs] == sorted(j.submit_s for j in w.jobs)
        for team in {j.team for j in jobs}:
            for day in range(days):
                drawn = Counter(
                    (j.submit_s % DAY, j.duration_s) for j in w.jobs if j.team == team and j.submit_s // DAY == day
                )
                sources = [
                    Counter((j.submit_s % DAY, j.duration_s) for j in jobs if j.team == team and j.submit_s // DAY == d)
                    for d in range(days)
                ]
                assert drawn in sources  # one whole day of this team, moved to this day


def test_the_recommendation_is_the_judged_candidate_that_beats_first_apply_on_most_weeks(tmp_path: Path) -> None:
    """Every judged candidate carries its comparison with first apply on each held-out week; the
    recommendation is the one ``pick`` prefers, moved last, and when it does not beat first apply on
    every week a ``FirstApplyNotBeaten`` finding says so with each week's figures (never a blocker)."""
    weeks = [Week("b-returns", tuple(b_comes_back())), Week("a-again", tuple(a_alone()))]
    t = tune(policy(), a_alone(), _spec(tmp_path, 6), constraints=CALM, holdout=weeks, holdout_candidates=6)
    assert t.recommended is not None and t.judged[-1].candidate == t.recommended
    assert pick(t.judged) is t.judged[-1]
    for j in t.judged:
        assert [v.rival.week for v in j.verdicts] == ["b-returns", "a-again"]
        for v, b in zip(j.verdicts, t.heldout, strict=True):
            assert v.rival.first_goodput_gpu_h == b.first.measures.goodput_gpu_h
            assert v.rival.goodput_gpu_h == v.tuned.measures.goodput_gpu_h
    findings = [i for i in t.infeasible if i.reason == "FirstApplyNotBeaten"]
    best = t.judged[-1]
    print("beaten", best.beaten, [v.rival.describe() for v in best.verdicts])  # simulated figures, for the log
    if best.beaten == len(weeks):
        assert findings == [] and len(t.judged) <= 6
    else:
        (finding,) = findings
        assert not finding.blocks and len(finding.evidence) == len(weeks)
        assert f"on {best.beaten} of {len(weeks)} held-out week(s)" in finding.message
    rows = [r for r in t.heldout_table() if r["world"] == "tuned"]
    assert [r["beatsFirstApply"] for r in rows] == [v.rival.beats for v in best.verdicts]
