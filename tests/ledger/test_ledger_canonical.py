"""The canonical text the chain and the tree hash: msgspec's fast form is exactly the JSON encoder's
sorted-keys output in UTF-8, for any record (unicode, control characters, every optional field, any
time zone), and anything it does not cover takes the encoder."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.ledger.canonical import canonical, canonical_bytes
from gpufleet.ledger.records import Allocation, Placement, from_canonical, to_plain
from tests.ledger.ledger_factories import allocation, allocations, wait

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


def _reference(record: object) -> str:
    return json.dumps(to_plain(record), sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # type: ignore[arg-type]


@st.composite
def odd_allocations(draw: st.DrawFn) -> Allocation:
    """Allocations with arbitrary text in every string field, and every optional field empty or not."""
    base = draw(allocations())
    return replace(
        base,
        namespace=draw(_text),
        checkpoint=draw(st.none() | _text),
        data_class=draw(st.none() | _text),
        end_message=draw(_text),
        flavors=tuple(draw(st.lists(st.tuples(_text, _text), max_size=3))),
        placements=tuple(
            Placement(draw(_text), draw(st.integers(0, 64)), tuple(draw(st.lists(_text, max_size=3))), draw(_text))
            for _ in range(draw(st.integers(0, 2)))
        ),
        borrowing=draw(st.none() | st.booleans()),
        priority=draw(st.integers(-(2**40), 2**40)),
        cluster=draw(st.none() | _text),  # None: no key at all, the form of every record before the field
    )


@settings(max_examples=400, deadline=None)
@given(record=odd_allocations())
def test_the_fast_form_is_the_encoders_sorted_output_and_round_trips(record: Allocation) -> None:
    text = canonical(record)
    assert text == _reference(record)
    assert canonical_bytes(record) == text.encode()
    assert from_canonical(text) == record


_zones = st.integers(-14 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m)))


@settings(max_examples=300, deadline=None)
@given(record=odd_allocations(), zone=_zones, micro=st.integers(0, 999_999))
def test_the_bytes_are_the_encoders_in_utf8_whatever_the_zone_of_a_time(
    record: Allocation, zone: timezone, micro: int
) -> None:
    record = replace(record, created=record.created.replace(microsecond=micro).astimezone(zone))
    assert canonical_bytes(record) == _reference(record).encode()


@settings(max_examples=300, deadline=None)
@given(message=_text, reason=_text, team=st.none() | _text, open_=st.booleans(), zone=_zones, cluster=st.none() | _text)
def test_wait_bytes_are_the_encoders_too(
    message: str, reason: str, team: str | None, open_: bool, zone: timezone, cluster: str | None
) -> None:
    base = wait(message=message, reason=reason, team=team, cluster=cluster)
    record = replace(base, start=base.start.astimezone(zone), end=None if open_ else base.end)
    assert canonical_bytes(record) == _reference(record).encode()
    assert from_canonical(canonical(record)) == record


def test_msgspec_escapes_every_code_point_as_the_json_encoder_does() -> None:
    """The one assumption the fast form rests on, checked for all of Unicode but the surrogates."""
    points = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    for start in range(0, len(points), 4096):
        chunk = "".join(chr(c) + "x" for c in points[start : start + 4096])
        assert msgspec.json.encode(chunk) == json.dumps(chunk, ensure_ascii=False).encode()


def test_a_str_subclass_takes_the_encoder_and_still_matches() -> None:
    class Name(str):
        __slots__ = ()

    record = allocation(name=Name("train-a"), placements=(Placement(Name("n1"), 1, (Name("0"),), ""),))
    assert canonical_bytes(record) == _reference(record).encode()


@pytest.mark.parametrize("micro", [0, 5, 450_000, 999_999])
def test_a_utc_time_written_by_msgspec_is_format_times_text(micro: int) -> None:
    """UTC datetimes go to msgspec as they are: its RFC 3339 text must be the encoder's, with and
    without microseconds, and a datetime subclass (which msgspec might write its own way) takes the text."""

    class Instant(datetime):
        pass

    when = datetime(2026, 11, 2, 1, 2, 3, micro, tzinfo=UTC)
    for record in (
        allocation(created=when, finished=when),
        allocation(admitted=Instant.fromisoformat(when.isoformat())),
    ):
        assert canonical_bytes(record) == _reference(record).encode()


def test_a_lone_surrogate_has_text_but_no_bytes() -> None:
    record = allocation(end_message="bad \ud800")
    assert canonical(record) == _reference(record)
    with pytest.raises(UnicodeEncodeError):
        canonical_bytes(record)


@pytest.mark.parametrize("number", [1e16, 0.5, float("inf")])
def test_a_float_where_an_int_belongs_takes_the_encoder(number: float) -> None:
    """msgspec writes 1e16 as ``1e16``, json as ``1e+16``: the encoder defines the form."""
    for record in (allocation(priority=number), allocation(placements=(Placement("n", number, (), ""),))):  # type: ignore[arg-type]
        assert canonical_bytes(record) == _reference(record).encode()


def test_a_subclassed_number_takes_the_encoder_and_still_matches() -> None:
    class Count(int):
        pass

    record = allocation(gpu_count=Count(8))
    assert canonical(record) == _reference(record)
    assert canonical_bytes(record) == _reference(record).encode()
    flag = wait(index=Count(2))
    assert canonical_bytes(flag) == _reference(flag).encode()


def test_waits_are_canonical_too() -> None:
    record = wait(message='quota "h100" \\ \n ünïcode')
    assert canonical(record) == _reference(record) and from_canonical(canonical(record)) == record


@settings(max_examples=300, deadline=None)
@given(record=odd_allocations() | st.builds(lambda a: wait(workload_uid=a.workload_uid, end=a.finished), allocations()))
def test_the_current_row_from_a_body_equals_the_one_from_its_record(record: Allocation) -> None:
    from gpufleet.ledger import derived

    assert derived.row_from_body(canonical(record), 7) == derived.row(record, 7)
