"""Reports: values in, files out. ``write_report`` turns a simulation's results document and its
per-job rows into the per-job table, PNG charts and one self-contained report.html."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet.files import atomic_path
from gpufleet.report.html import render_html

__all__ = ["ReportFiles", "write_report"]


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    csv: Path
    parquet: Path
    charts: tuple[Path, ...]


def _write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_report(document: Mapping[str, Any], rows: Sequence[dict[str, Any]], out: Path) -> ReportFiles:
    """Write ``jobs.csv``, ``jobs.parquet``, ``charts/*.png`` and ``report.html`` into ``out``."""
    # matplotlib and polars load here, when a report is written, not with the CLI: they were a
    # second of every command's start-up, `gpufleet --version` and `webhook serve` included
    from gpufleet.report import charts
    from gpufleet.report.tables import write_table

    out.mkdir(parents=True, exist_ok=True)
    runs: Mapping[str, Any] = document["runs"]
    first = next(iter(runs.values()))
    teams = list(first["teams"])
    capacity = float(first["fleet"]["capacityGpus"])
    images = [
        ("waits-per-team", "Wait per team", charts.waits_per_team(runs, teams)),
        ("utilization", "GPUs held over time by team", charts.utilization_over_time(runs, teams, capacity)),
        ("queue-length", "Queue length over time", charts.queue_length(runs)),
        ("share-vs-weight", "Share against weight", charts.share_vs_weight(runs, teams)),
    ]
    chart_dir = out / "charts"
    chart_dir.mkdir(exist_ok=True)
    paths = []
    for stem, _, png in images:
        path = chart_dir / f"{stem}.png"
        _write_bytes(path, png)
        paths.append(path)
    csv, parquet = out / "jobs.csv", out / "jobs.parquet"
    write_table(rows, csv, parquet)
    html = out / "report.html"
    _write_bytes(html, render_html(document, [(title, png) for _, title, png in images]).encode("utf-8"))
    return ReportFiles(html, csv, parquet, tuple(paths))
