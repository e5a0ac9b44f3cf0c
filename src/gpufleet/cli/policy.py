"""``gpufleet schema | init | plan | render``: the policy file and what it becomes.

What only one of them needs (the renderer and its validator, the cluster scan, the simulator behind
``plan --trace``) is imported inside that command, so ``plan`` starts without them."""

from __future__ import annotations

import importlib.resources
import json
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
    guarded,
    output_option,
    pick_output,
    print_kept,
    print_table,
)
from gpufleet.errors import InputError
from gpufleet.files import write_text
from gpufleet.plan import Plan, make_plan
from gpufleet.policy import FleetPolicy, load_policy, resolve

PolicyArg = Annotated[Path, typer.Argument(help="The fleet policy (YAML)", show_default=False)]


def schema() -> None:
    """Print the policy file's JSON Schema (point your editor's YAML plugin at it)."""
    typer.echo(json.dumps(FleetPolicy.model_json_schema(), indent=2))


@guarded
def init(
    path: Annotated[Path, typer.Argument(help="Where to write the policy")] = Path("fleet.yaml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file")] = False,
    from_cluster: Annotated[
        bool, typer.Option("--from-cluster", help="Start from what `gpufleet scan` finds in the cluster")
    ] = False,
    kubeconfig: Annotated[Path | None, typer.Option(help="Kubeconfig for --from-cluster")] = None,
) -> None:
    """Write a policy to start from: a commented example, or a starter policy read from a live cluster."""
    if path.exists() and not force:
        raise InputError.one("already exists; pass --force to overwrite it", file=str(path))
    if from_cluster:
        from gpufleet.scan import analyse
        from gpufleet.scan.fetch import fetch

        text = analyse(fetch(kubeconfig), "gpufleet.io/team").starter_policy()
    else:
        text = (importlib.resources.files("gpufleet.policy") / "init.yaml").read_text(encoding="utf-8")
    write_text(path, text)
    console.print(f"wrote {path}; next: [bold]gpufleet plan {path}[/]", soft_wrap=True)


def _units(units: dict[str, int]) -> str:
    return ", ".join(f"{n}× {r.removeprefix('nvidia.com/')}" for r, n in units.items())


def _limit(value: int | None) -> str:
    return "∞" if value is None else str(value)


def print_plan(plan: Plan) -> None:
    pools = Table(title="Pools: how each is sliced", title_justify="left")
    for col in ("pool", "GPUs", "role", "slicing", "decided by", "yields"):
        pools.add_column(col, overflow="fold")
    for p in plan.pools:
        slicing = p.mode
        if p.layout:
            slicing += f" {p.layout_name or 'custom'}: " + " + ".join(f"{n}×{k}" for k, n in p.layout.items())
        if p.replicas:
            slicing += f" ×{p.replicas}"
        flag = " [yellow]⚠[/]" if p.flagged else ""
        pools.add_row(
            p.name,
            f"{p.nodes}×{p.gpus // p.nodes} {p.gpu}",
            p.role,
            slicing,
            p.reason + flag,
            _units(p.units),
        )
    print_table(pools)
    console.print("[bold]Why[/]")
    for p in plan.pools:
        extra = f" Sizing: {p.sizing}." if p.sizing else ""
        flag = f" [yellow]{p.flag_message}.[/]" if p.flagged else ""
        console.print(f"  [bold]{p.name}[/] ({p.reason}): {p.message}.{extra}{flag}", highlight=False)

    quotas = Table(title="Quotas against capacity", title_justify="left")
    for col in ("pool resource", "capacity", "team", "nominal", "borrow ≤", "lend ≤", "can reach"):
        quotas.add_column(col, justify="left" if col in ("pool resource", "team") else "right", no_wrap=True)
    for q in plan.quotas:
        label = f"{q.pool} {q.resource.removeprefix('nvidia.com/')}"
        for i, t in enumerate(q.teams):
            quotas.add_row(
                label if i == 0 else "",
                str(q.capacity) if i == 0 else "",
                t.team,
                str(t.nominal),
                _limit(t.borrowing_limit),
                _limit(t.lending_limit),
                str(t.reach),
            )
        quotas.add_row("", "", "[dim](cohort)[/]", f"[dim]{q.unassigned}[/]", "", "", "", end_section=True)
    print_table(quotas)

    if plan.serving:
        s = plan.serving
        goal = f", latency goal {s.latency_goal_ms} ms" if s.latency_goal_ms else ""
        console.print(
            f"[bold]Serving[/] (outside the queue): pool {s.pool}, namespace {s.namespace}{goal}; "
            f"the deployments hold {_units(s.reserved) or 'nothing'} of {_units(s.capacity)}",
            highlight=False,
        )
    if plan.clusters:
        print_federation(plan)
    for w in plan.warnings:
        console.print(f"[yellow]warning[/] {w.reason}: {w.message}", highlight=False)


def print_federation(plan: Plan) -> None:
    """The fleet per worker cluster and the residency zones (a policy with ``clusters:``)."""
    clusters = Table(title="Clusters: where each pool runs (MultiKueue workers)", title_justify="left")
    for col in ("cluster", "provider", "region", "pools", "yields", "zones", "kubeconfig Secret"):
        clusters.add_column(col, overflow="fold")
    for c in plan.clusters:
        clusters.add_row(
            c.name, c.provider, c.region, ", ".join(c.pools), _units(c.units), ", ".join(c.zones), c.kubeconfig_secret
        )
    print_table(clusters)
    zones = Table(title="Residency zones: one MultiKueueConfig each", title_justify="left")
    for col in ("zone", "data classes", "clusters", "team queues"):
        zones.add_column(col, overflow="fold")
    for z in plan.zones:
        zones.add_row(z.name, ", ".join(z.data_classes), ", ".join(z.clusters), ", ".join(z.queues))
    print_table(zones)


