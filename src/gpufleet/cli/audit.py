"""``gpufleet audit who|why|report|verify|export``: parsing and printing only.

Every ``audit`` command here only reads: it opens the ledger read-only and refuses a missing or
foreign database (exit 2). ``keygen``, ``checkpoint``, ``prove`` and ``upgrade`` live in
``cli/checkpoint.py``; ``gpufleet record``, which writes the ledger, in ``cli/record.py``.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpufleet.cli.audit_common import (
    DEFAULT_LEDGER,
    EXIT_FINDING,
    FLEET_LEDGER_HELP,
    audited,
    open_read,
    print_verdict,
    workload_name,
)
from gpufleet.cli.common import console, guarded
from gpufleet.errors import InputError
from gpufleet.files import write_text
from gpufleet.ledger.records import format_time
from gpufleet.policy import load_policy

if TYPE_CHECKING:
    from gpufleet.ledger.store import Ledger

audit_app = typer.Typer(
    name="audit",
    help="Answer who held which GPUs, why a workload waited, and prove the ledger intact.",
    no_args_is_help=True,
)


def _time(value: str, option: str) -> datetime:
    """ISO-8601; a time without a zone is UTC."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError.one(f"not an ISO-8601 time: {value!r} (e.g. 2026-11-02T08:00:00Z)", path=option) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _open(ledger: str) -> Ledger:
    return open_read(ledger)


