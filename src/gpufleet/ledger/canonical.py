"""The canonical form of a record: the exact bytes the hash chain and the Merkle tree hash.

UTF-8 JSON of ``records.to_plain(record)`` with sorted keys, no whitespace and only the escapes
``json`` makes with ``ensure_ascii=False``. Every ledger ever written hashes this form, so it
must never change by a byte: a checked-in ledger written by the code before this module
(``tests/ledger/data``) must verify, and the same records must give the same bytes.

Every append writes every record in this form, which made it the append path's largest cost
written out by hand. msgspec (already a dependency) writes a Struct's fields in declaration order,
in C, straight to UTF-8: the Structs below declare the fields in sorted key order, and a test
checks that msgspec escapes every code point as ``json`` does. A UTC time goes to msgspec as the
datetime itself: its RFC 3339 text is ``format_time``'s (``...Z``, microseconds only when there
are any), written in C, where formatting it in Python cost more than the rest of the form. Values of other than the declared
types (an int subclass, a str subclass) take the JSON encoder, which defines the form.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import msgspec

from gpufleet.ledger.records import Allocation, Record, WaitInterval, format_time, to_plain

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_MSGSPEC = msgspec.json.Encoder()
_Time = datetime | str  # a UTC datetime for msgspec to write, or format_time's text for any other


class _PlacementForm(msgspec.Struct, rename={"gpu_model": "gpuModel"}):
    devices: tuple[str, ...]
    gpu_model: str
    gpus: int
    node: str


class _AllocationForm(msgspec.Struct):
    admitted: _Time | None
    attempt: int
    borrowing: bool | None
    checkpoint: str | None
    cluster: str | msgspec.UnsetType  # UNSET (no key) while the record names no cluster, as ``to_plain``
    cluster_queue: str
    created: _Time
    data_class: str | None
    end_detail: str
    end_message: str
    end_reason: str | None
    finished: _Time | None
    flavors: tuple[tuple[str, str], ...]
    gpu_count: int
    gpu_resource: str
    kind: str
    local_queue: str
    model: str | None
    name: str
    namespace: str
    placements: list[_PlacementForm]
    priority: int
    quota_reserved: _Time | None
    simulated: bool
    started: _Time | None
    team: str | None
    workload_uid: str


class _WaitForm(msgspec.Struct):
    cluster: str | msgspec.UnsetType
    end: _Time | None
    index: int
    kind: str
    local_queue: str
    message: str
    name: str
    namespace: str
    reason: str
    simulated: bool
    start: _Time
    team: str | None
    workload_uid: str


def _stime(value: datetime | None) -> _Time | None:
    """The value msgspec writes as ``format_time(value)``: the datetime itself when it is a plain
    one in ``UTC`` (msgspec's own text is the same), else the text."""
    if value is None or (value.tzinfo is UTC and type(value) is datetime):
        return value
    return format_time(value)


def _form(record: Record) -> _AllocationForm | _WaitForm:
    if isinstance(record, Allocation):
        a = record
        return _AllocationForm(
            _stime(a.admitted),
            a.attempt,
            a.borrowing,
            a.checkpoint,
            msgspec.UNSET if a.cluster is None else a.cluster,
            a.cluster_queue,
            _stime(a.created),  # type: ignore[arg-type]  # never None for a datetime
            a.data_class,
            a.end_detail,
            a.end_message,
            None if a.end_reason is None else a.end_reason.value,
            _stime(a.finished),
            a.flavors,
            a.gpu_count,
            a.gpu_resource,
            "Allocation",
            a.local_queue,
            a.model,
            a.name,
            a.namespace,
            [_PlacementForm(p.devices, p.gpu_model, p.gpus, p.node) for p in a.placements],
            a.priority,
            _stime(a.quota_reserved),
            a.simulated,
            _stime(a.started),
            a.team,
            a.workload_uid,
        )
    w = record
    return _WaitForm(
        msgspec.UNSET if w.cluster is None else w.cluster,
        _stime(w.end),
        w.index,
        "WaitInterval",
        w.local_queue,
        w.message,
        w.name,
        w.namespace,
        w.reason,
        w.simulated,
        _stime(w.start),  # type: ignore[arg-type]
        w.team,
        w.workload_uid,
    )


def _exact(record: Record) -> bool:
    """The msgspec form covers the declared types only: a float where an int belongs is written
    differently by the two encoders (``1e+16`` against ``1e16``), so anything but exact ints and
    bools takes the JSON encoder (msgspec refuses an int or str subclass itself)."""
    if isinstance(record, WaitInterval):
        return type(record.index) is int and type(record.simulated) is bool
    if not (
        type(record.attempt) is int
        and type(record.gpu_count) is int
        and type(record.priority) is int
        and type(record.simulated) is bool
        and (record.borrowing is None or type(record.borrowing) is bool)
    ):
        return False
    for p in record.placements:  # noqa: SIM110 (a loop: cheaper than all() over a generator, on the hot path)
        if type(p.gpus) is not int:
            return False
    return True


def canonical_bytes(record: Record) -> bytes:
    """The exact bytes the hash chain and the Merkle tree hash: ``canonical(record)`` in UTF-8.

    Raises ``UnicodeEncodeError`` for text that is not valid Unicode (a lone surrogate)."""
    if _exact(record):
        try:
            return _MSGSPEC.encode(_form(record))
        except TypeError:  # a str subclass or another type msgspec does not write: the encoder's way
            pass
    return _ENCODER.encode(to_plain(record)).encode()


def canonical(record: Record) -> str:
    """The exact text the hash chain signs: UTF-8 JSON, sorted keys, no whitespace (equal to
    ``json.dumps(to_plain(record), sort_keys=True, separators=(",", ":"), ensure_ascii=False)``)."""
    try:
        return canonical_bytes(record).decode()
    except UnicodeEncodeError:  # a lone surrogate: no bytes, but still the encoder's text
        return _ENCODER.encode(to_plain(record))
