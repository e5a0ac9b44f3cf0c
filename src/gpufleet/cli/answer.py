"""The answer a simulation gives, as the terminal prints it first: the measures of every world over
the one window, per team, and the pathologies found, each with what removes it.

Everything here reads results.json's ``window``, ``measures`` and ``findings`` (docs/simulate.md),
so ``simulate``, ``plan --trace`` and ``demo`` print the same tables from the same document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from gpufleet.cli.common import console, print_table
from gpufleet.durations import human

Doc = Mapping[str, Any]


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def _share(part: float, whole: float) -> str:
    return f"{_num(part)} ({part / whole:.0%})" if whole else _num(part)


def _finished(m: Doc) -> str:
    return f"{m['finished']} of {m['jobs']}"


ROWS: list[tuple[str, Callable[[Doc], str]]] = [
    ("goodput GPU-h (of capacity)", lambda m: _share(m["goodputGpuHours"], m["capacityGpuHours"])),
    ("held idle GPU-h (bound, not running)", lambda m: _share(m["heldIdleGpuHours"], m["capacityGpuHours"])),
    ("lost GPU-h (preempted work)", lambda m: _share(m["lostGpuHours"], m["capacityGpuHours"])),
    ("usable idle GPU-h (a waiting job fit)", lambda m: _num(m["usableIdleGpuHoursTotal"])),
    ("serving GPU-h", lambda m: _num(m["servingGpuHours"])),
    ("capacity GPU-h", lambda m: _num(m["capacityGpuHours"])),
    ("makespan", lambda m: human(m["makespanSeconds"])),
    ("jobs finished", _finished),
    ("jobs never admissible (beyond reach)", lambda m: str(m["neverAdmissible"])),
    ("Jain (goodput / fair share)", lambda m: "–" if m["jain"] is None else f"{m['jain']:.3f}"),
    ("serving starved replica-min", lambda m: _num(m["servingStarvedReplicaMinutes"])),
    (
        "preemptions per job: max / p95",
        lambda m: f"{m['preemptionsPerJob']['max']} / {m['preemptionsPerJob']['p95']}",
    ),
]


def print_measures(document: Doc) -> None:
    """Both worlds side by side over the window, then each team's waits and completion times."""
    measures: Mapping[str, Doc] = document.get("measures", {})
    if not measures:
        return
    window = document["window"]
    span = f"{human(window['startSeconds'])} to {human(window['endSeconds'])}"
    table = Table(title=f"Measures over one window, {span} of the trace", title_justify="left")
    table.add_column("")
    for name in measures:
        table.add_column(name, justify="right", no_wrap=True)
    for label, value in ROWS:
        table.add_row(label, *[escape(value(m)) for m in measures.values()])
    pools = sorted({p for m in measures.values() for p, h in m["usableIdleGpuHours"].items() if h})
    for pool in pools:
        table.add_row(f"  usable idle on {pool}", *[_num(m["usableIdleGpuHours"].get(pool)) for m in measures.values()])
    print_table(table)

    teams = Table(title="Per team, p50 / p95", title_justify="left")
    teams.add_column("team", no_wrap=True)
    for name in measures:
        teams.add_column(name, justify="right", no_wrap=True)
    first = next(iter(measures.values()))
    for team in first["teams"]:
        each = [m["teams"].get(team) for m in measures.values()]

        def pair(t: Doc | None, key: str) -> str:
            return "–" if t is None else f"{human(t[key]['p50'])} / {human(t[key]['p95'])}"

        teams.add_row(f"{escape(team)} wait", *[pair(t, "waitSeconds") for t in each])
        teams.add_row("  completion", *[pair(t, "completionSeconds") for t in each])
        teams.add_row(
            "  goodput GPU-h", *["–" if t is None else _num(t["goodputGpuHours"]) for t in each], end_section=True
        )
    print_table(teams)


def print_findings(document: Doc, evidence: int = 3) -> None:
    """Each world's pathologies: the reason, what happened (with the numbers), the first lines of
    evidence, and what removes it with the policy fields it touches. Printed as indented paragraphs
    (the console wraps them at spaces), not a table: setting paths are long words."""
    findings: Mapping[str, list[Doc]] = document.get("findings", {})
    if not findings:
        return
    console.print("[bold]Findings[/]: what goes wrong in each world, and the policy change that removes it")
    if not any(findings.values()):
        console.print("  none")
    for world, items in findings.items():
        for f in items:
            console.print(Padding(f"[bold]{escape(world)} · {f['reason']}[/]  {escape(f['message'])}", (0, 0, 0, 2)))
            for line in f["evidence"][:evidence]:
                console.print(Padding(f"• {escape(line)}", (0, 0, 0, 6)))
            console.print(Padding(f"[green]remedy[/] {escape(f['remedy'])}", (0, 0, 0, 4)))
            if f["settings"]:
                console.print(Padding(f"[dim]settings {escape(', '.join(f['settings']))}[/]", (0, 0, 0, 4)))


def print_answer(document: Doc) -> None:
    print_measures(document)
    print_findings(document)
