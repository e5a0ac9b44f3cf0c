"""The one definition of a ``ledger_current`` row, from a record (what ``append`` writes) or
straight from an entry's canonical body (what ``audit verify`` recomputes a million times).

Both give the same tuple for the same record; a property test holds them to it. Decoding only
the fields a row needs (msgspec, already installed with lightkube) instead of rebuilding the
record makes verify's rebuild of the current view about ten times cheaper.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from gpufleet.ledger.records import Allocation, Record

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

CurrentRow = tuple[Any, ...]  # the columns of schema.current, in order


def micros(value: datetime | None) -> int | None:
    """UTC microseconds since the epoch (exact integer arithmetic, the same on every database)."""
    if value is None:
        return None
    return (value - _EPOCH) // _MICROSECOND  # timedelta // timedelta: an exact int


def span(record: Record) -> tuple[datetime | None, datetime | None]:
    """When a record starts and ends holding (an allocation) or waiting (a wait interval)."""
    if isinstance(record, Allocation):
        return record.quota_reserved or record.admitted or record.created, record.finished
    return record.start, record.end


def row(record: Record, seq: int) -> CurrentRow:
    """The current-view row for entry ``seq``, the newest entry of ``record``'s key."""
    begin, end = span(record)
    return (
        record.key,
        record.kind,
        seq,
        record.workload_uid,
        record.namespace,
        record.name,
        record.team,
        micros(begin),
        micros(end),
        record.simulated,
    )


def _time_micros(text: str | None) -> int | None:
    return None if text is None else micros(datetime.fromisoformat(text))


class _Fields(msgspec.Struct):
    """The fields of a canonical body that a current-view row is made of (others are skipped)."""

    kind: str
    workload_uid: str
    namespace: str
    name: str
    team: str | None
    simulated: bool
    attempt: int | None = None
    index: int | None = None
    created: str | None = None
    quota_reserved: str | None = None
    admitted: str | None = None
    finished: str | None = None
    start: str | None = None
    end: str | None = None


_DECODER = msgspec.json.Decoder(_Fields)


class NotARecord(ValueError):
    """A chained body that is not a ledger record (only a forged chain has one)."""


def row_from_body(body: str, seq: int) -> CurrentRow:
    """``row(from_canonical(body), seq)`` without building the record."""
    try:
        d = _DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise NotARecord(f"entry {seq}'s body is not a ledger record: {exc}") from None
    if d.kind == "Allocation" and d.attempt is not None:
        key = f"{d.workload_uid}/{d.attempt}"
        begin, end = d.quota_reserved or d.admitted or d.created, d.finished
    elif d.kind == "WaitInterval" and d.index is not None:
        key = f"{d.workload_uid}/wait/{d.index}"
        begin, end = d.start, d.end
    else:
        raise NotARecord(f"entry {seq}'s body is not a ledger record (kind {d.kind!r})")
    try:
        return (
            key,
            d.kind,
            seq,
            d.workload_uid,
            d.namespace,
            d.name,
            d.team,
            _time_micros(begin),
            _time_micros(end),
            d.simulated,
        )
    except ValueError as exc:
        raise NotARecord(f"entry {seq}'s body has a time that is not ISO-8601: {exc}") from None
