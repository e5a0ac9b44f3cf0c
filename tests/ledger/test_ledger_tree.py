"""The stored Merkle tree on SQLite and a real PostgreSQL: roots and proofs from the store agree
with the RFC's definition over the bodies, and verify rebuilds every derived table.

Records are written through ``Ledger.append`` in several transactions; tampering is done in SQL,
as someone with write access to the database would.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from gpufleet.ledger import merkle, proofs
from gpufleet.ledger.store import Ledger
from tests.ledger.ledger_backends import BACKENDS
from tests.ledger.ledger_factories import allocation

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TABLES = ("ledger_entries", "ledger_current", "ledger_head", "ledger_positions", "ledger_tree")


def _fill(ledger: Ledger, count: int, batches: list[int]) -> list[bytes]:
    """Append ``count`` allocations in batches of the given sizes; return the leaf hashes."""
    with ledger.engine.begin() as conn:
        for table in TABLES:
            conn.execute(text(f"DELETE FROM {table}"))
    records = [allocation(workload_uid=f"uid-{i}", name=f"train-{i}") for i in range(count)]
    at, turn = 0, 0
    while at < count:
        size = batches[turn % len(batches)]
        ledger.append(records[at : at + size])
        at, turn = at + size, turn + 1
    return [merkle.leaf_hash(e.body.encode()) for e in ledger.entries()]


sizes = st.integers(1, 150)
batch_plans = st.lists(st.integers(1, 40), min_size=1, max_size=4)


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
@SETTINGS
@given(count=sizes, batches=batch_plans, data=st.data())
def test_stored_tree_gives_the_rfc_root_and_proofs_that_verify(
    ledger: Ledger, count: int, batches: list[int], data: st.DataObject
) -> None:
    leaves = _fill(ledger, count, batches)
    assert ledger.tree_head() == (count, merkle.root_of(leaves))
    size = data.draw(st.integers(1, count), label="size")
    index = data.draw(st.integers(0, size - 1), label="index")
    root = merkle.root_of(leaves[:size])
    path = proofs.inclusion(ledger, index, size)
    assert merkle.verify_inclusion(index, size, leaves[index], path, root)
    assert not merkle.verify_inclusion(index, size, merkle.leaf_hash(b"tampered"), path, root)
    assert not merkle.verify_inclusion(index, size, leaves[index], path, merkle.leaf_hash(root))
    m = data.draw(st.integers(0, count), label="m")
    proof = proofs.consistency(ledger, m, count)
    assert merkle.verify_consistency(m, count, merkle.root_of(leaves[:m]), merkle.root_of(leaves), proof)
    if 0 < m < count:
        assert not merkle.verify_consistency(m, count, merkle.leaf_hash(b"rewritten"), merkle.root_of(leaves), proof)
    verdict = ledger.verify(sizes=frozenset({m}))
    assert verdict.ok and verdict.roots_at[m] == merkle.root_of(leaves[:m]) and verdict.size == count


TAMPER = [
    (
        "UPDATE ledger_current SET begin_us = begin_us + 3600000000, end_us = 1 WHERE record_key = 'uid-7/1'",
        "CurrentViewDiffers",
        "'uid-7/1': begin_us is",
    ),
    (
        "UPDATE ledger_current SET team = 'vision' WHERE record_key = 'uid-3/1'",
        "CurrentViewDiffers",
        "team is 'vision'",
    ),
    ("DELETE FROM ledger_current WHERE record_key = 'uid-5/1'", "CurrentViewDiffers", "'uid-5/1' (entry 6) is missing"),
    (
        "INSERT INTO ledger_current SELECT 'ghost/1', kind, seq, workload_uid, namespace, name, team, begin_us, end_us,"
        " simulated FROM ledger_current WHERE record_key = 'uid-1/1'",
        "CurrentViewDiffers",
        "'ghost/1' is not a key of any entry",
    ),
    ("UPDATE ledger_tree SET hash = hash WHERE 1 = 0", None, ""),
    ("DELETE FROM ledger_tree WHERE level = 4 AND idx = 1", "TreeDiffers", "(level 4, index 1) is missing"),
    ("UPDATE ledger_head SET tree_frontier = NULL", "HeadDiffers", "Merkle frontier"),
]


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
@pytest.mark.parametrize(("sql", "reason", "named"), TAMPER, ids=[f"{i}-{t[1]}" for i, t in enumerate(TAMPER)])
def test_verify_rebuilds_every_derived_table_and_names_the_row(
    ledger: Ledger, sql: str, reason: str | None, named: str
) -> None:
    _fill(ledger, 40, [7])
    assert ledger.verify().ok
    with ledger.engine.begin() as conn:
        conn.execute(text(sql))
    verdict = ledger.verify()
    assert verdict.chain.ok
    if reason is None:
        assert verdict.ok
        return
    assert [p.reason for p in verdict.problems] == [reason]
    assert named in verdict.problems[0].message


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
def test_a_changed_tree_node_is_named(ledger: Ledger) -> None:
    _fill(ledger, 40, [40])
    with ledger.engine.begin() as conn:
        conn.execute(text("UPDATE ledger_tree SET hash = :h WHERE level = 5 AND idx = 0"), {"h": bytes(32)})
    verdict = ledger.verify()
    assert [p.reason for p in verdict.problems] == ["TreeDiffers"]
    assert "(level 5, index 0) is different" in verdict.problems[0].message


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
def test_a_chained_body_that_is_not_a_record_is_a_finding_not_a_crash(ledger: Ledger) -> None:
    from gpufleet.ledger import chain

    _fill(ledger, 5, [5])
    body = '{"kind":"Other","workload_uid":"x"}'
    with ledger.engine.begin() as conn:
        last = conn.execute(text("SELECT record_hash, chain_hash FROM ledger_entries WHERE seq = 5")).one()
        rh, prev, chained = chain.seal((last.record_hash, last.chain_hash), body)
        conn.execute(
            text("INSERT INTO ledger_entries VALUES (6, 'Allocation', 'x/1', :b, :rh, :p, :c)"),
            {"b": body, "rh": rh, "p": prev, "c": chained},
        )
        conn.execute(text("UPDATE ledger_current SET seq = 6, record_key = 'x/1' WHERE record_key = 'uid-4/1'"))
    verdict = ledger.verify()
    assert verdict.chain.ok and "CurrentViewDiffers" in [p.reason for p in verdict.problems]
    assert "entry 6's body is not a ledger record" in verdict.problems[0].message
