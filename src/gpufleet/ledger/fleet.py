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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from gpufleet.errors import InputError
from gpufleet.ledger import queries
from gpufleet.ledger.records import Allocation, WaitInterval
from gpufleet.ledger.store import Ledger

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
