"""From Workload conditions to records: table-driven cases of Kueue v1beta2 object shapes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gpufleet.ledger.records import INFERRED_FROM_COUNT, EndReason
from gpufleet.recorder import derive, waits

KEYS = derive.LabelKeys()
NOW = datetime(2026, 11, 2, 10, 3, tzinfo=UTC)


def cond(kind: str, status: bool, reason: str, minute: int, message: str = "") -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": f"2026-11-02T10:{minute:02d}:00Z",
    }


def workload(*conditions: dict[str, Any], admitted: bool = True, evictions: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if admitted:
        status["admission"] = {
            "clusterQueue": "research",
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {"nvidia.com/mig-3g.40gb": "a100-mig", "cpu": "default"},
                    "resourceUsage": {"nvidia.com/mig-3g.40gb": "2", "cpu": "8"},
                }
            ],
        }
    if evictions is not None:
        status["schedulingStats"] = {"evictions": [{"reason": "Preempted", "count": evictions}]}
    return {
        "metadata": {
            "uid": "u1",
            "name": "job-a",
            "namespace": "research",
            "creationTimestamp": "2026-11-02T10:00:00Z",
            "labels": {"gpufleet.io/team": "research"},
        },
        "spec": {"queueName": "batch", "priority": 100},
        "status": status,
    }


JOB = {
    "metadata": {
        "labels": {"gpufleet.io/model": "m", "gpufleet.io/data-class": "internal"},
        "annotations": {"gpufleet.io/checkpoint": "s3://eu-central-1/a"},
    }
}
RESERVED = cond("QuotaReserved", True, "QuotaReserved", 5)
PENDING = cond("QuotaReserved", False, "WaitingForQuota", 1, "insufficient unused quota")


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (workload(PENDING, admitted=False), []),
        (workload(RESERVED), [(1, None, "")]),
        (workload(RESERVED, cond("Finished", True, "Succeeded", 30)), [(1, EndReason.FINISHED, "Succeeded")]),
        (workload(RESERVED, cond("Finished", True, "Failed", 30)), [(1, EndReason.FAILED, "Failed")]),
        # Kueue counted two earlier evictions: attempt 3 now, 1 and 2 inferred (test_recorder_inference.py)
        (
            workload(RESERVED, evictions=2),
            [(3, None, ""), *[(n, EndReason.PREEMPTED, INFERRED_FROM_COUNT) for n in (1, 2)]],
        ),
        # the real Kueue finishes a running workload whose Job is deleted with reason OwnerNotFound:
        # that attempt did not run to its end, so it is not recorded as a success
        (workload(RESERVED, cond("Finished", True, "OwnerNotFound", 30)), [(1, EndReason.EVICTED, "OwnerNotFound")]),
        (workload(RESERVED, cond("Finished", True, "OutOfSync", 30)), [(1, EndReason.EVICTED, "OutOfSync")]),
    ],
    ids=[
        "pending",
        "reserved",
        "succeeded",
        "failed",
        "attempt-from-eviction-count",
        "job-deleted-while-running",
        "prebuilt-out-of-sync",
    ],
)
def test_first_sight_of_a_workload(obj: dict[str, Any], expected: list[tuple[int, EndReason | None, str]]) -> None:
    records = derive.allocation_records(obj, JOB, [], {}, [], keys=KEYS)
    assert [(a.attempt, a.end_reason, a.end_detail) for a in records] == expected
    for a in records:
        assert (a.team, a.model, a.data_class, a.checkpoint) == (
            "research",
            "m",
            "internal",
            "s3://eu-central-1/a",
        )
        if a.end_detail != INFERRED_FROM_COUNT:  # an inferred attempt's admission is not known
            assert (a.gpu_resource, a.gpu_count, a.cluster_queue) == ("nvidia.com/mig-3g.40gb", 2, "research")


@pytest.mark.parametrize(
    ("evicted", "preempted", "expected"),
    [
        (
            cond("Evicted", True, "Preempted", 20, "Preempted to accommodate"),
            cond("Preempted", True, "InCohortReclamation", 20),
            (EndReason.PREEMPTED, "InCohortReclamation"),
        ),
        (cond("Evicted", True, "PodsReadyTimeout", 20), None, (EndReason.EVICTED, "PodsReadyTimeout")),
    ],
    ids=["preempted", "evicted"],
)
def test_an_eviction_ends_the_open_attempt_with_kueues_reason(
    evicted: dict[str, Any], preempted: dict[str, Any] | None, expected: tuple[EndReason, str]
) -> None:
    (first,) = derive.allocation_records(workload(RESERVED), JOB, [], {}, [], keys=KEYS)
    pending = cond("QuotaReserved", False, "Pending", 20, "Preempted")
    after = workload(pending, evicted, *([preempted] if preempted else []), admitted=False)
    (ended,) = derive.allocation_records(after, JOB, [], {}, [first], keys=KEYS)
    assert (ended.attempt, ended.end_reason, ended.end_detail) == (1, *expected)
    assert ended.finished == datetime(2026, 11, 2, 10, 20, tzinfo=UTC)
    assert derive.allocation_records(after, JOB, [], {}, [ended], keys=KEYS) == []  # a replay changes nothing


def test_pending_reasons_become_consecutive_wait_intervals() -> None:
    (opened,) = waits.wait_records(workload(PENDING, admitted=False), JOB, [], KEYS, NOW)
    assert (opened.index, opened.reason, opened.end) == (0, "WaitingForQuota", None)
    again = waits.wait_records(workload(PENDING, admitted=False), JOB, [opened], KEYS, NOW)
    assert again == []  # same reason: nothing new
    other = cond("QuotaReserved", False, "WaitingForPreemptedWorkloads", 1, "Pending the preemption of 1 workload(s)")
    closed, switched = waits.wait_records(workload(other, admitted=False), JOB, [opened], KEYS, NOW)
    assert closed.end == NOW == switched.start  # the condition's time did not move: seen at NOW
    (done,) = waits.wait_records(workload(RESERVED), JOB, [closed, switched], KEYS, NOW)
    assert done.index == 1 and done.end == datetime(2026, 11, 2, 10, 5, tzinfo=UTC)


def test_pods_of_an_attempt_give_its_nodes_and_start() -> None:
    def pod(node: str, minute: int, gpus: str) -> dict[str, Any]:
        return {
            "metadata": {"creationTimestamp": f"2026-11-02T10:{minute:02d}:00Z"},
            "spec": {
                "nodeName": node,
                "containers": [{"resources": {"limits": {"nvidia.com/mig-3g.40gb": gpus}}}],
            },
            "status": {"startTime": f"2026-11-02T10:{minute + 1:02d}:00Z"},
        }

    pods = [
        pod("a100-0", 6, "1"),
        pod("a100-1", 7, "1"),
        pod("a100-0", 2, "1"),
    ]  # the last predates the attempt
    (a,) = derive.allocation_records(workload(RESERVED), JOB, pods, {"a100-0": "A100"}, [], keys=KEYS)
    assert [(p.node, p.gpus, p.gpu_model) for p in a.placements] == [("a100-0", 1, "A100"), ("a100-1", 1, "")]
    assert a.started == datetime(2026, 11, 2, 10, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("evictions", "expected"),
    [
        ([{"reason": "Preempted", "underlyingCause": "InCohortReclamation", "count": 1}],
         (EndReason.PREEMPTED, "InCohortReclamation")),
        ([{"reason": "PodsReadyTimeout", "count": 1}], (EndReason.EVICTED, "PodsReadyTimeout")),
        ([], None),  # no count: the same time is the same attempt
    ],
    ids=["preempted", "evicted", "uncounted"],
)  # fmt: skip
def test_a_readmission_within_the_same_second_is_a_new_attempt(
    evictions: list[dict[str, Any]], expected: tuple[EndReason, str] | None
) -> None:
    # Seen on the testbed: preempted and readmitted within one second while the recorder relisted, so
    # the new QuotaReserved time equals the first attempt's; only Kueue's eviction count differs
    (first,) = derive.allocation_records(workload(RESERVED), JOB, [], {}, [], keys=KEYS)
    again = workload(RESERVED)
    again["status"]["schedulingStats"] = {"evictions": evictions}
    records = derive.allocation_records(again, JOB, [], {}, [first], keys=KEYS)
    if expected is None:
        assert records == []
        return
    closed, second = records
    assert (closed.attempt, closed.end_reason, closed.end_detail) == (1, *expected)
    assert (second.attempt, second.quota_reserved, second.end_reason) == (2, first.quota_reserved, None)
    assert derive.allocation_records(again, JOB, [], {}, [closed, second], keys=KEYS) == []  # replay: nothing


def test_an_eviction_counted_before_the_reservation_is_released_is_the_current_attempts() -> None:
    # Kueue increments schedulingStats.evictions in the patch that sets Evicted=True, while
    # QuotaReserved is still True: that version is still attempt 1, not a readmission
    (first,) = derive.allocation_records(workload(RESERVED), JOB, [], {}, [], keys=KEYS)
    evicting = workload(RESERVED, cond("Evicted", True, "Preempted", 20, "Preempted to accommodate"), evictions=1)
    assert [
        (a.attempt, a.end_reason) for a in derive.allocation_records(evicting, JOB, [], {}, [first], keys=KEYS)
    ] == []
    (seen_first,) = derive.allocation_records(evicting, JOB, [], {}, [], keys=KEYS)
    assert seen_first.attempt == 1  # first sight mid-eviction: the count includes this attempt
