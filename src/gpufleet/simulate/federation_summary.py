"""What a fleet owner reads from a federated simulation: per worker, per residency zone, fleet-wide.

Every figure comes from the simulator, never from a cluster, and says so: each section carries
``basis: simulated``. Waits are whole seconds from a Job's submission to its start (the end of the run
for a Job that never started); the 95th percentile is the nearest rank, so it is one of the waits.
Jobs are listed in submission order (the key breaks ties).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from gpufleet.simulate.federation import Dispatch, FederationResult

SCHEMA = "gpufleet.io/simulate-federation/v1"
BASIS = "simulated"


def _p95(values: Sequence[int]) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def figures(dispatches: Sequence[Dispatch]) -> dict[str, Any]:
    """Counts, waits and GPU-hours of these Jobs."""
    waits = [d.waited_s for d in dispatches]
    return {
        "basis": BASIS,
        "jobs": len(dispatches),
        "admitted": sum(1 for d in dispatches if d.cluster is not None),
        "finished": sum(1 for d in dispatches if d.finished is not None),
        "neverAdmitted": sum(1 for d in dispatches if d.cluster is None),
        "meanWaitSeconds": round(sum(waits) / len(waits), 1) if waits else None,
        "p95WaitSeconds": _p95(waits),
        "maxWaitSeconds": max(waits) if waits else None,
        "gpuHours": round(sum(d.gpu_seconds for d in dispatches) / 3600, 3),
    }


def summary(result: FederationResult) -> dict[str, Any]:
    ordered = sorted(result.dispatches, key=lambda d: (d.submitted, d.key))
    clusters = {
        c: figures([d for d in ordered if d.cluster == c]) | {"admissionOrder": list(result.admission_order[c])}
        for c in result.clusters
    }
    zones = {}
    for z in result.zones:
        mine = [d for d in ordered if d.zone == z.name]
        landed = {c: sum(1 for d in mine if d.cluster == c) for c in z.clusters}
        zones[z.name] = figures(mine) | {"clusters": list(z.clusters), "landed": landed}
    return {
        "schema": SCHEMA,
        "basis": BASIS,
        "dispatcher": result.dispatcher,
        "endSeconds": result.end,
        "fleet": figures(ordered),
        "clusters": clusters,
        "zones": zones,
        "jobs": [asdict(d) | {"basis": BASIS} for d in ordered],
    }
