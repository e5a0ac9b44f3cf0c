"""Saying when nothing can work: a constraint no knob can meet is named with its evidence and the
capacity that would make it feasible, instead of "no trial met the constraints" (``tune.feasibility``)."""

from __future__ import annotations

from pathlib import Path

from gpufleet.simulate.config import HOUR
from gpufleet.trace.job import Job
from gpufleet.tune.feasibility import fits
from gpufleet.tune.objectives import Constraints
from gpufleet.tune.study import StudySpec
from gpufleet.tune.tuning import tune
from tests.tune.cases import LIMITED, a_alone, a_needs_the_pool, job, policy

LOOSE = Constraints(min_jain=0.0)
# three two-card replicas at the curve's peak (hours 7-19) on two three-card nodes: six cards, as the
# policy's own check asks, but a node holds one replica, so one replica starves each peak hour
CROWDED = LIMITED.replace("replicas: 1, gpusPerReplica: 1", "replicas: 3, gpusPerReplica: 2").replace(
    "nodes: [s1], gpusPerNode: 1", "nodes: [s1, s2], gpusPerNode: 3"
)


def a_day() -> list[Job]:
    """a's eight jobs at 0 and one at 22 h: every world runs past the curve's peak (hours 7-19)."""
    return [*a_alone(), job("a-late", "a", 22 * HOUR, HOUR)]


def _spec(tmp_path: Path, trials: int) -> StudySpec:
    return StudySpec(str(tmp_path / "s.journal"), trials=trials)


def test_a_serving_pool_too_small_is_named_and_the_search_is_not_run(tmp_path: Path) -> None:
    """By hand: the default curve wants 3 replicas at hours 7-19 (2 at hours 6, 20, 21); two fit on the
    two nodes, the third starves: 13 hours × 60 = 780 replica-minutes a day at least; a third node holds it."""
    t = tune(policy(CROWDED), a_day(), _spec(tmp_path, 6), constraints=LOOSE)
    (blocker,) = [i for i in t.infeasible if i.blocks]
    assert blocker.reason == "ServingPoolTooSmall" and blocker.constraint == "servingStarvation"
    assert "at least 780 replica-minutes starve" in blocker.message
    assert blocker.needed.startswith("1 more node(s) of 3 GPUs in serve (2 → 3)")
    assert blocker.evidence == ("chat: up to 3 replica(s) × 2 GPU",)
    assert t.recommended is None and [c.source for c in t.trials] == ["input"]  # no budget spent


def test_the_simulator_starves_at_least_the_bound(tmp_path: Path) -> None:
    """The bound is a lower bound on what the simulator measures (first apply, no queue at all)."""
    t = tune(policy(CROWDED), a_day(), _spec(tmp_path, 1), constraints=LOOSE)
    for world in t.worlds:
        assert world.measures.serving_starved_replica_min >= 780, world.name


def test_packing_is_exact_on_small_cases() -> None:
    assert fits([2, 2, 2], 2, 3) is False and fits([2, 2, 2], 3, 3) is True
    assert fits([3, 2, 1], 2, 3) is True and fits([4], 2, 3) is False and fits([], 1, 1) is True


def test_an_allowance_above_the_bound_is_not_called_infeasible(tmp_path: Path) -> None:
    allowed = Constraints(min_jain=0.0, max_starved_replica_min=780)
    t = tune(policy(CROWDED), a_day(), _spec(tmp_path, 2), constraints=allowed)
    assert not t.blocked


def test_jobs_no_knob_admits_are_named_without_blocking(tmp_path: Path) -> None:
    t = tune(policy(), a_needs_the_pool(), _spec(tmp_path, 4), constraints=LOOSE)
    (larger,) = t.infeasible
    assert (larger.reason, larger.constraint, larger.blocks) == ("JobLargerThanAnyPool", "stranded", False)
    assert larger.evidence == ("a/a-huge",) and "1 more nvidia.com/gpu units in train (4 → 5)" in larger.needed
    assert t.recommended is not None


def test_nothing_found_says_how_close_each_constraint_came(tmp_path: Path) -> None:
    t = tune(policy(), a_alone(), _spec(tmp_path, 2), constraints=Constraints(min_jain=1.5))
    (none,) = t.infeasible
    assert none.reason == "NoTrialFeasible" and none.constraint == "jain" and not none.blocks
    assert "never met: jain" in none.message
    assert any(e.startswith("jain: missed by 0.5 at best") for e in none.evidence), none.evidence
    assert any(e.startswith("preemptions: met") for e in none.evidence)
