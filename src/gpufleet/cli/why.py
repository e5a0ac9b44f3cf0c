"""``gpufleet why NS/NAME``: why a live Workload (or the Job owning it) waits, and what would let it in."""

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
from gpufleet.errors import InputError
from gpufleet.explain.report import why_json
from gpufleet.explain.why import explain
from gpufleet.explain.workers import (
    WorkerCopy,
    kubeconfig_text,
    kueue_namespace,
    unreachable,
    worker_copy,
    worker_sources,
    worth_asking,
)
from gpufleet.render.worker_secret import kubeconfig_problems
from gpufleet.twin.resources import format_quantity
from gpufleet.yamldoc import read_document, read_single

KubeconfigOpt = Annotated[
    Path | None, typer.Option("--kubeconfig", help="Kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
]
KueueConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kueue-config",
        help="Kueue's manager Configuration (YAML), where the kueue-system/kueue-manager-config ConfigMap "
        "is not readable or not where Kueue reads it from",
    ),
]
Doc = dict[str, Any]


def target(text: str) -> tuple[str, str]:
    namespace, slash, name = text.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise InputError.one(f"expected NAMESPACE/NAME of a Workload or Job, got {text!r}", path="NS/NAME")
    return namespace, name


def _worker_copies(report: Doc, workers: list[tuple[str, Path]], kueue_config: Path | None) -> list[Doc] | None:
    """Each worker's copy, while no worker holds the Workload (None: not asked)."""
    dispatch = report.get("dispatch") or {}
    if not workers or not worth_asking(dispatch.get("reason")):
        return None
    namespace, _, name = str(report["workload"]).partition("/")
    return [_worker_copy(c, path, kueue_config, namespace, name).to_json() for c, path in workers]


def _workers(values: list[str]) -> list[tuple[str, Path]]:
    """``--worker CLUSTER=KUBECONFIG`` values, each cluster once, or exit 2 saying what was expected."""
    out: list[tuple[str, Path]] = []
    for value in values:
        cluster, sep, path = value.partition("=")
        if not sep or not cluster or not path:
            raise InputError.one(f"expected CLUSTER=KUBECONFIG, got {value!r}", path="--worker")
        if any(cluster == c for c, _ in out):
            raise InputError.one(f"worker {cluster} given twice", path="--worker")
        out.append((cluster, Path(path)))
    return out


def _worker_copy(
    cluster: str, source: Path | kube.InlineKubeconfig, kueue_config: Path | None, namespace: str, name: str
) -> WorkerCopy:
    """One worker's copy; a worker that cannot be read is reported as such, not as the whole answer's
    failure (a lost worker is exactly when a manager's user asks)."""
    try:
        state = kube.read_kueue_state(source)
        config, _ = configuration(state, kueue_config)
    except InputError as exc:
        return unreachable(cluster, "; ".join(p.message for p in exc.problems))
    return worker_copy(cluster, state.objects, namespace, name, config)


def _refused(text: str, source: str) -> str:
    """What Kueue would refuse in a worker's kubeconfig, as one message ("" when nothing): a refused
    one is never used, above all an exec plugin, which would run a command the Secret names."""
    try:
        problems = list(kubeconfig_problems(read_document(text, source)))
    except InputError as exc:
        problems = exc.problems
    return "; ".join(f"{source}: {p.message}" for p in problems)


def copies_from_manager(
    report: Doc, manager: Path | None, manager_config: Doc | None, kueue_config: Path | None
) -> list[Doc] | None:
    """Each worker's copy, the workers read from the manager as its Kueue reads them: every
    MultiKueueCluster, and the kubeconfig in the Secret it names (in Kueue's namespace). None while
    a worker holds the Workload (not asked, so no Secret is read)."""
    dispatch = report.get("dispatch") or {}
    if not worth_asking(dispatch.get("reason")):
        return None
    sources = worker_sources(kube.read_multikueue_clusters(manager))
    if not sources:
        raise InputError.one("the manager has no MultiKueueCluster: no worker to ask", path="--workers-from-manager")
    secrets = kueue_namespace(manager_config)
    namespace, _, name = str(report["workload"]).partition("/")
    copies = []
    for source in sources:
        problem, text = source.problem, None
        if source.secret is not None:
            try:
                text, problem = kubeconfig_text(
                    kube.read_secret(manager, secrets, source.secret), secrets, source.secret
                )
            except InputError as exc:
                problem = "; ".join(p.message for p in exc.problems)
            problem = problem or _refused(text or "", f"Secret {secrets}/{source.secret}")
        if text is None or problem:
            copy = unreachable(source.cluster, f"{problem}; {source.active}")
        else:
            inline = kube.InlineKubeconfig(text, f"Secret {secrets}/{source.secret}")
            copy = _worker_copy(source.cluster, inline, kueue_config, namespace, name)
            if copy.state == "Unreachable":
                copy = unreachable(source.cluster, f"{copy.message}; {source.active}")
        copies.append(copy.to_json())
    return copies


