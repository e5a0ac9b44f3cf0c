"""Reading the ledger for evidence: the allocations and waits that overlap the windows, as a ``LedgerView``.

This is the one place evidence touches the ledger's storage. The ledger is opened read-only in
spirit: no migration is run (a report must not change the record it reports on), and a path that
does not exist is an error rather than a new, empty ledger.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gpufleet.errors import InputError
from gpufleet.evidence.waits import HeldSpan, LedgerView, WaitSpan
from gpufleet.evidence.window import CLI, Window
from gpufleet.ledger.records import Allocation, WaitInterval


def view(allocations: Iterable[Allocation], waits: Iterable[WaitInterval]) -> LedgerView:
    """GPUs are held from the start of the pods (admission when the start is unknown) until the finish."""
    held: list[HeldSpan] = []
    spans: list[WaitSpan] = []
    simulated = False
    for a in allocations:
        simulated |= a.simulated
        start = a.started or a.admitted
        if start is None:
            continue  # never admitted: it held nothing
        held.extend(
            HeldSpan(
                namespace=a.namespace, node=p.node, resource=a.gpu_resource, count=p.gpus, start=start, end=a.finished
            )
            for p in a.placements
        )
    for w in waits:
        simulated |= w.simulated
        spans.append(WaitSpan(namespace=w.namespace, start=w.start, end=w.end))
    return LedgerView(held=tuple(held), waits=tuple(spans), simulated=simulated)


def read(location: str, windows: tuple[Window, Window]) -> LedgerView:
    if "://" not in location and not Path(location).expanduser().exists():
        raise InputError.one(f"no ledger at {location!r}", file=CLI, path="--ledger")
    from sqlalchemy.exc import SQLAlchemyError  # SQLAlchemy loads when a ledger is read, not with the CLI

    from gpufleet.ledger.store import Ledger

    span = (windows[0].start, windows[1].end)
    try:
        with Ledger.open(location, migrate=False) as ledger:
            return view(ledger.allocations(overlapping=span), ledger.waits(overlapping=span))
    except SQLAlchemyError as exc:
        raise InputError.one(
            f"cannot read the ledger {location!r}: {getattr(exc, 'orig', None) or exc}", file=CLI, path="--ledger"
        ) from None
