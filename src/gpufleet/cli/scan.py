"""``gpufleet scan``: the fleet and its GPU jobs as the cluster shows them, and what is at risk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gpufleet.cli.common import JsonOpt, console, guarded, print_table
from gpufleet.errors import InputError
from gpufleet.files import write_text
from gpufleet.policy.slicing import SlicingMode
from gpufleet.scan import FleetReport, analyse
from gpufleet.scan.fetch import fetch


def _units(units: dict[str, int]) -> str:
    return ", ".join(f"{n}× {r.removeprefix('nvidia.com/')}" for r, n in units.items()) or "-"


def print_report(report: FleetReport) -> None:
    pools = Table(title="GPU pools", title_justify="left")
    for col in ("pool", "card", "nodes", "GPUs/node", "slicing", "units", "quota", "taints"):
        pools.add_column(col, overflow="fold")
    for p in report.pools:
        slicing = str(p.sharing)
        if p.sharing is SlicingMode.MIG:
            slicing += f" {p.mig_config or '?'} ({p.mig_state or 'no state'})"
        elif p.replicas:
            slicing += f" ×{p.replicas}"
        if p.dra:
            slicing += " via DRA"
        quota = str(report.quota.get(p.name, 0)) if report.kueue_installed else "-"
        if p.name in report.serving_pools:
            quota += " (serving)"
        pools.add_row(
            p.name,
            p.model or p.product or "?",
            str(len(p.nodes)),
            str(p.gpus_per_node),
            slicing,
            _units(p.units),
            quota,
            "\n".join(p.taints) or "-",
        )
    print_table(pools)

    teams = Table(title="GPU pods by team", title_justify="left")
    for col in ("team", "pod", "phase", "pool", "asks", "queue"):
        teams.add_column(col, overflow="fold")
    for team, pods in report.by_team().items():
        for i, pod in enumerate(pods):
            queue = pod.queue or ("serving" if pod.serving else "[yellow]none[/]")
            teams.add_row(
                team if i == 0 else "",
                f"{pod.namespace}/{pod.name}",
                pod.phase,
                pod.pool or "-",
                _units(pod.requests),
                queue,
                end_section=i == len(pods) - 1,
            )
    print_table(teams)

    if report.kueue_installed:
        present = "; ".join(f"{len(names)} {kind}" for kind, names in report.kueue.items() if names)
        console.print(f"[bold]Kueue[/]: {present or 'installed, no objects'}", highlight=False)
    for risk in report.risks:
        console.print(f"[yellow]risk[/] {risk.reason} {risk.subject}: {risk.message}", highlight=False)
    if not report.risks:
        console.print("no risks found")


@guarded
def scan(
    kubeconfig: Annotated[
        Path | None, typer.Option(help="Kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    ] = None,
    as_json: JsonOpt = False,
    team_label: Annotated[str, typer.Option(help="The label that names a pod's team")] = "gpufleet.io/team",
    write_policy: Annotated[
        Path | None, typer.Option(help="Write a starter policy from what was found (refuses to overwrite)")
    ] = None,
) -> None:
    """List GPU pools, GPU pods by team and Kueue's objects, and flag the risks (read-only)."""
    if write_policy is not None and write_policy.exists():
        raise InputError.one("already exists; choose another file", file=str(write_policy))
    report = analyse(fetch(kubeconfig), team_label)
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        print_report(report)
    if write_policy is not None:
        write_text(write_policy, report.starter_policy())
        if not as_json:
            console.print(f"wrote {write_policy}; next: [bold]gpufleet plan {write_policy}[/]")
