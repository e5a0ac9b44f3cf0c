"""A ledger written by the code before the msgspec canonical form (main at 7e47630, checked in under
``tests/ledger/data``) verifies with today's code, and today's code writes it byte for byte.

Together the two directions mean old and new ledgers are interchangeable: a ledger today's code
writes is the same bytes as one the old code wrote, so the old code verifies it too.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.ledger import checkpoint, note
from gpufleet.ledger.canonical import canonical_bytes
from gpufleet.ledger.records import from_canonical
from gpufleet.ledger.store import Ledger
from tests.ledger import ledger_golden as golden
from tests.ledger.ledger_backends import BACKENDS


@pytest.fixture
def old_ledger(tmp_path: Path) -> Path:
    """A copy, so that a reader's side files never land in the source tree."""
    return Path(shutil.copy(golden.LEDGER, tmp_path / "old.db"))


def test_the_old_ledger_verifies_against_its_checkpoint(old_ledger: Path) -> None:
    anchor = ["--checkpoint", str(golden.CHECKPOINT), "--pubkey", str(golden.PUBKEY)]
    result = CliRunner().invoke(app, ["audit", "verify", "--ledger", str(old_ledger), *anchor])
    assert result.exit_code == 0, result.output
    assert "294 entries" in result.output and "extends checkpoint" in result.output


def test_every_stored_body_is_what_the_new_form_writes_for_its_record(old_ledger: Path) -> None:
    with sqlite3.connect(old_ledger) as conn:
        bodies = [body for (body,) in conn.execute("SELECT body FROM ledger_entries ORDER BY seq")]
    assert len(bodies) == len(golden.records()) == 294
    for body in bodies:
        assert canonical_bytes(from_canonical(body)) == body.encode()


def test_the_new_code_writes_the_old_ledger_byte_for_byte(old_ledger: Path, tmp_path: Path) -> None:
    new = tmp_path / "new.db"
    golden.write(str(new))
    old_rows, new_rows = golden.rows(old_ledger), golden.rows(new)
    for table, rows in old_rows.items():
        assert new_rows[table] == rows, table
    assert len(old_rows["ledger_entries"]) == 294 and old_rows["ledger_tree"]


@pytest.mark.parametrize("ledger_url", BACKENDS, indirect=True)
def test_the_same_records_give_the_checkpointed_root_on_every_backend(ledger_url: str) -> None:
    """The old code's checkpoint verifies a ledger the new code wrote, on SQLite and on PostgreSQL."""
    golden.write(ledger_url)
    signed = golden.CHECKPOINT.read_text(encoding="utf-8")
    verifier = note.parse_verifier(golden.PUBKEY.read_text(encoding="utf-8"))
    with Ledger.read(ledger_url) as ledger:
        result = checkpoint.check(ledger, signed, verifier, origin=None)
    assert result.ok, result.problems
    assert result.verdict is not None and result.verdict.size == 294
