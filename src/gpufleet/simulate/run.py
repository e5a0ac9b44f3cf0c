"""One call per question: simulate a policy against a trace in one world, or in both, and write
everything a person or a tool reads afterwards into one folder."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpufleet.ledger.records import Record, to_plain
from gpufleet.policy import Fleet
from gpufleet.report import ReportFiles, write_report
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.engine import Outcome, Progress, Simulation
from gpufleet.simulate.metrics import summarize
from gpufleet.simulate.records import job_rows, ledger_records
from gpufleet.trace.job import Job

SCHEMA = "gpufleet.io/simulate/v1"


@dataclass(frozen=True)
class RunResult:
    name: str  # "queue" or "first-apply"
    outcome: Outcome
    summary: dict[str, Any]
    records: list[Record]
    rows: list[dict[str, Any]]


def simulate(
    fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig, progress: Progress | None = None
) -> RunResult:
    outcome = Simulation(fleet, jobs, config, progress).run()
    name = config.mode.value
    return RunResult(name, outcome, summarize(outcome), ledger_records(outcome, name), job_rows(outcome, name))


def compare(
    fleet: Fleet,
    jobs: Sequence[Job],
    config: SimulationConfig,
    modes: Sequence[Mode],
    progress: Progress | None = None,
) -> list[RunResult]:
    """The same trace in each world, first-apply first (the "before"), then the queue (the "after")."""
    ordered = sorted(set(modes), key=lambda m: m is Mode.QUEUE)
    return [simulate(fleet, jobs, replace(config, mode=mode), progress) for mode in ordered]


def results_document(fleet: Fleet, trace: str, jobs: int, results: Sequence[RunResult]) -> dict[str, Any]:
    """results.json: the stable, documented summary of every run (docs/simulate.md)."""
    policy = fleet.policy
    return {
        "schema": SCHEMA,
        "trace": {"source": trace, "jobs": jobs},
        "fleet": {
            "pools": {name: cap.pool.gpu_count for name, cap in fleet.pools.items()},
            "teams": {t.name: float(t.weight) for t in policy.teams},
            "serving": policy.serving.pool if policy.serving else None,
        },
        "runs": {r.name: r.summary for r in results},
    }


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


@dataclass(frozen=True)
class Written:
    results: Path
    allocations: Path
    report: ReportFiles


def write_outputs(out: Path, document: dict[str, Any], results: Sequence[RunResult]) -> Written:
    """results.json, the ledger records as JSON lines, the per-job table, the charts and report.html."""
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.json"
    _atomic_write(results_path, json.dumps(document, indent=2, sort_keys=False) + "\n")
    allocations = out / "allocations.jsonl"
    lines = [json.dumps(to_plain(rec), sort_keys=True) for r in results for rec in r.records]
    _atomic_write(allocations, "\n".join(lines) + ("\n" if lines else ""))
    rows = [row for r in results for row in r.rows]
    report = write_report(document, rows, out)
    return Written(results_path, allocations, report)
