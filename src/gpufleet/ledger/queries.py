"""The audit questions, answered from the ledger's current view: who held a GPU, and why a workload waited.

Every answer carries ``simulated`` per row, so a report can never pass off a twin run as a
recorded one. Orderings are documented where they are made, each as one sort key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gpufleet.errors import InputError
from gpufleet.ledger.records import Allocation, EndReason, WaitInterval, format_time, inferred
from gpufleet.ledger.store import Ledger

INSTANT = timedelta(microseconds=1)
MAX_HOLDERS = 10


@dataclass(frozen=True, slots=True)
class Holding:
    """One allocation holding GPUs on the asked node at the asked time."""

    allocation: Allocation
    node: str
    gpus: int
    devices: tuple[str, ...]
    gpu_model: str


def _held_at(allocation: Allocation, at: datetime) -> bool:
    begin = allocation.quota_reserved or allocation.admitted
    return begin is not None and begin <= at and (allocation.finished is None or at < allocation.finished)


def who(ledger: Ledger, node: str, at: datetime, device: str | None = None) -> list[Holding]:
    """Allocations with GPUs on ``node`` at ``at`` (on device ``device`` when given).

    When the source did not know device IDs (the device-plugin path), a holder of the node is
    listed for any ``device``, with empty ``devices``: the ledger cannot rule it out.
    Ordered by (workload namespace, name, attempt).
    """
    found: list[Holding] = []
    for allocation in ledger.allocations(overlapping=(at, at + INSTANT)):
        if not _held_at(allocation, at):
            continue
        for p in allocation.placements:
            if p.node != node or (device is not None and p.devices and device not in p.devices):
                continue
            found.append(Holding(allocation, p.node, p.gpus, p.devices, p.gpu_model))
    found.sort(key=lambda h: (h.allocation.namespace, h.allocation.name, h.allocation.attempt))
    return found


@dataclass(frozen=True, slots=True)
class Holder:
    """A workload that held the GPUs a waiting workload needed, while it waited."""

    namespace: str
    name: str
    team: str | None
    cluster_queue: str
    flavor: str
    gpus: int
    borrowing: bool | None
    simulated: bool


@dataclass(frozen=True, slots=True)
class WaitStep:
    wait: WaitInterval
    seconds: float | None  # None while still waiting
    holders: tuple[Holder, ...]
    more_holders: int


@dataclass(frozen=True, slots=True)
class Explanation:
    namespace: str
    name: str
    workload_uid: str
    waits: tuple[WaitStep, ...]
    attempts: tuple[Allocation, ...]

    @property
    def simulated(self) -> bool:
        return any(a.simulated for a in self.attempts) or any(w.wait.simulated for w in self.waits)

    @property
    def preemptions(self) -> int:
        return sum(1 for a in self.attempts if a.end_reason == EndReason.PREEMPTED)


def _flavors_needed(attempts: list[Allocation]) -> set[tuple[str, str]]:
    return {(r, f) for a in attempts for r, f in a.flavors if r == a.gpu_resource}


def _holders(me: str, needed: set[tuple[str, str]], others: list[Allocation]) -> tuple[tuple[Holder, ...], int]:
    """Who held GPUs of the flavors this workload later got (any GPU flavor if it never got one).

    Ordered by GPUs held, largest first, then namespace and name: the biggest holders explain most.
    """
    rows: list[Holder] = []
    for a in others:
        if a.workload_uid == me or not a.gpu_count:
            continue
        flavor = dict(a.flavors).get(a.gpu_resource, "")
        if needed and (a.gpu_resource, flavor) not in needed:
            continue
        rows.append(Holder(a.namespace, a.name, a.team, a.cluster_queue, flavor, a.gpu_count, a.borrowing, a.simulated))
    rows.sort(key=lambda h: (-h.gpus, h.namespace, h.name))
    return tuple(rows[:MAX_HOLDERS]), max(0, len(rows) - MAX_HOLDERS)


def why(ledger: Ledger, namespace: str, name: str) -> Explanation:
    """The latest workload of that name: each wait with who held the quota then, and each attempt."""
    records = ledger.current_records(namespace=namespace, name=name)
    if not records:
        raise InputError.one(f"the ledger has no workload {namespace}/{name}", path="WORKLOAD")
    newest = max(records, key=lambda r: (r.created if isinstance(r, Allocation) else r.start, r.workload_uid))
    uid = newest.workload_uid
    attempts = sorted(
        (r for r in records if isinstance(r, Allocation) and r.workload_uid == uid), key=lambda a: a.attempt
    )
    waits = sorted((r for r in records if isinstance(r, WaitInterval) and r.workload_uid == uid), key=lambda w: w.index)
    needed = _flavors_needed(attempts)
    steps: list[WaitStep] = []
    for wait in waits:
        end = wait.end or wait.start + INSTANT
        others = [a for a in ledger.allocations(overlapping=(wait.start, end)) if _held_at(a, wait.start)]
        holders, more = _holders(uid, needed, others)
        seconds = (wait.end - wait.start).total_seconds() if wait.end is not None else None
        steps.append(WaitStep(wait, seconds, holders, more))
    return Explanation(namespace, name, uid, tuple(steps), tuple(attempts))


def duration_text(seconds: float) -> str:
    """For people: the two largest units ("3 d 21 h", "2 h 05 min", "4 min 10 s", "12 s")."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


