"""The policy's preemption settings: what parses (with Kueue's defaults) and each mistake, located."""

from __future__ import annotations

import pytest

from gpufleet.errors import InputError
from gpufleet.policy import parse_policy
from tests.policy.test_load import BASE

QUEUEING_LINE = 35  # the queueing block is inserted where BASE has its top-level priorityClasses


def with_queueing(block: str) -> str:
    anchor = "priorityClasses: [{name: batch, value: 100}]"
    assert anchor in BASE
    return BASE.replace(anchor, f"queueing: {block}\n{anchor}", 1)


# (id, queueing block, borrowWithinCohort policy, its maxPriorityThreshold)
GOOD = [
    ("default", "{}", "Never", None),
    ("never", "{borrowWithinCohort: {policy: Never}}", "Never", None),
    ("lower", "{borrowWithinCohort: {policy: LowerPriority}}", "LowerPriority", None),
    ("threshold", "{borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}}", "LowerPriority", 100),
    (
        "negative-threshold",
        "{borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: -2147483648}}",
        "LowerPriority",
        -(2**31),
    ),
    (
        "lower-reclaim",
        "{reclaimWithinCohort: LowerPriority, borrowWithinCohort: {policy: LowerPriority}}",
        "LowerPriority",
        None,
    ),
]


@pytest.mark.parametrize(("block", "policy", "threshold"), [c[1:] for c in GOOD], ids=[c[0] for c in GOOD])
def test_borrow_within_cohort_parses(block: str, policy: str, threshold: int | None) -> None:
    q = parse_policy(with_queueing(block), "fleet.yaml").queueing
    assert (q.borrowWithinCohort.policy, q.borrowWithinCohort.maxPriorityThreshold) == (policy, threshold)


# (id, queueing block, path, fragment of the message)
BAD = [
    ("unknown-policy", "{borrowWithinCohort: {policy: Always}}", "queueing.borrowWithinCohort.policy", "'Never'"),
    (
        "threshold-without-policy",
        "{borrowWithinCohort: {maxPriorityThreshold: 10}}",
        "queueing.borrowWithinCohort.maxPriorityThreshold",
        "applies only with policy LowerPriority",
    ),
    (
        "threshold-not-int32",
        "{borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 2147483648}}",
        "queueing.borrowWithinCohort.maxPriorityThreshold",
        "less than or equal to 2147483647",
    ),
    (
        "threshold-not-a-number",
        "{borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: high}}",
        "queueing.borrowWithinCohort.maxPriorityThreshold",
        "valid integer",
    ),
    ("unknown-field", "{borrowWithinCohort: {polcy: Never}}", "queueing.borrowWithinCohort.polcy", "unknown field"),
    (
        "borrow-without-reclaim",
        "{reclaimWithinCohort: Never, borrowWithinCohort: {policy: LowerPriority}}",
        "queueing.borrowWithinCohort.policy",
        "needs reclaimWithinCohort other than Never",
    ),
]