@guarded
def plan(
    policy: PolicyArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON")] = False,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Also run the queue world on this job trace (.csv or .parquet) and name what goes wrong "
            "(exit 1 when it finds something)",
        ),
    ] = None,
) -> None:
    """Explain how each pool is sliced and whether the quotas fit; with --trace, the pathologies."""
    fleet = resolve(load_policy(policy))
    result = make_plan(fleet)
    document: dict[str, Any] = result.as_dict()
    judged = None
    if trace is not None:
        from gpufleet.cli.simulate import progress_bar
        from gpufleet.simulate.config import SimulationConfig
        from gpufleet.simulate.measures import as_dict
        from gpufleet.simulate.run import assess, simulate
        from gpufleet.trace import read_trace

        jobs = read_trace(trace)
        with progress_bar(1, quiet=as_json) as update:
            run = simulate(fleet, jobs, SimulationConfig(), update)
        (judged,) = assess(fleet, [run])
        document["simulation"] = {
            "trace": {"source": str(trace), "jobs": len(jobs)},
            "window": {"startSeconds": judged.measures.window_s[0], "endSeconds": judged.measures.window_s[1]},
            "measures": {run.name: as_dict(judged.measures)},
            "findings": {run.name: [f.as_dict() for f in judged.findings]},
        }
    if as_json:
        typer.echo(json.dumps(document, indent=2))
    else:
        print_plan(result)
        if judged is not None:
            console.print()
            print_answer(document["simulation"])
    if judged is not None and judged.findings:
        raise typer.Exit(1)


@guarded
def render_cmd(
    policy: PolicyArg,
    *,
    output: Annotated[
        Path | None, output_option("Folder to write (replaced atomically, only if missing, empty or gpufleet's)")
    ] = None,
    check: Annotated[bool, typer.Option("--check", help="Validate every object offline before writing")] = False,
    crds: Annotated[
        Path | None, typer.Option("--crds", help="Folder of Kueue CRD YAML files (needed by --check)")
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            help="The gpufleet image the webhook and recorder run (build it with `make image` and push it first); "
            "overrides the policy's cluster.image",
            show_default=False,
        ),
    ] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
    legacy_out: LegacyOut = None,
) -> None:
    """Write the manifests that put Kueue in front of the cards (a kustomize-ready folder)."""
    from gpufleet.policy.images import image_problem
    from gpufleet.render import render, write_bundle

    out = pick_output(output, legacy_out)
    problem = None if image is None else image_problem(image)
    if problem is not None:
        raise InputError.one(f"{image!r}: {problem}", path="--image")
    loaded = load_policy(policy)
    if loaded.clusters:  # beyond one cluster: manager/ and workers/<cluster>/ (docs/multikueue.md)
        from gpufleet.render.multikueue import render_federation

        bundle = render_federation(resolve(loaded), image=image)
    else:
        bundle = render(resolve(loaded), image=image)
    target = outputs.check(out, force=force)  # before --check's work, and before anything is written
    document: dict[str, Any] = {}
    if check:
        if crds is None:
            raise InputError.one(
                "--check validates the Kueue objects against Kueue's CRDs: pass --crds DIR "
                "(config/components/crd/bases of the Kueue release you run)",
                path="--crds",
            )
        from gpufleet.render.check import check_bundle
        from gpufleet.validation import load_crds

        report = check_bundle(bundle, kubernetes=loaded.cluster.kubernetes, crds=load_crds(crds))
        if report.findings:
            if as_json:
                findings = [
                    {"object": f.object, "path": f.path, "source": f.source, "message": f.message}
                    for f in report.findings
                ]
                typer.echo(json.dumps({"valid": False, "written": False, "findings": findings}, indent=2))
                raise typer.Exit(1)
            table = Table(title=f"{len(report.findings)} problems; nothing was written", title_justify="left")
            for col in ("object", "field", "source", "problem"):
                table.add_column(col, overflow="fold")
            for f in report.findings:
                table.add_row(f.object, f.path, f.source, f.message)
            print_table(table)
            raise typer.Exit(1)
        document |= {"valid": True, "checked": report.checked, "unchecked": list(report.unchecked)}
        if not as_json:
            console.print(
                f"checked {report.checked} objects against Kubernetes {loaded.cluster.kubernetes} and the CRDs: all valid"
            )
            for name in report.unchecked:
                console.print(f"  [yellow]not checked[/] {name}", highlight=False)
    paths = write_bundle(bundle, out, force=force)
    if as_json:
        kept = str(target.keep_as) if target.keep_as else None
        document |= {"output": str(target.path), "files": [str(p) for p in paths], "kept": kept}
        typer.echo(json.dumps(document, indent=2))
        return
    console.print(f"wrote {len(paths)} files to {out}:", soft_wrap=True)
    for path in paths:
        console.print(f"  {path.relative_to(target.path)}", highlight=False, soft_wrap=True)
    print_kept(target)
