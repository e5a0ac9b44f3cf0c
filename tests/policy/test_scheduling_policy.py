"""The policy's scheduling.nodeScoring: kube-scheduler's two NodeResourcesFit strategies, each mistake located."""

from __future__ import annotations

import pytest

from gpufleet.errors import InputError
from gpufleet.policy import parse_policy
from tests.policy.test_load import BASE

SCHEDULING_LINE = 35  # inserted where BASE has its top-level priorityClasses


def with_scheduling(block: str) -> str:
    anchor = "priorityClasses: [{name: batch, value: 100}]"
    assert anchor in BASE
    return BASE.replace(anchor, f"scheduling: {block}\n{anchor}", 1)


@pytest.mark.parametrize(
    ("text", "scoring"),
    [
        (BASE, "LeastAllocated"),  # no block: kube-scheduler's default
        (with_scheduling("{}"), "LeastAllocated"),
        (with_scheduling("{nodeScoring: LeastAllocated}"), "LeastAllocated"),
        (with_scheduling("{nodeScoring: MostAllocated}"), "MostAllocated"),
    ],
    ids=["absent", "empty", "least", "most"],
)
def test_the_node_scoring_parses(text: str, scoring: str) -> None:
    assert parse_policy(text, "fleet.yaml").scheduling.nodeScoring == scoring


@pytest.mark.parametrize(
    ("block", "path", "fragment"),
    [
        # gpufleet's own model: a simulate-only choice, never something a cluster could run
        ("{nodeScoring: FragmentationAware}", "scheduling.nodeScoring", "'LeastAllocated' or 'MostAllocated'"),
        ("{nodeScoring: mostallocated}", "scheduling.nodeScoring", "'LeastAllocated' or 'MostAllocated'"),
        ("{nodeScoring: RequestedToCapacityRatio}", "scheduling.nodeScoring", "'LeastAllocated' or 'MostAllocated'"),
        ("{scoring: MostAllocated}", "scheduling.scoring", "unknown field"),
    ],
    ids=["fragmentation-aware", "lower-case", "unsupported-strategy", "misspelt-key"],
)
def test_each_node_scoring_mistake_is_located(block: str, path: str, fragment: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_policy(with_scheduling(block), "fleet.yaml")
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.path) == ("fleet.yaml", SCHEDULING_LINE, path)
    assert fragment in problem.message
