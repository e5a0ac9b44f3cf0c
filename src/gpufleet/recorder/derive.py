"""From Kubernetes objects to ledger records: pure functions, no client, no clock.

A Workload's conditions tell the story (Kueue ``v1beta2``): ``QuotaReserved=True`` starts an
admission attempt (its lastTransitionTime identifies the attempt), ``Evicted`` / ``Preempted`` or
``Finished`` end it, and ``QuotaReserved=False`` carries the pending reason and message. Team,
model and data class come from the Workload's labels, falling back to its Job's; the checkpoint
from the annotation; nodes and GPUs from the bound Pods of the Job (``pods``). The pending
intervals are ``waits``'; the attempts Kueue counted but the recorder never saw, ``inference``'s.

Each function takes what the ledger already holds for the workload and returns only the records
that changed (new versions of their keys), so re-deriving from a replayed object writes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from gpufleet.ledger.records import Allocation, EndReason, format_time, parse_time
from gpufleet.recorder import inference
from gpufleet.recorder.pods import GPU_PREFIX, merge_placements, placements, quantity, settle


@dataclass(frozen=True, slots=True)
class LabelKeys:
    """Where gpufleet's policy keeps the audit labels (the policy file's defaults), and the name of
    the cluster the recorder watches (``record --cluster``): in a federation each worker's recorder
    writes its own ledger, and every record it writes names the worker, so the chain signs it."""

    team: str = "gpufleet.io/team"
    model: str = "gpufleet.io/model"
    data_class: str = "gpufleet.io/data-class"
    checkpoint: str = "gpufleet.io/checkpoint"
    cluster: str | None = None


@dataclass(frozen=True, slots=True)
class Condition:
    status: bool
    reason: str
    message: str
    time: datetime | None


def conditions(obj: Mapping[str, Any]) -> dict[str, Condition]:
    found: dict[str, Condition] = {}
    for c in obj.get("status", {}).get("conditions") or []:
        when = c.get("lastTransitionTime")
        found[c["type"]] = Condition(
            c.get("status") == "True",
            c.get("reason", ""),
            c.get("message", ""),
            parse_time(when) if when else None,
        )
    return found


def owner_uid(obj: Mapping[str, Any], kind: str) -> str | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == kind:
            return str(ref["uid"])
    return None


def label(workload: Mapping[str, Any], job: Mapping[str, Any] | None, key: str) -> str | None:
    for source in (workload, job or {}):
        for field in ("labels", "annotations"):
            value = (source.get("metadata", {}).get(field) or {}).get(key)
            if value:
                return str(value)
    return None


def _admission(workload: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, str], ...], str, int]:
    admission = workload.get("status", {}).get("admission") or {}
    flavors: dict[str, str] = {}
    usage: dict[str, int] = {}
    for assignment in admission.get("podSetAssignments") or []:
        flavors.update(assignment.get("flavors") or {})
        for name, value in (assignment.get("resourceUsage") or {}).items():
            if name.startswith(GPU_PREFIX):
                usage[name] = usage.get(name, 0) + quantity(value)
    gpu = min(usage, key=lambda n: (n != "nvidia.com/gpu", n)) if usage else ""
    return str(admission.get("clusterQueue", "")), tuple(sorted(flavors.items())), gpu, usage.get(gpu, 0)


def _evicted(workload: Mapping[str, Any]) -> int | None:
    """How many earlier attempts Kueue evicted, where it reports it.

    Kueue counts an eviction when it sets ``Evicted=True``, while the attempt still holds its
    reservation (seen on the testbed); until the reservation is released that count includes the
    current attempt, so it is left out.
    """
    stats = inference.counted(workload)
    if stats is None:
        return None
    count = sum(stats.values())
    being_evicted = any(
        c.get("type") == "Evicted" and c.get("status") == "True"
        for c in workload.get("status", {}).get("conditions") or []
    )
    return max(0, count - 1) if being_evicted else count


def _attempt(workload: Mapping[str, Any], latest: Allocation | None) -> int:
    """The number of a new admission: one more than Kueue's eviction count, when Kueue reports it.

    ``status.schedulingStats.evictions`` survives missed events (a relist after 410 Gone), so the
    attempt number stays right even when the recorder never saw the earlier attempts.
    """
    counted = latest.attempt + 1 if latest is not None else 1
    evicted = _evicted(workload)
    return counted if evicted is None else max(counted, 1 + evicted)


#: Kueue's ``Finished`` reasons that do not mean the job ran to its end: its owner (the Job) was deleted
#: while the workload held quota, or a prebuilt workload no longer matches its job. The real Kueue sets
#: ``OwnerNotFound`` on every running Job that is deleted, before the Workload itself goes.
NOT_RUN_TO_END = frozenset({"OwnerNotFound", "OutOfSync"})

#: How the message of an attempt that finished while Kueue was evicting it begins its account of that.
BEGAN_TO_EVICT = "Kueue began to evict it"


def _finished_as(reason: str) -> EndReason:
    if reason == "Failed":
        return EndReason.FAILED
    return EndReason.EVICTED if reason in NOT_RUN_TO_END else EndReason.FINISHED


def finished(conds: Mapping[str, Condition]) -> bool:
    finished = conds.get("Finished")
    return finished is not None and finished.status


def end_of(conds: Mapping[str, Condition]) -> tuple[EndReason, str, str, datetime | None] | None:
    finished = conds.get("Finished")
    if finished is not None and finished.status:
        return _finished_as(finished.reason), finished.reason, finished.message, finished.time
    evicted = conds.get("Evicted")
    reserved = conds.get("QuotaReserved")
    if evicted is not None and evicted.status and (reserved is None or not reserved.status):
        if evicted.reason == "Preempted":
            preempted = conds.get("Preempted")
            detail = preempted.reason if preempted is not None else evicted.reason
            return EndReason.PREEMPTED, detail, evicted.message, evicted.time
        return EndReason.EVICTED, evicted.reason, evicted.message, evicted.time
    return None


def _template(workload: Mapping[str, Any], job: Mapping[str, Any] | None, keys: LabelKeys, **fields: Any) -> Allocation:
    """An attempt of this workload: the workload's own fields, and ``fields`` (nothing of any admission
    by default). Built in one call: this is the recorder's hottest path."""
    meta, spec = workload.get("metadata", {}), workload.get("spec", {})
    labelled = "team" in fields  # the caller read the labels already
    values: dict[str, Any] = {
        "workload_uid": str(meta["uid"]),
        "attempt": 0,
        "namespace": str(meta.get("namespace", "")),
        "name": str(meta["name"]),
        "team": None if labelled else label(workload, job, keys.team),
        "model": None if labelled else label(workload, job, keys.model),
        "data_class": None if labelled else label(workload, job, keys.data_class),
        "checkpoint": None if labelled else label(workload, job, keys.checkpoint),
        "local_queue": str(spec.get("queueName", "")),
        "cluster_queue": "",
        "priority": int(spec.get("priority") or 0),
        "flavors": (),
        "gpu_resource": "",
        "gpu_count": 0,
        "placements": (),
        "created": parse_time(meta["creationTimestamp"]),
        "quota_reserved": None,
        "admitted": None,
        "started": None,
        "finished": None,
        "end_reason": None,
        "end_detail": "",
        "end_message": "",
        "borrowing": None,
        "simulated": False,
        "cluster": keys.cluster,
    }
    values.update(fields)
    return Allocation(**values)


