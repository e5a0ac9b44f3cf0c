"""One call per question: simulate a policy against a trace in one world, or in both, and write
everything a person or a tool reads afterwards into one folder."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpufleet.ledger.records import to_plain
from gpufleet.outputs import replace_folder
from gpufleet.policy import Fleet
from gpufleet.report import ReportFiles, write_report
from gpufleet.simulate.config import Mode, SimulationConfig, for_policy
from gpufleet.simulate.engine import Progress, Simulation
from gpufleet.simulate.first_apply import FirstApplyWorld
from gpufleet.simulate.measures import Measures, as_dict, common_window, measure
from gpufleet.simulate.metrics import summarize
from gpufleet.simulate.pathologies import Finding, diagnose
from gpufleet.simulate.queue_world import QueueWorld
from gpufleet.simulate.records import job_rows, ledger_records
from gpufleet.simulate.result import RunResult
from gpufleet.trace.job import Job

SCHEMA = "gpufleet.io/simulate/v1"


WORLDS: dict[Mode, type[Simulation]] = {Mode.QUEUE: QueueWorld, Mode.FIRST_APPLY: FirstApplyWorld}


def simulate(
    fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig, progress: Progress | None = None
) -> RunResult:
    config = for_policy(config, fleet.policy)  # the timeout Kueue runs with, when the policy sets one
    outcome = WORLDS[config.mode](fleet, jobs, config, progress).run()
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


@dataclass(frozen=True)
class Assessment:
    """One run judged: its measures over the common window and the pathologies it shows."""

    result: RunResult
    measures: Measures
    findings: list[Finding]


def assess(fleet: Fleet, results: Sequence[RunResult], window: tuple[int, int] | None = None) -> list[Assessment]:
    """Every run's measures over one window (``common_window`` unless given) and its findings."""
    span = common_window(results) if window is None else window
    out = []
    for r in results:
        m = measure(r, fleet, span)
        out.append(Assessment(r, m, diagnose(r, fleet, m)))
    return out


def results_document(
    fleet: Fleet,
    trace: str,
    jobs: int,
    results: Sequence[RunResult],
    assessments: Sequence[Assessment] | None = None,
) -> dict[str, Any]:
    """results.json: the stable, documented summary of every run (docs/simulate.md)."""
    policy = fleet.policy
    judged = list(assessments) if assessments is not None else assess(fleet, results)
    window = judged[0].measures.window_s if judged else (0, 0)
    return {
        "schema": SCHEMA,
        "trace": {"source": trace, "jobs": jobs},
        "fleet": {
            "pools": {name: cap.pool.gpu_count for name, cap in fleet.pools.items()},
            "teams": {t.name: float(t.weight) for t in policy.teams},
            "serving": policy.serving.pool if policy.serving else None,
        },
        "window": {"startSeconds": window[0], "endSeconds": window[1]},
        "measures": {a.result.name: as_dict(a.measures) for a in judged},
        "findings": {a.result.name: [f.as_dict() for f in a.findings] for a in judged},
        "runs": {r.name: r.summary for r in results},
    }


@dataclass(frozen=True)
class Written:
    results: Path
    allocations: Path
    report: ReportFiles

    def moved(self, old: Path, new: Path) -> Written:
        """The same files, after ``old`` (the folder they were written in) became ``new``."""

        def at(p: Path) -> Path:
            return new / p.relative_to(old)

        r = self.report
        report = ReportFiles(at(r.html), at(r.csv), at(r.parquet), tuple(at(c) for c in r.charts))
        return Written(at(self.results), at(self.allocations), report)


def write_into(folder: Path, document: dict[str, Any], results: Sequence[RunResult]) -> Written:
    """results.json, the ledger records as JSON lines, the per-job table, the charts and report.html."""
    folder.mkdir(parents=True, exist_ok=True)
    results_path = folder / "results.json"
    results_path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    allocations = folder / "allocations.jsonl"
    lines = [json.dumps(to_plain(rec), sort_keys=True) for r in results for rec in r.records]
    allocations.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
    rows = [row for r in results for row in r.rows]
    report = write_report(document, rows, folder)
    return Written(results_path, allocations, report)


def write_outputs(out: Path, document: dict[str, Any], results: Sequence[RunResult], *, force: bool = False) -> Written:
    """Everything ``write_into`` writes, in a folder beside ``out`` renamed into place at the end.

    A killed run leaves the previous output (or none), never a folder with only results.json in it;
    ``out`` is replaced only when it is missing, empty or an earlier gpufleet output (``gpufleet.outputs``).
    """
    with replace_folder(out, "simulate", force=force) as staging:
        written = write_into(staging, document, results)
    return written.moved(staging, out)  # the paths as the caller named them
