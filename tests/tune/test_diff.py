"""The diff names, for each changed knob, the input's pathologies whose settings point at it."""

from __future__ import annotations

import pytest

from gpufleet.policy import resolve
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.measures import Measures, measure
from gpufleet.simulate.pathologies import Finding, Reason
from gpufleet.simulate.run import simulate
from gpufleet.tune.diff import diff
from tests.tune.cases import a_alone, policy

# the settings the simulator's PreemptionLoop names for a lender's reclaim (InCohortReclamation)
LOOP = Finding(
    Reason.PREEMPTION_LOOP,
    "a job was preempted 4 times",
    (),
    "Break the loop",
    ("queueing.reclaimWithinCohort", "queueing.prioritizePreemptorWorkloads"),
    ("a",),
)

# the settings the simulator's QuotaWithoutNode names
UNPLACED = Finding(
    Reason.QUOTA_WITHOUT_NODE,
    "a job got quota but no node",
    (),
    "Quota the nodes cannot deliver",
    ("scheduling.nodeScoring", "queueing.waitForPodsReady.timeoutSeconds"),
    ("a", "train"),  # its team and pool
)


@pytest.fixture(scope="module")
def measures() -> Measures:
    fleet = resolve(policy())
    result = simulate(fleet, a_alone(), SimulationConfig())
    return measure(result, fleet, (0, result.outcome.end))


@pytest.mark.parametrize(
    ("knob", "before", "after", "removes"),
    [
        ("queueing.prioritizePreemptorWorkloads", "false", "true", (Reason.PREEMPTION_LOOP,)),
        ("queueing.reclaimWithinCohort", "Any", "Never", (Reason.PREEMPTION_LOOP,)),
        ("teams[a].preemption.reclaimWithinCohort", "fleet", "Never", (Reason.PREEMPTION_LOOP,)),
        ("queueing.waitForPodsReady.timeoutSeconds", "1800", "600", (Reason.QUOTA_WITHOUT_NODE,)),
        ("scheduling.nodeScoring", "LeastAllocated", "MostAllocated", (Reason.QUOTA_WITHOUT_NODE,)),
        ("queueing.fairSharing", "true", "false", ()),
    ],
)
def test_a_changed_knob_names_the_loop_it_removes(
    measures: Measures, knob: str, before: str, after: str, removes: tuple[Reason, ...]
) -> None:
    (change,) = diff(
        base={knob: before},
        tuned={knob: after},
        before=measures,
        after=measures,
        found_before=[LOOP, UNPLACED],
        found_after=[],
    )
    assert (change.setting, change.before, change.after) == (knob, before, after)
    assert change.removes == removes
    if removes == (Reason.PREEMPTION_LOOP,):
        assert [e.measure for e in change.effects] == ["most preemptions of one job"]
    elif removes:
        assert [e.measure for e in change.effects] == ["usable idle GPU-h (train)"]
    else:  # no finding points at it: the two objectives instead
        assert [e.measure for e in change.effects] == ["goodput GPU-h", "worst team p95 wait h"]
