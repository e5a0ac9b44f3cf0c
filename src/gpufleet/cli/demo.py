"""``gpufleet demo``: the product's main job on the bundled example, end to end, with no cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from gpufleet import outputs
from gpufleet.cli.common import (
    ForceOpt,
    JsonOpt,
    LegacyOut,
    console,
    guarded,
    output_option,
    pick_output,
    print_kept,
)
from gpufleet.cli.policy import print_plan
from gpufleet.cli.simulate import print_comparison, progress_bar
from gpufleet.demo import DAYS, DemoResult, run_demo


def _document(result: DemoResult, out: Path) -> dict[str, object]:
    w = result.written
    return {
        "output": str(out),
        "policy": str(result.policy),
        "plan": str(result.plan_json),
        "manifests": [str(p) for p in result.manifests],
        "trace": {"file": str(result.trace), "jobs": result.jobs, "days": DAYS},
        "results": str(w.results),
        "report": str(w.report.html),
        "jobs": [str(w.report.csv), str(w.report.parquet)],
        "charts": [str(c) for c in w.report.charts],
        "ledger": {"file": str(result.ledger), "records": result.ledger_records},
        "runs": {r.name: r.summary for r in result.results},
    }


@guarded
def demo(
    output: Annotated[Path | None, output_option("Folder for everything the demo produces [default: demo-out]")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
    legacy_out: LegacyOut = None,
) -> None:
    """Run the whole chain on the bundled example: plan, render, simulate a week both ways, report.

    A synthetic week for the example's teams is simulated without the queue (first apply) and with
    it; the simulated allocations go into a SQLite ledger and the report into one HTML page. The
    folder is replaced only when it is missing, empty or an earlier gpufleet output."""
    out = pick_output(output, legacy_out, Path("demo-out"))
    target = outputs.check(out, force=force)
    with progress_bar(2, quiet=as_json) as update:
        result = run_demo(out, update, force=force)
    if as_json:
        typer.echo(json.dumps(_document(result, target.path), indent=2))
        return
    print_plan(result.plan)
    console.print()
    print_comparison(result.results)
    w = result.written
    console.print(f"\n[bold]Demo output in {out}/[/]", soft_wrap=True)
    console.print(f"  policy      {result.policy}", soft_wrap=True)
    console.print(f"  plan        {result.plan_json}", soft_wrap=True)
    console.print(
        f"  manifests   {target.path / 'manifests'}/ ({len(result.manifests)} files: kubectl apply -k)", soft_wrap=True
    )
    console.print(f"  trace       {result.trace} ({result.jobs} jobs, a synthetic {DAYS}-day week)", soft_wrap=True)
    console.print(f"  results     {w.results}", soft_wrap=True)
    console.print(f"  report      {w.report.html}  ← open this", soft_wrap=True)
    console.print(f"  jobs        {w.report.csv} and {w.report.parquet.name}", soft_wrap=True)
    console.print(f"  charts      {w.report.charts[0].parent}/", soft_wrap=True)
    console.print(f"  ledger      {result.ledger} ({result.ledger_records} simulated records)", soft_wrap=True)
    print_kept(target)


def register(app: typer.Typer) -> None:
    app.command()(demo)
