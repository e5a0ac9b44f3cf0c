"""No recommendation strands work: a job first apply runs (or the input admits) may not become
never-admissible, unless no policy in the space can admit it; then it is reported with the capacity
that would (``tune.strand``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.policy import resolve
from gpufleet.tune.objectives import CONSTRAINTS, Constraints
from gpufleet.tune.space import build_space
from gpufleet.tune.strand import never_keys, stranding
from gpufleet.tune.study import StudySpec
from gpufleet.tune.tuning import tune
from gpufleet.tune.verdict import headline, shortfalls
from tests.tune.cases import a_needs_the_pool, policy

A_BORROW = "teams[a].quota[train].borrowingLimit"
B_LEND = "teams[b].quota[train].lendingLimit"
LOOSE = Constraints(min_jain=0.0)
STRANDED = CONSTRAINTS.index("stranded")


@pytest.mark.parametrize(
    ("params", "never"),
    [
        ({}, {"a/a-big", "a/a-huge"}),  # a reaches its own two cards
        ({A_BORROW: "unlimited"}, {"a/a-huge"}),  # b's two lent: the whole pool
        ({A_BORROW: "unlimited", B_LEND: "0"}, {"a/a-big", "a/a-huge"}),  # b lends nothing
        ({A_BORROW: "1"}, {"a/a-big", "a/a-huge"}),  # three cards at most
    ],
)
def test_which_jobs_a_policy_strands(params: dict[str, str], never: set[str]) -> None:
    space = build_space(policy())
    assert never_keys(space.fleet({**space.base_params(), **params}), a_needs_the_pool()) == never


def test_a_job_no_knob_can_admit_is_reported_with_the_capacity_that_would() -> None:
    space = build_space(policy())
    jobs = a_needs_the_pool()
    input_never = never_keys(resolve(policy()), jobs)
    unseen = stranding(space, jobs, set(), input_never)  # first apply ran nothing: only what the input admits
    assert unseen.protected == {"a/a-0", "a/a-1", "b/b-0"}
    s = stranding(space, jobs, {"a/a-big", "a/a-huge"}, input_never)  # as if first apply had run both
    assert s.protected == {"a/a-big", "a/a-0", "a/a-1", "b/b-0"}
    (beyond,) = s.beyond
    assert (beyond.team, beyond.jobs, beyond.largest, beyond.pool, beyond.reach, beyond.capacity) == (
        "a",
        ("a/a-huge",),
        5,
        "train",
        4,
        4,
    )
    assert "1 more nvidia.com/gpu units in train (4 → 5)" in beyond.message()


def test_the_recommendation_strands_nothing_a_knob_can_save(tmp_path: Path) -> None:
    """The input strands a-big (a reaches two cards); every trial that strands it is infeasible, so
    the recommendation lifts a's limit and keeps b lending."""
    t = tune(policy(), a_needs_the_pool(), StudySpec(str(tmp_path / "s.journal"), trials=6), constraints=LOOSE)
    assert t.trials[0].source == "input" and t.trials[0].constraints[STRANDED] == 1 and not t.trials[0].feasible
    for c in t.trials:
        assert (c.measures["neverAdmissible"] - 1 > 0) == (c.constraints[STRANDED] > 0)  # a-huge is not counted
        if c.constraints[STRANDED] > 0:
            assert not c.feasible
    assert t.recommended is not None and t.recommended.constraints[STRANDED] == 0
    assert t.recommended.params[A_BORROW] not in ("0", "1") and t.recommended.params.get(B_LEND) != "0"
    assert t.worlds[2].measures.never_admissible == 1  # only a-huge, which no knob saves
    assert [b.jobs for b in t.beyond] == [("a/a-huge",)]
    assert (t.worlds[1].stranded, t.worlds[2].stranded) == (1, 0)  # the input strands a-big, the tuned policy none
    first, given, tuned = (w.measures for w in t.worlds)
    # the headline never calls a stranding queue better: the input's own week, with its stranded job, misses
    # the goal by the stranded constraint, whatever its goodput and waits; the tuned one is not held to it
    strands = shortfalls(first, given, LOOSE, t.worlds[1].stranded)
    assert "1 job(s) that first apply runs or the input admits can never be admitted (stranded)" in strands
    assert any(s.startswith("a constraint is not met") for s in strands)
    assert "It misses the goal" in headline(first, given, given, LOOSE, t.worlds[1].stranded)
    assert not any("stranded" in s for s in shortfalls(first, tuned, LOOSE, t.worlds[2].stranded))
