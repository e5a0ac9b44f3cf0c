"""``gpufleet what-if POLICY``: what Kueue would do right after the policy is applied to the live cluster.

Reads the cluster and dry-runs the policy's Kueue objects (``dryRun=All``): nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from gpufleet import kube
from gpufleet.cli.common import JsonOpt, console, guarded, print_table
from gpufleet.cli.why import KubeconfigOpt, KueueConfigOpt, configuration
from gpufleet.explain.diff import object_change
from gpufleet.explain.report import whatif_json
from gpufleet.explain.whatif import what_if
from gpufleet.policy import load_policy, resolve
from gpufleet.render import kueue_objects

Doc = dict[str, Any]


@guarded
def whatif(
    policy: Annotated[Path, typer.Argument(help="The fleet policy (YAML) to try", show_default=False)],
    kubeconfig: KubeconfigOpt = None,
    kueue_config: KueueConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What applying POLICY would do now: admissions, preemptions, inadmissible work, changed objects."""
    rendered = kueue_objects(resolve(load_policy(policy)))
    rendered_config = next((o for o in rendered if o.get("kind") == "Configuration"), None)
    api_objects = [o for o in rendered if o.get("kind") != "Configuration"]
    state = kube.read_kueue_state(kubeconfig)
    live_config, source = configuration(state, kueue_config)
    dry = kube.dry_run_apply(api_objects, kubeconfig)
    replacements = [d.applied or o for d, o in zip(dry, api_objects, strict=True)]
    result = what_if(state.objects, live_config, replacements, rendered_config)
    changes = [object_change(d.kind, d.name, d.namespace, live=d.live, applied=d.applied, error=d.error) for d in dry]
    report = whatif_json(result, changes)
    report["kueueConfiguration"] = source
    if as_json:
        typer.echo(json.dumps(report, indent=2, default=str))
        return
    print_whatif(report)


def _rows(title: str, rows: list[Doc], detail: str) -> None:
    if not rows:
        console.print(f"[bold]{title}[/]: none")
        return
    table = Table(title=title, title_justify="left")
    for column in ("workload", "ClusterQueue", "reason", detail, "also without the policy"):
        table.add_column(column)
    for c in rows:
        table.add_row(
            c["workload"], c["clusterQueue"], c["reason"], c["message"], "yes" if c["alsoWithoutPolicy"] else "no"
        )
    print_table(table)


def _value(value: Any) -> str:
    return "(absent)" if value is None else json.dumps(value, default=str)


def print_whatif(r: Doc) -> None:
    _rows("Pending Workloads it would admit", r["admitted"], "when")
    _rows("Running Workloads it would preempt", r["preempted"], "for")
    _rows("Workloads that would be inadmissible", r["inadmissible"], "Kueue's message")
    console.print(f"still pending, waiting for quota: {r['stillPending']}")
    changed = [o for o in r["objects"] if o["action"] != "Unchanged"]
    same = len(r["objects"]) - len(changed)
    console.print(f"[bold]Objects the apply would change[/] (server-side dry run; {same} unchanged)")
    for o in changed:
        who = f"{o['kind']} {o['namespace']}/{o['name']}" if o["namespace"] else f"{o['kind']} {o['name']}"
        console.print(Padding(f"[bold]{o['action']}[/] {escape(who)}", (0, 0, 0, 2), expand=False))
        if o["error"]:
            console.print(Padding(escape(o["error"]), (0, 0, 0, 6), expand=False))
        for f in o["fields"]:
            if not f["path"]:
                continue  # a new object: its fields are all new
            text = f"{f['path']}: {_value(f['before'])} → {_value(f['after'])}"
            console.print(Padding(escape(text), (0, 0, 0, 6), expand=False))
    for s in r["skipped"]:
        console.print(Padding(f"left out of the twin: {escape(s)}", (0, 0, 0, 2), expand=False))
    console.print(
        Padding(f"[dim]Kueue configuration: {escape(r['kueueConfiguration'])}[/]", (0, 0, 0, 0), expand=False)
    )