@pytest.mark.parametrize(("block", "path", "fragment"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_each_borrow_within_cohort_mistake_is_located(block: str, path: str, fragment: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_policy(with_queueing(block), "fleet.yaml")
    matching = [p for p in caught.value.problems if p.path == path]
    assert matching, f"no problem at {path}; got {[str(p) for p in caught.value.problems]}"
    assert (matching[0].file, matching[0].line) == ("fleet.yaml", QUEUEING_LINE)
    assert fragment in matching[0].message


TEAM_LINE = 24  # team a's preemption block is inserted after its namespaces (line 23)


def with_team_preemption(block: str, queueing: str = "{}") -> str:
    anchor = "    namespaces: [team-a]\n"
    assert anchor in BASE
    return with_queueing(queueing).replace(anchor, f"{anchor}    preemption: {block}\n", 1)


# (id, team a's preemption block, the fleet's queueing, a's (within, reclaim, borrow policy), b's the same)
TEAM_GOOD = [
    ("none", "{}", "{}", ("LowerPriority", "Any", "Never"), ("LowerPriority", "Any", "Never")),
    ("within", "{withinClusterQueue: Never}", "{}", ("Never", "Any", "Never"), ("LowerPriority", "Any", "Never")),
    (
        "reclaim-never-over-fleet-any",
        "{reclaimWithinCohort: Never}",
        "{}",
        ("LowerPriority", "Never", "Never"),
        ("LowerPriority", "Any", "Never"),
    ),
    (
        "borrow-over-fleet-never",
        "{borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 5}}",
        "{}",
        ("LowerPriority", "Any", "LowerPriority"),
        ("LowerPriority", "Any", "Never"),
    ),
    (
        "reclaim-back-for-one-team",
        "{reclaimWithinCohort: LowerPriority, borrowWithinCohort: {policy: LowerPriority}}",
        "{reclaimWithinCohort: Never}",
        ("LowerPriority", "LowerPriority", "LowerPriority"),
        ("LowerPriority", "Never", "Never"),
    ),
]


@pytest.mark.parametrize(("block", "queueing", "a", "b"), [c[1:] for c in TEAM_GOOD], ids=[c[0] for c in TEAM_GOOD])
def test_a_teams_preemption_overrides_the_fleets_for_that_team_only(
    block: str, queueing: str, a: tuple[str, str, str], b: tuple[str, str, str]
) -> None:
    policy = parse_policy(with_team_preemption(block, queueing), "fleet.yaml")

    def got(name: str) -> tuple[str, str, str]:
        team = policy.team(name)
        assert team is not None
        p = policy.preemption_of(team)
        return (p.withinClusterQueue, p.reclaimWithinCohort, p.borrowWithinCohort.policy)

    assert (got("a"), got("b")) == (a, b)


# (id, team a's preemption block, the fleet's queueing, path, fragment of the message)
TEAM_BAD = [
    ("unknown-value", "{withinClusterQueue: Sometimes}", "{}", "teams[0].preemption.withinClusterQueue", "'Never'"),
    ("unknown-field", "{fairSharing: false}", "{}", "teams[0].preemption.fairSharing", "unknown field"),
    (
        "team-borrow-without-fleet-reclaim",
        "{borrowWithinCohort: {policy: LowerPriority}}",
        "{reclaimWithinCohort: Never}",
        "teams[0].preemption.borrowWithinCohort.policy",
        "needs reclaimWithinCohort other than Never in team 'a'",
    ),
    (
        "team-reclaim-never-under-fleet-borrow",
        "{reclaimWithinCohort: Never}",
        "{borrowWithinCohort: {policy: LowerPriority}}",
        "teams[0].preemption.reclaimWithinCohort",
        "needs reclaimWithinCohort other than Never in team 'a'",
    ),
    (
        "team-threshold-without-policy",
        "{borrowWithinCohort: {maxPriorityThreshold: 1}}",
        "{}",
        "teams[0].preemption.borrowWithinCohort.maxPriorityThreshold",
        "applies only with policy LowerPriority",
    ),
]


@pytest.mark.parametrize(
    ("block", "queueing", "path", "fragment"), [c[1:] for c in TEAM_BAD], ids=[c[0] for c in TEAM_BAD]
)
def test_each_team_preemption_mistake_is_located(block: str, queueing: str, path: str, fragment: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_policy(with_team_preemption(block, queueing), "fleet.yaml")
    problems = caught.value.problems
    matching = [p for p in problems if p.path == path]
    assert matching, f"no problem at {path}; got {[str(p) for p in problems]}"
    assert (matching[0].file, matching[0].line) == ("fleet.yaml", TEAM_LINE)
    assert fragment in matching[0].message
    assert not [p for p in problems if p.path.startswith("queueing")], "the fleet's own settings are valid"


@pytest.mark.parametrize(
    ("block", "timeout"),
    [("{}", None), ("{waitForPodsReady: {}}", None), ("{waitForPodsReady: {timeoutSeconds: 600}}", 600)],
    ids=["unset", "empty", "ten-minutes"],
)
def test_the_pods_ready_timeout_parses(block: str, timeout: int | None) -> None:
    assert parse_policy(with_queueing(block), "fleet.yaml").queueing.waitForPodsReady.timeoutSeconds == timeout


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("0", "greater than or equal to 1"),
        ("-5", "greater than or equal to 1"),
        ("9223372037", "less than or equal to 9223372036"),  # past a Go time.Duration
        ("10m", "valid integer"),
    ],
    ids=["zero", "negative", "past-go-duration", "a-duration-text"],
)
def test_each_pods_ready_timeout_mistake_is_located(value: str, fragment: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_policy(with_queueing(f"{{waitForPodsReady: {{timeoutSeconds: {value}}}}}"), "fleet.yaml")
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.path) == (
        "fleet.yaml",
        QUEUEING_LINE,
        "queueing.waitForPodsReady.timeoutSeconds",
    )
    assert fragment in problem.message
