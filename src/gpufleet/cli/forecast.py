"""``gpufleet forecast``: when each waiting workload is expected to be admitted, with the p10–p90 of its simulated futures."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from gpufleet.cli.common import JsonOpt, console, guarded, print_table
from gpufleet.errors import InputError


@guarded
def forecast(
    *,
    policy: Annotated[Path, typer.Option("--policy", help="The fleet policy (YAML)")],
    trace: Annotated[
        Path | None,
        typer.Option("--trace", help="A job trace in gpufleet's format (.csv or .parquet); none: the live cluster"),
    ] = None,
    at: Annotated[
        str | None, typer.Option("--at", help="The moment, from the trace's start: seconds, or 2d4h30m (with --trace)")
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="The live cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster)"),
    ] = None,
    ledger: Annotated[
        str | None,
        typer.Option("--ledger", help="The ledger the runtimes come from (live): SQLite file or database URL"),
    ] = None,
    workload: Annotated[
        str | None, typer.Option("--workload", help="Only this NAMESPACE/JOB_ID (it must be waiting then)")
    ] = None,
    samples: Annotated[int, typer.Option("--samples", min=1, max=1000, help="Futures sampled")] = 40,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the samples")] = 0,
    arrivals: Annotated[
        bool, typer.Option("--arrivals/--no-arrivals", help="Sample work not yet submitted from the arrivals seen")
    ] = True,
    as_json: JsonOpt = False,
    serve: Annotated[
        str | None, typer.Option("--serve", help="Export the live forecast as Prometheus metrics on HOST:PORT")
    ] = None,
    every: Annotated[float, typer.Option("--every", min=1, help="With --serve: seconds between rounds")] = 60,
    workers: Annotated[
        int, typer.Option("--workers", min=0, help="Processes the samples run in (0: every core); same answer")
    ] = 0,
) -> None:
    """When each waiting workload is expected to be admitted: quantiles of simulated futures, what they rest on.

    With --trace and --at: every workload waiting at --at of simulating the trace under the policy,
    from the state and the ledger as of then (no later arrival, no unfinished job's true runtime).
    Without: every Workload waiting on the live cluster now, the cluster rendered from the policy,
    runtimes from the ledger (--ledger; without one, no figure)."""
    from gpufleet.forecast.answer import document, parse_time
    from gpufleet.forecast.estimate import Settings
    from gpufleet.forecast.simulated import forecast_trace
    from gpufleet.policy import load_policy, resolve
    from gpufleet.simulate.config import SimulationConfig
    from gpufleet.trace import read_trace

    settings = Settings(samples=samples, seed=seed, arrivals=arrivals, workers=workers or cores())
    if serve is not None:
        from gpufleet.cli.forecast_serve import serve_forecasts

        serve_forecasts(
            policy,
            serve,
            every,
            trace=trace,
            at=at,
            workload=workload,
            kubeconfig=kubeconfig,
            ledger=ledger,
            settings=settings,
            read_records=ledger_records,
        )
        return
    if trace is None:
        if at is not None:
            raise InputError.one("--at is a moment of a trace: give --trace too, or leave --at out", path="--at")
        from gpufleet import kube

        records = ledger_records(ledger)  # a bad ledger is refused before the cluster is asked anything
        cluster = kube.read_kueue_state(kubeconfig, with_owners=True)
        doc = live_document(
            policy, cluster.objects + cluster.owners, ledger=ledger, records=records, settings=settings,
            workload=workload, server_time=cluster.server_time,
        )  # fmt: skip
        if workload is not None and not doc["workloads"]:
            raise InputError.one(
                f"no Workload of Job {workload} waits on the cluster (`gpufleet why {workload}` says what it does)",
                path="--workload",
            )
    else:
        if at is None or kubeconfig is not None or ledger is not None:
            raise InputError.one(
                "--trace needs --at, and takes neither --kubeconfig nor --ledger (the trace's run is its own ledger)",
                path="--trace",
            )
        fleet = resolve(load_policy(policy))
        moment, jobs = parse_time(at), read_trace(trace)
        report = forecast_trace(fleet, jobs, moment, settings=settings, config=SimulationConfig(), workload=workload)
        doc = document(report, str(trace), str(policy), report.forecasts)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    print_forecast(doc)


def cores() -> int:
    """The cores this process may run on (its affinity, where the platform tells)."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def ledger_records(ledger: str | None) -> list[Any]:
    """The ledger's allocations (none without a ledger), read-only."""
    from gpufleet.ledger.store import Ledger

    if ledger is None:
        return []
    with Ledger.read(ledger) as book:
        return list(book.allocations())


def live_document(
    policy: Path,
    objects: list[dict[str, Any]],
    *,
    ledger: str | None,
    records: list[Any],
    settings: Any,
    workload: str | None = None,
    server_time: datetime | None = None,
) -> dict[str, Any]:
    """Read the ledger, forecast every waiting Workload of the live ``objects`` (or ``workload``, a
    key of ``NS/JOB``) as of the API server's ``server_time``, and return the JSON document
    (``gpufleet.forecast.live.live_document``)."""
    from gpufleet.forecast import live
    from gpufleet.forecast.clock import cluster_now
    from gpufleet.policy import load_policy, resolve
    from gpufleet.simulate.config import SimulationConfig

    fleet = resolve(load_policy(policy))
    state = live.live_state(objects, fleet, *cluster_now(server_time, datetime.now(UTC)))
    if workload is not None:  # samples stop at its admission: the same answer, sooner
        settings = replace(settings, only=frozenset({workload}))
    report = live.forecast_live(state, fleet, records, settings, SimulationConfig())
    doc = live.live_document(report, state, str(policy), ledger)
    if workload is not None:
        doc["workloads"] = [w for w in doc["workloads"] if w["workload"] == workload]
    return doc


def print_forecast(doc: dict) -> None:  # type: ignore[type-arg]
    from gpufleet.durations import human
    from gpufleet.forecast.answer import UNCALIBRATED

    b = doc["basis"]
    when = f"now ({doc['now']})" if "now" in doc else f"at {human(doc['atSeconds'])}"
    table = Table(title=f"Expected admission of the workloads waiting {when}", title_justify="left")
    for column in ("workload", "team", "waited", "p10", "p50", "p90", "waits for"):
        table.add_column(column, justify="right" if column in ("waited", "p10", "p50", "p90") else "left")
    for w in doc["workloads"]:
        q = w["admissionSeconds"] or {}
        cells = [human(q.get(k), missing="–" if w["declined"] else "not within") for k in ("p10", "p50", "p90")]
        waits = ", ".join(f"{x['workload']} ({x['share']:.0%})" for x in w["waitsFor"]) or (w["declined"] or "")
        table.add_row(w["workload"], w["team"], human(w["waitedSeconds"]), *cells, waits)
    print_table(table)
    for s in doc.get("skipped", []):
        console.print(f"left out: {s['workload']}: {s['reason']}: {s['message']}", highlight=False, soft_wrap=True)
    for s in doc.get("malformed", []):
        console.print(f"not read: {s['workload']}: {s['reason']}: {s['message']}", highlight=False, soft_wrap=True)
    if b["declined"]:
        console.print(f"No estimate: {b['declined']}", highlight=False)
        return
    sources = ", ".join(f"{k} {v}" for k, v in b["runtimeSources"].items())
    arrivals = "included (bursts per hour: " + ", ".join(f"{k} {v}" for k, v in b["arrivalBurstsPerHour"].items()) + ")"
    console.print(
        f"{b['samples']} sampled futures (seed {b['seed']}); runtimes from {b['historyFinishedRuns']} finished runs "
        f"before the moment, drawn as: {sources}; future arrivals {arrivals if b['arrivalsIncluded'] else 'not included'}."
        + ("" if doc["calibrated"] else f" The p10-p90 interval is {UNCALIBRATED}."),
        highlight=False,
        soft_wrap=True,
    )
