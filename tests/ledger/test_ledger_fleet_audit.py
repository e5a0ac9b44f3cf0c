"""``audit report``, ``audit export`` and ``audit verify`` over one ledger per worker of a federation
(``--ledger NAME=URL``, repeated), on SQLite and on a real PostgreSQL server: every row names its
cluster, no figure adds one chain's records to another's, each chain is verified on its own, and a
mistake is exit 2 naming the ledger, with nothing written.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import polars as pl
import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.cli.common import console
from gpufleet.ledger.records import Placement, Record
from gpufleet.ledger.store import Ledger
from tests.ledger import ledger_backends
from tests.ledger.ledger_factories import allocation, at, wait

runner = CliRunner()
WINDOW = ["--from", "2026-11-02T08:05:00Z", "--to", "2026-11-02T09:05:00Z"]  # at(5) .. at(65): one hour

# West: research holds 8 GPUs the whole hour, vision 4; east: research 4. Merged, research's share
# would be 12 of 16 GPU-hours; per cluster it is 8 of 12 on west and 4 of 4 on east.
VISION = {"namespace": "vision", "name": "detect", "team": "vision", "cluster_queue": "vision", "gpu_count": 4}
WEST: list[Record] = [
    allocation(workload_uid="w-1", name="train-a", cluster="west"),
    allocation(
        workload_uid="w-2", **VISION, finished=at(65), cluster="west", placements=(Placement("n", 4, (), "H100"),)
    ),
    wait(workload_uid="w-1", name="train-a", cluster="west", start=at(4), end=at(7)),
]
EAST: list[Record] = [
    allocation(workload_uid="e-1", name="train-b", gpu_count=4, cluster="east"),
    wait(workload_uid="e-1", name="train-b", cluster="east", start=at(2), end=at(7)),
]
UNNAMED: list[Record] = [allocation(workload_uid="o-1", name="train-c", gpu_count=2)]


def _fill(url: str, records: list[Record]) -> str:
    with Ledger.open(url) as ledger:
        ledger.append(records)
    return url


@pytest.fixture(params=ledger_backends.BACKENDS)
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """West's, east's and an unnamed cluster's ledgers, a second ledger of west's records, all on the
    backend of the parameter; and places that hold no ledger: a missing one on that backend, a text
    file, a PostgreSQL port nobody listens on."""
    made = {}
    for name, records in (("west", WEST), ("east", EAST), ("old", UNNAMED), ("west_copy", WEST[:1])):
        url = ledger_backends.backend_url(request, tmp_path, sqlite=f"{name}.db", database=f"fleet_{name}")
        made[name] = _fill(url, records)
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database\n")
    missing = str(tmp_path / "missing.db")
    if made["west"].startswith("postgresql"):
        missing = made["west"].rsplit("/", 1)[0] + "/fleet_missing"  # a database the real server does not have
    return {**made, "foreign": str(foreign), "missing": missing, "unreachable": "postgresql://x@127.0.0.1:1/ledger"}


def _command(command: str, out: Path) -> list[str]:
    """``audit COMMAND`` with what it needs besides the ledgers (report and export write to ``out``)."""
    return {
        "report": ["report", *WINDOW, "--format", "csv", "--out", str(out)],
        "export": ["export", "--out", str(out)],
        "verify": ["verify"],
    }[command]


def _both(urls: dict[str, str]) -> list[str]:
    return ["--ledger", f"west={urls['west']}", "--ledger", f"east={urls['east']}"]


def test_report_gives_each_cluster_its_own_rows_and_shares(urls: dict[str, str]) -> None:
    result = runner.invoke(app, ["audit", "report", *WINDOW, *_both(urls), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert [(r["cluster"], r["team"], r["gpu_hours"], r["share"], r["wait_p50_s"]) for r in rows] == [
        ("east", "research", 4.0, 1.0, 300.0),
        ("west", "research", 8.0, 0.6667, 180.0),
        ("west", "vision", 4.0, 0.3333, None),
    ]
    csv_out = runner.invoke(app, ["audit", "report", *WINDOW, *_both(urls), "--format", "csv"])
    assert csv_out.exit_code == 0, csv_out.output
    table = list(csv.DictReader(io.StringIO(csv_out.stdout)))
    assert csv_out.stdout.startswith("cluster,team,") and [r["cluster"] for r in table] == ["east", "west", "west"]


def test_report_table_and_html_name_the_cluster(urls: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", 200)
    table = runner.invoke(app, ["audit", "report", *WINDOW, *_both(urls)])
    assert table.exit_code == 0, table.output
    lines = [line for line in table.stdout.splitlines() if "research" in line]
    assert [line.split("│")[1].strip() for line in lines] == ["east", "west"]
    html = runner.invoke(app, ["audit", "report", *WINDOW, *_both(urls), "--format", "html"])
    assert html.exit_code == 0 and "<th>cluster</th>" in html.stdout and "<td>east</td>" in html.stdout


def test_one_unnamed_ledger_keeps_the_one_cluster_report(urls: dict[str, str]) -> None:
    result = runner.invoke(app, ["audit", "report", *WINDOW, "--ledger", urls["old"], "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("team,flavor,") and "cluster" not in result.stdout


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_names_the_cluster_on_every_row(urls: dict[str, str], tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"fleet.{fmt}"
    named = ["--ledger", f"onprem={urls['old']}"]  # its records name no cluster: the NAME labels them
    result = runner.invoke(app, ["audit", "export", *_both(urls), *named, "--out", str(out), "--format", fmt])
    assert result.exit_code == 0, result.output
    frame = pl.read_csv(out) if fmt == "csv" else pl.read_parquet(out)
    assert frame.columns[0] == "cluster" and "wrote 4 rows" in result.stdout
    assert sorted(zip(frame["cluster"], frame["workload_uid"], strict=True)) == [
        ("east", "e-1"),
        ("onprem", "o-1"),
        ("west", "w-1"),
        ("west", "w-2"),
    ]
    waits = tmp_path / f"waits.{fmt}"
    result = runner.invoke(app, ["audit", "export", *_both(urls), "--waits", "--out", str(waits), "--format", fmt])
    frame = pl.read_csv(waits) if fmt == "csv" else pl.read_parquet(waits)
    assert result.exit_code == 0 and sorted(frame["cluster"]) == ["east", "west"], result.output


def test_verify_checks_each_chain_and_names_the_one_that_fails(urls: dict[str, str]) -> None:
    ok = runner.invoke(app, ["audit", "verify", *_both(urls)])
    assert ok.exit_code == 0, ok.output
    assert "ledger west:\n  OK: 3 entries intact" in ok.stdout and "ledger east:\n  OK: 2 entries intact" in ok.stdout
    with Ledger.open(urls["east"]) as ledger, ledger.engine.begin() as conn:
        conn.execute(text("UPDATE ledger_entries SET body = replace(body, 'train-b', 'train-x') WHERE seq = 2"))
    bad = runner.invoke(app, ["audit", "verify", *_both(urls)])
    assert bad.exit_code == 1, bad.output
    assert "ledger west:\n  OK: 3 entries intact" in bad.stdout  # the other chain is still checked, and intact
    assert "ledger east:\n  TAMPERED: entry 2 (e-1/wait/0): Changed" in bad.stdout
    assert "1 of 2 ledgers failed: east" in bad.stdout


@pytest.mark.parametrize(
    ("command", "extra", "message", "named"),
    [
        ("report", ["--ledger", "west={old}"], "cluster name given twice: west", None),
        ("export", ["--ledger", "{west}"], "ledger given twice", None),
        ("report", ["--ledger", "{old}"], "its records name no cluster", "old"),
        ("export", ["--ledger", "{old}"], "its records name no cluster", "old"),
        ("report", ["--ledger", "again={missing}"], "", "missing"),
        ("export", ["--ledger", "again={unreachable}"], "cannot open the ledger", "unreachable"),
        ("report", ["--ledger", "again={foreign}"], "not a gpufleet ledger", "foreign"),
        ("export", ["--ledger", "copy={west_copy}"], "holds records of cluster west", "west_copy"),
        ("verify", ["--ledger", "again={foreign}"], "not a gpufleet ledger", "foreign"),
        ("verify", ["--head", "abc"], "--head belongs to one chain", None),
    ],
    ids=[
        "name-twice",
        "url-twice",
        "unnamed-report",
        "unnamed-export",
        "missing",
        "unreachable",
        "foreign",
        "one-cluster-two-ledgers",
        "verify-foreign",
        "verify-head",
    ],
)
def test_fleet_mistakes_are_located_errors_and_write_nothing(
    urls: dict[str, str], tmp_path: Path, command: str, extra: list[str], message: str, named: str | None
) -> None:
    """Exit 2, the message, the ledger at fault named (``named``: which of ``urls``), no file written."""
    out = tmp_path / "out.csv"
    args = _command(command, out)
    result = runner.invoke(app, ["audit", *args, *_both(urls), *(e.format(**urls) for e in extra)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output
    assert "--ledger" in result.stderr or "--head" in result.stderr
    assert named is None or urls[named] in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("command", ["report", "export", "verify"])
def test_a_ledger_that_fails_while_read_is_named(urls: dict[str, str], tmp_path: Path, command: str) -> None:
    """Its schema revision passes the opening check, a table it needs is gone: exit 2 naming that ledger."""
    with Ledger.open(urls["east"]) as ledger, ledger.engine.begin() as conn:
        conn.execute(text("DROP TABLE ledger_current" if command != "verify" else "DROP TABLE ledger_tree"))
    out = tmp_path / "out.csv"
    args = _command(command, out)
    result = runner.invoke(app, ["audit", *args, *_both(urls)])
    assert result.exit_code == 2, result.output
    assert "cannot read the ledger" in result.stderr and urls["east"] in result.stderr, result.stderr
    assert not out.exists()
