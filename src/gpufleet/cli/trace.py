"""``gpufleet trace``: make, convert and inspect job traces."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.table import Table

from gpufleet.cli.common import JsonOpt, console, guarded, print_table
from gpufleet.durations import human
from gpufleet.errors import InputError
from gpufleet.policy import load_policy, resolve
from gpufleet.prom import DEFAULT_TIMEOUT_S, Connection  # the option default; httpx2 only, no query
from gpufleet.trace import SynthSpec, load_spec, read_trace, synthesize, write_trace
from gpufleet.trace.summary import peak_gpus, summarize
from gpufleet.trace.synth import fleet_spec

app = typer.Typer(help="Make, convert and inspect job traces.", no_args_is_help=True)


def _is_policy(path: Path) -> bool:
    """A FleetPolicy file (``kind: FleetPolicy``) rather than a synth spec; unreadable files are the spec
    loader's to report."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and data.get("kind") == "FleetPolicy"


def _synth_spec(path: Path) -> SynthSpec:
    if _is_policy(path):
        return fleet_spec(resolve(load_policy(path)))
    return load_spec(path)


@app.command()
@guarded
def synth(
    spec: Annotated[
        Path, typer.Argument(help="A fleet policy (its teams and queued pools), or a spec YAML (docs/traces.md).")
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="Trace to write (.csv or .parquet).")],
    seed: Annotated[int, typer.Option(help="Random seed: the same seed gives the same trace.")] = 0,
    days: Annotated[int | None, typer.Option(help="Horizon in days (overrides the spec).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Synthesize a realistic, reproducible workload for the policy's (or the spec's) teams and pools."""
    loaded = _synth_spec(spec)
    if days is not None:
        if days < 1:
            raise InputError.one("--days must be >= 1")
        loaded = replace(loaded, days=days)
    jobs = synthesize(loaded, seed)
    write_trace(jobs, output)
    if as_json:
        typer.echo(json.dumps({"output": str(output), "jobs": len(jobs), "days": loaded.days, "seed": seed}, indent=2))
        return
    console.print(
        f"wrote {len(jobs)} jobs over {loaded.days} day(s) to {output} (seed {seed})", highlight=False, soft_wrap=True
    )


@app.command()
@guarded
def convert(
    source: Annotated[
        Path | None, typer.Argument(help="A native trace, or an Alibaba openb pod list with --alibaba.")
    ] = None,
    *,
    output: Annotated[Path, typer.Option("-o", "--output", help="Native trace to write (.csv or .parquet).")],
    from_ledger: Annotated[
        str | None,
        typer.Option("--from-ledger", help="A cluster's ledger (SQLite file or postgresql:// URL), read only."),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option("--policy", help="--from-ledger: the fleet policy naming teams and priority classes."),
    ] = None,
    alibaba: Annotated[bool, typer.Option(help="Read an Alibaba cluster-trace-gpu-v2023 pod list.")] = False,
    compression: Annotated[float, typer.Option(help="Alibaba only: divide arrival times by this.")] = 1.0,
    team: Annotated[str, typer.Option(help="Alibaba only: the team the pods belong to.")] = "openb",
    as_json: JsonOpt = False,
) -> None:
    """Convert a trace into the native format (CSV <-> Parquet, from the Alibaba trace, or from a ledger)."""
    if (source is None) == (from_ledger is None):
        raise InputError.one("give a trace file to convert or --from-ledger URL (one of them)", path="SOURCE")
    if from_ledger is not None:
        from gpufleet.trace.from_ledger import read_allocations
        from gpufleet.trace.from_ledger import to_jobs as ledger_jobs  # SQLAlchemy: only for a ledger

        fleet_policy = load_policy(policy) if policy is not None else None
        converted = ledger_jobs(read_allocations(from_ledger), fleet_policy, from_ledger)
        write_trace(converted.jobs, output)
        left = {"unfinished": converted.unfinished, "withoutGpus": converted.without_gpus}
        if as_json:
            document = {"output": str(output), "jobs": len(converted.jobs), "workloads": converted.workloads}
            typer.echo(json.dumps({**document, "leftOut": left, "simulated": converted.simulated}, indent=2))
            return
        console.print(
            f"wrote {len(converted.jobs)} jobs to {output} from {converted.workloads} workloads in the ledger "
            f"(left out: {converted.unfinished} without a finished attempt, {converted.without_gpus} without GPUs)",
            highlight=False,
            soft_wrap=True,
        )
        return
    assert source is not None
    from gpufleet.trace.alibaba import read_pods, to_jobs

    jobs = to_jobs(read_pods(source), compression, team, str(source)) if alibaba else read_trace(source)
    write_trace(jobs, output)
    if as_json:
        typer.echo(json.dumps({"output": str(output), "jobs": len(jobs)}, indent=2))
        return
    console.print(f"wrote {len(jobs)} jobs to {output}", highlight=False, soft_wrap=True)


@app.command("from-prometheus")
@guarded
def from_prometheus(
    url: Annotated[str, typer.Argument(help="Prometheus base URL, e.g. http://prometheus:9090", show_default=False)],
    *,
    start: Annotated[str, typer.Option("--from", help="Window start (ISO 8601; no offset means UTC)")],
    end: Annotated[str, typer.Option("--to", help="Window end (ISO 8601; no offset means UTC)")],
    policy: Annotated[Path, typer.Option("--policy", help="The fleet policy: namespaces → teams, nodes → GPU models")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Native trace to write (.csv or .parquet).")],
    token: Annotated[
        str | None, typer.Option("--token", envvar="GPUFLEET_PROMETHEUS_TOKEN", help="Bearer token", show_default=False)
    ] = None,
    ca_file: Annotated[Path | None, typer.Option("--ca-file", help="CA bundle for an https Prometheus")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per query", min=1)] = DEFAULT_TIMEOUT_S,
    as_json: JsonOpt = False,
) -> None:
    """A cluster's history before any queue, from kube-state-metrics in its Prometheus, as a trace."""
    from gpufleet.evidence.window import parse_time
    from gpufleet.trace.from_prometheus import read_prometheus

    since, until = parse_time(start, option="--from"), parse_time(end, option="--to")
    if until <= since:
        raise InputError.one(f"--to {end} must be after --from {start}", path="--to")
    fleet_policy = load_policy(policy)
    got = read_prometheus(Connection(url, token, ca_file, timeout), since, until, fleet_policy)
    write_trace(got.jobs, output)
    if as_json:
        left = {"unfinished": got.unfinished, "otherNamespaces": got.other_namespaces}
        typer.echo(
            json.dumps({"output": str(output), "jobs": len(got.jobs), "pods": got.pods, "leftOut": left}, indent=2)
        )
        return
    console.print(
        f"wrote {len(got.jobs)} jobs ({got.pods} pods with GPU requests) to {output}; left out: {got.unfinished} "
        f"jobs not completed in the window, {got.other_namespaces} pods of namespaces no team owns",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
@guarded
def show(
    trace: Annotated[Path, typer.Argument(help="A native trace (.csv or .parquet).")],
    as_json: JsonOpt = False,
) -> None:
    """Summarize a trace: jobs, pods and GPU-hours per team and kind."""
    jobs = read_trace(trace)
    rows = summarize(jobs)
    span = max(j.submit_s for j in jobs) - min(j.submit_s for j in jobs) if jobs else 0
    peak = peak_gpus(jobs) if jobs else 0.0
    if as_json:
        document = {
            "trace": str(trace),
            "jobs": len(jobs),
            "submitSpanSeconds": span,
            "peakGpus": peak,
            "rows": [
                {"team": r.team, "kind": r.kind, "jobs": r.jobs, "pods": r.pods, "gpuHours": r.gpu_hours} for r in rows
            ],
        }
        typer.echo(json.dumps(document, indent=2))
        return
    table = Table(title=f"{trace.name}: {len(jobs)} jobs")
    for name in ("team", "kind", "jobs", "pods", "GPU-hours"):
        table.add_column(name, justify="right" if name[0].isupper() or name in ("jobs", "pods") else "left")
    for row in rows:
        table.add_row(row.team, row.kind, str(row.jobs), str(row.pods), f"{row.gpu_hours:,.1f}")
    print_table(table)
    if jobs:
        console.print(f"submits span {human(span)}; peak demand {peak:,.1f} GPUs if none waited", highlight=False)
