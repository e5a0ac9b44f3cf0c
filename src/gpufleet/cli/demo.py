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
from gpufleet.cli.tune import print_diff, print_worlds, study_bar
from gpufleet.demo import DAYS, TRIALS, DemoResult, run_demo
from gpufleet.tune import output as tune_output
from gpufleet.tune.verdict import headline


def print_findings(result: DemoResult) -> None:
    """The example policy's pathologies, each with its remedy (from the simulated week)."""
    found = result.tuning.worlds[1].findings
    if not found:
        console.print("The example policy shows no pathology in the simulated week.")
        return
    console.print("[bold]What goes wrong with the example policy[/] (simulated)")
    for f in found:
        console.print(f"  {f.reason.value}: {f.message}", highlight=False, markup=False)
        console.print(f"    remedy: {f.remedy}", highlight=False, markup=False)


def _document(result: DemoResult, out: Path) -> dict[str, object]:
    w = result.written
    return {
        "output": str(out),
        "policy": str(result.policy),
        "plan": str(result.plan_json),
        "manifests": [str(p) for p in result.manifests],
        "trace": {"file": str(result.trace), "jobs": result.jobs, "days": result.days},
        "results": str(w.results),
        "report": str(w.report.html),
        "jobs": [str(w.report.csv), str(w.report.parquet)],
        "charts": [str(c) for c in w.report.charts],
        "ledger": {"file": str(result.ledger), "records": result.ledger_records},
        "runs": {r.name: r.summary for r in result.results},
        "headline": _headline(result),
        "tune": {
            "folder": str(result.tune_folder),
            "policy": str(result.tune_folder / tune_output.POLICY),
            **tune_output.document(result.tuning, str(result.trace)),
        },
    }


def _headline(result: DemoResult) -> str:
    first, given, tuned = (w.measures for w in result.tuning.worlds)
    return headline(first, given, tuned, result.tuning.constraints, result.tuning.worlds[2].stranded)


@guarded
def demo(
    *,
    output: Annotated[Path | None, output_option("Folder for everything the demo produces [default: demo-out]")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
    legacy_out: LegacyOut = None,
    days: Annotated[int, typer.Option("--days", min=1, help="Days of synthetic work (a week by default)")] = DAYS,
    trials: Annotated[
        int, typer.Option("--trials", min=1, help="The tuning budget, the example policy included")
    ] = TRIALS,
) -> None:
    """Run the whole chain on the bundled example: plan, render, simulate, find what goes wrong, tune.

    A synthetic week for the example's teams is simulated without the queue (first apply) and with
    the example policy; its pathologies are named; gpufleet tune searches a better policy with a
    small budget; the three worlds are shown side by side. The simulated allocations go into a
    SQLite ledger, the reports into HTML pages. The folder is replaced only when it is missing,
    empty or an earlier gpufleet output. Every figure is simulated."""
    out = pick_output(output, legacy_out, Path("demo-out"))
    target = outputs.check(out, force=force)
    with progress_bar(2, quiet=as_json) as update, study_bar(trials, quiet=as_json) as (tick, _stage):
        result = run_demo(out, update, force=force, tick=tick, days=days, trials=trials)
    if as_json:
        typer.echo(json.dumps(_document(result, target.path), indent=2))
        return
    console.print(_headline(result), style="bold", highlight=False, markup=False)
    console.print()
    print_worlds(result.tuning.worlds, "First apply, the example policy, the tuned policy (simulated week)")
    console.print()
    print_diff(result.tuning)
    console.print()
    print_findings(result)
    console.print()
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
    console.print(
        f"  trace       {result.trace} ({result.jobs} jobs, a synthetic {result.days}-day trace)", soft_wrap=True
    )
    console.print(f"  results     {w.results}", soft_wrap=True)
    console.print(f"  report      {w.report.html}  ← open this (the three worlds)", soft_wrap=True)
    console.print(f"  jobs        {w.report.csv} and {w.report.parquet.name}", soft_wrap=True)
    console.print(f"  charts      {w.report.charts[0].parent}/", soft_wrap=True)
    console.print(f"  ledger      {result.ledger} ({result.ledger_records} simulated records)", soft_wrap=True)
    console.print(
        f"  tuned       {result.tune_folder / tune_output.POLICY} (the study, its trials and the diff "
        f"in {result.tune_folder}/)",
        soft_wrap=True,
    )
    print_kept(target)
