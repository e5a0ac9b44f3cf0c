"""The forecast checked on a real cluster: what ``gpufleet forecast`` reads at a moment of a real run,
kept, and forecast afterwards against the admissions the run's ledger recorded.

A live forecast is a pure function of three inputs: the Workloads as listed, the ledger's records as
read, and *now*: the API server's ``Date`` header, as the CLI takes it (``clock.cluster_now``; this
machine's clock where the server sent none). A ``Snapshot`` keeps exactly those, taken while the run
goes on (``gpufleet.testbed.world.run_real``'s probes); forecasting from it after the run gives the
answer a user running ``gpufleet forecast`` at that moment would have got, without spending the run's
CPU on the samples (which could shift the races the run decides).

Each Workload waiting at a snapshot is then checked (``calibration.Check``) against its next quota
reservation in the run's final ledger: the first attempt of its Job reserved at or after the listing
(second resolution, as Kueue writes conditions) that had not ended before it, measured from that same
*now*. Both are whole seconds of the cluster's clock, as every time the replay reads; measured from
this machine's clock instead, a fraction of a second past the server's second, each real wait came
out that fraction short of the forecast's, all one way (docs/forecast-notebook.md, "On the testbed, as it was measured"). A
Workload the ledger never saw reserved counts as never admitted. A waiting Workload with no figure is
kept with the forecast's reason (too little history, the replay differs) or the live state's (left
out of the replay), never dropped silently.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpufleet.forecast.calibration import MIN_WAIT_S, Check
from gpufleet.forecast.clock import cluster_now
from gpufleet.forecast.estimate import Settings
from gpufleet.forecast.live import forecast_live, live_state
from gpufleet.ledger.records import Allocation, Record
from gpufleet.policy import Fleet
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.differential import job_name


@dataclass(frozen=True)
class Snapshot:
    """What a live forecast reads at one moment: the ledger's records (read first, as the CLI reads
    them), the wall clock just before the listing, the Workloads listed, this machine's clock after
    both, and the API server's ``Date`` of its reply to the listing (*now* for the forecast)."""

    records: tuple[Record, ...]
    listed: datetime
    objects: tuple[dict[str, Any], ...]
    now: datetime
    server: datetime | None = None  # the API server's Date header of the listing (None: it sent none)


@dataclass(frozen=True)
class Declined:
    """A Workload waiting at a snapshot that got no figure, and why (the answer's own words)."""

    at: int  # seconds from the run's origin
    workload: str  # namespace/Job
    reason: str


@dataclass(frozen=True)
class Hindsight:
    """Every Workload waiting at the snapshots: checked against its real admission, or declined."""

    checks: tuple[Check, ...]
    declined: tuple[Declined, ...]


def next_admission(allocations: Sequence[Allocation], job: str, listed: datetime) -> datetime | None:
    """When ``job`` (namespace/Job) was next reserved quota after ``listed``, by the final ledger; None: never.

    An attempt reserved in the listing's second, truncated, still counts; one that had ended by then is
    the attempt the Workload waited after, not the next."""
    floor = listed.replace(microsecond=0)
    times = [
        a.quota_reserved
        for a in allocations
        if job_name(a) == job
        and a.quota_reserved is not None
        and a.quota_reserved >= floor
        and (a.finished is None or a.finished > listed)
    ]
    return min(times, default=None)


def hindsight(
    snapshots: Sequence[Snapshot],
    fleet: Fleet,
    final: Sequence[Record],
    origin: datetime,
    *,
    settings: Settings,
    config: SimulationConfig,
    time_factor: float = 1.0,
) -> Hindsight:
    """Forecast every snapshot (the CLI's live path, with its records only) and check each waiting
    Workload against ``final``, the run's ledger at its end. ``time_factor`` is the trace's compression:
    the relative error's floor of the wait shrinks with it (``calibration.MIN_WAIT_S``)."""
    allocations = [r for r in final if isinstance(r, Allocation)]
    checks: list[Check] = []
    declined: list[Declined] = []
    for snap in snapshots:
        # *now* as ``gpufleet forecast`` takes it: the API server's Date, whole seconds like every stamp
        # the replay reads; the check measures from it too (from this machine's clock, a fraction of a
        # second later, every waiting Workload's real wait came out that much short of the forecast's)
        now, now_from = cluster_now(snap.server, snap.now)
        at = int((snap.now - origin).total_seconds())  # the probe's label
        state = live_state(snap.objects, fleet, now, now_from)
        history = [r for r in snap.records if isinstance(r, Allocation)]  # the CLI reads allocations only
        report = forecast_live(state, fleet, history, settings, config)
        declined += [Declined(at, key, f"{reason}: {message}") for key, reason, message in state.skipped]
        for f in report.forecasts:
            if f.declined:
                declined.append(Declined(at, f.workload, f.declined))
                continue
            admitted = next_admission(allocations, f.workload, snap.listed)
            delay = math.inf if admitted is None else max((admitted - now).total_seconds(), 0.0)
            if delay > settings.horizon_s:
                delay = math.inf
            q = {k: math.inf if v is None else float(v) for k, v in f.quantiles.items()}
            checks.append(Check(f.workload, f.team, at, q["p10"], q["p50"], q["p90"], delay, MIN_WAIT_S / time_factor))
    return Hindsight(tuple(checks), tuple(declined))