def merged(known: list[Allocation], changed: list[Allocation]) -> list[Allocation]:
    """``known`` with the newer versions in ``changed`` in place of their keys."""
    by_key = {a.key: a for a in known}
    by_key.update({a.key: a for a in changed})
    return list(by_key.values())


def allocation_records(
    workload: Mapping[str, Any],
    job: Mapping[str, Any] | None,
    pods: Collection[Mapping[str, Any]],
    node_models: Mapping[str, str],
    known: list[Allocation],
    *,
    keys: LabelKeys,
    now: datetime | None = None,
) -> list[Allocation]:
    """New versions of this workload's allocations (attempts are 1-based, in reservation order).

    Attempts Kueue counted as evicted that the ledger lacks are added, marked as inferred
    (``gpufleet.recorder.inference``); ``now`` is when this version was seen, their latest possible end.
    """
    conds = conditions(workload)
    latest = max(known, key=lambda a: a.attempt, default=None)
    changed: list[Allocation] = []
    reserved = conds.get("QuotaReserved")
    end = end_of(conds)
    evicted_cond = conds.get("Evicted")
    shown = evicted_cond.reason if evicted_cond is not None and evicted_cond.status else None
    holding = reserved is not None and reserved.status
    in_progress = holding and shown is not None  # counted already, its reservation not yet released
    counts = inference.counted(workload)
    total = sum(counts.values()) if counts is not None else None
    if reserved is not None and reserved.status and reserved.time is not None:
        # Times have one-second resolution: an attempt preempted and readmitted within that second
        # carries its predecessor's time, and only Kueue's eviction count tells them apart
        evicted = _evicted(workload)
        same = [
            a for a in known
            if a.quota_reserved == reserved.time and (evicted is None or a.attempt > evicted)
            and (in_progress or not _released_by_eviction(a))
        ]  # fmt: skip
        if not same and latest is not None and latest.end_reason is None:
            # an eviction we never saw (while no recorder ran, or lost to a relist): close it without a time
            left = inference.unaccounted(workload, known, shown if in_progress else None)
            changed.append(inference.unobserved_end(latest, left))
        current = same[0] if same else None
        cq, flavors, gpu, count = _admission(workload)
        admitted = conds.get("Admitted")
        found, started = placements(pods, node_models, reserved.time, None)
        fields: dict[str, Any] = {
            "team": label(workload, job, keys.team),
            "model": label(workload, job, keys.model),
            "data_class": label(workload, job, keys.data_class),
            "checkpoint": label(workload, job, keys.checkpoint),
        }
        if current is None:
            fields.update(
                attempt=_attempt(workload, latest), cluster_queue=cq, flavors=flavors, gpu_resource=gpu,
                gpu_count=count, quota_reserved=reserved.time, placements=found, started=started,
                admitted=admitted.time if admitted is not None and admitted.status else None,
            )  # fmt: skip
        else:
            fields.update(
                cluster_queue=cq or current.cluster_queue, flavors=flavors or current.flavors,
                gpu_resource=gpu or current.gpu_resource, gpu_count=count or current.gpu_count,
                admitted=admitted.time if admitted is not None and admitted.status else current.admitted,
                placements=merge_placements(current.placements, found), started=current.started or started,
            )  # fmt: skip
        if end is not None and finished(conds) and (current is None or current.end_reason is None):
            message = _finished_while_evicted(end[2], evicted_cond) if in_progress else end[2]
            fields.update(end_reason=end[0], end_detail=end[1], end_message=message, finished=end[3])
        updated = _template(workload, job, keys, **fields) if current is None else replace(current, **fields)
        updated = settle(updated, pods, node_models)
        if updated != current:
            changed.append(updated)
    elif latest is not None and latest.end_reason is None and end is not None:
        if not finished(conds) and total is not None and latest.attempt < total:
            # the eviction the conditions show is a later attempt's: this one's end was never seen
            changed.append(inference.unobserved_end(latest, inference.unaccounted(workload, known, shown)))
        elif finished(conds) and total is not None and latest.attempt <= total:
            # finished, but Kueue counts this attempt among the evicted: the finish is attempt total + 1's,
            # whose reservation the recorder never saw (it is released in this version)
            changed.append(inference.unobserved_end(latest, inference.unaccounted(workload, known, shown)))
            changed.append(_finished_unseen(workload, job, keys, latest=latest, attempt=total + 1, end=end))
        else:
            ended = replace(latest, end_reason=end[0], end_detail=end[1], end_message=end[2], finished=end[3])
            changed.append(settle(ended, pods, node_models))
    if total:
        now_known = merged(known, changed)
        seen = inference.Seen(
            total=total,
            in_progress=in_progress,
            evicted=shown,
            evicted_at=evicted_cond.time if evicted_cond is not None and shown is not None else None,
            evicted_message=evicted_cond.message if evicted_cond is not None and shown is not None else "",
            now=now,
        )
        left = inference.unaccounted(workload, now_known, shown if in_progress else None)
        changed += inference.inferred(_template(workload, job, keys), now_known, left, seen)
    return changed


