"""Evidence across clusters: records that name their cluster, signed in the chain, and ``audit who/why``
over one ledger per worker of a federation (``--ledger NAME=URL``, repeated).

The end-to-end proof (a recorder per worker of the federation testbed) is
``tests/e2e/test_federation.py::test_audit_answers_for_the_whole_fleet_from_each_workers_ledger``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.ledger.canonical import canonical
from gpufleet.ledger.chain import Tampering
from gpufleet.ledger.fleet import LedgerRef, parse_ref
from gpufleet.ledger.records import Placement, Record, from_canonical
from gpufleet.ledger.store import Ledger
from tests.ledger.ledger_factories import allocation, at, wait

runner = CliRunner()

# Two workers whose nodes share a name (node names are unique only within a cluster).
WEST = [
    allocation(workload_uid="w-1", name="train-a", cluster="west", placements=(Placement("gpu-0", 8, (), "H100"),)),
    wait(workload_uid="w-2", name="train-b", cluster="west", start=at(0), end=at(3)),
]
EAST = [
    allocation(workload_uid="e-1", name="train-b", cluster="east", placements=(Placement("gpu-0", 4, (), "H100"),)),
    wait(workload_uid="e-1", name="train-b", cluster="east", start=at(0), end=at(5)),
]
OLD = [allocation(workload_uid="o-1", name="train-c", placements=(Placement("gpu-0", 2, (), "A100"),))]


def _ledger(tmp_path: Path, name: str, records: list[Record]) -> str:
    path = str(tmp_path / f"{name}.db")
    with Ledger.open(path) as ledger:
        ledger.append(records)
    return path


@pytest.fixture
def ledgers(tmp_path: Path) -> dict[str, str]:
    return {"west": _ledger(tmp_path, "west", WEST), "east": _ledger(tmp_path, "east", EAST)}


def test_a_record_without_a_cluster_keeps_the_form_it_always_had() -> None:
    """No ``cluster`` key at all while it is None: a ledger written before the field verifies as it did
    (``test_ledger_golden`` checks a checked-in one); a named cluster is in the signed body."""
    plain = allocation()
    assert '"cluster"' not in canonical(plain) and '"cluster"' not in canonical(wait())
    named = replace(plain, cluster="west")
    assert '"cluster":"west","cluster_queue"' in canonical(named)
    assert canonical(replace(wait(), cluster="east")).startswith('{"cluster":"east","end"')
    assert from_canonical(canonical(named)) == named and from_canonical(canonical(plain)).cluster is None


def test_rewriting_the_cluster_a_record_names_is_tampering(tmp_path: Path) -> None:
    path = _ledger(tmp_path, "west", WEST)
    with Ledger.open(path) as ledger:
        assert ledger.verify().ok
        with ledger.engine.begin() as conn:
            body = conn.execute(text("SELECT body FROM ledger_entries WHERE seq = 1")).scalar_one()
            forged = body.replace('"cluster":"west"', '"cluster":"east"')
            assert forged != body
            conn.execute(text("UPDATE ledger_entries SET body = :b WHERE seq = 1"), {"b": forged})
        verdict = ledger.verify()
    assert verdict.chain.finding is not None
    assert (verdict.chain.finding.seq, verdict.chain.finding.kind) == (1, Tampering.CHANGED)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("west=/data/west.db", LedgerRef("/data/west.db", "west")),
        ("/data/ledger.db", LedgerRef("/data/ledger.db", None)),
        ("postgresql://u@db/ledger?sslmode=require", LedgerRef("postgresql://u@db/ledger?sslmode=require", None)),
        ("aks-weu=postgresql://u@db/x?a=b", LedgerRef("postgresql://u@db/x?a=b", "aks-weu")),
        ("West=x.db", LedgerRef("West=x.db", None)),  # not a cluster name: the whole text is a path
    ],
)
def test_a_ledger_is_a_url_or_a_cluster_name_and_a_url(given: str, expected: LedgerRef) -> None:
    assert parse_ref(given) == expected


def test_who_over_two_ledgers_names_the_cluster_of_each_holder(ledgers: dict[str, str]) -> None:
    args = ["audit", "who", "--node", "gpu-0", "--at", "2026-11-02T08:10:00Z", "--json"]
    result = runner.invoke(app, [*args, "--ledger", ledgers["west"], "--ledger", ledgers["east"]])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["cluster"], r["workload"], r["gpus"]) for r in rows] == [
        ("east", "research/train-b", 4),
        ("west", "research/train-a", 8),
    ]
    table = runner.invoke(app, [*args[:-1], "--wide", "--ledger", ledgers["west"], "--ledger", ledgers["east"]])
    assert table.exit_code == 0 and "cluster" in table.stdout and "east" in table.stdout, table.output


def test_a_name_labels_a_ledger_whose_records_name_no_cluster_and_never_overrides_one(
    tmp_path: Path, ledgers: dict[str, str]
) -> None:
    old = _ledger(tmp_path, "old", OLD)
    args = ["audit", "who", "--node", "gpu-0", "--at", "2026-11-02T08:10:00Z", "--json"]
    result = runner.invoke(app, [*args, "--ledger", f"onprem={old}", "--ledger", f"mislabelled={ledgers['west']}"])
    assert result.exit_code == 0, result.output
    assert sorted((r["cluster"], r["workload"]) for r in json.loads(result.stdout)) == [
        ("onprem", "research/train-c"),
        ("west", "research/train-a"),  # the signed name wins over the command line's
    ]


def test_why_over_two_ledgers_gives_each_clusters_account(ledgers: dict[str, str]) -> None:
    both = ["--ledger", f"west={ledgers['west']}", "--ledger", f"east={ledgers['east']}"]
    result = runner.invoke(app, ["audit", "why", "research/train-b", *both, "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["workload"] == "research/train-b"
    assert [(c["cluster"], c["uid"], len(c["attempts"]), len(c["waits"])) for c in answer["clusters"]] == [
        ("east", "e-1", 1, 1),
        ("west", "w-2", 0, 1),
    ]
    text_answer = runner.invoke(app, ["audit", "why", "research/train-b", *both])
    assert text_answer.exit_code == 0, text_answer.output
    assert text_answer.stdout.index("cluster east:") < text_answer.stdout.index("cluster west:")
    one = runner.invoke(app, ["audit", "why", "research/train-a", "--ledger", ledgers["west"], "--json"])
    assert one.exit_code == 0 and json.loads(one.stdout)["cluster"] == "west", one.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["why", "research/nobody"], "no ledger given has a workload research/nobody"),
        (["why", "research/train-a", "--ledger", "west="], "no ledger after the '='"),
        (["who", "--node", "n", "--at", "2026-11-02T08:00:00Z", "--ledger", "{west}", "--ledger", "{west}"], "twice"),
        (
            ["who", "--node", "n", "--at", "2026-11-02T08:00:00Z", "--ledger", "a={west}", "--ledger", "a={east}"],
            "twice",
        ),
    ],
)
def test_fleet_mistakes_are_located_errors(ledgers: dict[str, str], args: list[str], message: str) -> None:
    filled = [a.format(**ledgers) for a in args]
    if "--ledger" not in filled:
        filled += ["--ledger", ledgers["west"], "--ledger", ledgers["east"]]
    result = runner.invoke(app, ["audit", *filled])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_record_refuses_a_cluster_name_the_policy_could_not_hold() -> None:
    result = runner.invoke(app, ["record", "--cluster", "West_1", "--ledger", "/nonexistent/x.db"])
    assert result.exit_code == 2, result.output
    assert "--cluster" in result.output and "not a cluster name" in result.output
