"""``gpufleet backtest``: how well the forecast's p10-p90 interval holds on a trace, simulated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from gpufleet.cli.common import JsonOpt, console, counting_bar, guarded, print_table
from gpufleet.errors import InputError


def _seconds(text: str, option: str) -> int:
    from gpufleet.forecast.answer import duration_seconds

    seconds = duration_seconds(text)
    if not seconds:
        raise InputError.one(f"expected seconds or a duration such as 1d or 2d4h, got {text.strip()!r}", path=option)
    return seconds


@guarded
def backtest(
    *,
    policy: Annotated[Path, typer.Option("--policy", help="The fleet policy (YAML)")],
    trace: Annotated[
        Path,
        typer.Option(
            "--trace",
            help="A job trace in gpufleet's format (.csv or .parquet); a cluster's own: trace convert --from-ledger",
        ),
    ],
    moments: Annotated[int, typer.Option("--moments", min=1, max=200, help="Moments of the run forecast at")] = 12,
    samples: Annotated[int, typer.Option("--samples", min=1, max=1000, help="Futures sampled per forecast")] = 30,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the moments and the samples")] = 1,
    skip: Annotated[
        str, typer.Option("--skip", help="No moment in the trace's first stretch (the forecast needs finished runs)")
    ] = "1d",
    horizon: Annotated[
        str,
        typer.Option("--horizon", help="How far each forecast looks; an admission later than it is not judged"),
    ] = "6d",
    arrivals: Annotated[
        bool, typer.Option("--arrivals/--no-arrivals", help="Sample work not yet submitted from the arrivals seen")
    ] = True,
    workers: Annotated[
        int, typer.Option("--workers", min=0, help="Processes the samples run in (0: every core); same answer")
    ] = 0,
    as_json: JsonOpt = False,
) -> None:
    """How well the forecast holds on a trace: at seeded moments of its simulated run, every waiting workload forecast and judged.

    The trace is simulated once under the policy; at each moment every workload waiting then is
    forecast from what was known then (no later arrival, no unfinished job's true runtime) and its
    p10-p90 interval compared with the run's own admission. The goal is 75-85 %. Every figure is
    simulated. Checks of one moment move together: the coverage comes with its interval over moments.
    """
    from gpufleet.cli.forecast import cores
    from gpufleet.forecast.backtest import backtest as run_backtest
    from gpufleet.forecast.backtest import document, moments_of
    from gpufleet.forecast.estimate import Settings
    from gpufleet.policy import load_policy, resolve
    from gpufleet.simulate.config import SimulationConfig
    from gpufleet.trace import read_trace

    skip_s, horizon_s = _seconds(skip, "--skip"), _seconds(horizon, "--horizon")
    fleet = resolve(load_policy(policy))
    jobs = read_trace(trace)
    ats = moments_of(jobs, moments, seed, skip_s)
    settings = Settings(samples=samples, seed=seed, arrivals=arrivals, workers=workers or cores(), horizon_s=horizon_s)
    with counting_bar("{task.description}", quiet=as_json) as bar:
        simulating = bar.add_task("simulating the trace", total=len(jobs))
        forecasting = bar.add_task("forecasting at its moments", total=len(ats))
        bt = run_backtest(
            fleet,
            jobs,
            ats,
            settings=settings,
            config=SimulationConfig(),
            on_arrival=lambda n, total: bar.update(simulating, completed=n, total=total),
            on_moment=lambda n, _: bar.update(forecasting, completed=n),
        )
    doc = document(bt, str(trace), str(policy))
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    print_backtest(doc)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def _spread(r: dict[str, Any]) -> str:
    return "–" if r["overMoments"] is None else f"{r['overMoments'][0]:.0%}–{r['overMoments'][1]:.0%}"


def _rows(title: str, rows: list[dict[str, Any]], first: str) -> None:
    table = Table(title=title, title_justify="left")
    for column in (first, "judged", "80 % covers", "over moments", "median error", "censored"):
        table.add_column(column, justify="left" if column == first else "right")
    for r in rows:
        cells = (str(r["admissions"]), _pct(r["coverage"]), _spread(r), _pct(r["medianError"]), str(r["censored"]))
        table.add_row(r["label"], *cells)
    print_table(table)


def print_backtest(doc: dict[str, Any]) -> None:
    from gpufleet.durations import human

    moments = Table(title="Per moment (simulated)", title_justify="left")
    for column in ("moment", "judged", "80 % covers", "early", "late", "censored"):
        moments.add_column(column, justify="left" if column == "moment" else "right")
    for m in doc["moments"]:
        moments.add_row(
            f"{human(m['atSeconds'])} ({m['atSeconds']} s)",
            str(m["admissions"]),
            _pct(m["coverage"]),
            str(m["early"]),
            str(m["late"]),
            str(m["censored"]),
        )
    print_table(moments)
    _rows("Per team (simulated)", doc["teams"], "team")
    _rows("Per wait, the actual one from the moment (simulated)", doc["waits"], "wait")
    said = [
        f"{doc['samples']} samples per forecast (seed {doc['seed']}), horizon {human(doc['horizonSeconds'])}, "
        f"{doc['jobs']} jobs simulated under {doc['policy']}.",
        *doc["said"],
        doc["line"] + "; the goal is 75-85 %.",
    ]
    for line in said:
        console.print(line, highlight=False, soft_wrap=True)
