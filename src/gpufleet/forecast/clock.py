"""Whose clock *now* is, and whether the ledger's clock agrees with the cluster's.

*Now* is the API server's (the ``Date`` header of its reply to the listing, ``kube.KueueState``),
not this machine's: every time the forecast reads (a Workload's creation, its admission) was stamped
by the cluster, so a running workload's elapsed time and a waiting one's wait are the cluster's own
differences, whatever this machine's clock says. Only where the server sent no ``Date`` does the
local clock stand in, and the answer says so.

The ledger is checked against that *now* and against the cluster's own stamps, two ways:

- the Workloads both hold (same UID): the recorder copies a Workload's ``creationTimestamp`` into
  every attempt's ``created``, so a ledger recorded from this cluster agrees to the second; the
  median difference is the offset between the two clocks, measured;
- records stamped after *now*: a ledger cannot have seen the future (it is read before the cluster
  is listed), so its clock runs at least that far ahead.

Either beyond ``TOLERANCE_S`` declines the forecast (``LedgerClockSkew``, the offset in the message)
rather than shifting the ledger by it. Why not correct: a ledger of this cluster cannot be skewed (it
holds the cluster's stamps, not the recorder's clock), so a skew says the ledger was written from
another clock: another cluster's, an import shifted in time, a hand-made one. Its runtimes, teams and
shapes are then not known to be this fleet's, which no shift repairs; and the second check gives only
a lower bound of the offset, not a figure to shift by. The answer names the offset so the user can
mend the source (or pass the right ledger), never a figure resting on a ledger that disagrees.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from gpufleet.durations import human
from gpufleet.ledger.records import Allocation, Record

SKEW = "LedgerClockSkew"
TOLERANCE_S = 5  # both sides are one-second stamps of the same clock; a few seconds is not a skew
SERVER = "the API server's Date header"
LOCAL = "this machine's clock (the API server sent no Date header)"


def cluster_now(server: datetime | None, local: datetime) -> tuple[datetime, str]:
    """The cluster's *now* and where it came from."""
    return (local, LOCAL) if server is None else (server, SERVER)


def _stamps(r: Allocation) -> list[datetime]:
    return [t for t in (r.created, r.quota_reserved, r.admitted, r.started, r.finished) if t is not None]


def ledger_skew(now: datetime, workloads: Sequence[tuple[str, datetime | None]], records: Sequence[Record]) -> str:
    """Empty where the ledger's clock agrees with the cluster's; else ``LedgerClockSkew`` and the
    offset. ``workloads``: the cluster's (UID, creation time) of each Workload it holds."""
    allocations = [r for r in records if isinstance(r, Allocation)]
    created = {r.workload_uid: r.created for r in allocations}
    offsets = sorted(
        int((created[uid] - born).total_seconds()) for uid, born in workloads if uid in created and born is not None
    )
    if offsets:
        median = offsets[(len(offsets) - 1) // 2]
        if abs(median) > TOLERANCE_S:
            side = "ahead of" if median > 0 else "behind"
            return (
                f"{SKEW}: the ledger's clock is {human(abs(median))} {side} the cluster's (offset {median:+d} s, "
                f"the median over the {len(offsets)} Workloads both hold: the ledger's creation time against the "
                "cluster's; a ledger recorded from this cluster agrees to the second, so this one was written "
                "from another clock; check --ledger)"
            )
    latest = max((t for r in allocations for t in _stamps(r)), default=None)
    if latest is not None:
        ahead = int((latest - now).total_seconds())
        if ahead > TOLERANCE_S:
            return (
                f"{SKEW}: the ledger holds records stamped up to {human(ahead)} after the cluster's now "
                f"({now.isoformat().replace('+00:00', 'Z')}): its clock is at least {ahead} s ahead of "
                f"the cluster's (offset ≥ +{ahead} s), so its history is not this cluster's as of now; check --ledger"
            )
    return ""
