"""``audit who`` and ``audit why`` over a federation: one ledger per worker cluster, one answer.

In a MultiKueue federation the manager's Workload only names the worker that admitted it
(``status.clusterName``); the pods, the nodes and the worker's own quota decisions live on the
worker. So each worker runs its own recorder (``record --cluster NAME``) writing its own ledger: one
writer per chain stays the rule, each chain is verified on its own (``audit verify --ledger``), and
every record names its cluster inside the signed body. This module only reads several such ledgers
and labels each answer with the cluster that holds it.

A ledger is given as ``URL`` or ``NAME=URL``. NAME labels the records that name no cluster (a ledger
written before ``--cluster``, or by a one-cluster recorder); a record's own cluster always wins,
since the chain signs it and the command line does not.

``audit report`` and ``audit export`` over several ledgers name the cluster on every row, and are
refused (exit 2, nothing written) where they could not: a ledger whose records name no cluster and
that was given no NAME, or two ledgers holding records of one cluster (one chain per cluster is the
rule; two would put two rows under one name). ``audit verify`` checks each chain on its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from gpufleet.errors import InputError
from gpufleet.ledger import connect, queries
from gpufleet.ledger import export as exports
from gpufleet.ledger import report as reports
from gpufleet.ledger.records import Allocation, WaitInterval
from gpufleet.ledger.store import Ledger
from gpufleet.ledger.verification import LedgerVerdict

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # a cluster name: a DNS label, as in the policy


def cluster_name(text: str, option: str) -> str:
    """A cluster name as the policy spells one (``clusters[].name``), or exit 2 saying so."""
    if not (_NAME.match(text) and len(text) <= 63):
        raise InputError.one(
            f"{text!r} is not a cluster name (lower-case letters, digits and '-', at most 63, as in the policy)",
            path=option,
        )
    return text


@dataclass(frozen=True, slots=True)
class LedgerRef:
    """One ``--ledger`` value: where the ledger is, and the cluster name given for it, if any."""

    url: str
    name: str | None

    @property
    def shown(self) -> str:
        """The ledger as messages name it: the user's text, a password hidden."""
        return connect.parse(self.url).shown

    @property
    def label(self) -> str:
        """How answers name this ledger: its NAME, else where it is."""
        return self.name or self.shown


def parse_ref(text: str, option: str = "--ledger") -> LedgerRef:
    """``NAME=URL`` when the part before the first ``=`` is a cluster name (a DNS label of at most 63
    characters) and a URL follows; otherwise the whole text is the URL (a PostgreSQL URL's query may
    hold ``=``, its scheme ``postgresql://`` never is a DNS label followed by ``=``)."""
    name, sep, url = text.partition("=")
    if sep and _NAME.match(name) and len(name) <= 63:
        if not url:
            raise InputError.one(f"expected NAME=URL, got {text!r}: no ledger after the '='", path=option)
        return LedgerRef(url, name)
    return LedgerRef(text, None)


def parse_refs(texts: list[str], option: str = "--ledger") -> list[LedgerRef]:
    """Every ``--ledger``, each URL once and each name once: two answers from one chain would count
    its allocations twice, and two ledgers under one name would hide which one answered."""
    refs = [parse_ref(t, option) for t in texts]
    for what, values in (("ledger", [r.url for r in refs]), ("cluster name", [r.name for r in refs if r.name])):
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise InputError.one(f"{what} given twice: {', '.join(repeated)}", path=option)
    return refs


def cluster_of(record: Allocation | WaitInterval, ref: LedgerRef) -> str | None:
    """The cluster an answer names: the record's own (signed), else the name given for its ledger."""
    return record.cluster if record.cluster is not None else ref.name


@dataclass(frozen=True, slots=True)
class FleetHolding:
    """One holding of a node's GPUs, and the cluster whose ledger recorded it."""

    cluster: str | None
    holding: queries.Holding


def who(ledgers: list[tuple[LedgerRef, Ledger]], node: str, at: datetime, device: str | None) -> list[FleetHolding]:
    """``queries.who`` in every ledger. Node names are unique only within a cluster, so a node name
    two workers share answers with both, each row naming its cluster. Ordered by (cluster, the one
    ledger's order: namespace, name, attempt); a row without a cluster sorts first."""
    found = [
        FleetHolding(cluster_of(h.allocation, ref), h)
        for ref, ledger in ledgers
        for h in queries.who(ledger, node, at, device)
    ]
    return sorted(
        found,
        key=lambda f: (
            f.cluster or "",
            f.holding.allocation.namespace,
            f.holding.allocation.name,
            f.holding.allocation.attempt,
            f.holding.allocation.workload_uid,
        ),
    )


