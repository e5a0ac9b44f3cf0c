"""Classic preemption in cohort trees: Kueue v0.19.2's own table, through the twin's public API.

Each case restates one case of ``TestHierarchicalPreemptions``
(``pkg/scheduler/preemption/preemption_hierarchical_test.go``), named as there, with the victims
and reasons Kueue's test expects. Kueue's test counts CPUs and fixes the flavor assignment by hand;
here the quantities are GPUs (or GPUs and a second resource) and the twin's whole scheduler runs
one cycle, so its flavor assigner must also reach preemption (``mayReclaimInHierarchy`` where the
preemptor's queue has no nominal quota of its own). Tree drawings are Kueue's: a number in
parentheses is a node's own nominal quota.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpufleet.twin import Twin
from gpufleet.twin.apis import specs as s
from tests.twin.trees import GPU, Amounts, Job, Queue, tree

MEM = "memory"
LOWER = s.LOWER_PRIORITY
RECLAIM = "InCohortReclamation"
WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_CQ = "InClusterQueue"


def q(
    cohort: str,
    nominal: Amounts = 0,
    *,
    reclaim: str = s.ANY,
    threshold: int | None = None,
    lending: Amounts | None = None,
) -> Queue:
    """Kueue's test queues: withinClusterQueue LowerPriority; ``threshold`` turns on
    ``borrowWithinCohort: LowerPriority`` with that ``maxPriorityThreshold``."""
    borrow = s.NEVER if threshold is None else LOWER
    return Queue(cohort, nominal, reclaim=reclaim, within=LOWER, borrow=borrow, threshold=threshold, lending=lending)


@dataclass(frozen=True)
class Case:
    cohorts: dict[str, str | None]  # name -> parent
    quota: dict[str, Amounts]  # a cohort's own nominal quota
    queues: dict[str, Queue]
    running: list[Job]
    preemptor: Job
    victims: dict[str, str]  # workload -> Kueue's reason
    evicted: tuple[str, ...] = ()  # running workloads already being evicted (still holding quota)
    pending_reason: str = "WaitingForPreemptedWorkloads"


def run(name: str, prio: int, queue: str, amount: Amounts) -> Job:
    return Job(name, queue, amount, prio, at=1)


R_C_BORROWING = {"r": None, "c": "r"}  # R{C{q}, q_borrowing}

CASES = {
    #      R
    #   C(2)  q_borrowing(0)
    #   q(0)
    "preempt with hierarchical advantage": Case(
        R_C_BORROWING,
        {"c": 2},
        {"q": q("c"), "q_borrowing": q("r")},
        [run("admitted2", 0, "q_borrowing", 2)],
        Job("in", "q", 2, 0, at=100),
        {"ns/admitted2": RECLAIM},
    ),
    #      R
    #   C(2)  q_borrowing(0)  q_nominal(2)
    #   q(0)
    "avoid queues within nominal quota": Case(
        R_C_BORROWING,
        {"c": 2},
        {"q_nominal": q("r", 2), "q": q("c"), "q_borrowing": q("r")},
        [run("admitted1", -10, "q_nominal", 2), run("admitted2", 0, "q_borrowing", 2)],
        Job("in", "q", 2, 0, at=100),
        {"ns/admitted2": RECLAIM},
    ),
    # Hierarchical candidates go whatever their priority (1 and 2 against the preemptor's 0).
    "preempt multiple with hierarchical advantage": Case(
        R_C_BORROWING,
        {"c": 2},
        {"q": q("c"), "q_borrowing": q("r")},
        [run("admitted1", 1, "q_borrowing", 1), run("admitted2", 2, "q_borrowing", 1)],
        Job("in", "q", 2, 0, at=100),
        {"ns/admitted1": RECLAIM, "ns/admitted2": RECLAIM},
    ),
    #      R
    #     C(3)
    #  q(0)  q_same_cohort(0)
    # No advantage inside C (the request does not fit in C): priority candidates, reclaimed while
    # borrowing only below the preemptor's priority and at most the threshold. Kueue's test admits
    # admitted_preemptible with a request of 1 and an assignment of 2; here it requests 2.
    "preempt in cohort and own CQ": Case(
        {"r": None, "c": "r"},
        {"c": 3},
        {"q": q("c", threshold=0), "q_same_cohort": q("c")},
        [
            run("admitted_not_preemptible", 1, "q_same_cohort", 1),
            run("admitted_preemptible", 0, "q_same_cohort", 2),
            run("admitted_own_queue", -1, "q", 1),
        ],
        Job("in", "q", 2, 1, at=100),
        {"ns/admitted_own_queue": IN_CQ, "ns/admitted_preemptible": WHILE_BORROWING},
    ),
    # The hierarchical candidate (priority 1) goes before the own queue's lower-priority workload.
    "prefer to preempt hierarchical candidate": Case(
        R_C_BORROWING,
        {"c": 2},
        {"q": q("c"), "q_borrowing": q("r")},
        [run("admitted_borrowing", 1, "q_borrowing", 1), run("admitted_same_queue", -2, "q", 1)],
        Job("in", "q", 1, 0, at=100),
        {"ns/admitted_borrowing": RECLAIM},
    ),
    #         R
    #   C(2)     q_nominal(2)
    # q(0) q_same_cohort(0)
    "forced to preempt priority candidate": Case(
        R_C_BORROWING,
        {"c": 2},
        {"q": q("c", threshold=0), "q_nominal": q("r", 2), "q_same_cohort": q("c")},
        [run("admitted_nominal", -10, "q_nominal", 2), run("admitted_same_cohort", -1, "q_same_cohort", 2)],
        Job("in", "q", 2, 0, at=100),
        {"ns/admitted_same_cohort": WHILE_BORROWING},
    ),
    #           R
    #     C(2)     q_borrowing(0)
    # q(4) q_same_cohort(0)
    # The request fits in q's own nominal quota: the advantage over everything, priority 10 included.
    "incoming workload fits in CQ nominal quota": Case(
        R_C_BORROWING,
        {"c": 2},
        {"q": q("c", 4), "q_borrowing": q("r"), "q_same_cohort": q("c")},
        [run("admitted_borrowing", 10, "q_borrowing", 3), run("admitted_same_cohort", 10, "q_same_cohort", 3)],
        Job("in", "q", 4, 0, at=100),
        {"ns/admitted_borrowing": RECLAIM, "ns/admitted_same_cohort": RECLAIM},
    ),
    #           R(1)
    #     C(4)     q_borrowing(0)
    # q(0) q_same_cohort(0)
    # reclaimWithinCohort LowerPriority keeps admitted_borrowing_not_preemptible out even as a
    # hierarchical candidate.
    "preempt hierarchical and priority candidates": Case(
        R_C_BORROWING,
        {"r": 1, "c": 4},
        {"q": q("c", reclaim=LOWER, threshold=0), "q_borrowing": q("r"), "q_same_cohort": q("c")},
        [
            run("admitted_borrowing", -1, "q_borrowing", 2),
            run("admitted_same_cohort_preemptible", -1, "q_same_cohort", 1),
            run("admitted_borrowing_not_preemptible", 1, "q_borrowing", 2),
        ],
        Job("in", "q", 3, 0, at=100),
        {"ns/admitted_borrowing": RECLAIM, "ns/admitted_same_cohort_preemptible": WHILE_BORROWING},
    ),
    "preempt hierarchical candidates and inside CQ": Case(
        R_C_BORROWING,
        {"r": 1, "c": 4},
        {"q": q("c", reclaim=LOWER, threshold=0), "q_borrowing": q("r"), "q_same_cohort": q("c")},
        [
            run("admitted_borrowing", -1, "q_borrowing", 2),
            run("admitted_same_queue_preemptible", -1, "q", 1),
            run("admitted_borrowing_not_preemptible", 1, "q_borrowing", 2),
        ],
        Job("in", "q", 3, 0, at=100),
        {"ns/admitted_borrowing": RECLAIM, "ns/admitted_same_queue_preemptible": IN_CQ},
    ),
    #             R
    #   C(3)  q_borrowing(0)  q_nominal(2)
    #   q(0)
    "reclaim nominal quota from lowest priority workload, excluding non-borrowing": Case(
        R_C_BORROWING,
        {"c": 3},
        {"q": q("c"), "q_borrowing": q("r"), "q_nominal": q("r", 2)},
        [
            run("admitted_borrowing_prio_8", 8, "q_borrowing", 1),
            run("admitted_borrowing_prio_9", 9, "q_borrowing", 1),
            run("admitted_borrowing_prio_10", 9, "q_borrowing", 1),
            run("admitted_nominal", -2, "q_nominal", 2),
        ],
        Job("in", "q", 1, 0, at=100),
        {"ns/admitted_borrowing_prio_8": RECLAIM},
    ),
    #              R
    #      C(2)          C_other(2)
    # q(0) q_same_cohort(0)  q_other(0)
    # C_other is within its quota, so q_other's low-priority workloads are never candidates; the
    # same-cohort one would need the preemptor not to borrow. Kueue finds no targets (and its flavor
    # assigner, no subtree below the root holding the request, does not even simulate preemption).
    "infeasible preemption all available workloads in pruned subtrees": Case(
        {"r": None, "c": "r", "c_other": "r"},
        {"c": 2, "c_other": 2},
        {"q_other": q("c_other"), "q": q("c"), "q_same_cohort": q("c")},
        [
            run("admitted_other_1", -10, "q_other", 1),
            run("admitted_other_2", -10, "q_other", 1),
            run("admitted_same_cohort", 0, "q_same_cohort", 2),
        ],
        Job("in", "q", 2, 0, at=100),
        {},
        pending_reason="WaitingForQuota",
    ),
    #        R(3 GPU, no memory)
    #   C(4 GPU, 4 memory)  q_borrowing(0)
    # q(0) q_same_cohort(0)
    # Only memory needs preemption in the twin (GPUs fit); Kueue's test marks both, same victim.
    "hiearchical preemption with multiple resources": Case(
        R_C_BORROWING,
        {"r": {GPU: 3}, "c": {GPU: 4, MEM: 4}},
        {
            "q": q("c", {GPU: 0, MEM: 0}),
            "q_borrowing": q("r", {GPU: 0, MEM: 0}),
            "q_same_cohort": q("c", {GPU: 0, MEM: 0}),
        },
        [
            run("admitted_borrowing", 0, "q_borrowing", {GPU: 3, MEM: 1}),
            run("admitted_same_cohort", -2, "q_same_cohort", {GPU: 1, MEM: 3}),
        ],
        Job("in", "q", {GPU: 2, MEM: 1}, -2, at=100),
        {"ns/admitted_borrowing": RECLAIM},
    ),
    # The evicted workload is first in the order and makes room: Kueue counts it as preempted
    # (still terminating) and writes nothing new; the twin issues no new eviction.
    "prefer to preempt evicted workloads": Case(
        R_C_BORROWING,
        {"c": 2},
        {"q": q("c", threshold=0), "q_borrowing": q("r"), "q_same_cohort": q("c")},
        [run("admitted_borrowing", -10, "q_borrowing", 1), run("evicted_same_cohort", -1, "q_same_cohort", 1)],
        Job("in", "q", 1, 0, at=100),
        {},
        evicted=("ns/evicted_same_cohort",),
    ),
    #        R
    #   C(2)   q_borrowing(0)
    #   q(3, lendingLimit 2)
    "respect lending limits": Case(
        R_C_BORROWING,
        {"c": 2},
        {"q": q("c", 3, lending=2), "q_borrowing": q("r")},
        [run("admitted_borrowing", 0, "q_borrowing", 4)],
        Job("in", "q", 5, -2, at=100),
        {"ns/admitted_borrowing": RECLAIM},
    ),
    #                         r
    #              c11                 c12
    #       c21     c22   c23           q1
    #   c31   c32    q3    q2
    #   q5     q4
    # Every cohort 4, every queue 0. After q2's lowest-priority workload goes, c23 is back within
    # its quota and q2's other workload stops counting; q1's lowest goes next.
    "reclaim in complex hierarchy": Case(
        {"r": None, "c11": "r", "c12": "r", "c21": "c11", "c22": "c11", "c23": "c11", "c31": "c21", "c32": "c21"},
        dict.fromkeys(("c11", "c12", "c21", "c22", "c23", "c31", "c32"), 4),
        {"q1": q("c12"), "q2": q("c23"), "q3": q("c22"), "q4": q("c32"), "q5": q("c31")},
        [
            run("admitted_borrowing_1", -6, "q1", 4),
            run("admitted_borrowing_2", -5, "q1", 4),
            run("admitted_borrowing_3", -9, "q2", 4),
            run("admitted_borrowing_4", -10, "q2", 4),
            run("admitted_borrowing_5", -4, "q3", 4),
            run("admitted_borrowing_6", -3, "q3", 3),
            run("admitted_borrowing_7", 4, "q4", 2),
            run("admitted_borrowing_8", 2, "q4", 3),
        ],
        Job("in", "q5", 7, -2, at=100),
        {"ns/admitted_borrowing_1": RECLAIM, "ns/admitted_borrowing_4": RECLAIM},
    ),
}


@pytest.mark.parametrize("memo", [True, False], ids=["fast", "reference"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_kueue_hierarchical_preemptions(case: Case, memo: bool) -> None:
    cohorts = {name: (parent, 1.0) for name, parent in case.cohorts.items()}
    spec = tree(cohorts, case.queues, case.running, [case.preemptor], s.ConfigSpec(), cohort_quota=case.quota)
    twin = Twin(spec, fast=memo)
    for key in case.evicted:
        wl = twin.workloads[key]
        twin.tree.cluster_queues[wl.cluster_queue].mark_evicted(wl, True)
    result = twin.run_cycle()
    assert {p.workload: p.reason for p in result.preempted} == case.victims
    assert not result.admitted  # a preemptor waits for its victims
    (verdict,) = [p for p in result.pending if p.workload == "ns/" + case.preemptor.name]
    assert verdict.reason == case.pending_reason


def test_flat_cohort_hierarchical_advantage_comes_before_the_borrowing_threshold() -> None:
    """A flat cohort is the one-level case of the same generator. Kueue's "use BorrowWithinCohort;
    allow preempting a lower-priority workload with priority above MaxPriorityThreshold, if
    borrowing is not required after the preemption" (``preemption_test.go``) with the victim's
    priority lowered from 1 to 0, below the threshold: the request fits in a_standard's nominal
    quota, so the victim is a hierarchical candidate (``classifyPreemptionVariant`` asks for the
    advantage before the threshold) and goes for InCohortReclamation, not
    InCohortReclaimWhileBorrowing: the preemptor does not borrow."""
    queues = {
        "a_standard": q("with_shared_cq", 1, reclaim=LOWER, threshold=0),
        "b_standard": q("with_shared_cq", 1, reclaim=LOWER, threshold=0),
        "shared": Queue("with_shared_cq", 10, reclaim=s.NEVER),
    }
    spec = tree(
        {"with_shared_cq": (None, 1.0)},
        queues,
        [run("b_standard", 0, "b_standard", 12)],
        [Job("in", "a_standard", 1, 2, at=100)],
        s.ConfigSpec(),
    )
    result = Twin(spec).run_cycle()
    assert {p.workload: p.reason for p in result.preempted} == {"ns/b_standard": RECLAIM}
