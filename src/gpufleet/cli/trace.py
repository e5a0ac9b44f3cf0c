"""``gpufleet trace``: make, convert and inspect job traces."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gpufleet.cli.common import console, guarded
from gpufleet.errors import InputError
from gpufleet.trace import load_spec, read_trace, synthesize, write_trace
from gpufleet.trace.alibaba import read_pods, to_jobs
from gpufleet.trace.summary import peak_gpus, summarize

app = typer.Typer(help="Make, convert and inspect job traces.", no_args_is_help=True)


@app.command()
@guarded
def synth(
    spec: Annotated[Path, typer.Argument(help="Spec YAML: teams, pools, load (see docs/traces.md).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Trace to write (.csv or .parquet).")],
    seed: Annotated[int, typer.Option(help="Random seed: the same seed gives the same trace.")] = 0,
    days: Annotated[int | None, typer.Option(help="Horizon in days (overrides the spec).")] = None,
) -> None:
    """Synthesize a realistic, reproducible workload for the spec's teams and pools."""
    loaded = load_spec(spec)
    if days is not None:
        if days < 1:
            raise InputError.one("--days must be >= 1")
        loaded = replace(loaded, days=days)
    jobs = synthesize(loaded, seed)
    write_trace(jobs, output)
    console.print(f"wrote {len(jobs)} jobs over {loaded.days} day(s) to {output} (seed {seed})")


@app.command()
@guarded
def convert(
    source: Annotated[
        Path, typer.Argument(help="A native trace, or an Alibaba openb pod list with --alibaba.")
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="Native trace to write (.csv or .parquet).")],
    alibaba: Annotated[bool, typer.Option(help="Read an Alibaba cluster-trace-gpu-v2023 pod list.")] = False,
    compression: Annotated[float, typer.Option(help="Alibaba only: divide arrival times by this.")] = 1.0,
    team: Annotated[str, typer.Option(help="Alibaba only: the team the pods belong to.")] = "openb",
) -> None:
    """Convert a trace into the native format (CSV <-> Parquet, or from the Alibaba trace)."""
    jobs = to_jobs(read_pods(source), compression, team, str(source)) if alibaba else read_trace(source)
    write_trace(jobs, output)
    console.print(f"wrote {len(jobs)} jobs to {output}")


@app.command()
@guarded
def show(trace: Annotated[Path, typer.Argument(help="A native trace (.csv or .parquet).")]) -> None:
    """Summarize a trace: jobs, pods and GPU-hours per team and kind."""
    jobs = read_trace(trace)
    table = Table(title=f"{trace.name}: {len(jobs)} jobs")
    for name in ("team", "kind", "jobs", "pods", "GPU-hours"):
        table.add_column(name, justify="right" if name[0].isupper() or name in ("jobs", "pods") else "left")
    for row in summarize(jobs):
        table.add_row(row.team, row.kind, str(row.jobs), str(row.pods), f"{row.gpu_hours:,.1f}")
    console.print(table)
    if jobs:
        span = max(j.submit_s for j in jobs) - min(j.submit_s for j in jobs)
        console.print(
            f"submits span {span / 86400:.2f} days; peak demand {peak_gpus(jobs):,.1f} GPUs if none waited"
        )