def _holder_text(h: Holder) -> str:
    borrowing = {True: ", borrowing from the cohort", False: ", within its own quota", None: ""}[h.borrowing]
    return f"{h.namespace}/{h.name} (team {h.team or 'unlabelled'}, {h.gpus} GPU on {h.flavor}{borrowing})"


def explain_text(e: Explanation) -> list[str]:
    """The explanation as sentences a team lead can read, one paragraph per line."""
    lines: list[str] = []
    marker = " [simulated run]" if e.simulated else ""
    lines.append(f"{e.namespace}/{e.name}{marker}")
    if not e.waits and not e.attempts:
        return [*lines, "Nothing recorded yet."]
    for step in e.waits:
        w = step.wait
        span = duration_text(step.seconds) if step.seconds is not None else "so far (still waiting)"
        text = f"From {format_time(w.start)} it waited {span}: {w.reason}"
        text += f" — {w.message}." if w.message else "."
        if step.holders:
            holders = "; ".join(_holder_text(h) for h in step.holders)
            more = f" and {step.more_holders} more" if step.more_holders else ""
            text += f" At that time the GPUs it needed were held by {holders}{more}."
        lines.append(text)
    for a in e.attempts:
        if inferred(a):  # never observed: no times, no placement, only what Kueue's count proves
            ended = a.end_reason.value if a.end_reason is not None else "Evicted"
            lines.append(
                f"Attempt {a.attempt}: NOT OBSERVED, inferred from Kueue's eviction count; ended {ended}: {a.end_message}."
            )
            continue
        flavors = ", ".join(f"{f} for {r}" for r, f in a.flavors) or "no flavor recorded"
        reserved = format_time(a.quota_reserved) if a.quota_reserved else "an unrecorded time"
        text = (
            f"Attempt {a.attempt}: quota reserved at {reserved}"
            f" in ClusterQueue {a.cluster_queue} ({flavors}), {a.gpu_count} × {a.gpu_resource or 'no GPU'}"
        )
        if a.placements:
            nodes = ", ".join(f"{p.node} ({p.gpus})" for p in a.placements)
            started = f" started {format_time(a.started)}" if a.started else ""
            text += f";{started} on {nodes}"
        if a.end_reason is not None:
            when = format_time(a.finished) if a.finished else "an unrecorded time"
            detail = f" ({a.end_detail})" if a.end_detail else ""
            text += f"; ended {a.end_reason.value}{detail} at {when}"
            if a.end_reason == EndReason.PREEMPTED and a.end_message:
                text += f": {a.end_message}"
        else:
            text += "; still running"
        lines.append(text + ".")
    if e.preemptions:
        lines.append(f"It was preempted {e.preemptions} time{'s' if e.preemptions != 1 else ''}.")
    unseen = sum(1 for a in e.attempts if inferred(a))
    if unseen:
        lines.append(
            f"{unseen} of its {len(e.attempts)} attempts {'was' if unseen == 1 else 'were'} not observed by the recorder;"
            " Kueue's status.schedulingStats.evictions counts them, so they are recorded without times."
        )
    return lines


def explain_json(e: Explanation) -> dict[str, Any]:
    def when(value: datetime | None) -> str | None:
        return format_time(value) if value is not None else None

    return {
        "workload": f"{e.namespace}/{e.name}",
        "uid": e.workload_uid,
        "simulated": e.simulated,
        "preemptions": e.preemptions,
        "waits": [
            {
                "reason": s.wait.reason,
                "message": s.wait.message,
                "from": when(s.wait.start),
                "to": when(s.wait.end),
                "seconds": s.seconds,
                "heldBy": [
                    {
                        "workload": f"{h.namespace}/{h.name}",
                        "team": h.team,
                        "clusterQueue": h.cluster_queue,
                        "flavor": h.flavor,
                        "gpus": h.gpus,
                        "borrowing": h.borrowing,
                        "simulated": h.simulated,
                    }
                    for h in s.holders
                ],
                "moreHolders": s.more_holders,
            }
            for s in e.waits
        ],
        "attempts": [
            {
                "attempt": a.attempt,
                "observed": not inferred(a),
                "clusterQueue": a.cluster_queue,
                "flavors": dict(a.flavors),
                "gpuResource": a.gpu_resource,
                "gpus": a.gpu_count,
                "nodes": [{"node": p.node, "gpus": p.gpus, "devices": list(p.devices)} for p in a.placements],
                "quotaReserved": when(a.quota_reserved),
                "admitted": when(a.admitted),
                "started": when(a.started),
                "finished": when(a.finished),
                "endReason": a.end_reason.value if a.end_reason else None,
                "endDetail": a.end_detail,
                "endMessage": a.end_message,
            }
            for a in e.attempts
        ],
    }
