"""Fair-sharing preemption in cohort trees, hand-worked from Kueue v0.19.2's code.

Kueue picks the ClusterQueue that gives the next victim from the root down (``nextTarget`` in
``pkg/scheduler/preemption/fairsharing/ordering.go``: the child with the highest share at each
cohort; a cohort that is not borrowing and is not an ancestor of the preemptor is pruned, and so
is every ClusterQueue inside it) and compares shares one level below the least common ancestor
(``least_common_ancestor.go``). All quotas below are GPUs of one flavor, no cohort has quota of
its own, so what a parent can lend is the root's total: every share is borrowed * 1000 / total.
Each case names the shares Kueue computes; the twin must reach Kueue's victims and reasons.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpufleet.twin import Twin
from gpufleet.twin.apis import specs as s
from tests.twin.trees import Job, Queue, jobs, tree

LTE = s.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
LTI = s.LESS_THAN_INITIAL_SHARE


@dataclass(frozen=True)
class Case:
    cohorts: dict[str, tuple[str | None, float]]
    queues: dict[str, Queue]
    running: list[Job]
    preemptor: Job
    strategies: tuple[str, ...]
    victims: dict[str, str]  # workload -> Kueue's reason; {} when Kueue finds no targets


# Weight-0 queue inside a cohort that is not borrowing. root{A{a1, a2}, B{b1 (weight 0), b2}}, 16
# GPUs. a2 uses 8 (nominal 4), b1 uses 6 (nominal 4, weight 0: an infinite share), b2 nothing.
# a1 (nominal 4) asks 4 with 2 free: within nominal, so FairSharingPreemptWithinNominal takes
# victims without a share test, in target order. At the root, B uses 6 of its 8: not borrowing and
# not on a1's path, so B is pruned with b1 in it; A is on the path; inside A, a1 has no candidates
# and a2 borrows. The victim is a2's most recently admitted workload. The flat rules visited b1
# first (the highest share of all borrowing queues) and preempted a weight-0 queue Kueue never sees.
WEIGHT_ZERO_IN_QUIET_COHORT = Case(
    cohorts={"root": (None, 1.0), "A": ("root", 1.0), "B": ("root", 1.0)},
    queues={"a1": Queue("A", 4), "a2": Queue("A", 4), "b1": Queue("B", 4, weight=0.0), "b2": Queue("B", 4)},
    running=jobs("a2", 4, 2) + jobs("b1", 3, 2),
    preemptor=Job("p", "a1", 4, at=100),
    strategies=(LTE, LTI),
    victims={"ns/a2-4": "InCohortReclamation"},
)

# A cohort that borrows only inside itself is never a target. root{L{p, q}, R{r1, r2}}, 12 GPUs:
# p 2, q 2 (L 4), r1 4, r2 4 (R 8). q uses 2, r1 uses 8 (borrowing 4 from r2), total 10. p asks 4
# (borrowing 2, not within nominal). At the root R uses 8 of 8: not borrowing, not on p's path:
# pruned, so no candidate is ever visited and Kueue finds no targets. The flat rules compared p
# (166) with r1 (333, 166 after one victim) and preempted r1.
BORROWING_ONLY_INSIDE_ITS_COHORT = Case(
    cohorts={"root": (None, 1.0), "L": ("root", 1.0), "R": ("root", 1.0)},
    queues={"p": Queue("L", 2), "q": Queue("L", 2), "r1": Queue("R", 4), "r2": Queue("R", 4)},
    running=jobs("q", 1, 2) + jobs("r1", 4, 2),
    preemptor=Job("w", "p", 4, at=100),
    strategies=(LTE, LTI),
    victims={},
)


def lca_case(strategies: tuple[str, ...], victims: dict[str, str]) -> Case:
    """Shares at the cohorts below the root. root{L{p, q}, R{r1, r2}}, 12 GPUs: p 1, q 1 (L 2),
    r1 5, r2 5 (R 10). r1 runs four 3-GPU workloads (12: R borrows 2, share 166). p asks 3 with
    nothing free. Kueue: at the root L (on the path; with the request 3 of 2: share 83) and R (166):
    R; inside R, r1. The LCA is the root, so the preemptor's share is L's 83 and the target's is
    R's: 166 before, 0 after removing a 3-GPU victim (R uses 9 of 10).
    LessThanOrEqualToFinalShare: 83 <= 0 fails for every candidate. LessThanInitialShare: 83 < 166
    passes; one victim frees 3 and p fits. Both: the first fails, rule S2-b takes the first
    refused candidate of r1. (The flat rules compared p's own 166 with r1's 583 -> 333 and passed
    LessThanOrEqualToFinalShare.)"""
    return Case(
        cohorts={"root": (None, 1.0), "L": ("root", 1.0), "R": ("root", 1.0)},
        queues={"p": Queue("L", 1), "q": Queue("L", 1), "r1": Queue("R", 5), "r2": Queue("R", 5)},
        running=jobs("r1", 4, 3),
        preemptor=Job("w", "p", 3, at=100),
        strategies=strategies,
        victims=victims,
    )


# Three levels: org{dept{team{p, q}, r}, s}, 12 GPUs: p 0, q 2 (team 2), r 4 (dept 6), s 6. s uses 6
# (not borrowing: pruned at org), r uses 6 (borrowing 2: 166), dept uses 6 of 6 but is p's
# ancestor. p asks 2 with nothing free. Kueue: org -> dept (with the request 8 of 6: 166) -> r
# (166) against team (on the path, 2 of 2 with the request: 0), so r. The LCA of p and r is dept:
# the preemptor's share is team's 0, which passes LessThanOrEqualToFinalShare against anything;
# one 2-GPU victim of r and p fits. The flat rules compared p's own share (166) with r's (166 ->
# 0 after the victim) and refused with both strategies.
THREE_LEVELS_LCA_BELOW_ROOT = Case(
    cohorts={"org": (None, 1.0), "dept": ("org", 1.0), "team": ("dept", 1.0)},
    queues={"p": Queue("team", 0), "q": Queue("team", 2), "r": Queue("dept", 4), "s": Queue("org", 6)},
    running=jobs("s", 3, 2) + jobs("r", 3, 2),
    preemptor=Job("w", "p", 2, at=100),
    strategies=(LTE, LTI),
    victims={"ns/r-3": "InCohortFairSharing"},
)

# The same tree, LessThanInitialShare alone: team's 0 < r's 166, the same victim.
THREE_LEVELS_LTI_ALONE = Case(
    **{**THREE_LEVELS_LCA_BELOW_ROOT.__dict__, "strategies": (LTI,)},
)

# Own queue first when it holds the highest share: root{A{a1, a2}}, a1 nominal 2 runs 2 + 2 (its
# second one borrowed), a2 nominal 4 runs 2; a1's higher-priority preemptor asks 2 with nothing
# free. nextTarget at A: a1 is the preemptor (kept although it is its own queue) and borrows (333
# with the request), a2 is not borrowing: pruned. a1's newest workload goes, InClusterQueue.
OWN_QUEUE_FIRST = Case(
    cohorts={"root": (None, 1.0), "A": ("root", 1.0)},
    queues={"a1": Queue("A", 2, within=s.LOWER_PRIORITY), "a2": Queue("A", 4)},
    running=jobs("a1", 2, 2) + jobs("a2", 1, 2, first=10),
    preemptor=Job("w", "a1", 2, priority=10, at=100),
    strategies=(LTE, LTI),
    victims={"ns/a1-2": "InClusterQueue"},
)

CASES = {
    "weight-0 queue in a cohort that is not borrowing": WEIGHT_ZERO_IN_QUIET_COHORT,
    "cohort borrowing only inside itself": BORROWING_ONLY_INSIDE_ITS_COHORT,
    "LCA shares, LessThanOrEqualToFinalShare alone": lca_case((LTE,), {}),
    "LCA shares, LessThanInitialShare alone": lca_case((LTI,), {"ns/r1-4": "InCohortFairSharing"}),
    "LCA shares, both strategies (S2-b)": lca_case((LTE, LTI), {"ns/r1-4": "InCohortFairSharing"}),
    "three levels, LCA below the root": THREE_LEVELS_LCA_BELOW_ROOT,
    "three levels, LessThanInitialShare alone": THREE_LEVELS_LTI_ALONE,
    "own queue first": OWN_QUEUE_FIRST,
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_fair_preemption_in_a_cohort_tree(case: Case) -> None:
    config = s.ConfigSpec(fair_sharing=True, preemption_strategies=case.strategies)
    twin = Twin(tree(case.cohorts, case.queues, case.running, [case.preemptor], config))
    result = twin.run_cycle()
    assert {p.workload: p.reason for p in result.preempted} == case.victims
    assert not result.admitted  # a preemptor waits for its victims
    (verdict,) = [p for p in result.pending if p.workload == "ns/" + case.preemptor.name]
    assert verdict.reason == ("WaitingForPreemptedWorkloads" if case.victims else "WaitingForQuota")
