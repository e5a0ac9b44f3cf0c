"""Tamper evidence: every kind of tampering with stored entries is caught and the first bad entry named.

Each example writes real records through ``Ledger.append``, then tampers with the rows directly in
SQL (as someone with database access would), then runs ``Ledger.verify``. On SQLite and on a real
PostgreSQL server.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, text

from gpufleet.ledger import chain
from gpufleet.ledger.canonical import canonical
from gpufleet.ledger.chain import Tampering
from gpufleet.ledger.records import Allocation
from gpufleet.ledger.store import Ledger
from tests.ledger.ledger_backends import BACKENDS
from tests.ledger.ledger_factories import allocation, record_lists

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SHIFT = 1_000_000


def _reset(ledger: Ledger) -> None:
    with ledger.engine.begin() as conn:
        for table in ("ledger_entries", "ledger_current", "ledger_head", "ledger_positions", "ledger_tree"):
            conn.execute(text(f"DELETE FROM {table}"))


def _write(ledger: Ledger, records: list[Allocation]) -> None:
    _reset(ledger)
    for i in range(0, len(records), 4):  # several transactions, as a recorder would write
        ledger.append(records[i : i + 4])


def _row(conn: Connection, seq: int) -> dict[str, object]:
    return dict(conn.execute(text("SELECT * FROM ledger_entries WHERE seq = :s"), {"s": seq}).mappings().one())


def _renumber_after(conn: Connection, seq: int, delta: int) -> None:
    """Shift every seq above ``seq`` by ``delta`` (in two steps, so the primary key never collides)."""
    conn.execute(text("UPDATE ledger_entries SET seq = seq + :big WHERE seq > :s"), {"big": SHIFT, "s": seq})
    conn.execute(text("UPDATE ledger_entries SET seq = seq - :big + :d WHERE seq > :big"), {"big": SHIFT, "d": delta})


def _forged_body() -> str:
    return canonical(allocation(workload_uid="forged", team="someone-else"))


def change_body(conn: Connection, k: int) -> None:
    conn.execute(text("UPDATE ledger_entries SET body = :b WHERE seq = :s"), {"b": _forged_body(), "s": k})


def change_body_and_record_hash(conn: Connection, k: int) -> None:
    body = _forged_body()
    conn.execute(
        text("UPDATE ledger_entries SET body = :b, record_hash = :h WHERE seq = :s"),
        {"b": body, "h": chain.record_hash(body), "s": k},
    )


def delete_row(conn: Connection, k: int) -> None:
    conn.execute(text("DELETE FROM ledger_entries WHERE seq = :s"), {"s": k})


def delete_row_and_renumber(conn: Connection, k: int) -> None:
    delete_row(conn, k)
    _renumber_after(conn, k, -1)


def insert_forged_row(conn: Connection, k: int) -> None:
    """Insert a well-formed entry before entry k, hashes computed like the writer would."""
    before = _row(conn, k - 1) if k > 1 else {"record_hash": chain.GENESIS, "chain_hash": chain.GENESIS}
    _renumber_after(conn, k - 1, +1)
    body = _forged_body()
    rh, prev, chained = chain.seal((str(before["record_hash"]), str(before["chain_hash"])), body)
    conn.execute(
        text(
            "INSERT INTO ledger_entries (seq, kind, record_key, body, record_hash, prev_hash, chain_hash)"
            " VALUES (:s, 'Allocation', 'forged/1', :b, :rh, :p, :c)"
        ),
        {"s": k, "b": body, "rh": rh, "p": prev, "c": chained},
    )


def swap_rows(conn: Connection, k: int) -> None:
    """Move entry k+1 in front of entry k (each keeps its content and hashes)."""
    conn.execute(text("UPDATE ledger_entries SET seq = :t WHERE seq = :s"), {"t": SHIFT, "s": k})
    conn.execute(text("UPDATE ledger_entries SET seq = :t WHERE seq = :s"), {"t": k, "s": k + 1})
    conn.execute(text("UPDATE ledger_entries SET seq = :t WHERE seq = :s"), {"t": k + 1, "s": SHIFT})


# (tampering, the kind the verifier must report, the seq it must name relative to k)
CASES: list[tuple[Callable[[Connection, int], None], Tampering, int]] = [
    (change_body, Tampering.CHANGED, 0),
    (change_body_and_record_hash, Tampering.CHANGED, 0),
    (delete_row, Tampering.DELETED, +1),
    (delete_row_and_renumber, Tampering.CHANGED_OR_DELETED, 0),
    (insert_forged_row, Tampering.INSERTED, 0),
    (swap_rows, Tampering.REORDERED, 0),
]


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
@pytest.mark.parametrize(("tamper", "kind", "offset"), CASES, ids=[c[0].__name__ for c in CASES])
@SETTINGS
@given(records=record_lists, data=st.data())
def test_verify_names_the_first_tampered_entry(
    ledger: Ledger,
    records: list[Allocation],
    data: st.DataObject,
    tamper: Callable[[Connection, int], None],
    kind: Tampering,
    offset: int,
) -> None:
    _write(ledger, records)
    assert ledger.verify().ok
    # the last entry can only be vouched for by a published head (tested below), so tamper before it
    k = data.draw(st.integers(1, len(records) - 1), label="k")
    with ledger.engine.begin() as conn:
        tamper(conn, k)
    finding = ledger.verify().chain.finding
    assert finding is not None
    assert (finding.kind, finding.seq) == (kind, k + offset)


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
@SETTINGS
@given(records=record_lists)
def test_a_published_head_catches_removal_or_rewrite_at_the_end(ledger: Ledger, records: list[Allocation]) -> None:
    _write(ledger, records)
    head = ledger.verify().chain.head
    assert ledger.verify(expected_head=head).ok
    with ledger.engine.begin() as conn:
        delete_row(conn, len(records))
    verdict = ledger.verify(expected_head=head)
    assert verdict.chain.ok  # the remaining chain is consistent ...
    assert not verdict.ok  # ... but it no longer ends at the published head
    assert "published" in verdict.view_problems[0]


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
@SETTINGS
@given(records=record_lists, data=st.data())
def test_a_current_view_pointing_at_an_old_version_is_reported(
    ledger: Ledger, records: list[Allocation], data: st.DataObject
) -> None:
    _write(ledger, records)
    k = data.draw(st.integers(2, len(records)), label="k")
    with ledger.engine.begin() as conn:
        key = _row(conn, k)["record_key"]
        conn.execute(text("UPDATE ledger_current SET seq = 1 WHERE record_key = :k"), {"k": key})
    verdict = ledger.verify()
    assert verdict.chain.ok
    assert verdict.view_problems and repr(key) in verdict.view_problems[0]
