"""``gpufleet evidence``: utilization before and after, measured from Prometheus or not at all."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpufleet.cli.common import (
    ForceOpt,
    JsonOpt,
    LegacyOut,
    console,
    err_console,
    guarded,
    output_option,
    pick_output,
    print_kept,
    print_table,
)
from gpufleet.durations import human
from gpufleet.evidence import (
    DEFAULT_MIN_COVERAGE,
    FIGURES,
    Evidence,
    Settings,
    WindowInput,
    assemble,
    cell_text,
    check_order,
    collect,
    from_policy,
    ledger_join,
    parse_window,
    select_pools,
    write,
)
from gpufleet.evidence.output import LABELS, as_dict, check_target
from gpufleet.evidence.window import Window
from gpufleet.policy import load_policy, resolve
from gpufleet.prom import DEFAULT_TIMEOUT_S, Connection, PromClient

DEFAULT_SCRAPE_S = 30


@guarded
def evidence(
    *,
    prometheus: Annotated[str, typer.Option("--prometheus", help="Prometheus base URL, e.g. http://prometheus:9090")],
    before: Annotated[str, typer.Option("--before", help="FROM..TO (ISO 8601; no offset means UTC)")],
    after: Annotated[str, typer.Option("--after", help="FROM..TO (ISO 8601; no offset means UTC)")],
    policy: Annotated[
        Path | None, typer.Option("--policy", help="Fleet policy: pools by node names, teams by namespaces")
    ] = None,
    output: Annotated[
        Path | None, output_option("Folder for evidence.json, the charts and the page [default: evidence]")
    ] = None,
    pool: Annotated[list[str] | None, typer.Option("--pool", help="Only this pool (repeatable)")] = None,
    scrape_interval: Annotated[
        int, typer.Option("--scrape-interval", help="Seconds between DCGM scrapes: the coverage grid", min=1)
    ] = DEFAULT_SCRAPE_S,
    min_coverage: Annotated[
        float,
        typer.Option("--min-coverage", help="Share of the window a figure's series must cover", min=0.01, max=1.0),
    ] = DEFAULT_MIN_COVERAGE,
    token: Annotated[
        str | None, typer.Option("--token", envvar="GPUFLEET_PROMETHEUS_TOKEN", help="Bearer token", show_default=False)
    ] = None,
    ca_file: Annotated[Path | None, typer.Option("--ca-file", help="CA bundle for an https Prometheus")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per query", min=1)] = DEFAULT_TIMEOUT_S,
    exporter_namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--exporter-namespace",
            help="dcgm-exporter's own namespace, when Prometheus labels its series with it (repeatable)",
        ),
    ] = None,
    ledger: Annotated[
        str | None,
        typer.Option("--ledger", help="Ledger (SQLite path or database URL): allocations and waits from it"),
    ] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
    legacy_out: LegacyOut = None,
) -> None:
    """Utilization per pool and team before and after, from DCGM metrics in Prometheus; gaps read "not measured"."""
    out = pick_output(output, legacy_out, Path("evidence"))
    now = datetime.now(UTC)
    windows = (
        parse_window("before", before, step_s=scrape_interval, now=now),
        parse_window("after", after, step_s=scrape_interval, now=now),
    )
    check_order(*windows)
    target = check_target(out, force=force)
    fmap = from_policy(resolve(load_policy(policy))) if policy is not None else None
    if fmap is not None:
        fmap = select_pools(fmap, pool or [])  # a policy's pools are known before any query
    view = ledger_join.read(ledger, windows) if ledger is not None else None
    conn = Connection(url=prometheus, token=token, ca_file=ca_file, timeout_s=timeout)
    inputs = asyncio.run(_fetch(conn, windows, quiet=as_json))
    result = assemble(
        *inputs,
        fmap=fmap,
        pools=pool or [],
        ledger=view,
        settings=Settings(min_coverage=min_coverage),
        source=prometheus,
        simulated=False,
        exporters=frozenset(exporter_namespace or ()),
    )
    paths = write(result, out, force=force)
    if as_json:
        extra = {"output": str(target.path), "files": [str(p) for p in paths]}
        typer.echo(json.dumps(as_dict(result) | extra, indent=2))
        return
    print_evidence(result)
    console.print("wrote " + ", ".join(str(p) for p in paths), highlight=False, soft_wrap=True)
    print_kept(target)


async def _fetch(
    conn: Connection, windows: tuple[Window, Window], *, quiet: bool = False
) -> tuple[WindowInput, WindowInput]:
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=quiet,
    ) as bar:
        task = bar.add_task("querying Prometheus")

        def step(text: str) -> None:
            bar.update(task, description=f"querying Prometheus: {text}")

        async with PromClient(conn) as prom:
            first = await collect(prom, windows[0], step)
            second = await collect(prom, windows[1], step)
    return first, second


def print_evidence(result: Evidence) -> None:
    mark = " [yellow](simulated)[/]" if result.simulated else ""
    for w in (result.before, result.after):
        table = Table(
            title=f"{w.window.name}: {w.window.label()} ({w.window.slots} × {human(w.window.step_s)}){mark}",
            title_justify="left",
        )
        table.add_column("pool")
        table.add_column("team")
        for figure in FIGURES:
            table.add_column(LABELS[figure], overflow="fold")
        for row in w.rows:
            cells = [cell_text(row.cells.get(f), result.simulated) for f in FIGURES]
            styled = [f"[dim red]{c}[/]" if c.startswith("not measured") else c for c in cells]
            table.add_row(row.pool if row.team is None else "", row.team or "[bold](pool)[/]", *styled)
        print_table(table)
        for note in w.notes:
            console.print(f"  note: {note}", highlight=False)
    changes = Table(title=f"Change, before → after{mark}", title_justify="left")
    for col in ("pool", "team", "figure", "verdict", "statement"):
        changes.add_column(col, overflow="fold")
    for c in result.changes:
        changes.add_row(c.pool, c.team or "(pool)", c.figure, c.verdict, c.statement)
    print_table(changes)
    console.print(
        f"A figure needs its series to cover ≥ {result.min_coverage:.0%} of the window at the scrape interval; "
        "'not measured' gives the reason (evidence.html lists each one).",
        highlight=False,
    )
