"""``gpufleet check``: the admission rules as a CI gate (``gpufleet.cli.webhook`` serves the same rules)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from gpufleet.check.documents import read
from gpufleet.check.facts import AdmissionFacts
from gpufleet.check.gate import DEFAULT_NAMESPACE, Verdict, check
from gpufleet.check.residency import cluster_facts
from gpufleet.cli.common import console, guarded
from gpufleet.errors import InputError
from gpufleet.policy import load_policy, resolve

EXIT_DENIED = 1
PolicyArg = Annotated[Path, typer.Argument(help="The fleet policy (YAML)", show_default=False)]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        help="A federated policy (clusters:): judge as this worker cluster does; default: as the MultiKueue manager",
    ),
]


def facts_for(policy: Path, cluster: str | None) -> AdmissionFacts:
    """The admission facts of the cluster that judges: the only one, a federation's manager, or a worker."""
    loaded = load_policy(policy)
    if cluster is not None and cluster not in {c.name for c in loaded.clusters}:
        declared = ", ".join(c.name for c in loaded.clusters) or "none (the policy has no clusters:)"
        raise InputError.one(
            f"no cluster {cluster!r} in the policy; declared: {declared}", file=str(policy), path="--cluster"
        )
    return cluster_facts(resolve(loaded), cluster)


def _where(v: Verdict) -> str:
    item = f" item {v.source.item}" if v.source.item is not None else ""
    return escape(f"{v.source.file} #{v.source.document}{item}")


def _print(verdicts: list[Verdict]) -> None:
    for v in verdicts:
        ident = escape(f"{v.kind} {v.namespace}/{v.name}")
        if not v.governed:
            console.print(f"[dim]· not governed {ident} ({_where(v)})[/]", highlight=False, soft_wrap=True)
            continue
        if v.denials:
            console.print(f"[bold red]✗ denied[/]   {ident} ({_where(v)})", highlight=False, soft_wrap=True)
            for d in v.denials:
                console.print(f"    {d.message}", highlight=False, markup=False, soft_wrap=True)
            continue
        where = ""
        if v.local_queue:
            flavors = ", ".join(v.flavors) if v.requests_gpus else "none needed (no GPU request)"
            where = f" → LocalQueue {v.local_queue}, ClusterQueue {v.cluster_queue}, flavors: {flavors}"
        console.print(f"[bold green]✓ admitted[/] {ident} ({_where(v)}){where}", highlight=False, soft_wrap=True)
        for f in v.filled:
            console.print(
                f"    filled in by the webhook: {f.label}={f.value} ({f.why})",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    denied = sum(1 for v in verdicts if v.denials)
    console.print(
        f"{len(verdicts)} objects: {len(verdicts) - denied} admitted, {denied} denied", highlight=False, soft_wrap=True
    )


@guarded
def check_cmd(
    policy: PolicyArg,
    files: Annotated[
        list[Path], typer.Argument(help="Manifests: multi-document YAML or kubectl get -o yaml Lists; - reads stdin")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdicts as JSON")] = False,
    namespace: Annotated[
        str, typer.Option("-n", "--namespace", help="Namespace for objects that name none")
    ] = DEFAULT_NAMESPACE,
    cluster: ClusterOpt = None,
) -> None:
    """Judge manifests by the fleet's admission rules: exit 0 all admitted, 1 any denied, 2 unreadable input."""
    facts = facts_for(policy, cluster)
    verdicts = check(facts, read(files, sys.stdin), namespace)
    if as_json:
        denied = sum(1 for v in verdicts if v.denials)
        out = {"objects": [v.as_dict() for v in verdicts], "admitted": len(verdicts) - denied, "denied": denied}
        typer.echo(json.dumps(out, indent=2))
    else:
        _print(verdicts)
    if any(v.denials for v in verdicts):
        raise typer.Exit(EXIT_DENIED)