@audit_app.command()
@guarded
@audited
def who(
    *,
    node: Annotated[str, typer.Option("--node", help="Node name.")],
    at: Annotated[str, typer.Option("--at", help="ISO-8601 time (UTC when no zone is given).")],
    gpu: Annotated[
        str | None, typer.Option("--gpu", help="Device ID on the node (GPU index, MIG or DRA device).")
    ] = None,
    ledger: Annotated[list[str] | None, typer.Option("--ledger", help=FLEET_LEDGER_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="Always a table, as wide as its longest values.")] = False,
) -> None:
    """Who held GPUs on a node at a time: workload, team, model, data class, checkpoint (and cluster)."""
    from gpufleet.ledger import fleet

    moment = _time(at, "--at")
    refs = fleet.parse_refs(ledger or [DEFAULT_LEDGER])
    with ExitStack() as stack:
        opened = [(ref, stack.enter_context(_open(ref.url))) for ref in refs]
        holdings = fleet.who(opened, node, moment, gpu)
    rows = [
        {
            "cluster": f.cluster,
            "workload": f"{h.allocation.namespace}/{h.allocation.name}",
            "attempt": h.allocation.attempt,
            "team": h.allocation.team,
            "model": h.allocation.model,
            "dataClass": h.allocation.data_class,
            "checkpoint": h.allocation.checkpoint,
            "gpus": h.gpus,
            "resource": h.allocation.gpu_resource,
            "devices": list(h.devices),
            "gpuModel": h.gpu_model,
            "from": format_time(h.allocation.quota_reserved) if h.allocation.quota_reserved else None,
            "until": format_time(h.allocation.finished) if h.allocation.finished else None,
            "simulated": h.allocation.simulated,
        }
        for f in holdings
        for h in (f.holding,)
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    where = "any cluster's ledger" if len(refs) > 1 else "the ledger"
    if not rows:
        console.print(f"Nobody held GPUs on {node} at {format_time(moment)} according to {where}.")
        return
    clustered = any(f.cluster is not None for f in holdings)
    headers: tuple[str, ...] = (
        "workload",
        "team",
        "model",
        "data class",
        "checkpoint",
        "GPUs",
        "devices",
        "from",
        "until",
    )
    cells: list[tuple[str, ...]] = [
        (
            f"{h.allocation.namespace}/{h.allocation.name}" + (" [simulated]" if h.allocation.simulated else ""),
            h.allocation.team or "–",
            h.allocation.model or "–",
            h.allocation.data_class or "–",
            h.allocation.checkpoint or "–",
            f"{h.gpus} × {h.allocation.gpu_resource}",
            ",".join(h.devices) or "not recorded",
            format_time(h.allocation.quota_reserved) if h.allocation.quota_reserved else "–",
            format_time(h.allocation.finished) if h.allocation.finished else "still held",
        )
        for f in holdings
        for h in (f.holding,)
    ]
    if clustered:
        headers = ("cluster", *headers)
        cells = [(f.cluster or "–", *row) for f, row in zip(holdings, cells, strict=True)]
    _print_uncut(f"GPUs on {node} at {format_time(moment)}", headers, cells, wide=wide)


def _print_uncut(title: str, headers: tuple[str, ...], rows: list[tuple[str, ...]], *, wide: bool) -> None:
    """A table when it fits the terminal (or with --wide, at its full width); otherwise one block
    per row, "field: value" per line. Either way no value is ever cut or folded mid-word."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    needed = sum(widths) + 3 * len(widths) + 1
    if wide or needed <= console.width:
        table = Table(title=Text(title))
        for header in headers:
            table.add_column(header, no_wrap=True)
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        # --wide: a console exactly as wide as the table, whatever the terminal (rich caps at its width)
        out = Console(width=max(needed, console.width), file=console.file) if wide else console
        out.print(table, crop=False)
        return
    console.print(Text(title), soft_wrap=True)
    for row in rows:
        console.print()
        for header, cell in zip(headers, row, strict=True):
            console.print(Text(f"  {header}: {cell}"), soft_wrap=True)


@audit_app.command()
@guarded
@audited
def why(
    *,
    workload: Annotated[str, typer.Argument(metavar="NAMESPACE/NAME", help="The Workload (or the Job's Workload).")],
    ledger: Annotated[list[str] | None, typer.Option("--ledger", help=FLEET_LEDGER_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Why a workload waited: each pending reason, who held the quota, preemptions, where it ran.

    With several --ledger (one per worker of a federation), each cluster's account of its copy."""
    from gpufleet.ledger import fleet, queries

    namespace, name = workload_name(workload)
    refs = fleet.parse_refs(ledger or [DEFAULT_LEDGER])
    with ExitStack() as stack:
        opened = [(ref, stack.enter_context(_open(ref.url))) for ref in refs]
        found = fleet.why(opened, namespace, name)
    if as_json:
        if len(refs) == 1:  # one ledger: the one-cluster shape, as before, with the cluster named
            typer.echo(
                json.dumps({**queries.explain_json(found[0].explanation), "cluster": found[0].cluster}, indent=2)
            )
        else:
            clusters = [{"cluster": f.cluster, **queries.explain_json(f.explanation)} for f in found]
            typer.echo(json.dumps({"workload": f"{namespace}/{name}", "clusters": clusters}, indent=2))
        return
    for f in found:
        if len(refs) > 1 or f.cluster is not None:
            console.print(f"cluster {f.cluster or '(not named)'}:", markup=False, highlight=False, soft_wrap=True)
        for line in queries.explain_text(f.explanation):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
            console.print()


@audit_app.command()
@guarded
@audited
def report(
    *,
    start: Annotated[str, typer.Option("--from", help="Window start, ISO-8601.")],
    end: Annotated[str, typer.Option("--to", help="Window end, ISO-8601.")],
    weight: Annotated[
        list[str] | None, typer.Option("--weight", help="TEAM=WEIGHT (repeat), to compare shares.")
    ] = None,
    policy: Annotated[Path | None, typer.Option("--policy", help="Take the teams' weights from this policy.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, csv, json or html.")] = "table",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file instead of the terminal.")] = None,
    ledger: Annotated[list[str] | None, typer.Option("--ledger", help=FLEET_LEDGER_HELP)] = None,
) -> None:
    """Per team and flavor: GPU-hours, share against weight, waits p50/p95, preemptions, labels seen.

    With several --ledger (one per worker of a federation), per cluster too: every row names its
    cluster, and a share is of that cluster's GPU-hours."""
    from gpufleet.ledger import fleet
    from gpufleet.ledger import report as reports

    window = (_time(start, "--from"), _time(end, "--to"))
    if window[1] <= window[0]:
        raise InputError.one("--to must be after --from", path="--to")
    weights: dict[str, float] = {}
    if policy is not None:
        weights = {t.name: float(t.weight) for t in load_policy(policy).teams}
    for item in weight or []:
        team, sep, value = item.partition("=")
        try:
            weights[team] = float(value) if sep else -1.0
        except ValueError:
            weights[team] = -1.0
        if weights[team] < 0:
            raise InputError.one(f"expected TEAM=WEIGHT (a number ≥ 0), got {item!r}", path="--weight")
    formats = {"csv": reports.to_csv, "json": reports.to_json, "html": reports.to_html}
    if fmt not in (*formats, "table"):
        raise InputError.one(f"unknown format {fmt!r}; use table, csv, json or html", path="--format")
    refs = fleet.parse_refs(ledger or [DEFAULT_LEDGER])
    with ExitStack() as stack:
        opened = [(ref, stack.enter_context(_open(ref.url))) for ref in refs]
        result = fleet.report(opened, *window, weights or None)
    if fmt != "table":
        text = formats[fmt](result)
        if out is None:
            typer.echo(text, nl=False)
        else:
            write_text(out, text)
        return
    _print_report(result)


def _print_report(result: Any) -> None:
    table = Table(title=f"GPU allocations {format_time(result.start)} – {format_time(result.end)}")
    headers: tuple[str, ...] = (
        "team",
        "flavor",
        "source",
        "GPU-h",
        "share",
        "weight",
        "wait p50",
        "wait p95",
        "preempted",
        "models",
        "data classes",
    )
    if result.clustered:
        headers = ("cluster", *headers)
    for column in headers:
        table.add_column(column)

    from gpufleet.ledger.queries import duration_text

    def secs(value: float | None) -> str:
        return "–" if value is None else duration_text(value)

    for r in result.rows:
        table.add_row(
            *((r.cluster or "–",) if result.clustered else ()),
            r.team,
            r.flavor,
            "simulated" if r.simulated else "recorded",
            f"{r.gpu_hours:.2f}",
            f"{r.share:.1%}",
            "–" if r.weight_share is None else f"{r.weight_share:.1%}",
            secs(r.wait_p50_s),
            secs(r.wait_p95_s),
            str(r.preemptions),
            ", ".join(r.models),
            ", ".join(r.data_classes),
        )
    console.print(table)
    if result.incomplete:
        console.print(f"Workloads without complete labels: {', '.join(result.incomplete)}", markup=False)
    if result.untimed_preemptions:
        console.print(
            "Preempted at a time never observed (Kueue's eviction count; counted in no window):"
            f" {', '.join(result.untimed_preemptions)}",
            markup=False,
        )
    else:
        console.print("Every workload carried team, model and data class labels.")


@audit_app.command()
@guarded
@audited
def verify(
    *,
    ledger: Annotated[list[str] | None, typer.Option("--ledger", help=FLEET_LEDGER_HELP)] = None,
    head: Annotated[
        str | None, typer.Option("--head", help="A chain head published earlier, to check the end too.")
    ] = None,
    checkpoint: Annotated[
        Path | None, typer.Option("--checkpoint", help="A signed checkpoint: prove the ledger extends it.")
    ] = None,
    pubkey: Annotated[
        Path | None, typer.Option("--pubkey", help="The public key the checkpoint must be signed with.")
    ] = None,
    origin: Annotated[
        str | None, typer.Option("--origin", help="The checkpoint's expected origin (default: the key's name).")
    ] = None,
) -> None:
    """Check the chain and every table derived from it; with --checkpoint, that the ledger extends it.

    With several --ledger (one per worker of a federation), each chain on its own, each verdict
    naming its ledger. Exit 0 intact, 1 a finding (tampered, truncated, forked, bad signature) in
    any of them, 2 unusable input.
    """
    from gpufleet.cli.checkpoint import read_pubkey, read_text
    from gpufleet.ledger import fleet

    if (checkpoint is None) != (pubkey is None):
        raise InputError.one("--checkpoint and --pubkey go together", path="--checkpoint" if pubkey else "--pubkey")
    refs = fleet.parse_refs(ledger or [DEFAULT_LEDGER])
    if len(refs) > 1:
        _verify_fleet(refs, one_chain_only=[o for o, v in (("--head", head), ("--checkpoint", checkpoint)) if v])
        return
    url = refs[0].url
    if checkpoint is not None and pubkey is not None:
        signed, key = read_text(checkpoint, "--checkpoint"), read_pubkey(pubkey)
        from gpufleet.ledger import checkpoint as checkpoints

        with _open(url) as opened:
            result = checkpoints.check(opened, signed, key, origin=origin, file=str(checkpoint))
        if result.verdict is not None:
            print_verdict(result.verdict, quiet_ok=True)
        for problem in result.problems:
            console.print(
                f"[bold red]INCONSISTENT[/]: {problem.reason} — {problem.message}", highlight=False, soft_wrap=True
            )
        if not result.ok:
            raise typer.Exit(EXIT_FINDING)
        cp, verdict = result.checkpoint, result.verdict
        assert verdict is not None
        console.print(
            f"OK: the ledger ({verdict.size} entries) extends checkpoint {cp.origin!r} at size {cp.size}"
            f" (signed by {key.name}); consistency proof of {len(result.proof)} hashes verified",
            highlight=False,
            soft_wrap=True,
        )
        return
    with _open(url) as opened:
        verdict = opened.verify(expected_head=head)
    print_verdict(verdict, quiet_ok=False)
    if not verdict.ok:
        raise typer.Exit(EXIT_FINDING)


def _verify_fleet(refs: list[Any], one_chain_only: list[str]) -> None:
    """Each ledger's chain on its own, every verdict printed under its ledger's name (a finding in
    one does not stop the others being checked); exit 1 when any has a finding."""
    from gpufleet.ledger import fleet

    if one_chain_only:
        raise InputError.one(
            f"{one_chain_only[0]} belongs to one chain: verify each ledger against its own with one --ledger",
            path=one_chain_only[0],
        )
    with ExitStack() as stack:
        opened = [(ref, stack.enter_context(_open(ref.url))) for ref in refs]
        verdicts = fleet.verify(opened)
    for ref, verdict in zip(refs, verdicts, strict=True):
        console.print(f"ledger {ref.label}:", markup=False, highlight=False, soft_wrap=True)
        print_verdict(verdict, quiet_ok=False, indent="  ")
    failed = [ref.label for ref, v in zip(refs, verdicts, strict=True) if not v.ok]
    if failed:
        console.print(
            f"[bold red]{len(failed)} of {len(refs)} ledgers failed:[/] {', '.join(failed)}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_FINDING)
    console.print(f"All {len(refs)} ledgers intact, each chain verified on its own.", highlight=False)


@audit_app.command("export")
@guarded
@audited
def export_command(
    *,
    out: Annotated[Path, typer.Option("--out", help="Output file.")],
    fmt: Annotated[str, typer.Option("--format", help="csv or parquet.")] = "csv",
    waits: Annotated[bool, typer.Option("--waits", help="Export wait intervals instead of allocations.")] = False,
    ledger: Annotated[list[str] | None, typer.Option("--ledger", help=FLEET_LEDGER_HELP)] = None,
) -> None:
    """Export the current allocations (or waits) as CSV or Parquet.

    With several --ledger (one per worker of a federation), one file whose first column names each
    row's cluster; every ledger is read before anything is written."""
    from gpufleet.ledger import export, fleet

    export.check_target(out, fmt)
    refs = fleet.parse_refs(ledger or [DEFAULT_LEDGER])
    with ExitStack() as stack:
        opened = [(ref, stack.enter_context(_open(ref.url))) for ref in refs]
        found = fleet.export_rows(opened, "WaitInterval" if waits else "Allocation")
    rows = export.write(out, fmt, found)
    console.print(f"wrote {rows} rows to {out}", highlight=False, soft_wrap=True)


def _register() -> None:
    from gpufleet.cli import checkpoint

    checkpoint.register(audit_app)


_register()
