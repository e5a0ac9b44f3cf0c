"""The ledger's record types and their canonical form.

A record is a plain frozen value: the recorder derives it from cluster objects, the twin from a
simulated run, and both hand it to ``Ledger.append``. This module imports no database code, so the
pure parts of gpufleet (the twin) can build records without pulling in SQLAlchemy.

The canonical form is what the hash chain signs: UTF-8 JSON with sorted keys, no insignificant
whitespace, times as UTC ISO-8601 strings with a ``Z`` (``to_plain`` here, written out fast by
``gpufleet.ledger.canonical``). Two equal records always have the same canonical bytes, and
``from_canonical`` restores the exact value, so a verifier can re-hash the stored text and the
queries can read it back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


class EndReason(StrEnum):
    """How an admission attempt ended (machine reasons; Kueue's condition reason goes in ``end_detail``)."""

    FINISHED = "Finished"
    FAILED = "Failed"
    PREEMPTED = "Preempted"
    EVICTED = "Evicted"


#: Seconds from a finished attempt's pods' end to its ``finished`` (Kueue finishing the Workload once
#: the Job controller has marked the Job complete): measured on the testbed by the world differential
#: (issue 32: 122 of 131 finishes 1 s after the pods' run-for in whole seconds, 6 after 2 s, 2 in the
#: same second). The simulator frees a finished job's quota this long after its run
#: (``SimulationConfig.finish_delay_s``) and writes ``finished`` then; a trace read from a ledger takes
#: it off the duration, so a replayed job runs as long as it ran.
FINISH_LATENCY_S = 1


#: ``end_detail`` of an attempt the recorder never observed, recorded because Kueue's own count of
#: evictions (``status.schedulingStats.evictions``) proves it happened; its times are unknown (empty)
#: and its message says between which recorded times it ran. Never written for an observed attempt.
INFERRED_FROM_COUNT = "InferredFromEvictionCount"


def inferred(allocation: Allocation) -> bool:
    """Whether this attempt was inferred from Kueue's count rather than observed."""
    return allocation.end_detail == INFERRED_FROM_COUNT


@dataclass(frozen=True, slots=True)
class Placement:
    """The GPUs one allocation held on one node.

    ``devices`` names the device IDs (GPU index, MIG instance, DRA device) when the source knows
    them: the twin and DRA do, the device plugin path does not, so it may be empty.
    """

    node: str
    gpus: int
    devices: tuple[str, ...] = ()
    gpu_model: str = ""


@dataclass(frozen=True, slots=True)
class Allocation:
    """One admission attempt of one workload: who held which GPUs, from when to when, and how it ended.

    Keyed by workload UID and attempt number (1 for the first admission, +1 after each eviction), so
    a replayed event rebuilds the same key. A later change (it started, it finished) is a new
    version of the same key, never an edit of an old one.

    ``cluster`` names the worker cluster of a federation whose recorder wrote the record, so the chain
    signs where the GPUs were. Its key is left out of the canonical form while it is None: every
    record written before the field existed keeps its bytes, and its ledger still verifies.
    """

    workload_uid: str
    attempt: int
    namespace: str
    name: str
    team: str | None
    model: str | None
    data_class: str | None
    checkpoint: str | None
    local_queue: str
    cluster_queue: str
    priority: int
    flavors: tuple[tuple[str, str], ...]  # (resource, flavor), sorted by resource
    gpu_resource: str  # ``nvidia.com/gpu`` or a MIG profile resource such as ``nvidia.com/mig-3g.40gb``
    gpu_count: int
    placements: tuple[Placement, ...]
    created: datetime
    quota_reserved: datetime | None
    admitted: datetime | None
    started: datetime | None
    finished: datetime | None
    end_reason: EndReason | None
    end_detail: str  # Kueue's reason, e.g. ``InCohortReclamation`` or ``Succeeded``
    end_message: str
    borrowing: bool | None  # None: the source could not tell
    simulated: bool
    cluster: str | None = None  # the cluster that held the GPUs (``record --cluster``); None: one cluster

    @property
    def key(self) -> str:
        return f"{self.workload_uid}/{self.attempt}"

    @property
    def kind(self) -> str:
        return "Allocation"

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(p.node for p in self.placements)


@dataclass(frozen=True, slots=True)
class WaitInterval:
    """One span during which a workload was pending for one reason (Kueue's ``QuotaReserved=False``).

    Keyed by workload UID and the interval's index within that workload; ``end`` is None while
    the interval is still open, and closing it appends a new version.
    """

    workload_uid: str
    index: int
    namespace: str
    name: str
    team: str | None
    local_queue: str
    reason: str
    message: str
    start: datetime
    end: datetime | None
    simulated: bool
    cluster: str | None = None  # the cluster the workload waited in (``record --cluster``); None: one cluster

    @property
    def key(self) -> str:
        return f"{self.workload_uid}/wait/{self.index}"

    @property
    def kind(self) -> str:
        return "WaitInterval"


Record = Allocation | WaitInterval

_KINDS: dict[str, type[Allocation] | type[WaitInterval]] = {
    "Allocation": Allocation,
    "WaitInterval": WaitInterval,
}


def format_time(value: datetime) -> str:
    """UTC, second or microsecond precision, with a ``Z``: one spelling per instant."""
    if value.tzinfo is UTC:  # the common case, and the ledger's hot path: "...+00:00" -> "...Z"
        return value.isoformat()[:-6] + "Z"
    offset = value.utcoffset()
    if offset is None:
        raise ValueError(f"naive datetime {value!r}: ledger times must carry a timezone")
    return (value - offset).replace(tzinfo=None).isoformat() + "Z"


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _placement(p: Placement) -> dict[str, Any]:
    return {"devices": list(p.devices), "gpuModel": p.gpu_model, "gpus": p.gpus, "node": p.node}


def _time(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


# The dicts below are spelled out field by field, keys in sorted order, so that the encoder's
# output is sorted without sorting (a property test holds it to ``json.dumps(..., sort_keys=True)``).
# ``cluster`` is the one key written only when set (see ``Allocation``); it sorts first in a wait and
# between ``checkpoint`` and ``cluster_queue`` in an allocation.


def _allocation(a: Allocation) -> dict[str, Any]:
    if a.cluster is not None:
        return _clustered(_unclustered(a), "cluster_queue", a.cluster)
    return _unclustered(a)


def _clustered(plain: dict[str, Any], before: str, cluster: str) -> dict[str, Any]:
    """``plain`` with ``"cluster"`` inserted before the key ``before``: still in sorted order."""
    out: dict[str, Any] = {}
    for key, value in plain.items():
        if key == before:
            out["cluster"] = cluster
        out[key] = value
    return out


def _unclustered(a: Allocation) -> dict[str, Any]:
    return {
        "admitted": _time(a.admitted),
        "attempt": a.attempt,
        "borrowing": a.borrowing,
        "checkpoint": a.checkpoint,
        "cluster_queue": a.cluster_queue,
        "created": format_time(a.created),
        "data_class": a.data_class,
        "end_detail": a.end_detail,
        "end_message": a.end_message,
        "end_reason": None if a.end_reason is None else a.end_reason.value,
        "finished": _time(a.finished),
        "flavors": [[r, f] for r, f in a.flavors],
        "gpu_count": a.gpu_count,
        "gpu_resource": a.gpu_resource,
        "kind": "Allocation",
        "local_queue": a.local_queue,
        "model": a.model,
        "name": a.name,
        "namespace": a.namespace,
        "placements": [_placement(p) for p in a.placements],
        "priority": a.priority,
        "quota_reserved": _time(a.quota_reserved),
        "simulated": a.simulated,
        "started": _time(a.started),
        "team": a.team,
        "workload_uid": a.workload_uid,
    }


def _wait(w: WaitInterval) -> dict[str, Any]:
    plain = _unclustered_wait(w)
    return plain if w.cluster is None else _clustered(plain, "end", w.cluster)


def _unclustered_wait(w: WaitInterval) -> dict[str, Any]:
    return {
        "end": _time(w.end),
        "index": w.index,
        "kind": "WaitInterval",
        "local_queue": w.local_queue,
        "message": w.message,
        "name": w.name,
        "namespace": w.namespace,
        "reason": w.reason,
        "simulated": w.simulated,
        "start": format_time(w.start),
        "team": w.team,
        "workload_uid": w.workload_uid,
    }


def to_plain(record: Record) -> dict[str, Any]:
    """The record as JSON-ready data, with its kind."""
    return _allocation(record) if isinstance(record, Allocation) else _wait(record)


_TIME_FIELDS = frozenset({"created", "quota_reserved", "admitted", "started", "finished", "start", "end"})


def from_plain(data: dict[str, Any]) -> Record:
    """Rebuild a record from ``to_plain`` output (or its JSON)."""
    values = dict(data)
    cls = _KINDS[values.pop("kind")]
    for name in _TIME_FIELDS & values.keys():
        if values[name] is not None:
            values[name] = parse_time(values[name])
    if cls is Allocation:
        values["flavors"] = tuple((r, f) for r, f in values["flavors"])
        values["placements"] = tuple(
            Placement(p["node"], p["gpus"], tuple(p["devices"]), p["gpuModel"]) for p in values["placements"]
        )
        if values["end_reason"] is not None:
            values["end_reason"] = EndReason(values["end_reason"])
    return cls(**values)


def from_canonical(text: str) -> Record:
    return from_plain(json.loads(text))
