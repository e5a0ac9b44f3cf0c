"""``tune`` on tiny fleets where the better policy is worked out by hand (``cases``)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from gpufleet.errors import InputError
from gpufleet.simulate.pathologies import Reason
from gpufleet.tune.objectives import Constraints, lost_guarantees
from gpufleet.tune.study import StudySpec
from gpufleet.tune.tuning import tune
from tests.tune.cases import HOUR, LIMITED, a_alone, b_comes_back, policy

BORROW = "teams[a].quota[train].borrowingLimit"


def _journal(tmp_path: Path, trials: int, **kw: object) -> StudySpec:
    return StudySpec(str(tmp_path / "study.journal"), trials=trials, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("reasoned", [True, False], ids=["reasoned-candidates", "sampler-only"])
def test_lifting_the_borrowing_limit_lets_the_idle_quota_be_used(tmp_path: Path, reasoned: bool) -> None:
    """By hand (cases.a_alone): limit 0 → two at a time, 3.999 GPU-h in the 2 h window, last wait 3 h
    3 s; lifted → 7.999 GPU-h, 1 h 1 s (each later round waits one requeue batch)."""
    t = tune(policy(), a_alone(), _journal(tmp_path, 6), reasoned=reasoned)
    first, given, tuned = (w.measures for w in t.worlds)
    assert t.window == (0, 2 * HOUR)  # first apply runs all eight in two rounds
    assert given.goodput_gpu_h == pytest.approx(3.999) and tuned.goodput_gpu_h == pytest.approx(7.999)
    assert max(x.wait_p95_s or 0 for x in given.teams) == 3 * HOUR + 3
    assert max(x.wait_p95_s or 0 for x in tuned.teams) == HOUR + 1
    assert first.goodput_gpu_h == pytest.approx(8.0)
    assert t.recommended is not None and t.recommended.params[BORROW] != "0"
    tuned_a = t.policy.team("a")
    assert tuned_a is not None and tuned_a.quota["train"].borrowingLimit != 0
    # the sampler's trial changed settings that do nothing here; simplifying leaves only the one that matters
    assert [c.setting for c in t.changes] == [BORROW]
    lifted = t.changes[0]
    assert lifted.before == "0" and Reason.IDLE_BEHIND_LIMITS in lifted.removes
    assert [(e.before, e.after) for e in lifted.effects] == [(4.0, 0.0)]  # usable idle GPU-h of the pool
    if reasoned:  # the reasoned candidate (trial 1) is the one a consultant would write: lift the limits
        assert t.trials[1].source == "candidate" and t.trials[1].params[BORROW] == "unlimited"


def test_the_input_policy_is_trial_zero_and_never_beaten_by_the_recommendation(tmp_path: Path) -> None:
    t = tune(policy(), a_alone(), _journal(tmp_path, 3))
    zero = t.trials[0]
    assert zero.number == 0 and zero.source == "input" and zero.params == t.space.base_params()
    assert t.recommended is not None
    assert t.recommended.goodput_gpu_h >= zero.goodput_gpu_h
    assert t.recommended.worst_p95_h <= zero.worst_p95_h


def test_constraints_hold_for_the_recommendation(tmp_path: Path) -> None:
    """With b coming back, lifting the limit makes b reclaim (preemptions) unless reclaim is Never,
    and reclaim Never costs b its guarantee: with no preemption allowed and guarantees kept, the
    recommendation must do without either: by hand, b's cards cannot be lent at all then.
    (Jain is off here: b's small demand keeps it near 0.8 in every world.)"""
    strict = Constraints(max_preemptions=0, keep_guarantees=True, min_jain=0.0)
    t = tune(policy(), b_comes_back(), _journal(tmp_path, 8), constraints=strict)
    assert t.recommended is not None and t.recommended.feasible
    m = t.worlds[2].measures
    assert m.preemptions_max == 0 and m.serving_starved_replica_min == 0
    assert lost_guarantees(policy(), t.policy) == []
    for c in t.trials:  # every trial that preempted is marked infeasible
        if c.measures["preemptionsPerJob"]["max"] > 0:
            assert not c.feasible
    assert t.recommended.goodput_gpu_h == pytest.approx(7.999)  # a keeps to its own two cards
    loose = Constraints(max_preemptions=3, keep_guarantees=False, min_jain=0.0)
    freer = tune(policy(), b_comes_back(), StudySpec(str(tmp_path / "loose.journal"), trials=8), constraints=loose)
    # 10 GPU-h but for a round of parked jobs that starts one requeue batch (1 s) after quota frees
    assert freer.recommended is not None and freer.recommended.goodput_gpu_h == pytest.approx(9.999)


def test_nothing_feasible_gives_no_recommendation(tmp_path: Path) -> None:
    t = tune(policy(), a_alone(), _journal(tmp_path, 2), constraints=Constraints(min_jain=1.5))
    assert t.recommended is None and t.front == []
    assert t.policy == policy() and t.changes == []


def test_a_study_resumes_where_it_stopped(tmp_path: Path) -> None:
    first = tune(policy(), a_alone(), _journal(tmp_path, 3))
    again = tune(policy(), a_alone(), _journal(tmp_path, 5))
    assert [c.number for c in first.trials] == [0, 1, 2]
    assert [c.number for c in again.trials] == [0, 1, 2, 3, 4]
    assert again.trials[:3] == first.trials  # the same trials, not run again
    assert [c.source for c in again.trials].count("input") == 1  # seeded once
    other = LIMITED.replace("borrowingLimit: 0", "borrowingLimit: 1")
    with pytest.raises(InputError, match="another policy, trace or constraints"):
        tune(policy(other), a_alone(), _journal(tmp_path, 6))


def test_workers_in_processes_share_a_postgresql_study(postgres_url: str) -> None:
    """Two worker processes and this one join one study in a real PostgreSQL server."""
    from tests.ledger.ledger_pgserver import create_database

    url = create_database(postgres_url, "tune_study")
    t = tune(policy(), a_alone(), StudySpec(url, name="pg", trials=6, jobs=2))
    assert len(t.trials) >= 6 and t.trials[0].source == "input"
    stored = optuna.load_study(study_name="pg", storage=url.replace("postgresql://", "postgresql+psycopg://", 1))
    assert len(stored.trials) == len(t.trials) + t.pruned
    assert {tr.number for tr in stored.trials} == set(range(len(stored.trials)))
    assert t.recommended is not None and t.recommended.goodput_gpu_h == pytest.approx(7.999)
