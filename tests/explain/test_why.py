"""``explain``'s answers on hand-worked clusters: one flavor of GPUs, a few ClusterQueues, a few Workloads.

Each row states the cluster and what a person working it out by hand concludes: who holds the quota,
how much is missing, which ends would admit the Workload, why its ClusterQueue does not preempt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gpufleet.errors import InputError
from gpufleet.explain.why import explain
from tests.explain.objects import (
    FLAVOR,
    GPU,
    cluster_queue,
    flavor,
    local_queue,
    namespace,
    priority_class,
    short,
    team_setup,
    workload,
)

FR = f"{FLAVOR}/{GPU}"
MAX_QUOTA = (
    "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor train, "
    "previously considered podsets requests (0) + current podset request (6) > maximum capacity (4)"
)


def lone(cq: dict[str, Any]) -> list[dict[str, Any]]:
    """One team alone: a flavor, its ClusterQueue (no cohort), namespace and LocalQueue."""
    return [
        flavor(),
        cq,
        namespace("alpha"),
        local_queue("alpha", cq["metadata"]["name"]),
        priority_class("low", 10),
        priority_class("high", 1000),
    ]


@dataclass(frozen=True)
class Case:
    id: str
    objects: list[dict[str, Any]]
    target: str
    reason: str
    holders: list[tuple[str, bool]] = field(default_factory=list)  # (workload, borrowing)
    shortfall: list[str] = field(default_factory=list)
    ends: list[list[str]] | None = None
    preemption: str | None = None
    disagreements: list[str] = field(default_factory=list)
    ahead: list[str] = field(default_factory=list)
    admits_with: dict[str, str] | None = None  # a preemption setting under which the twin admits it


BORROWED = team_setup(cluster_queue("alpha", 4, borrowing_limit=0), cluster_queue("beta", 4, borrowing_limit=4))

CASES = [
    # beta borrows 2 of alpha's 4; alpha's 4-GPU Workload finds 2 free: 2 more needed, only beta's end helps
    Case(
        "waits-behind-borrowing",
        [*BORROWED, workload("beta", "big", pods=3, gpus=2, admitted_to="beta"),
         workload("alpha", "wait", pods=1, gpus=4, message=short(2))],
        "alpha/wait", "WaitsBehindBorrowing", holders=[("beta/big", True)], shortfall=["2"],
        ends=[["beta/big"]], preemption="PreemptionNever", admits_with={"reclaimWithinCohort": "Any"},
    ),
    # the same, but alpha may reclaim: Kueue would preempt beta's borrower (Kueue says it waits for it)
    Case(
        "reclaims-from-borrower",
        [*team_setup(cluster_queue("alpha", 4, borrowing_limit=0, reclaim="Any"),
                     cluster_queue("beta", 4, borrowing_limit=4)),
         workload("beta", "big", pods=3, gpus=2, admitted_to="beta"),
         workload("alpha", "wait", pods=1, gpus=4, message="Pending the preemption of 1 workload(s)")],
        "alpha/wait", "WaitsForPreemptedWorkloads", holders=[("beta/big", True)], preemption="PreemptsToAdmit",
    ),
    # alpha's own Workload of higher priority holds all 4: LowerPriority finds no victim
    Case(
        "own-queue-full-no-lower-priority",
        [*lone(cluster_queue("alpha", 4, cohort=None, within="LowerPriority")),
         workload("alpha", "first", pods=1, gpus=4, admitted_to="alpha", priority="high"),
         workload("alpha", "second", pods=1, gpus=2, priority="low", message=short(2))],
        "alpha/second", "WaitsForQuota", holders=[("alpha/first", False)], shortfall=["2"],
        ends=[["alpha/first"]], preemption="NoLowerPriorityInQueue",
    ),
    # two 2-GPU Workloads hold alpha's 4: only both ends together admit a 4-GPU one
    Case(
        "two-ends-needed",
        [*lone(cluster_queue("alpha", 4, cohort=None)),
         workload("alpha", "a", pods=1, gpus=2, admitted_to="alpha"),
         workload("alpha", "b", pods=1, gpus=2, admitted_to="alpha"),
         workload("alpha", "wait", pods=2, gpus=2, message=short(4))],
        "alpha/wait", "WaitsForQuota", holders=[("alpha/a", False), ("alpha/b", False)], shortfall=["4"],
        ends=[["alpha/a", "alpha/b"]], preemption="PreemptionNever",
    ),
    # a higher-priority Workload waits ahead and would take what the ends free: no set of ends suffices
    Case(
        "ahead-takes-the-freed-quota",
        [*lone(cluster_queue("alpha", 4, cohort=None)),
         workload("alpha", "a", pods=1, gpus=2, admitted_to="alpha"),
         workload("alpha", "b", pods=1, gpus=2, admitted_to="alpha"),
         workload("alpha", "front", pods=1, gpus=2, priority="high", message=short(2)),
         workload("alpha", "wait", pods=2, gpus=2, message=short(4))],
        "alpha/wait", "WaitsForQuota", holders=[("alpha/a", False), ("alpha/b", False)], shortfall=["4"],
        ends=[], preemption="PreemptionNever", ahead=["alpha/front"],
    ),
    # 6 GPUs where alpha can reach 4 at most: no end helps, so none is searched
    Case(
        "exceeds-max-quota",
        [*BORROWED, workload("alpha", "huge", pods=3, gpus=2, message=MAX_QUOTA)],
        "alpha/huge", "ExceedsMaxQuota", preemption="PreemptionNever",
    ),
    # a Finished Workload keeps status.admission but frees its quota; Kueue's status (stale) still counts it
    Case(
        "finished-frees-quota",
        [*lone(cluster_queue("alpha", 4, cohort=None, reserved=4)),
         workload("alpha", "done", pods=1, gpus=4, admitted_to="alpha", finished=True),
         workload("alpha", "wait", pods=1, gpus=4, message=short(4))],
        "alpha/wait", "TwinWouldAdmit", preemption="PreemptionNever",
        disagreements=["TwinWouldAdmit", "UsageDiffers"],
    ),
    # Kueue has not looked at it yet, and its message would not be the twin's
    Case(
        "not-yet-judged",
        [*lone(cluster_queue("alpha", 4, cohort=None)),
         workload("alpha", "a", pods=1, gpus=4, admitted_to="alpha"),
         workload("alpha", "wait", pods=1, gpus=1)],
        "alpha/wait", "WaitsForQuota", holders=[("alpha/a", False)], shortfall=["1"], ends=[["alpha/a"]],
        preemption="PreemptionNever", disagreements=["NotYetJudged"],
    ),
    # Kueue's message differs from the twin's (an older message, or a rule the twin does not model)
    Case(
        "message-differs",
        [*lone(cluster_queue("alpha", 4, cohort=None)),
         workload("alpha", "a", pods=1, gpus=4, admitted_to="alpha"),
         workload("alpha", "wait", pods=1, gpus=1, message=short(3))],
        "alpha/wait", "WaitsForQuota", holders=[("alpha/a", False)], shortfall=["1"], ends=[["alpha/a"]],
        preemption="PreemptionNever", disagreements=["MessageDiffers"],
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_explain_on_hand_worked_clusters(case: Case) -> None:
    ns, name = case.target.split("/")
    why = explain(case.objects, ns, name)
    assert why.state == "Pending"
    assert why.reason == case.reason, why.message
    assert [(h.workload, h.borrowing) for h in why.holders] == case.holders
    assert [s.needed for s in why.shortfall] == case.shortfall
    assert (None if why.ends is None else [list(s) for s in why.ends.sets]) == case.ends
    assert why.preemption is not None and why.preemption.reason == case.preemption, why.preemption
    assert [d.reason for d in why.disagreements] == case.disagreements, why.disagreements
    assert list(why.ahead) == case.ahead
    if case.admits_with is not None:
        helping = [a.change for a in why.preemption.alternatives if a.outcome.admitted_in is not None]
        assert case.admits_with in helping


def test_the_borrowing_answer_in_numbers() -> None:
    objects = [
        *BORROWED,
        workload("beta", "big", pods=3, gpus=2, admitted_to="beta"),
        workload("alpha", "wait", pods=1, gpus=4, message=short(2), job="train"),
    ]
    why = explain(objects, "alpha", "train")  # the Job's name finds its Workload
    assert why.workload == "alpha/wait" and why.job == "train"
    assert why.kueue_reason == "Pending" and why.kueue_message == short(2)  # verbatim
    assert why.twin_reason == "WaitingForQuota" and why.twin_message == short(2)
    assert why.requests == {GPU: 4}
    queues = {q.name: (q.nominal[FR], q.usage[FR], q.borrowed[FR]) for q in why.queues}
    assert queues == {"alpha": (4, 0, 0), "beta": (4, 6, 2)}
    assert why.holders[0].uses == {FR: 6} and why.holders[0].team == "beta"
    assert "beta" in why.message and "2 more" in why.message


@pytest.mark.parametrize(
    ("objects", "target", "state", "reason"),
    [
        (
            [*BORROWED, workload("beta", "big", pods=1, gpus=2, admitted_to="beta")],
            "beta/big",
            "Admitted",
            "NotPending",
        ),
        (
            [*BORROWED, workload("beta", "old", pods=1, gpus=2, admitted_to="beta", finished=True)],
            "beta/old",
            "Finished",
            "NotPending",
        ),
        (
            [*BORROWED, workload("alpha", "lost", pods=1, gpus=1, queue="nowhere", message="x")],
            "alpha/lost",
            "Pending",
            "LocalQueueNotFound",
        ),
    ],
    ids=["admitted", "finished", "no-local-queue"],
)
def test_workloads_that_do_not_wait_for_quota(
    objects: list[dict[str, Any]], target: str, state: str, reason: str
) -> None:
    why = explain(objects, *target.split("/"))
    assert (why.state, why.reason) == (state, reason)
    assert why.holders == () and why.ends is None


def test_an_odd_workload_elsewhere_is_left_out_not_fatal() -> None:
    objects = [
        *BORROWED,
        workload("beta", "lost", pods=1, gpus=1, queue="nowhere"),
        workload("beta", "big", pods=3, gpus=2, admitted_to="beta"),
        workload("alpha", "wait", pods=1, gpus=4, message=short(2)),
    ]
    why = explain(objects, "alpha", "wait")
    assert why.reason == "WaitsBehindBorrowing"
    assert why.skipped == ("beta/lost: its LocalQueue beta/nowhere does not exist",)


@pytest.mark.parametrize(
    ("objects", "name", "words"),
    [
        (BORROWED, "nothing", "no Workload alpha/nothing and no Job of that name"),
        (
            [*BORROWED, *(workload("alpha", f"w{i}", pods=1, gpus=1, job="twice") for i in range(2))],
            "twice",
            "owns several Workloads (w0, w1)",
        ),
    ],
    ids=["unknown", "ambiguous-job"],
)
def test_unknown_or_ambiguous_targets_are_input_errors(objects: list[dict[str, Any]], name: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        explain(objects, "alpha", name)
    assert words in str(err.value)


def _owned_by(wl: dict[str, Any], *refs: tuple[str, str]) -> dict[str, Any]:
    meta = {**wl["metadata"], "ownerReferences": [{"kind": k, "name": n, "uid": f"{k}-{n}"} for k, n in refs]}
    return {**wl, "metadata": meta}


@pytest.mark.parametrize(
    ("refs", "found"),
    [
        ((("JobSet", "sweep"),), True),  # any job integration's owner names its Workload
        ((("RayJob", "sweep"),), True),
        ((("Pod", "sweep"),), False),  # a pod group's members are not the job
        ((("Pod", "sweep-0"), ("LeaderWorkerSet", "sweep")), True),
    ],
    ids=["jobset", "rayjob", "pod", "lws-after-pod"],
)
def test_a_workload_is_found_by_its_owners_name_whatever_its_kind(
    refs: tuple[tuple[str, str], ...], found: bool
) -> None:
    objects = [*BORROWED, _owned_by(workload("alpha", "wait-xyz", pods=1, gpus=4, message=short(2)), *refs)]
    if found:
        why = explain(objects, "alpha", "sweep")
        assert (why.workload, why.owner_kind, why.job) == ("alpha/wait-xyz", refs[-1][0], "sweep")
    else:
        with pytest.raises(InputError, match="nor a JobSet, RayJob or other owner"):
            explain(objects, "alpha", "sweep")
