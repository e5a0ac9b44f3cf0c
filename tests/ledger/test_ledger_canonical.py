"""The canonical text the chain and the tree hash: the written-out fast form is exactly the JSON
encoder's sorted-keys output, for any record (unicode, control characters, every optional field)."""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.ledger.records import Allocation, Placement, canonical, from_canonical, to_plain
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
    )


@settings(max_examples=400, deadline=None)
@given(record=odd_allocations())
def test_the_fast_form_is_the_encoders_sorted_output_and_round_trips(record: Allocation) -> None:
    text = canonical(record)
    assert text == _reference(record)
    assert from_canonical(text) == record


def test_a_subclassed_number_takes_the_encoder_and_still_matches() -> None:
    class Count(int):
        pass

    record = allocation(gpu_count=Count(8))
    assert canonical(record) == _reference(record)


def test_waits_are_canonical_too() -> None:
    record = wait(message='quota "h100" \\ \n ünïcode')
    assert canonical(record) == _reference(record) and from_canonical(canonical(record)) == record


@settings(max_examples=300, deadline=None)
@given(record=odd_allocations() | st.builds(lambda a: wait(workload_uid=a.workload_uid, end=a.finished), allocations()))
def test_the_current_row_from_a_body_equals_the_one_from_its_record(record: Allocation) -> None:
    from gpufleet.ledger import derived

    assert derived.row_from_body(canonical(record), 7) == derived.row(record, 7)
