"""Storage semantics on SQLite and PostgreSQL: idempotent appends, versions folded into the current
view, positions committed with records, and the same path for twin (simulated) records."""

from __future__ import annotations

import json
from dataclasses import fields, replace

import pytest
from hypothesis import HealthCheck, given, settings
from sqlalchemy import text

from gpufleet.errors import InputError
from gpufleet.ledger.canonical import canonical
from gpufleet.ledger.records import Allocation, EndReason, from_canonical
from gpufleet.ledger.store import Ledger
from tests.ledger.ledger_backends import BACKENDS
from tests.ledger.ledger_factories import allocation, at, record_lists, wait

pytestmark = pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)


def _count(ledger: Ledger) -> int:
    with ledger.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM ledger_entries")).scalar_one())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=record_lists)
def test_replaying_any_batch_writes_nothing_new(ledger: Ledger, records: list[Allocation]) -> None:
    before = _count(ledger)
    first = ledger.append(records)
    again = ledger.append(list(reversed(records)) + records)
    assert first.written + before == _count(ledger)
    assert again.written == 0 and again.skipped == 2 * len(records)
    assert ledger.verify().ok


def test_a_later_state_is_a_new_entry_and_the_current_view_shows_it(ledger: Ledger) -> None:
    running = allocation()
    done = replace(running, finished=at(60), end_reason=EndReason.FINISHED, end_detail="Succeeded")
    ledger.append([running])
    ledger.append([done])
    ledger.append([running])  # a replayed older event: already in the chain, so nothing happens
    assert _count(ledger) == 2
    assert ledger.allocations() == [done]
    with ledger.engine.connect() as conn:
        bodies = [r[0] for r in conn.execute(text("SELECT body FROM ledger_entries ORDER BY seq"))]
    assert [from_canonical(b) for b in bodies] == [running, done]  # history kept, untouched


def test_positions_are_stored_with_the_records(ledger: Ledger) -> None:
    ledger.append([allocation()], positions={"watch/workloads": "41"})
    ledger.append([], positions={"watch/workloads": "57", "watch/pods": "12"})
    assert ledger.positions() == {"watch/workloads": "57", "watch/pods": "12"}


def test_twin_records_go_through_the_same_path_and_stay_marked(ledger: Ledger) -> None:
    simulated = [allocation(simulated=True), wait(simulated=True)]
    ledger.append(simulated)
    assert all(r.simulated for r in ledger.current_records())
    assert ledger.verify().ok


def test_a_nul_character_is_refused_on_every_backend(ledger: Ledger) -> None:
    with pytest.raises(InputError, match="NUL"):
        ledger.append([allocation(team="a\x00b")])


def test_canonical_text_round_trips(ledger: Ledger) -> None:
    record = allocation(team="équipe-ü", finished=at(1.5), end_reason=EndReason.PREEMPTED)
    assert from_canonical(canonical(record)) == record
    ledger.append([record])
    assert ledger.allocations() == [record]


def test_the_canonical_form_covers_every_field(ledger: Ledger) -> None:
    """A field added to a record type but not to its canonical form would escape the hash. ``cluster``
    is in it whenever set; unset, its key is left out (the form of every record written before it)."""
    for record in (allocation(cluster="west"), wait(cluster="west")):
        plain = json.loads(canonical(record))
        assert set(plain) == {f.name for f in fields(record)} | {"kind"}
        unset = json.loads(canonical(replace(record, cluster=None)))
        assert set(unset) == set(plain) - {"cluster"}


def test_current_of_workloads_is_each_workloads_newest_records_in_one_call(ledger: Ledger) -> None:
    # what the recorder reads for a whole batch: the same as one current_records query per workload
    first = allocation(workload_uid="uid-a")
    ledger.append([first, wait(workload_uid="uid-a"), allocation(workload_uid="uid-b", attempt=2)])
    ledger.append([replace(first, finished=at(30), end_reason=EndReason.FINISHED)])
    uids = [f"uid-{n}" for n in range(1200)] + ["uid-a", "uid-b", "uid-a"]  # more than one chunk of 500
    found = ledger.current_of_workloads(uids)
    assert set(found) == {"uid-a", "uid-b"}
    for uid, records in found.items():
        assert records == ledger.current_records(workload_uid=uid)
    assert [r.key for r in found["uid-a"]] == ["uid-a/1", "uid-a/wait/0"]
    assert found["uid-a"][0].end_reason == EndReason.FINISHED  # the newest version only
