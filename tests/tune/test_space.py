"""The knobs tune turns and the reasoned candidates, read off the policy they build."""

from __future__ import annotations

import pytest

from gpufleet.tune.remedies import candidates
from gpufleet.tune.space import build_space, value_of
from tests.tune.cases import policy


@pytest.mark.parametrize(
    ("path", "value", "field", "expected"),
    [
        ("queueing.prioritizePreemptorWorkloads", "true", "prioritizePreemptorWorkloads", True),
        ("queueing.prioritizePreemptorWorkloads", "false", "prioritizePreemptorWorkloads", False),
        ("queueing.fairSharing", "false", "fairSharing", False),
        ("queueing.reclaimWithinCohort", "Never", "reclaimWithinCohort", "Never"),
    ],
)
def test_a_queueing_knob_sets_its_field_and_reads_back_as_its_choice(
    path: str, value: str, field: str, expected: object
) -> None:
    space = build_space(policy())
    assert value in space.knob(path).choices
    changed = space.apply({path: value})
    assert getattr(changed.queueing, field) == expected
    assert value_of(changed, path) == value


def test_the_preemptor_gate_starts_at_kueues_default() -> None:
    assert build_space(policy()).base_params()["queueing.prioritizePreemptorWorkloads"] == "false"


def test_a_reasoned_candidate_keeps_reclaim_and_turns_the_preemptor_gate_on() -> None:
    space = build_space(policy())
    gated = [c for c in candidates(space) if c.get("queueing.prioritizePreemptorWorkloads") == "true"]
    assert gated, "no candidate tries PrioritizePreemptorWorkloads"
    # The point of that candidate: guaranteed reclaim stays as the input policy has it.
    assert all("queueing.reclaimWithinCohort" not in c for c in gated)
    assert space.apply(gated[0]).queueing.reclaimWithinCohort == policy().queueing.reclaimWithinCohort
