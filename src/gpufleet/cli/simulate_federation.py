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
from gpufleet.simulate.federation import simulate_federation
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


def run_federated(
    fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig, out: Path, *, force: bool, as_json: bool
) -> None:
    document = summary(simulate_federation(fleet, jobs, config))
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
    console.print(f"\n[bold]Wrote {out / RESULTS}[/] (every figure simulated)", soft_wrap=True)