def with_labels(
    known: list[Allocation], workload: Mapping[str, Any], job: Mapping[str, Any] | None, *, keys: LabelKeys
) -> list[Allocation]:
    """New versions of ``known`` allocations that lack a label the Workload or its Job now gives.

    Watch streams lag each other: an attempt can be recorded, and even end, before its Job's event
    arrives, and only the current attempt is re-derived when it does. What the Job says is filled
    in where the record has nothing; nothing recorded is overwritten."""
    found = {
        field: label(workload, job, getattr(keys, field)) for field in ("team", "model", "data_class", "checkpoint")
    }
    out = []
    for allocation in known:
        missing: dict[str, Any] = {f: v for f, v in found.items() if v is not None and getattr(allocation, f) is None}
        if missing:
            out.append(replace(allocation, **missing))
    return out


#: How an attempt ends when it is evicted: a reservation held after one of these is a readmission.
#: Watch events arrive in order, so once the ledger holds the release, a version that holds a
#: reservation again is newer, whatever its time says: Kueue v0.19.2 can readmit a workload from a
#: copy of it from before the eviction (kueue#15504 describes such stale writes), which puts back
#: the first admission's ``QuotaReserved`` time and drops ``Evicted`` and the eviction's count
#: (seen in recorder_bench at 5,000 Jobs: Kueue's events show the preemption and readmission half
#: a second apart, its final status one admission and no eviction).
_EVICTED_ENDS = frozenset({EndReason.PREEMPTED, EndReason.EVICTED})


