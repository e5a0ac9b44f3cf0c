"""``gpufleet audit``: what a user sees, exit codes, and user mistakes reported without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.cli.common import console
from gpufleet.ledger.store import Ledger
from tests.ledger.ledger_scenario import history
from tests.support import EXAMPLES

runner = CliRunner()


@pytest.fixture
def path(tmp_path: Path) -> str:
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.append(history())
    return db


def test_who_prints_the_holders(path: str) -> None:
    result = runner.invoke(
        app,
        [
            "audit",
            "who",
            "--ledger",
            path,
            "--node",
            "h100-train-1",
            "--at",
            "2026-11-02T08:45:00Z",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["workload"], r["attempt"], r["model"], r["dataClass"]) for r in rows] == [
        ("research/train-a", 1, "llama-3.1-8b", "internal")
    ]


def test_why_reads_as_an_explanation(path: str) -> None:
    result = runner.invoke(app, ["audit", "why", "--ledger", path, "research/train-a"])
    assert result.exit_code == 0, result.output
    assert "From 2026-11-02T08:10:00Z it waited 30 min 00 s: WaitingForQuota" in result.stdout
    assert "It was preempted 1 time." in result.stdout


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "html"])
def test_report_in_every_format(path: str, fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", 200)  # a wide terminal, so no cell is cut
    result = runner.invoke(
        app,
        [
            "audit",
            "report",
            "--ledger",
            path,
            "--from",
            "2026-11-02T08:00:00Z",
            "--to",
            "2026-11-02T12:00:00Z",
            "--format",
            fmt,
            "--weight",
            "research=2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "research" in result.stdout and "vision" in result.stdout


def test_report_takes_weights_from_the_policy(path: str, tmp_path: Path) -> None:
    policy = tmp_path / "fleet.yaml"
    policy.write_text((EXAMPLES / "fleet.yaml").read_text())  # research 2, nlp 1, vision 1
    args = ["audit", "report", "--ledger", path, "--from", "2026-11-02T08:00:00Z", "--to", "2026-11-02T12:00:00Z"]
    result = runner.invoke(app, [*args, "--format", "json", "--policy", str(policy)])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    shares = {r["team"]: r["weight_share"] for r in rows}
    assert (shares["research"], shares["vision"]) == (0.5, 0.25)


@pytest.mark.parametrize("bad", ["research", "research=lots", "research=-1"])
def test_a_malformed_weight_is_a_clear_error(path: str, bad: str) -> None:
    args = ["audit", "report", "--ledger", path, "--from", "2026-11-02T08:00:00Z", "--to", "2026-11-02T12:00:00Z"]
    result = runner.invoke(app, [*args, "--weight", bad])
    assert result.exit_code == 2 and "expected TEAM=WEIGHT" in result.output


def test_verify_passes_then_names_the_tampered_entry_and_exits_1(path: str) -> None:
    ok = runner.invoke(app, ["audit", "verify", "--ledger", path])
    assert ok.exit_code == 0 and "OK: 6 entries intact" in ok.stdout
    with Ledger.open(path) as ledger, ledger.engine.begin() as conn:
        conn.execute(text("UPDATE ledger_entries SET body = replace(body, 'train-big', 'train-bug') WHERE seq = 1"))
    bad = runner.invoke(app, ["audit", "verify", "--ledger", path])
    assert bad.exit_code == 1 and "entry 1 (uid-big/1): Changed" in bad.stdout


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_writes_one_row_per_allocation(path: str, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"allocations.{fmt}"
    result = runner.invoke(app, ["audit", "export", "--ledger", path, "--out", str(out), "--format", fmt])
    assert result.exit_code == 0, result.output
    frame = pl.read_csv(out) if fmt == "csv" else pl.read_parquet(out)
    assert frame.height == 4 and set(frame["name"]) == {"train-a", "train-big", "train-v"}
    assert "h100-train-1:4:0,1,2,3" in set(frame["placements"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["audit", "why", "train-a"], "expected NAMESPACE/NAME"),
        (["audit", "who", "--node", "n", "--at", "yesterday"], "not an ISO-8601 time"),
        (
            ["audit", "report", "--from", "2026-11-02T09:00:00Z", "--to", "2026-11-02T08:00:00Z"],
            "--to must be after",
        ),
        (
            ["audit", "report", "--from", "2026-11-02", "--to", "2026-11-03", "--format", "pdf"],
            "unknown format",
        ),
        (["audit", "export", "--out", "x.xlsx", "--format", "xlsx"], "unknown format"),
        (["audit", "why", "research/nope"], "no workload research/nope"),
    ],
    ids=["workload", "time", "window", "report-format", "export-format", "unknown-workload"],
)
def test_user_mistakes_exit_2_with_the_problem(path: str, args: list[str], message: str) -> None:
    result = runner.invoke(app, [*args, "--ledger", path])
    assert result.exit_code == 2 and message in result.stderr
