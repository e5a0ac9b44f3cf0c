"""A workload's pending intervals, from its ``QuotaReserved`` condition: the ledger's answer to
"why did it wait, and for how long"."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from gpufleet.ledger.records import WaitInterval
from gpufleet.recorder.derive import LabelKeys, conditions, end_of, finished, label


def wait_records(
    workload: Mapping[str, Any],
    job: Mapping[str, Any] | None,
    known: list[WaitInterval],
    keys: LabelKeys,
    now: datetime,
) -> list[WaitInterval]:
    """Open, switch or close the workload's pending interval from its ``QuotaReserved`` condition.

    Kubernetes moves lastTransitionTime only when a condition's status flips, so a new pending
    reason while still pending starts at ``now`` (when the recorder saw it), not at that time.
    """
    meta = workload.get("metadata", {})
    conds = conditions(workload)
    reserved = conds.get("QuotaReserved")
    open_ = next((w for w in known if w.end is None), None)
    changed: list[WaitInterval] = []
    end = end_of(conds)
    pending = not finished(conds)
    if reserved is not None and not reserved.status and pending:
        if open_ is not None and (open_.reason, open_.message) == (reserved.reason, reserved.message):
            return []
        start = reserved.time if reserved.time is not None else now
        if open_ is not None:
            if start <= open_.start:  # same status, new reason: the condition's time did not move
                start = max(now, open_.start)
            changed.append(replace(open_, end=start))
        index = max((w.index for w in known), default=-1) + 1
        changed.append(
            WaitInterval(
                workload_uid=str(meta["uid"]),
                index=index,
                namespace=str(meta.get("namespace", "")),
                name=str(meta["name"]),
                team=label(workload, job, keys.team),
                local_queue=str(workload.get("spec", {}).get("queueName", "")),
                reason=reserved.reason or "Pending",
                message=reserved.message,
                start=start,
                end=None,
                simulated=False,
                cluster=keys.cluster,
            )
        )
    elif open_ is not None:
        closed_at = (reserved.time if reserved is not None and reserved.status else None) or (end[3] if end else None)
        changed.append(replace(open_, end=max(closed_at or now, open_.start)))
    return changed


def deleted_waits(known: list[WaitInterval], when: datetime) -> list[WaitInterval]:
    """The workload is gone: its open pending interval ends then."""
    return [replace(w, end=max(when, w.start)) for w in known if w.end is None]
