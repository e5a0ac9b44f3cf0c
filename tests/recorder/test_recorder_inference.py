"""Attempts the recorder never saw, inferred from Kueue's ``schedulingStats.evictions``.

Table-driven cases of Workload versions the recorder may see first after missing some (shapes as
Kueue v0.19.2 writes them: the count is incremented in the patch that sets ``Evicted=True``, and a
readmission resets ``Evicted`` to False), a property test over random histories observed in part,
and the idempotence of inferred records in a real SQLite ledger across a restart.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.ledger.records import INFERRED_FROM_COUNT, Allocation, EndReason, inferred
from gpufleet.ledger.store import Ledger
from gpufleet.recorder import derive
from gpufleet.recorder.tracker import Tracker

KEYS = derive.LabelKeys()
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
NOW = datetime(2026, 11, 2, 11, 0, tzinfo=UTC)


def at(minute: int) -> str:
    return (T0 + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(kind: str, status: bool, reason: str, minute: int, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": str(status), "reason": reason, "message": message, "lastTransitionTime": at(minute)}


def workload(*conditions: dict[str, Any], evictions: dict[str, int] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in conditions):
        status["admission"] = {
            "clusterQueue": "research",
            "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "h100"},
                                   "resourceUsage": {"nvidia.com/gpu": "4"}}],
        }  # fmt: skip
    if evictions is not None:
        status["schedulingStats"] = {
            "evictions": [{"reason": r, "underlyingCause": "", "count": n} for r, n in evictions.items()]
        }
    return {
        "metadata": {"uid": "u1", "name": "job-a", "namespace": "research", "creationTimestamp": at(0),
                     "labels": {"gpufleet.io/team": "research"}},
        "spec": {"queueName": "batch", "priority": 100},
        "status": status,
    }  # fmt: skip


def observed(attempt: int, reserved: int, end: EndReason | None = None, detail: str = "", ended: int = 0) -> Allocation:
    """An attempt the recorder saw: reserved at minute ``reserved``, ended at ``ended`` when ``end``."""
    (first,) = derive.allocation_records(
        workload(cond("QuotaReserved", True, "QuotaReserved", reserved)), None, [], {}, [], keys=KEYS
    )
    from dataclasses import replace

    return replace(
        first,
        attempt=attempt,
        end_reason=end,
        end_detail=detail,
        finished=T0 + timedelta(minutes=ended) if end else None,
    )


RESERVED = cond("QuotaReserved", True, "QuotaReserved", 30)
FINISHED = cond("Finished", True, "Succeeded", 40)
RELEASED = cond("QuotaReserved", False, "Pending", 20, "evicted")
PREEMPTED_NOW = cond(
    "Evicted", True, "Preempted", 20, "Preempted to accommodate a workload (UID: x) due to reclamation"
)
TIMEOUT_NOW = cond("Evicted", True, "PodsReadyTimeout", 20, "Exceeded the PodsReady timeout")


@dataclass(frozen=True)
class Case:
    known: list[Allocation]
    version: dict[str, Any]
    # (attempt, end, detail) of every record written, in order; inferred ones have detail INFERRED_FROM_COUNT
    written: list[tuple[int, EndReason | None, str]]
    # (lower, upper) bounds in the message of each inferred attempt, by attempt
    bounds: dict[int, tuple[str, str]]


INF = INFERRED_FROM_COUNT
P, E, F = EndReason.PREEMPTED, EndReason.EVICTED, EndReason.FINISHED
CASES = {
    # after a 410 Gone: the relist shows a finished workload preempted twice, none of it seen
    "relist-finished-after-two-unseen-preemptions": Case(
        [], workload(RESERVED, FINISHED, evictions={"Preempted": 2}),
        [(3, F, "Succeeded"), (1, P, INF), (2, P, INF)], {1: (at(0), at(30)), 2: (at(0), at(30))},
    ),
    # preempted twice and readmitted within the second of the first admission: same time, count 2
    "sub-second-readmissions": Case(
        [observed(1, 5)], workload(cond("QuotaReserved", True, "QuotaReserved", 5), evictions={"Preempted": 2}),
        [(1, P, "Preempted"), (3, None, ""), (2, P, INF)], {2: (at(5), at(5))},
    ),
    # the eviction the conditions show now ended an attempt the recorder never saw reserved
    "shown-eviction-of-an-unseen-attempt": Case(
        [observed(1, 5, P, "InCohortReclamation", 10)],
        workload(RELEASED, TIMEOUT_NOW, evictions={"Preempted": 1, "PodsReadyTimeout": 1}),
        [(2, E, INF)], {2: (at(10), at(20))},
    ),
    # the seen attempt 1 is open; the eviction shown is attempt 3's: 1 and 2 end unobserved
    "shown-eviction-is-a-later-attempts": Case(
        [observed(1, 5)], workload(RELEASED, PREEMPTED_NOW, evictions={"Preempted": 3}),
        [(1, P, "Preempted"), (2, P, INF), (3, P, INF)], {2: (at(5), "2026-11-02T11:00:00Z"),
                                                          3: (at(5), at(20))},
    ),
    # being evicted now (counted, reservation still held): that attempt is the current one, not inferred
    "being-evicted-now": Case(
        [], workload(cond("QuotaReserved", True, "QuotaReserved", 15), PREEMPTED_NOW, evictions={"Preempted": 2}),
        [(2, None, ""), (1, P, INF)], {1: (at(0), at(15))},
    ),
    # two reasons left and two unseen attempts: which ended how is not known, the totals are
    "two-reasons-two-unseen-attempts": Case(
        [], workload(RESERVED, evictions={"Preempted": 1, "PodsReadyTimeout": 1}),
        [(3, None, ""), (1, E, INF), (2, P, INF)], {1: (at(0), at(30)), 2: (at(0), at(30))},
    ),
    # everything seen: nothing inferred
    "all-seen": Case(
        [observed(1, 5, P, "InCohortReclamation", 10)], workload(RESERVED, evictions={"Preempted": 1}),
        [(2, None, "")], {},
    ),
    # finished while being evicted (Kueue finishes a Job before it handles an eviction): the count
    # includes an eviction that ended no attempt, so nothing is inferred and the attempt finished
    "finished-while-being-evicted": Case(
        [observed(1, 15)],
        workload(cond("QuotaReserved", True, "QuotaReserved", 15), PREEMPTED_NOW, FINISHED, evictions={"Preempted": 1}),
        [(1, F, "Succeeded")], {},
    ),
    # the same version first seen after a relist, one earlier preemption unseen too
    "relist-finished-while-being-evicted": Case(
        [], workload(RESERVED, PREEMPTED_NOW, FINISHED, evictions={"Preempted": 2}),
        [(2, F, "Succeeded"), (1, P, INF)], {1: (at(0), at(30))},
    ),
    # preempted (released, as the ledger holds), then readmitted from a stale copy: the first admission's
    # time is back and the count is gone (recorder_bench, 5,000 Jobs); the readmission is a new attempt
    "readmitted-with-the-first-admissions-time": Case(
        [observed(1, 15, P, "InCohortReclamation", 15)],
        workload(cond("QuotaReserved", True, "QuotaReserved", 15), FINISHED),
        [(2, F, "Succeeded")], {},
    ),
    # the eviction's own version again (the reservation still held): the ended attempt, nothing new
    "eviction-version-of-an-ended-attempt": Case(
        [observed(1, 15, P, "InCohortReclamation", 20)],
        workload(cond("QuotaReserved", True, "QuotaReserved", 15), PREEMPTED_NOW, evictions={"Preempted": 1}),
        [], {},
    ),
    # its Job deleted while running: Kueue finishes it (OwnerNotFound) with the reservation still shown
    # in every version until it is gone; those versions are the ended attempt, not readmissions
    "deleted-while-running-seen-again": Case(
        [observed(1, 15, E, "OwnerNotFound", 40)],
        workload(cond("QuotaReserved", True, "QuotaReserved", 15), cond("Finished", True, "OwnerNotFound", 40)),
        [], {},
    ),
    # a Kueue without schedulingStats: nothing can be inferred
    "no-counts": Case([observed(1, 5, P, "InCohortReclamation", 10)], workload(RESERVED), [(2, None, "")], {}),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_every_counted_attempt_is_written_once_marked_inferred(case: Case) -> None:
    records = derive.allocation_records(case.version, None, [], {}, case.known, keys=KEYS, now=NOW)
    assert [(a.attempt, a.end_reason, a.end_detail) for a in records] == case.written
    for a in records:
        if not inferred(a):
            continue
        # never a time as if observed: only the bounds, in the message
        assert (a.quota_reserved, a.admitted, a.started, a.finished, a.placements) == (None, None, None, None, ())
        assert (a.team, a.local_queue, a.priority, a.created) == ("research", "batch", 100, T0)
        lower, upper = case.bounds[a.attempt]
        assert f"between {lower} and {upper}" in a.end_message, a.end_message
        assert "not observed by the recorder" in a.end_message
    assert {a.attempt for a in records if inferred(a)} == set(case.bounds)
    # a replay of the same version, or a later look at it, writes nothing more
    after = derive.merged(case.known, records)
    assert derive.allocation_records(case.version, None, [], {}, after, keys=KEYS, now=NOW + timedelta(hours=1)) == []


def test_the_shown_eviction_gives_its_reason_and_message() -> None:
    (second,) = derive.allocation_records(
        CASES["shown-eviction-of-an-unseen-attempt"].version, None, [], {},
        CASES["shown-eviction-of-an-unseen-attempt"].known, keys=KEYS, now=NOW,
    )  # fmt: skip
    assert "evicted as PodsReadyTimeout" in second.end_message
    assert "Exceeded the PodsReady timeout" in second.end_message
    (first, *_) = derive.allocation_records(
        CASES["two-reasons-two-unseen-attempts"].version, None, [], {}, [], keys=KEYS, now=NOW
    )
    inferred_one = derive.allocation_records(
        CASES["two-reasons-two-unseen-attempts"].version, None, [], {}, [], keys=KEYS, now=NOW
    )[1]
    assert first.attempt == 3
    assert "evicted as PodsReadyTimeout or Preempted" in inferred_one.end_message  # the order is not known


def test_a_finish_during_an_eviction_says_so_with_kueues_message() -> None:
    (finished_attempt,) = derive.allocation_records(
        CASES["finished-while-being-evicted"].version, None, [], {}, CASES["finished-while-being-evicted"].known,
        keys=KEYS, now=NOW,
    )  # fmt: skip
    assert finished_attempt.finished == T0 + timedelta(minutes=40)
    assert f"Kueue began to evict it (Preempted) at {at(20)}" in finished_attempt.end_message
    assert "due to reclamation" in finished_attempt.end_message  # Kueue's own message


def test_a_deleted_workload_whose_last_version_shows_an_unseen_readmission() -> None:
    # seen: attempt 1 reserved; missed: its preemption and readmission; then the Job is deleted
    tracker = Tracker(lambda uid: ([observed(1, 5)], []), KEYS, lambda: NOW)
    gone = workload(cond("QuotaReserved", True, "QuotaReserved", 25), evictions={"Preempted": 1})
    gone["metadata"]["deletionTimestamp"] = at(35)
    records = [r for r in tracker.observe("workloads", "DELETED", gone) if isinstance(r, Allocation)]
    final = {a.attempt: a for a in derive.merged([], records)}
    assert sorted((n, a.end_reason, a.end_detail) for n, a in final.items()) == [
        (1, P, "Preempted"),
        (2, E, "Deleted"),
    ]
    assert final[2].quota_reserved == T0 + timedelta(minutes=25)


# --- property: any history, seen in any part, ends with every attempt exactly once ---------------

REASONS = ("Preempted", "PodsReadyTimeout")


def _history(steps: list[tuple[str, int]], finished_while_evicted: str | None = None) -> list[dict[str, Any]]:
    """Kueue's versions of one workload: admitted, then per step evicted (counted while still
    reserved, then released) and readmitted 0 or 1 seconds later, then finished; with
    ``finished_while_evicted``, Kueue begins one more eviction (counted) and the Job finishes before
    its quota is released, so the last version shows ``Evicted=True`` beside ``Finished=True``."""
    versions: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    t = T0

    def version(*conds: dict[str, Any]) -> dict[str, Any]:
        return workload(*conds, evictions=dict(counts))

    def c(kind: str, status: bool, reason: str, when: datetime, message: str = "") -> dict[str, Any]:
        stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"type": kind, "status": str(status), "reason": reason, "message": message, "lastTransitionTime": stamp}

    reserved = c("QuotaReserved", True, "QuotaReserved", t)
    versions.append(version(reserved))
    for reason, gap in steps:
        t += timedelta(milliseconds=400 * gap)
        counts[reason] += 1
        evicted = c("Evicted", True, reason, t, f"evicted: {reason}")
        versions.append(version(reserved, evicted))
        versions.append(version(c("QuotaReserved", False, "Pending", t), evicted))
        t += timedelta(milliseconds=400 * gap)
        reserved = c("QuotaReserved", True, "QuotaReserved", t)
        versions.append(version(reserved, c("Evicted", False, "QuotaReserved", t, "Previously: x")))
    t += timedelta(seconds=5)
    if finished_while_evicted is None:
        versions.append(version(reserved, c("Finished", True, "Succeeded", t)))
        return versions
    counts[finished_while_evicted] += 1
    evicted = c("Evicted", True, finished_while_evicted, t, f"evicted: {finished_while_evicted}")
    versions.append(version(reserved, evicted))
    versions.append(version(reserved, evicted, c("Finished", True, "Succeeded", t + timedelta(seconds=1))))
    return versions


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(st.tuples(st.sampled_from(REASONS), st.integers(0, 3)), max_size=6),
    seen=st.lists(st.booleans(), min_size=30, max_size=30),
    restart_at=st.integers(0, 30),
    race=st.one_of(st.none(), st.sampled_from(REASONS)),
)
def test_any_history_seen_in_part_ends_with_every_attempt_once(
    steps: list[tuple[str, int]], seen: list[bool], restart_at: int, race: str | None
) -> None:
    versions = _history(steps, race)
    ledger: dict[str, Allocation] = {}  # key -> newest version, as the ledger's current view
    written: list[Allocation] = []
    for i, version in enumerate(versions):
        if i < len(versions) - 1 and not seen[i % len(seen)]:
            continue  # missed: sub-second, a SIGKILL or a 410 window; the final version is always seen
        records = derive.allocation_records(version, None, [], {}, list(ledger.values()), keys=KEYS, now=NOW)
        if i == restart_at:  # a restart re-derives from what was committed: nothing new
            assert (
                derive.allocation_records(
                    version, None, [], {}, derive.merged(list(ledger.values()), records), keys=KEYS, now=NOW
                )
                == []
            )
        written += records
        ledger.update({a.key: a for a in records})
    attempts = sorted(ledger.values(), key=lambda a: a.attempt)
    assert [a.attempt for a in attempts] == list(range(1, len(steps) + 2))
    kinds = Counter(str(P if r == "Preempted" else E) for r, _ in steps)
    assert Counter(str(a.end_reason) for a in attempts[:-1]) == kinds
    assert attempts[-1].end_reason == F and attempts[-1].quota_reserved is not None
    assert (derive.BEGAN_TO_EVICT in attempts[-1].end_message) == (race is not None)
    for a in attempts:
        assert inferred(a) == (a.quota_reserved is None)  # an observed attempt always has its reservation
    # each inferred attempt written once (no second version of its key)
    assert all(sum(1 for w in written if w.key == a.key) == 1 for a in attempts if inferred(a))


def test_inferred_attempts_are_not_written_again_after_a_restart(tmp_path: Path) -> None:
    """A real SQLite ledger: the recorder restarted on it finds the inferred keys and adds nothing."""
    version = CASES["relist-finished-after-two-unseen-preemptions"].version
    url = str(tmp_path / "ledger.db")
    for clock in (NOW, NOW + timedelta(hours=2)):  # the second run sees the version later: other bounds
        with Ledger.open(url) as ledger:

            def load(uid: str, ledger: Ledger = ledger) -> tuple[list[Allocation], list[Any]]:
                return ledger.allocations(workload_uid=uid), ledger.waits(workload_uid=uid)

            tracker = Tracker(load, KEYS, lambda clock=clock: clock)
            ledger.append(tracker.observe("workloads", "ADDED", version))
    with Ledger.read(url) as ledger:
        entries = list(ledger.entries())
        current = ledger.allocations()
    assert len(entries) == 3 and len(current) == 3
    assert sorted((a.attempt, inferred(a)) for a in current) == [(1, True), (2, True), (3, False)]


def test_an_open_attempt_is_not_finished_when_the_count_says_it_was_evicted() -> None:
    """Attempt 1 recorded reserved at minute 30; the next version seen is finished, its reservation
    released, and Kueue counts one preemption: attempt 1 ended Preempted, attempt 2 Finished."""
    version = workload(
        cond("QuotaReserved", False, "Pending", 40),
        cond("Evicted", False, "QuotaReserved", 30),
        FINISHED,
        evictions={"Preempted": 1},
    )
    out = derive.allocation_records(version, None, [], {}, [observed(1, 30)], keys=KEYS)
    assert sorted((a.attempt, a.end_reason) for a in out) == [(1, EndReason.PREEMPTED), (2, EndReason.FINISHED)]
    second = next(a for a in out if a.attempt == 2)
    assert second.quota_reserved is None and second.gpu_count == 0  # its admission was not observed
    assert "reservation was not observed" in second.end_message


def test_attempts_recorded_before_their_jobs_event_get_its_labels_when_it_comes() -> None:
    """The Job's watch behind the Workload's (a dropped connection): attempt 1 is admitted and
    preempted, attempt 2 admitted, all before the Job is seen. When it comes, both attempts, the
    ended one too, carry what only the Job says (model, checkpoint); nothing recorded is replaced."""
    tracker = Tracker(lambda uid: ([], []), KEYS, lambda: NOW)
    owned = {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "a", "uid": "j1"}]}
    versions = [
        workload(cond("QuotaReserved", True, "QuotaReserved", 5)),
        workload(RELEASED, PREEMPTED_NOW, evictions={"Preempted": 1}),
        workload(RESERVED, PREEMPTED_NOW, evictions={"Preempted": 1}),
    ]
    records: list[Allocation] = []
    for version in versions:
        version["metadata"].update(owned)
        records += [r for r in tracker.observe("workloads", "MODIFIED", version) if isinstance(r, Allocation)]
    before = derive.merged([], records)
    assert sorted(a.attempt for a in before) == [1, 2] and all(a.model is None for a in before)
    job = {
        "metadata": {
            "uid": "j1", "name": "a", "namespace": "research",
            "labels": {"gpufleet.io/model": "llama-3.1-8b", "gpufleet.io/team": "someone-else"},
            "annotations": {"gpufleet.io/checkpoint": "s3://eu-central-1/a"},
        }
    }  # fmt: skip
    records += [r for r in tracker.observe("jobs", "ADDED", job) if isinstance(r, Allocation)]
    after = {a.attempt: a for a in derive.merged([], records)}
    assert {n: (a.model, a.checkpoint, a.team) for n, a in after.items()} == {
        1: ("llama-3.1-8b", "s3://eu-central-1/a", "research"),  # the Workload's own team label stays
        2: ("llama-3.1-8b", "s3://eu-central-1/a", "research"),
    }
    assert after[1].end_reason == P
