"""``gpufleet forecast``: when each waiting workload is expected to be admitted, with the p10–p90 of its simulated futures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gpufleet.cli.common import JsonOpt, console, guarded, print_table


@guarded
def forecast(
    *,
    policy: Annotated[Path, typer.Option("--policy", help="The fleet policy (YAML)")],
    trace: Annotated[Path, typer.Option("--trace", help="A job trace in gpufleet's format (.csv or .parquet)")],
    at: Annotated[str, typer.Option("--at", help="The moment, from the trace's start: seconds, or 2d4h30m")],
    workload: Annotated[
        str | None, typer.Option("--workload", help="Only this NAMESPACE/JOB_ID (it must be waiting then)")
    ] = None,
    samples: Annotated[int, typer.Option("--samples", min=1, max=1000, help="Futures sampled")] = 40,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the samples")] = 0,
    arrivals: Annotated[
        bool, typer.Option("--arrivals/--no-arrivals", help="Sample work not yet submitted from the arrivals seen")
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """When each waiting workload is expected to be admitted: quantiles of simulated futures, what they rest on.

    Every workload waiting at --at of simulating the trace under the policy, from the state and the
    ledger as of then (no later arrival, no unfinished job's true runtime)."""
    from gpufleet.forecast.answer import document, parse_time
    from gpufleet.forecast.estimate import Settings
    from gpufleet.forecast.simulated import forecast_trace
    from gpufleet.policy import load_policy, resolve
    from gpufleet.simulate.config import SimulationConfig
    from gpufleet.trace import read_trace

    moment = parse_time(at)
    fleet = resolve(load_policy(policy))
    jobs = read_trace(trace)
    settings = Settings(samples=samples, seed=seed, arrivals=arrivals)
    report = forecast_trace(fleet, jobs, moment, settings=settings, config=SimulationConfig(), workload=workload)
    doc = document(report, str(trace), str(policy), report.forecasts)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    print_forecast(doc)


def print_forecast(doc: dict) -> None:  # type: ignore[type-arg]
    from gpufleet.durations import human
    from gpufleet.forecast.answer import UNCALIBRATED

    b = doc["basis"]
    table = Table(
        title=f"Expected admission of the workloads waiting at {human(doc['atSeconds'])}", title_justify="left"
    )
    for column in ("workload", "team", "waited", "p10", "p50", "p90", "waits for"):
        table.add_column(column, justify="right" if column in ("waited", "p10", "p50", "p90") else "left")
    for w in doc["workloads"]:
        q = w["admissionSeconds"] or {}
        cells = [human(q.get(k), missing="–" if w["declined"] else "not within") for k in ("p10", "p50", "p90")]
        waits = ", ".join(f"{x['workload']} ({x['share']:.0%})" for x in w["waitsFor"]) or (w["declined"] or "")
        table.add_row(w["workload"], w["team"], human(w["waitedSeconds"]), *cells, waits)
    print_table(table)
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