def _released_by_eviction(a: Allocation) -> bool:
    """The attempt ended by an eviction that releases its quota. Not one ended by Kueue's ``Finished``
    (``OwnerNotFound`` when its Job is deleted while running, ``OutOfSync``): a finished Workload is never
    admitted again, and it keeps showing its reservation in every version until it is gone."""
    return a.end_reason in _EVICTED_ENDS and a.end_detail not in NOT_RUN_TO_END


def _finished_while_evicted(message: str, evicted: Condition | None) -> str:
    """A Job that ran to its end after Kueue began to evict it, before its quota was released: Kueue's
    job reconciler handles a finished Job before an eviction (``jobframework`` steps 3 and 6), so the
    Workload finishes with ``Evicted=True`` still set and the eviction counted in
    ``schedulingStats.evictions``. The attempt did finish; the eviction that never ended it is told
    here, so that the count Kueue keeps and the ledger's attempts can be reconciled."""
    if evicted is None:
        return message
    when = format_time(evicted.time) if evicted.time is not None else "an unknown time"
    told = (
        f"{BEGAN_TO_EVICT} ({evicted.reason}) at {when} and counted that eviction, but it finished"
        " before its quota was released"
    )
    if evicted.message:
        told += f" (Kueue's message: {evicted.message})"
    return f"{message}; {told}" if message else told


def _finished_unseen(
    workload: Mapping[str, Any],
    job: Mapping[str, Any] | None,
    keys: LabelKeys,
    *,
    latest: Allocation,
    attempt: int,
    end: tuple[EndReason, str, str, datetime | None],
) -> Allocation:
    """The attempt a finished version ends when the recorder never saw it reserved: how it ended is
    observed, its admission is not (no reservation time, no flavors, no GPUs held on record)."""
    message = (
        f"{end[2]}; attempt {attempt}: its reservation was not observed by the recorder (Kueue counts"
        f" {attempt - 1} eviction(s) before it)"
    ).lstrip("; ")
    return _template(
        workload, job, keys, attempt=attempt, cluster_queue=latest.cluster_queue,
        end_reason=end[0], end_detail=end[1], end_message=message, finished=end[3],
    )  # fmt: skip


def deleted_allocation(known: list[Allocation], when: datetime) -> list[Allocation]:
    """The workload object is gone: an attempt still open ended then (its Job was deleted)."""
    latest = max(known, key=lambda a: a.attempt, default=None)
    if latest is None or latest.end_reason is not None:
        return []
    return [replace(latest, end_reason=EndReason.EVICTED, end_detail="Deleted", finished=when)]