def configuration(state: kube.KueueState, path: Path | None) -> tuple[Doc | None, str]:
    """Kueue's Configuration as a mapping, from ``--kueue-config`` or the ConfigMap, and where it came from."""
    if path is not None:
        try:
            text, source = path.read_text(encoding="utf-8"), str(path)
        except OSError as exc:
            raise InputError.one(f"cannot read: {exc.strerror}", file=str(path)) from None
    elif state.configuration is not None:
        text, source = state.configuration, state.configuration_note
    else:
        return None, f"Kueue's defaults ({state.configuration_note})"
    doc = read_single(text, source)
    data = doc.data if doc is not None else None
    if not isinstance(data, dict) or data.get("kind") != "Configuration":
        raise InputError.one("expected Kueue's Configuration (kind: Configuration)", file=source)
    return data, source


@guarded
def why(
    workload: Annotated[
        str, typer.Argument(help="NAMESPACE/NAME of a Workload, or of the Job (JobSet, RayJob...) that owns one")
    ],
    *,
    kubeconfig: KubeconfigOpt = None,
    kueue_config: KueueConfigOpt = None,
    policy: Annotated[
        Path | None,
        typer.Option("--policy", help="The fleet policy the cluster was rendered from: adds the expected admission"),
    ] = None,
    ledger: Annotated[
        str | None, typer.Option("--ledger", help="The ledger the expected admission's runtimes come from")
    ] = None,
    worker: Annotated[
        list[str] | None,
        typer.Option(
            "--worker",
            help="On a MultiKueue manager: CLUSTER=KUBECONFIG of a worker (repeat); while no worker holds the "
            "Workload, each worker's copy is explained",
        ),
    ] = None,
    workers_from_manager: Annotated[
        bool,
        typer.Option(
            "--workers-from-manager",
            help="On a MultiKueue manager: take the workers from its MultiKueueClusters and their kubeconfig "
            "Secrets, as Kueue does (instead of --worker)",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Why a Workload waits: Kueue's reason, what holds its quota, what lets it in; with --policy, when it starts.

    Reads only. With --policy (and --ledger for the runtimes), the expected admission is added."""
    workers = _workers(worker or [])  # before any cluster is reached: a mistake costs no listing
    if workers and workers_from_manager:
        raise InputError.one("give --worker or --workers-from-manager, not both", path="--workers-from-manager")
    namespace, name = target(workload)
    if ledger is not None and policy is None:
        raise InputError.one("its runtimes are for the expected admission, which needs --policy", path="--ledger")
    from gpufleet.cli.forecast import ledger_records

    # read before the cluster, whatever the workload's state: an unreachable or foreign ledger is exit 2
    records = ledger_records(ledger)
    state = kube.read_kueue_state(kubeconfig, with_owners=policy is not None)
    config, source = configuration(state, kueue_config)
    report = why_json(explain(state.objects, namespace, name, config))
    report["kueueConfiguration"] = source
    if workers_from_manager:
        report["workers"] = copies_from_manager(report, kubeconfig, config, kueue_config)
    else:
        report["workers"] = _worker_copies(report, workers, kueue_config)
    report["forecast"] = None
    if policy is not None and report["state"] == "Pending":
        key = f"{namespace}/{report['job'] or name}"
        report["forecast"] = expected(policy, state, (ledger, records), key, report["workload"])
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    print_why(report)


def expected(
    policy: Path, state: kube.KueueState, ledger: tuple[str | None, list[Any]], key: str, workload: str
) -> Doc:
    """The workload's forecast (``gpufleet forecast``'s entry for ``key``, NS/JOB), or why there is
    none (``workload``, NS/NAME of the Workload, left out of the replay). ``ledger``: its URL and the
    allocations read from it."""
    from gpufleet.cli.forecast import cores, live_document
    from gpufleet.forecast.estimate import Settings

    url, records = ledger
    doc = live_document(
        policy, state.objects + state.owners, ledger=url, records=records,
        settings=Settings(workers=cores()), workload=key, server_time=state.server_time,
    )  # fmt: skip
    found = doc["workloads"]
    if found:
        return {**found[0], "basis": doc["basis"]}
    left = [s for s in doc["skipped"] if s["workload"] == workload]
    why = "; ".join(f"{s['reason']}: {s['message']}" for s in left) or "it is not waiting in the replay"
    return {"workload": key, "declined": why, "text": f"no estimate: {why}"}


def amounts(table: dict[str, int]) -> str:
    return ", ".join(f"{k}={format_quantity(v, k.split('/', 1)[-1])}" for k, v in table.items()) or "-"


def _line(label: str, text: str, indent: int = 0) -> None:
    console.print(
        Padding(f"[bold]{label}[/] {escape(text)}" if label else escape(text), (0, 0, 0, indent), expand=False)
    )


def print_why(r: Doc) -> None:
    job = f" ({r.get('ownerKind') or 'Job'} {r['job']})" if r["job"] else ""
    asks = ", ".join(f"{res}={format_quantity(n, res)}" for res, n in r["requests"].items())
    head = f"{r['workload']}{job}: {r['state']}"
    if r["clusterQueue"]:
        head += f" in ClusterQueue {r['clusterQueue']}"
    if asks:
        head += f", priority {r['priority']}, asks {asks}"
    _line("", head)
    kueue = r["kueue"]
    _line("Kueue says:", f"{kueue['reason'] or 'no reason yet'}: {kueue['message'] or '(no message)'}", 2)
    _line("Answer:", f"{r['verdict']['reason']}: {r['verdict']['message']}", 2)
    if r.get("dispatch"):
        _line("MultiKueue:", f"{r['dispatch']['reason']}: {r['dispatch']['text']}", 2)
    for copy in r.get("workers") or []:
        _line(f"Worker {copy['cluster']}:", _copy_text(copy), 4)
    if r.get("forecast"):
        _line("Expected:", r["forecast"]["text"], 2)
    if r["state"] != "Pending" or r["preemption"] is None:
        return
    if r["holders"]:
        holders = Table(title="What holds the quota it needs", title_justify="left")
        for column in ("workload", "team", "priority", "uses", "borrowing"):
            holders.add_column(column)
        for h in r["holders"]:
            team = h["team"] if h["team"] == h["clusterQueue"] else f"{h['team']} (ClusterQueue {h['clusterQueue']})"
            uses = ", ".join(
                f"{format_quantity(n, fr.split('/', 1)[1])} {fr.split('/', 1)[1]} in {fr.split('/', 1)[0]}"
                for fr, n in h["uses"].items()
            )
            holders.add_row(h["workload"], team, str(h["priority"]), uses, "yes" if h["borrowing"] else "no")
        print_table(holders)
    else:
        _line("What holds the quota it needs:", "nothing", 2)
    queues = Table(title="Its cohort's ClusterQueues on that quota", title_justify="left")
    for column in ("ClusterQueue", "team", "flavor/resource", "nominal", "borrowing limit", "in use", "borrowed"):
        queues.add_column(
            column, justify="right" if column in ("nominal", "borrowing limit", "in use", "borrowed") else "left"
        )
    for q in r["clusterQueues"]:
        for fr, nominal in q["nominal"].items():
            resource = fr.split("/", 1)[-1]
            limit = q["borrowingLimit"].get(fr)
            queues.add_row(
                q["name"], q["team"], fr, format_quantity(nominal, resource),
                "∞" if limit is None else format_quantity(limit, resource),
                format_quantity(q["usage"].get(fr, 0), resource), format_quantity(q["borrowed"].get(fr, 0), resource),
            )  # fmt: skip
    print_table(queues)
    _print_remedies(r)


def _copy_text(copy: Doc) -> str:
    verdict, kueue = copy["verdict"], copy["kueue"]
    if copy["state"] in ("NoCopy", "Unreachable"):
        return f"{copy['state']}: {verdict['message']}"
    said = f"{kueue['reason'] or 'no reason yet'}: {kueue['message'] or '(no message)'}"
    return f"{copy['state']}; Kueue says {said}; {verdict['reason']}: {verdict['message']}"


def _print_remedies(r: Doc) -> None:
    console.print("[bold]What would let it in[/]")
    if r["shortfall"]:
        short = ", ".join(f"{s['needed']} {s['resource']} in flavor {s['flavor']}" for s in r["shortfall"])
        _line("must free:", short, 2)
    _line("ahead of it in its ClusterQueue:", ", ".join(r["ahead"]) or "none", 2)
    ends = r["ends"]
    if ends is not None:
        if ends["sufficientSets"]:
            sets = "; ".join("{" + ", ".join(s) + "}" for s in ends["sufficientSets"])
            note = "" if ends["complete"] else f" (searched {ends['trials']} sets, not all)"
            _line(
                "ends that suffice:",
                f"any one of these sets finishing admits it: {sets}{note}. Kueue knows no runtimes, so which "
                "ends first is not knowable from the cluster.",
                2,
            )
        elif ends["candidates"]:
            _line("ends that suffice:", "none: even if every holder ended, the twin would not admit it", 2)
    p = r["preemption"]
    policy = ", ".join(f"{k}: {v}" for k, v in p["policy"].items())
    _line("preemption:", f"{p['reason']} ({policy}). {p['message']}", 2)
    console.print("[bold]Where the twin and Kueue disagree[/]")
    if not r["disagreements"]:
        _line("", "nowhere: the twin reads the same reason and message, and the same quota in use", 2)
    for d in r["disagreements"]:
        _line(f"{d['reason']}:", d["message"], 2)
    for s in r["skipped"]:
        _line("left out of the twin:", s, 2)
    console.print(
        Padding(f"[dim]Kueue configuration: {escape(r['kueueConfiguration'])}[/]", (0, 0, 0, 2), expand=False)
    )
