"""``gpufleet demo``: the product's main job on the bundled example, end to end, with no cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpufleet.cli.common import console, guarded
from gpufleet.cli.policy import print_plan
from gpufleet.cli.simulate import print_comparison, progress_bar
from gpufleet.demo import DAYS, run_demo


@guarded
def demo(
    out: Annotated[Path, typer.Option("-o", "--out", help="Folder for everything the demo produces")] = Path(
        "demo-out"
    ),
) -> None:
    """Run the whole chain on the bundled example: plan, render, simulate a week both ways, report.

    A synthetic week for the example's teams is simulated without the queue (first apply) and with
    it; the simulated allocations go into a SQLite ledger and the report into one HTML page."""
    with progress_bar(2) as update:
        result = run_demo(out, update)
    print_plan(result.plan)
    console.print()
    print_comparison(result.results)
    w = result.written
    console.print(f"\n[bold]Demo output in {out}/[/]")
    console.print(f"  policy      {result.policy}")
    console.print(f"  plan        {result.plan_json}")
    console.print(f"  manifests   {out / 'manifests'}/ ({len(result.manifests)} files: kubectl apply -k)")
    console.print(f"  trace       {result.trace} ({result.jobs} jobs, a synthetic {DAYS}-day week)")
    console.print(f"  results     {w.results}")
    console.print(f"  report      {w.report.html}  ← open this")
    console.print(f"  jobs        {w.report.csv} and {w.report.parquet.name}")
    console.print(f"  charts      {w.report.charts[0].parent}/")
    console.print(f"  ledger      {result.ledger} ({result.ledger_records} simulated records)")


def register(app: typer.Typer) -> None:
    app.command()(demo)
