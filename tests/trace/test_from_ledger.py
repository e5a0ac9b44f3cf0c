"""``trace convert --from-ledger``: a ledger's workloads back into a trace, on SQLite and PostgreSQL.

The ledger is written by simulating jobs worked out by hand on a tiny fleet (the recorder writes the
same records from a real cluster); converting it must give back what each job asked for, when it
was submitted and how long it ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.ledger.store import Ledger
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.run import simulate
from gpufleet.trace import Job, JobKind, read_trace
from tests.ledger.conftest import postgres_url
from tests.ledger.ledger_pgserver import create_database
from tests.tune.cases import LIMITED, job, policy

__all__ = ["postgres_url"]  # the ledger tests' real PostgreSQL server, reused

runner = CliRunner()
HOUR = 3600


def _jobs() -> list:
    gang = Job("gang", "b", "b", 600, 2 * HOUR, JobKind.TRAINING, pods=2, gpus=2, priority_class="batch")
    return [job("one", "a", 0, HOUR), job("two", "a", 0, HOUR), job("three", "a", 60, HOUR), gang]


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return create_database(request.getfixturevalue("postgres_url"), "trace_from_ledger")


def test_a_ledger_converts_back_to_the_jobs_that_ran(tmp_path: Path, ledger_url: str) -> None:
    from gpufleet.policy import resolve

    run = simulate(resolve(policy()), _jobs(), SimulationConfig(mode=Mode.QUEUE))
    with Ledger.open(ledger_url) as ledger:
        ledger.append(run.records)
    (tmp_path / "policy.yaml").write_text(LIMITED)
    out = tmp_path / "trace.csv"
    args = ["trace", "convert", "--from-ledger", ledger_url, "--policy", str(tmp_path / "policy.yaml")]
    result = runner.invoke(app, [*args, "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["jobs"] == 4 and doc["workloads"] == 4 and doc["simulated"] == 4
    back = {j.job_id: j for j in read_trace(out)}
    assert set(back) == {"one", "two", "three", "gang"}
    for original in _jobs():
        j = back[original.job_id]
        assert (j.team, j.namespace, j.submit_s, j.duration_s) == (
            original.team,
            original.namespace,
            original.submit_s,
            original.duration_s,
        )
        assert j.pods * j.gpus == original.pods * original.gpus
        assert j.priority_class == "batch"  # the policy's class of value 100
        assert j.gpu_models in ((), ("H100-SXM5-80GB",))
    # the ledger knows no kind: four cards (two pods on the one node) read as training, one card as batch-eval
    assert back["gang"].kind is JobKind.TRAINING
    assert {back[n].kind for n in ("one", "two", "three")} == {JobKind.BATCH_EVAL}


def test_a_missing_ledger_file_is_refused_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nope.sqlite"
    result = runner.invoke(app, ["trace", "convert", "--from-ledger", str(missing), "-o", str(tmp_path / "t.csv")])
    assert result.exit_code == 2 and "no such ledger file" in result.output
    assert not missing.exists() and not (tmp_path / "t.csv").exists()
    both = runner.invoke(app, ["trace", "convert", "x.csv", "--from-ledger", str(missing), "-o", "t.csv"])
    assert both.exit_code == 2
