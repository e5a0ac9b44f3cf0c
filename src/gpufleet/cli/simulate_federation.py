"""``gpufleet simulate`` on a federated policy: each worker's Kueue and the manager's dispatch, printed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from gpufleet.cli.common import console, print_table
from gpufleet.durations import human
from gpufleet.outputs import replace_folder
from gpufleet.policy import Fleet
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.federation_compare import CLUSTERS, RESIDENCY, Comparison, ask
from gpufleet.simulate.federation_run import federated_run
from gpufleet.simulate.federation_summary import summary
from gpufleet.trace.job import Job

RESULTS = "federation.json"
COLUMNS = ("jobs", "admitted", "finished", "never admitted", "mean wait", "p95 wait", "GPU-hours")


def _cells(f: dict[str, Any]) -> list[str]:
    def wait(v: float | None) -> str:
        return "–" if v is None else human(int(v))

    return [
        str(f["jobs"]),
        str(f["admitted"]),
        str(f["finished"]),
        str(f["neverAdmitted"]),
        wait(f["meanWaitSeconds"]),
        wait(f["p95WaitSeconds"]),
        f"{f['gpuHours']:.1f}",
    ]


def _table(title: str, first: str, rows: Sequence[tuple[str, dict[str, Any]]]) -> Table:
    table = Table(title=title)
    for name in (first, *COLUMNS):
        table.add_column(name, justify="left" if name == first else "right")
    for name, f in rows:
        table.add_row(name, *_cells(f))
    return table


TITLES = {RESIDENCY: "What residency costs", CLUSTERS: "One cluster or the federation"}
COMPARE = {"residency": RESIDENCY, "one-cluster": CLUSTERS}  # ``simulate --compare`` words -> questions


def print_question(c: Comparison, subject: str) -> None:
    """One question's table, per team: p95 wait and goodput in both worlds (fits 100 columns)."""
    a, b = c.names
    table = Table(title=f"{TITLES[c.question]} (simulated; {subject})", title_justify="left")
    for name in ("team", f"p95 {a}", f"p95 {b}", f"goodput {a}", f"goodput {b}"):
        table.add_column(name, justify="left" if name == "team" else "right", no_wrap=True)
    for r in c.teams:
        table.add_row(
            r.team, *("–" if w is None else human(w) for w in r.wait_p95_s), *(f"{g:,.1f}" for g in r.goodput_gpu_h)
        )
    table.add_row("all teams", "", "", *(f"{m.goodput_gpu_h:,.1f}" for m in c.measures))
    print_table(table)
    for r in c.teams:
        if r.never_admissible[0] != r.never_admissible[1]:
            console.print(
                f"  {r.team}: never-admissible jobs {r.never_admissible[0]} {a}, {r.never_admissible[1]} {b} "
                "(left out of the p95 waits; a job one world admits waits there)",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )


def run_federated(
    fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig, out: Path, *, force: bool, as_json: bool,
    compare: str | None = None,
) -> None:  # fmt: skip
    """The federation's run, printed and written; ``compare`` (a ``COMPARE`` word) adds one question."""
    run, fed = federated_run(fleet, jobs, config, "federated")
    document = summary(fed)
    question = None if compare is None else ask(COMPARE[compare], fleet, jobs, config, declared=run)
    if question is not None:
        document["compare"] = question.as_dict()
    with replace_folder(out, "simulate", force=force) as staging:
        (staging / RESULTS).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(document | {"output": str(out / RESULTS)}, indent=2))
        return
    clusters = document["clusters"]
    print_table(_table(f"Per worker cluster (simulated, {document['dispatcher']})", "cluster", list(clusters.items())))
    zones = document["zones"]
    print_table(_table("Per residency zone (simulated)", "zone", list(zones.items())))
    for name, z in zones.items():
        landed = ", ".join(f"{c} {n}" for c, n in z["landed"].items())
        console.print(f"  zone {name}: landed on {landed} (simulated)", highlight=False, soft_wrap=True)
    print_table(_table("Fleet (simulated)", "fleet", [("all clusters", document["fleet"])]))
    if question is not None:
        print_question(question, "the same trace, over the window both runs reach")
    console.print(f"\n[bold]Wrote {out / RESULTS}[/] (every figure simulated)", soft_wrap=True)
