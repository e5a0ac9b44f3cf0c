"""``gpufleet simulate``: a policy against a trace, in the queue world and (optionally) without it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from gpufleet import outputs
from gpufleet.cli.answer import print_answer
from gpufleet.cli.common import (
    ForceOpt,
    JsonOpt,
    LegacyOut,
    console,
    counting_bar,
    guarded,
    output_option,
    pick_output,
    print_kept,
    print_table,
    table_width,
)
from gpufleet.durations import human
from gpufleet.errors import InputError
from gpufleet.policy import load_policy, resolve
from gpufleet.report.html import num, pct, preempted
from gpufleet.simulate.config import Mode, PlacementPolicy, SimulationConfig
from gpufleet.simulate.engine import Progress as ProgressCallback
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import compare, results_document, write_outputs
from gpufleet.trace import read_trace


@contextmanager
def progress_bar(runs: int, *, quiet: bool = False) -> Iterator[ProgressCallback]:
    """A rich bar over every run's arrivals (on stderr, so stdout holds only the answer); the callback
    the engine calls as jobs arrive. ``quiet`` (under --json) shows no bar."""
    with counting_bar("simulating", quiet=quiet) as bar:
        task = bar.add_task("simulate", total=None)
        done = {"base": 0, "last": 0}

        def update(arrived: int, total: int) -> None:
            if arrived < done["last"]:  # the next run started
                done["base"] += total
            done["last"] = arrived
            bar.update(task, total=runs * total, completed=min(done["base"] + arrived, runs * total))

        yield update


def print_comparison(results: Sequence[RunResult]) -> None:
    """The before/after table: per team and job kind, each run's figures side by side, or one
    table per run, one below the other, when side by side would not fit the terminal."""
    table = _per_team(results, "Before and after, per team and job kind")
    if len(results) > 1 and table_width(table) > console.width:
        for r in results:
            print_table(_per_team([r], f"Before and after, per team and job kind: {r.name}"))
    else:
        print_table(table)

    fleet = Table(title="The fleet", title_justify="left")
    fleet.add_column("")
    for r in results:
        fleet.add_column(r.name, justify="right")
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        (
            "utilization (allocated / capacity GPU-h)",
            lambda s: (
                f"{pct(s['fleet']['utilization'])} ({num(s['fleet']['allocatedGpuHours'])} / {num(s['fleet']['capacityGpuHours'])})"
            ),
        ),
        ("idle GPU-hours while work waited", lambda s: num(s["fleet"]["idleGpuHoursWhileWaiting"])),
        (
            "Jain's index (GPU-h / fair share)",
            lambda s: "–" if s["fleet"]["jainIndex"] is None else f"{s['fleet']['jainIndex']:.3f}",
        ),
        ("jobs finished", lambda s: f"{s['fleet']['finished']} of {s['fleet']['jobs']}"),
        (
            "preemptions (GPU-h of work lost)",
            lambda s: f"{s['fleet']['preemptions']} ({num(s['fleet']['workLostGpuHours'])})",
        ),
        ("jobs preempted", lambda s: str(s["fleet"]["jobsPreempted"])),
        ("most preempted job", lambda s: preempted(next(iter(s["fleet"]["mostPreempted"]), None))),
        ("waitForPodsReady evictions", lambda s: str(s["fleet"]["podsReadyEvictions"])),
        ("admitted-but-unplaced hours", lambda s: num(s["fleet"]["admittedUnplacedHours"])),
        ("serving starved replica-minutes", lambda s: num(s["serving"]["starvedReplicaMinutes"])),
    ]
    for label, value in rows:
        fleet.add_row(label, *[value(r.summary) for r in results])
    print_table(fleet)


def _per_team(results: Sequence[RunResult], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("team / kind", no_wrap=True)
    for r in results:
        for col in ("wait p50", "p95", "max", "GPU-h", "share/weight"):
            table.add_column(f"{r.name} {col}" if col == "wait p50" else col, justify="right", no_wrap=True)

    def cells(group: dict[str, Any] | None, share: str) -> list[str]:
        if group is None:
            return ["–"] * 5
        w = group["waitSeconds"]
        return [human(w["p50"]), human(w["p95"]), human(w["max"]), num(group["gpuHours"]), share]

    first = results[0].summary
    for team in first["teams"]:
        row = [f"[bold]{team}[/]"]
        for r in results:
            t = r.summary["teams"][team]
            ratio = t["shareOverWeight"]
            row += cells(t, f"{pct(t['share'])}/{pct(t['weightShare'])}" + ("" if ratio is None else f" ({ratio:.2f})"))
        table.add_row(*row)
        kinds = sorted(
            {k.split("/", 1)[1] for r in results for k in r.summary["teamKinds"] if k.startswith(f"{team}/")}
        )
        for kind in kinds:
            row = [f"  {kind}"]
            for r in results:
                row += cells(r.summary["teamKinds"].get(f"{team}/{kind}"), "")
            table.add_row(*row)
    return table


FEDERATED_COMPARE = ("residency", "one-cluster")  # ``cli.simulate_federation.COMPARE``'s words


@guarded
def simulate(
    policy: Annotated[Path, typer.Argument(help="The fleet policy (YAML)", show_default=False)],
    *,
    trace: Annotated[Path, typer.Option("--trace", help="A job trace in gpufleet's format (.csv or .parquet)")],
    compare_with: Annotated[
        str | None,
        typer.Option(
            "--compare",
            help="Also run the baseline: first-apply; or, for a policy with clusters:, residency (lifted) or "
            "one-cluster (the pools merged)",
            metavar="first-apply|residency|one-cluster",
        ),
    ] = None,
    output: Annotated[
        Path | None, output_option("Folder for results.json, tables, charts, report [default: simulation]")
    ] = None,
    placement: Annotated[
        PlacementPolicy | None,
        typer.Option(
            "--placement",
            help="The scheduler's scoring [default: the policy's scheduling.nodeScoring]; FragmentationAware "
            "is gpufleet's own model, for simulation only",
        ),
    ] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
    legacy_out: LegacyOut = None,
) -> None:
    """Simulate the queue in front of the cards on a trace, and (with --compare) the first apply."""
    out = pick_output(output, legacy_out, Path("simulation"))
    if compare_with not in (None, Mode.FIRST_APPLY.value, *FEDERATED_COMPARE):
        raise InputError.one(
            f"--compare takes 'first-apply', 'residency' or 'one-cluster', not {compare_with!r}", path="--compare"
        )
    fleet = resolve(load_policy(policy))
    if compare_with in FEDERATED_COMPARE and not fleet.policy.clusters:
        raise InputError.one(
            f"--compare {compare_with} is for a policy with clusters: (a federation); this one is one cluster",
            file=str(policy),
            path="--compare",
        )
    jobs = read_trace(trace)
    target = outputs.check(out, force=force)  # refuse before the simulation, not after it
    if fleet.policy.clusters:  # a federation: each worker's Kueue and the manager's dispatch
        if compare_with == Mode.FIRST_APPLY.value:
            raise InputError.one(
                "--compare first-apply is for one cluster; a federated policy compares residency or one-cluster",
                path="--compare",
            )
        from gpufleet.cli.simulate_federation import run_federated

        config = SimulationConfig(placement=placement)
        run_federated(fleet, jobs, config, out, force=force, as_json=as_json, compare=compare_with)
        return
    modes = [Mode.QUEUE] + ([Mode.FIRST_APPLY] if compare_with else [])
    with progress_bar(len(modes), quiet=as_json) as update:
        results = compare(fleet, jobs, SimulationConfig(placement=placement), modes, update)
    document = results_document(fleet, str(trace), len(jobs), results)
    written = write_outputs(out, document, results, force=force)
    if as_json:
        files = {"results": written.results, "report": written.report.html, "jobs": written.report.csv}
        files |= {"allocations": written.allocations, "charts": written.report.charts[0].parent}
        extra = {"output": str(target.path), "files": {k: str(v) for k, v in files.items()}}
        typer.echo(json.dumps(document | extra, indent=2))
        return
    print_answer(document)
    print_comparison(results)
    console.print(f"\n[bold]Wrote {out}/[/]", soft_wrap=True)
    console.print(f"  results     {written.results}", soft_wrap=True)
    console.print(f"  report      {written.report.html}", soft_wrap=True)
    console.print(f"  jobs        {written.report.csv} and {written.report.parquet.name}", soft_wrap=True)
    console.print(f"  charts      {written.report.charts[0].parent}/", soft_wrap=True)
    console.print(f"  allocations {written.allocations} (ledger records, simulated)", soft_wrap=True)
    print_kept(target)
