"""``gpufleet twin``: ask the twin what Kueue does next, and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from gpufleet.cli.common import guarded, print_table
from gpufleet.errors import InputError, Problem
from gpufleet.twin.clocks import RELEASE_DELAY_MS, ClockSettings
from gpufleet.twin.resources import format_quantity
from gpufleet.twin.step import step as twin_step

app = typer.Typer(help="Simulate Kueue's admission on real Kueue objects.", no_args_is_help=True)


@app.command("step")
@guarded
def step(
    files: Annotated[list[Path], typer.Argument(help="YAML streams of Kueue objects ('-' for stdin).")],
    *,
    cycles: Annotated[int | None, typer.Option("--cycles", min=1, help="Run exactly N scheduling cycles.")] = None,
    until_stable: Annotated[
        bool, typer.Option("--until-stable", help="Run until a cycle changes nothing (the default).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the stable JSON report.")] = False,
    release_delay_ms: Annotated[
        int,
        typer.Option(
            "--release-delay-ms",
            min=0,
            help="How long a preempted victim keeps its quota (eviction to QuotaReserved=False; "
            "about a second for a batch Job on a test cluster).",
        ),
    ] = RELEASE_DELAY_MS,
    no_clocks: Annotated[
        bool,
        typer.Option(
            "--no-clocks",
            help="Kueue's unit-test world: victims free at the end of their cycle and parked "
            "workloads wake before the next, with no backoff or requeue batch.",
        ),
    ] = False,
) -> None:
    """Run scheduling cycles and show admissions, preemptions, pending reasons and quota use."""
    if cycles is not None and until_stable:
        raise InputError([Problem("use either --cycles or --until-stable, not both", "command line", "--until-stable")])
    clocks = None if no_clocks else ClockSettings(release_delay_ms=release_delay_ms)
    report = twin_step([_read(f) for f in files], cycles, clocks)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    _print_human(report)


def _read(path: Path) -> tuple[str, str]:
    if str(path) == "-":
        return "<stdin>", typer.get_text_stream("stdin").read()
    try:
        return str(path), path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError([Problem(f"cannot read: {exc.strerror}", str(path))]) from None
    except UnicodeDecodeError as exc:
        raise InputError([Problem(f"not UTF-8 text (byte {exc.start}): Kueue objects are YAML", str(path))]) from None


def _print_human(report: dict[str, Any]) -> None:
    timed = report.get("clocks") is not None
    for cycle in report["cycles"]:
        title = f"cycle {cycle['cycle']}" + (f" at {cycle['atMs']} ms" if timed else "")
        table = Table(title=title, show_lines=False)
        for column in ("workload", "decision", "clusterQueue", "detail"):
            table.add_column(column)
        for a in cycle["admitted"]:
            flavors = "; ".join(
                f"{ps}: " + ", ".join(f"{r}={f}" for r, f in res.items()) for ps, res in a["flavors"].items()
            )
            table.add_row(a["workload"], "[green]admitted[/]", a["clusterQueue"], flavors)
        for p in cycle["preempted"]:
            table.add_row(
                p["workload"], f"[red]preempted[/] ({p['reason']})", p["clusterQueue"], f"by {p['preemptor']}"
            )
        own = False
        for p in cycle["pending"]:
            mark = "" if p.get("kueueWrites", True) else " \N{DAGGER}"
            own = own or bool(mark)
            detail = p["message"]
            kept = p.get("kueueStatus")
            if kept is not None:
                detail += f" (its condition still says: {kept['reason']}: {kept['message']})"
            table.add_row(p["workload"], f"[yellow]{p['reason']}[/] ({p['queue']}){mark}", p["clusterQueue"], detail)
        if own:
            table.caption = "\N{DAGGER} the twin's own explanation: Kueue writes no new condition on this workload"
        print_table(table)
    loop = report.get("loop")
    if loop is not None:
        typer.echo(f"{loop['reason']}: {loop['message']}")
    queues = Table(title="ClusterQueues")
    for column in ("clusterQueue", "usage", "borrowed", "weightedShare", "admitted", "pending"):
        queues.add_column(column)
    for name, st in report["clusterQueues"].items():
        queues.add_row(
            name,
            ", ".join(f"{k}={_amount(k, v)}" for k, v in st["usage"].items()),
            ", ".join(f"{k}={_amount(k, v)}" for k, v in st["borrowed"].items() if v) or "-",
            str(st["weightedShare"]),
            str(st["admittedWorkloads"]),
            str(st["pendingWorkloads"]),
        )
    print_table(queues)


def _amount(key: str, value: int) -> str:
    return format_quantity(value, key.rsplit("/", 1)[-1])
