"""Allocations and waits from the ledger, joined with the real Prometheus' DCGM series.

The ledger here is a real SQLite ledger written through the ledger's own API. Expected figures are
worked out by hand from evidence_scenario.py (before window: node-a gpu1 idle and held by nobody).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from evidence_scenario import LivePrometheus
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.ledger.records import Allocation, Placement, WaitInterval
from gpufleet.ledger.store import Ledger

runner = CliRunner()
POLICY = Path(__file__).with_name("fleet.yaml")
SLOT_H = 30 / 3600
pytestmark = pytest.mark.xdist_group("prometheus")


def _allocation(ns: str, node: str, resource: str, count: int, start: datetime, end: datetime, sim: bool) -> Allocation:
    return Allocation(
        workload_uid=f"uid-{ns}-{node}",
        attempt=1,
        namespace=ns,
        name=f"job-{ns}",
        team=ns,
        model=None,
        data_class=None,
        checkpoint=None,
        local_queue=ns,
        cluster_queue=ns,
        priority=100,
        flavors=((resource, "flavor"),),
        gpu_resource=resource,
        gpu_count=count,
        placements=(Placement(node, count),),
        created=start - timedelta(minutes=10),
        quota_reserved=start,
        admitted=start,
        started=start,
        finished=end,
        end_reason=None,
        end_detail="",
        end_message="",
        borrowing=False,
        simulated=sim,
    )


def _ledger(path: Path, prom: LivePrometheus, *, simulated: bool) -> str:
    b0 = prom.windows.before_start
    records = [
        # research holds one H100 on node-a for the first hour of the before window
        _allocation("research", "node-a", "nvidia.com/gpu", 1, b0, b0 + timedelta(hours=1), simulated),
        # nlp holds a 2g.20gb MIG instance for the whole before window
        _allocation("nlp", "node-b", "nvidia.com/mig-2g.20gb", 1, b0, b0 + timedelta(hours=2), simulated),
        # vision waits from 1:00 to 1:30 into the before window
        WaitInterval(
            workload_uid="uid-v",
            index=0,
            namespace="vision",
            name="job-v",
            team="vision",
            local_queue="vision",
            reason="WaitingForQuota",
            message="insufficient unused quota",
            start=b0 + timedelta(hours=1),
            end=b0 + timedelta(hours=1, minutes=30),
            simulated=simulated,
        ),
    ]
    with Ledger.open(str(path)) as ledger:
        ledger.append(records)
    return str(path)


def _run(prom: LivePrometheus, tmp_path: Path, ledger: str) -> tuple[Any, str]:
    out = tmp_path / "out"
    w = prom.windows
    args = ["evidence", "--prometheus", prom.url, "--before", w.before, "--after", w.after]
    result = runner.invoke(app, [*args, "--policy", str(POLICY), "--ledger", ledger, "-o", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads((out / "evidence.json").read_text()), result.output


def _cell(data: Any, window: str, pool: str, team: str | None, figure: str) -> dict[str, Any]:
    row = next(r for r in data["windows"][window]["rows"] if r["pool"] == pool and r["team"] == team)
    return row["figures"][figure]


@pytest.mark.parametrize(
    ("window", "pool", "team", "figure", "expected"),
    [
        ("before", "train", None, "allocated", 1 * 1.0),
        ("before", "train", "research", "allocated", 1 * 1.0),
        ("before", "mig", None, "allocated", 2 / 7 * 2.0),
        ("before", "mig", "nlp", "allocated", 2 / 7 * 2.0),
        ("before", "mig", "research", "allocated", "NoSeries"),
        ("after", "train", None, "allocated", 0.0),  # the ledger records nothing after: nothing was held
        # vision waited 60 slots; meanwhile node-a gpu1 was held by nobody (gpu0 by research)
        ("before", "train", None, "idle_while_work_waited", 1 * 60 * SLOT_H),
        ("before", "train", "vision", "idle_while_work_waited", 1 * 60 * SLOT_H),
        ("before", "train", "research", "idle_while_work_waited", 0.0),  # research never waited
        ("before", "dev", None, "idle_while_work_waited", 0.0),  # the dev card was held all along
        ("before", "mig", None, "idle_while_work_waited", "Gaps"),
        ("after", "mig", None, "idle_while_work_waited", "MissingLabels"),
    ],
    ids=lambda v: "pool" if v is None else str(v) if not isinstance(v, float) else f"{v:g}",
)
def test_ledger_allocations_and_waits(
    prometheus: LivePrometheus,
    tmp_path: Path,
    window: str,
    pool: str,
    team: str | None,
    figure: str,
    expected: float | str,
) -> None:
    data, _ = _run(prometheus, tmp_path, _ledger(tmp_path / "ledger.db", prometheus, simulated=False))
    cell = _cell(data, window, pool, team, figure)
    if isinstance(expected, str):
        assert cell["reason"] == expected, cell
    else:
        assert cell["value"] == pytest.approx(expected), cell
        if figure == "allocated":
            assert cell["source"] == "ledger"


def test_simulated_records_mark_every_figure(prometheus: LivePrometheus, tmp_path: Path) -> None:
    data, output = _run(prometheus, tmp_path, _ledger(tmp_path / "ledger.db", prometheus, simulated=True))
    assert data["simulated"] is True
    cells = [c for w in data["windows"].values() for r in w["rows"] for c in r["figures"].values()]
    assert all(c.get("simulated") is True for c in cells)
    assert all(c.get("simulated") is True for c in data["changes"])
    assert "(simulated)" in output
    html = (tmp_path / "out" / "evidence.html").read_text()
    assert "Every figure below is simulated" in html


def test_a_real_ledger_is_not_marked_simulated(prometheus: LivePrometheus, tmp_path: Path) -> None:
    data, output = _run(prometheus, tmp_path, _ledger(tmp_path / "ledger.db", prometheus, simulated=False))
    assert data["simulated"] is False
    assert "simulated" not in output


def test_a_missing_ledger_file_is_an_error_and_is_not_created(prometheus: LivePrometheus, tmp_path: Path) -> None:
    w = prometheus.windows
    missing = tmp_path / "nope.db"
    args = ["evidence", "--prometheus", prometheus.url, "--before", w.before, "--after", w.after]
    result = runner.invoke(app, [*args, "--ledger", str(missing), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "no ledger at" in " ".join(result.output.split())
    assert not missing.exists() and not (tmp_path / "out").exists()
