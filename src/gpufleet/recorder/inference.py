"""Attempts the recorder never saw, from Kueue's own count of evictions.

Kueue v0.19.2 increments ``status.schedulingStats.evictions[(reason, underlyingCause)].count`` in the
same status patch that sets ``Evicted=True`` (``pkg/workload/evict``), and never resets it on purpose
(a readmission written from a stale copy can drop it: ``derive._EVICTED_ENDS``). So a
Workload version with a total count of E proves that E attempts were admitted and evicted, even when
the recorder saw none of them: one evicted and readmitted within a second, or wholly inside a window
where the recorder was down or its watch got 410 Gone. This module writes each such attempt once.

What is known of such an attempt, and nothing more, goes into its record:

- the workload's own fields (name, labels, LocalQueue, priority, creation);
- how it ended: ``Preempted`` or ``Evicted``, from the reasons Kueue counted that no recorded attempt
  accounts for (when several are left, the message names them: the order is not known);
- ``end_detail`` = ``InferredFromEvictionCount``, and the message says between which times it ran
  (the latest time recorded before it, and the next attempt's reservation or the moment the count
  was seen); every time field stays empty, because none was observed.

The key is the workload UID and the attempt number, like any attempt: a recorder restarted on the
same ledger finds the key and infers nothing again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from gpufleet.ledger.records import INFERRED_FROM_COUNT, Allocation, EndReason, format_time

NOT_COUNTED = frozenset({"Deleted", "OwnerNotFound", "OutOfSync"})  # ends that are not Kueue evictions
PREEMPTED = "Preempted"  # Kueue's eviction reason for a preemption (kueue.WorkloadEvictedByPreemption)


@dataclass(frozen=True, order=True, slots=True)
class Eviction:
    """One key of ``schedulingStats.evictions``."""

    reason: str
    cause: str = ""

    @property
    def preemption(self) -> bool:
        return self.reason == PREEMPTED

    def shown_as(self, condition_reason: str) -> bool:
        """Whether an ``Evicted`` condition with this reason is this eviction (Kueue writes a
        deactivation with a cause as ``<reason>DueTo<cause>``)."""
        return condition_reason in (self.reason, f"{self.reason}DueTo{self.cause}")

    def text(self) -> str:
        return f"{self.reason} ({self.cause})" if self.cause else self.reason


def counted(workload: Mapping[str, Any]) -> Counter[Eviction] | None:
    """Kueue's eviction counts by (reason, underlyingCause); None where the Workload has no schedulingStats."""
    stats = (workload.get("status", {}).get("schedulingStats") or {}).get("evictions")
    if stats is None:
        return None
    found: Counter[Eviction] = Counter()
    for entry in stats:
        count = int(entry.get("count", 0))
        if count > 0:
            found[Eviction(str(entry.get("reason", "")), str(entry.get("underlyingCause") or ""))] += count
    return found


def _take(left: Counter[Eviction], fits: list[Eviction]) -> Eviction | None:
    for key in sorted(fits):
        if left[key] > 0:
            left[key] -= 1
            return key
    return None


def _account(left: Counter[Eviction], a: Allocation) -> None:
    """Remove from ``left`` the counted eviction that ended attempt ``a``, when it was one."""
    if a.end_reason == EndReason.PREEMPTED:
        keys = [k for k in left if k.preemption]
        _take(left, [k for k in keys if k.cause == a.end_detail] or keys)
    elif a.end_reason == EndReason.EVICTED and a.end_detail not in NOT_COUNTED:
        if a.end_detail in (INFERRED_FROM_COUNT, "NotObserved"):
            _take(left, [k for k in left if not k.preemption] or list(left))
        else:
            _take(left, [k for k in left if a.end_detail == k.reason or k.shown_as(a.end_detail)])


def unaccounted(workload: Mapping[str, Any], known: list[Allocation], shown: str | None) -> Counter[Eviction]:
    """The evictions Kueue counted that no ended attempt of ``known`` accounts for.

    ``shown``: the reason of an ``Evicted=True`` condition whose attempt ``known`` holds open (still
    being evicted): its eviction is counted already and is that attempt's, not a missing one's.
    """
    left = counted(workload) or Counter()
    for a in sorted(known, key=lambda a: a.attempt):
        _account(left, a)
    if shown is not None:
        _take(left, [k for k in left if k.shown_as(shown)])
    return +left


