"""``gpufleet twin step``'s core: YAML in, a stable JSON-ready report out.

The report's keys are documented in docs/twin.md and kept stable for other tools:
``{"cycles": [{"cycle", "admitted", "preempted", "pending"}], "clusterQueues": {...}}``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from gpufleet.errors import InputError
from gpufleet.twin.objects import located, parse_cluster
from gpufleet.twin.results import ClusterQueueStatus, CycleResult
from gpufleet.twin.scheduler import Twin

REPORT_VERSION = 1


def step(sources: Iterable[tuple[str, str]], cycles: int | None = None) -> dict[str, Any]:
    """Run ``cycles`` cycles (None: until stable) over the objects in ``sources``."""
    spec = parse_cluster(sources)
    try:
        twin = Twin(spec)
    except InputError as exc:  # a problem across objects: name where the object was written
        raise located(exc, spec) from None
    out_cycles = [cycle_json(result, twin) for result in twin.run(cycles)]
    report = {
        "version": REPORT_VERSION,
        "fairSharing": twin.fair is not None,
        "cycles": out_cycles,
        "clusterQueues": {st.name: status_json(st) for st in twin.statuses()},
    }
    if twin.afs is not None:  # AdmissionFairSharing: each LocalQueue's usage after the last cycle
        report["localQueues"] = {
            key: {"admissionFairSharingUsage": _finite(twin.afs.usage(key)), "consumedResources": dict(entry.consumed)}
            for key, entry in sorted(twin.afs.entries.items())
        }
    return report


def _finite(value: float) -> float | None:
    """JSON has no infinity: a zero-weight LocalQueue's +Inf usage is written as null."""
    return None if math.isinf(value) else value


def cycle_json(result: CycleResult, twin: Twin) -> dict[str, Any]:
    return {
        "cycle": result.number,
        "admitted": [
            {
                "workload": a.workload,
                "clusterQueue": a.cluster_queue,
                "flavors": a.flavors,
                "counts": a.counts,
            }
            for a in result.admitted
        ],
        "preempted": [
            {
                "workload": p.workload,
                "clusterQueue": p.cluster_queue,
                "preemptor": p.preemptor,
                "reason": p.reason,
                "message": p.message,
            }
            for p in result.preempted
        ],
        "pending": [
            {
                "workload": p.workload,
                "clusterQueue": p.cluster_queue,
                "reason": p.reason,
                "message": p.message,
                "queue": p.queue,
                "kueueWrites": p.kueue_writes,
            }
            for p in twin.pending()
        ],
    }


def status_json(st: ClusterQueueStatus) -> dict[str, Any]:
    return {
        "usage": st.usage,
        "borrowed": st.borrowed,
        "weightedShare": st.weighted_share,
        "admittedWorkloads": st.admitted,
        "pendingWorkloads": st.pending,
    }
