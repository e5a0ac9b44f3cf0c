"""The audit commands never lie about their input: a missing, foreign or unusable ledger is exit 2
naming it, nothing is created or changed, and a crash never exits 1 (issue 15, section 3)."""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import EXIT_CRASH, app, main
from gpufleet.cli.audit_common import EXIT_FINDING
from gpufleet.cli.common import console
from gpufleet.ledger.store import Ledger
from tests.ledger.ledger_factories import allocation, at
from tests.ledger.ledger_scenario import history

runner = CliRunner()
WINDOW = ["--from", "2026-11-02T08:00:00Z", "--to", "2026-11-02T12:00:00Z"]
READERS: dict[str, Callable[[Path], list[str]]] = {
    "verify": lambda tmp: ["audit", "verify"],
    "who": lambda tmp: ["audit", "who", "--node", "n", "--at", "2026-11-02T08:00:00Z"],
    "why": lambda tmp: ["audit", "why", "research/train-a"],
    "report": lambda tmp: ["audit", "report", *WINDOW],
    "export": lambda tmp: ["audit", "export", "--out", str(tmp / "out.csv")],
    "prove": lambda tmp: ["audit", "prove", "research/train-a"],
}


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")


def _old(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE ledger_alembic_version (version_num VARCHAR(32))")
        conn.execute("CREATE TABLE ledger_entries (seq INTEGER)")
        conn.execute("INSERT INTO ledger_alembic_version VALUES ('0001')")


INPUTS: list[tuple[str, Callable[[Path], str], str]] = [
    ("missing", lambda tmp: str(tmp / "nope.db"), "no such ledger file"),
    ("missing-dir", lambda tmp: str(tmp / "no" / "such" / "ledger.db"), "no such ledger file"),
    (
        "text-file",
        lambda tmp: (tmp / "notes.txt").write_text("hello\n") and str(tmp / "notes.txt"),
        "not a SQLite database",
    ),
    ("folder", str, "not a regular file"),
    ("foreign-sqlite", lambda tmp: _foreign(tmp / "other.db") or str(tmp / "other.db"), "not a gpufleet ledger"),
    ("empty-sqlite", lambda tmp: sqlite3.connect(tmp / "e.db").close() or str(tmp / "e.db"), "not a SQLite database"),
    ("old-schema", lambda tmp: _old(tmp / "old.db") or str(tmp / "old.db"), "run `gpufleet audit upgrade"),
    ("mysql", lambda tmp: "mysql://user@db/ledger", "unsupported database URL scheme 'mysql'"),
    ("foo", lambda tmp: "foo://x", "unsupported database URL scheme 'foo'"),
    ("http", lambda tmp: "http://example.com/ledger", "unsupported database URL scheme 'http'"),
    ("memory", lambda tmp: "sqlite://", "in-memory SQLite"),
    ("pg-unreachable", lambda tmp: "postgresql://nobody@127.0.0.1:1/ledger", "cannot open the ledger"),
]


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize("command", sorted(READERS))
@pytest.mark.parametrize(("case", "make", "said"), INPUTS, ids=[c[0] for c in INPUTS])
def test_reading_commands_refuse_unusable_ledgers_and_create_nothing(
    tmp_path: Path, command: str, case: str, make: Callable[[Path], str], said: str
) -> None:
    ledger = make(tmp_path)
    before = _snapshot(tmp_path)
    result = runner.invoke(app, [*READERS[command](tmp_path), "--ledger", ledger])
    assert result.exit_code == 2, result.output
    assert said in result.stderr and "Traceback" not in result.output
    shown = ledger if "://" in ledger else Path(ledger).name
    assert shown.split("@")[-1] in result.stderr  # the message names the ledger
    assert _snapshot(tmp_path) == before  # nothing created, nothing changed


def test_a_crash_is_not_a_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug inside verify (simulated by a raising stand-in, the only way to provoke one) exits 70, never 1."""
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.append(history())

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(Ledger, "verify", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(["audit", "verify", "--ledger", db])
    assert exited.value.code == EXIT_CRASH != EXIT_FINDING
    err = " ".join(capsys.readouterr().err.split())
    assert "gpufleet crashed: RuntimeError: boom" in err and "not a mistake in your input" in err


def test_export_to_a_folder_is_a_clear_error(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.append(history())
    result = runner.invoke(app, ["audit", "export", "--ledger", db, "--out", str(tmp_path)])
    assert result.exit_code == 2 and "is a folder" in result.stderr and "Traceback" not in result.output


def test_a_writer_never_adds_its_tables_to_a_foreign_database(tmp_path: Path) -> None:
    from gpufleet.errors import InputError

    _foreign(tmp_path / "other.db")
    before = (tmp_path / "other.db").read_bytes()
    with pytest.raises(InputError, match="not a gpufleet ledger"):
        Ledger.open(str(tmp_path / "other.db"))
    assert (tmp_path / "other.db").read_bytes() == before


def test_upgrade_brings_an_old_ledger_to_the_current_schema_with_its_tree(tmp_path: Path) -> None:
    """A ledger at revision 0001 with entries: readers refuse it, upgrade builds its Merkle tree."""
    from importlib import resources

    from alembic import command
    from alembic.config import Config

    from gpufleet.ledger import merkle

    db = tmp_path / "old.db"
    with Ledger.open(str(db)) as ledger:  # write at head, then step the schema back to 0001
        ledger.append([allocation(workload_uid=f"u{i}", name=f"w{i}", created=at(i)) for i in range(37)])
        leaves = [merkle.leaf_hash(e.body.encode()) for e in ledger.entries()]
        config = Config()
        config.set_main_option("script_location", str(resources.files("gpufleet.ledger") / "migrations"))
        with ledger.engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0001")
    refused = runner.invoke(app, ["audit", "verify", "--ledger", str(db)])
    assert refused.exit_code == 2 and "revision 0001" in refused.stderr
    assert runner.invoke(app, ["audit", "upgrade", "--ledger", str(db)]).exit_code == 0
    with Ledger.read(str(db)) as ledger:
        assert ledger.tree_head() == (37, merkle.root_of(leaves))
        assert ledger.verify().ok


def test_report_prints_durations_for_people(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.ledger.ledger_factories import wait

    monkeypatch.setattr(console, "width", 200)
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.append([allocation(), wait(start=at(0), end=at(0 + 335_748 / 60))])
    result = runner.invoke(
        app, ["audit", "report", "--ledger", db, "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-09T00:00:00Z"]
    )
    assert result.exit_code == 0, result.output
    assert "3 d 21 h" in result.stdout and "335748 s" not in result.stdout


@pytest.mark.parametrize("width", [60, 100, 140])
@pytest.mark.parametrize("wide", [False, True])
def test_who_never_cuts_a_workload_name_or_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int, wide: bool
) -> None:
    monkeypatch.setattr(console, "width", width)
    name = "a-training-workload-with-a-rather-long-generated-name-7f3c9"
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.append([allocation(name=name, checkpoint="s3://eu-central-1/checkpoints/research/" + name)])
    args = ["audit", "who", "--ledger", db, "--node", "h100-train-0", "--at", "2026-11-02T08:10:00Z"]
    result = runner.invoke(app, [*args, *(["--wide"] if wide else [])])
    assert result.exit_code == 0, result.output
    for value in (f"research/{name}", "2026-11-02T08:05:00Z", "s3://eu-central-1/checkpoints/research/" + name):
        assert value in result.stdout
    assert "…" not in result.stdout