@dataclass(frozen=True, slots=True)
class FleetExplanation:
    """One cluster's account of a workload (in a federation: its copy of the manager's Workload)."""

    cluster: str | None
    explanation: queries.Explanation


def why(ledgers: list[tuple[LedgerRef, Ledger]], namespace: str, name: str) -> list[FleetExplanation]:
    """``queries.why`` in every ledger that knows the workload. MultiKueue creates each worker's copy
    under the manager's namespace and name (a new UID), so the name finds every cluster's copy: the
    one that ran, and those that waited until Kueue removed them. Ordered by cluster name; exit 2
    when no ledger knows it."""
    found: list[FleetExplanation] = []
    for ref, ledger in ledgers:
        if len(ledgers) > 1 and not ledger.current_records(namespace=namespace, name=name):
            continue  # one ledger: ``queries.why``'s own error names it
        explanation = queries.why(ledger, namespace, name)
        records: list[Allocation | WaitInterval] = [*explanation.attempts, *(s.wait for s in explanation.waits)]
        cluster = next((r.cluster for r in records if r.cluster is not None), ref.name)
        found.append(FleetExplanation(cluster, explanation))
    if not found:
        raise InputError.one(f"no ledger given has a workload {namespace}/{name}", path="WORKLOAD")
    return sorted(found, key=lambda f: (f.cluster or "", f.explanation.workload_uid))


@contextmanager
def reading(ref: LedgerRef) -> Iterator[None]:
    """A database error while reading one of several ledgers: exit 2 naming that ledger."""
    try:
        yield
    except SQLAlchemyError as exc:
        orig = getattr(exc, "orig", None) or exc
        raise InputError.one(f"cannot read the ledger: {str(orig).strip()}", file=ref.shown, path="--ledger") from None


def _one_chain_per_cluster(seen: list[tuple[LedgerRef, set[str | None]]]) -> None:
    """Every row names its cluster (where several ledgers are read), and no cluster comes from two ledgers."""
    owner: dict[str, LedgerRef] = {}
    for ref, clusters in seen:
        if None in clusters and len(seen) > 1:
            raise InputError.one(
                f"its records name no cluster (written without `record --cluster`): give it as NAME={ref.url}",
                file=ref.shown,
                path="--ledger",
            )
        for cluster in sorted(c for c in clusters if c is not None):
            if cluster in owner:
                raise InputError.one(
                    f"holds records of cluster {cluster}, as {owner[cluster].shown} does: give one ledger per"
                    " cluster (each cluster's recorder writes one chain)",
                    file=ref.shown,
                    path="--ledger",
                )
            owner[cluster] = ref


def report(
    ledgers: list[tuple[LedgerRef, Ledger]],
    start: datetime,
    end: datetime,
    weights: Mapping[str, float] | None = None,
) -> reports.Report:
    """``audit report`` per ledger, side by side: each row's cluster named, each share of its own cluster."""
    built: list[reports.Report] = []
    for ref, ledger in ledgers:
        with reading(ref):
            built.append(reports.report(ledger, start, end, weights, cluster=ref.name))
    _one_chain_per_cluster([(ref, {row.cluster for row in r.rows}) for (ref, _), r in zip(ledgers, built, strict=True)])
    return reports.combined(built)


def export_rows(ledgers: list[tuple[LedgerRef, Ledger]], kind: str) -> list[dict[str, Any]]:
    """``audit export``'s rows from every ledger, each with its cluster in the first column; read whole
    before anything is written. One ledger given without a name keeps the one-cluster columns."""
    if len(ledgers) == 1 and ledgers[0][0].name is None:
        with reading(ledgers[0][0]):
            return [exports.flat(r) for r in exports.records(ledgers[0][1], kind)]
    rows: list[dict[str, Any]] = []
    seen: list[tuple[LedgerRef, set[str | None]]] = []
    for ref, ledger in ledgers:
        with reading(ref):
            found = exports.records(ledger, kind)
        clusters = [cluster_of(r, ref) for r in found]
        seen.append((ref, set(clusters)))
        rows += [exports.flat(r, c or "") for r, c in zip(found, clusters, strict=True)]
    _one_chain_per_cluster(seen)
    return rows


def verify(ledgers: list[tuple[LedgerRef, Ledger]], expected_head: str | None = None) -> list[LedgerVerdict]:
    """Each chain verified on its own (a federation's chains share nothing), in the order given."""
    verdicts = []
    for ref, ledger in ledgers:
        with reading(ref):
            verdicts.append(ledger.verify(expected_head=expected_head))
    return verdicts