def _choose(left: Counter[Eviction], shown: str | None) -> tuple[EndReason, Eviction | None, str]:
    """How an unobserved attempt ended, taking its eviction out of ``left``: (end, the counted key, or
    None when several fit and the order is not known, the fitting counted reasons as text)."""
    keys = sorted(k for k in left if left[k] > 0)
    fits = [k for k in keys if shown is not None and k.shown_as(shown)] or keys
    if not fits:
        return EndReason.EVICTED, None, ""
    text = " or ".join(k.text() for k in fits)
    preemptions = [k for k in fits if k.preemption]
    # several reasons fit: a preemption is named only when nothing else could have ended it
    key = preemptions[0] if len(preemptions) == len(fits) else next(k for k in fits if not k.preemption)
    left[key] -= 1
    end = EndReason.PREEMPTED if key.preemption else EndReason.EVICTED
    return end, key if len(fits) == 1 else None, text


def unobserved_end(latest: Allocation, left: Counter[Eviction]) -> Allocation:
    """Close an attempt whose start the recorder saw and whose end it did not, with the reason Kueue
    counted for it; ``Evicted (NotObserved)`` where Kueue counts none. Its end time stays unknown."""
    end, key, reasons = _choose(left, None)
    if not reasons:
        return replace(latest, end_reason=EndReason.EVICTED, end_detail="NotObserved")
    message = f"end not observed by the recorder; counted in Kueue's schedulingStats.evictions as {reasons}"
    if key is None:  # several counted reasons fit
        detail = PREEMPTED if end == EndReason.PREEMPTED else "NotObserved"
        return replace(latest, end_reason=end, end_detail=detail, end_message=message)
    return replace(latest, end_reason=end, end_detail=key.cause or key.reason, end_message=message)


@dataclass(frozen=True, slots=True)
class Seen:
    """What the current version of the Workload shows beside its counts."""

    total: int  # evictions Kueue counted, all reasons
    in_progress: bool  # Evicted=True while QuotaReserved=True: attempt ``total`` is being evicted now
    evicted: str | None  # the reason of an Evicted=True condition
    evicted_at: datetime | None
    evicted_message: str
    now: datetime | None  # when the recorder saw this version (None: not known here)


def _bounds(n: int, known: list[Allocation], template: Allocation, seen: Seen) -> tuple[datetime, datetime | None]:
    before = [t for a in known if a.attempt < n for t in (a.quota_reserved, a.admitted, a.started, a.finished) if t]
    after = [a.quota_reserved for a in known if a.attempt > n and a.quota_reserved is not None]
    lower = max(before, default=template.created)
    if after:
        return lower, min(after)
    if n == seen.total and seen.evicted_at is not None:
        return lower, seen.evicted_at
    return lower, seen.now


def inferred(template: Allocation, known: list[Allocation], left: Counter[Eviction], seen: Seen) -> list[Allocation]:
    """One record for each attempt Kueue counted as evicted that ``known`` lacks, numbered 1..total.

    ``template`` carries the workload's own fields; ``left`` (from ``unaccounted``) is consumed.
    """
    last = seen.total - 1 if seen.in_progress else seen.total  # a current attempt is not inferred
    present = {a.attempt for a in known}
    records: list[Allocation] = []
    for n in range(1, last + 1):
        if n in present:
            continue
        shown = seen.evicted if n == seen.total else None  # the eviction the conditions show is the last one's
        end, _, reasons = _choose(left, shown)
        lower, upper = _bounds(n, known, template, seen)
        until = f" and {format_time(upper)}" if upper is not None else " and when the count was seen"
        message = (
            f"attempt not observed by the recorder, inferred from Kueue's schedulingStats.evictions"
            f" ({seen.total} counted); evicted as {reasons or 'an uncounted reason'}; it ran at some time"
            f" between {format_time(lower)}{until} (Kueue's times are whole seconds)"
        )
        if shown is not None and seen.evicted_message:
            message += f"; Kueue's message: {seen.evicted_message}"
        records.append(
            replace(
                template,
                attempt=n,
                end_reason=end,
                end_detail=INFERRED_FROM_COUNT,
                end_message=message,
            )
        )
    return records
