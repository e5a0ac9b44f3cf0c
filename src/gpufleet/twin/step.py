"""Ours, not Kueue's: the ``gpufleet twin step`` report.

``gpufleet twin step``'s core: YAML in, a stable JSON-ready report out.

The report's keys are documented in docs/twin.md and kept stable for other tools:
``{"cycles": [{"cycle", "atMs", "admitted", "preempted", "pending"}], "clusterQueues": {...},
"clocks": {...} | null, "loop": {...} | null}``.

Kueue's clocks (``twin/clocks.py``) are on by default, so the cycles are the ones Kueue runs on a
cluster; ``clocks=None`` is the world of Kueue's scheduler unit tests (a victim frees at the end of
its cycle, parked workloads wake before the next). Until stable, a run that repeats its state is
stopped and reported as a loop (``twin/loops.py``) instead of spinning to the cycle limit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from gpufleet.errors import InputError
from gpufleet.twin.apis.objects import located, parse_cluster
from gpufleet.twin.apis.reasons import written_reason
from gpufleet.twin.clocks import ClockSettings
from gpufleet.twin.kueue import Twin
from gpufleet.twin.loops import Loop
from gpufleet.twin.results import ClusterQueueStatus, CycleResult

REPORT_VERSION = 1
KUEUE_CLOCKS = ClockSettings()  # the default: Kueue's constants and issue 18's release delay


def step(
    sources: Iterable[tuple[str, str]], cycles: int | None = None, clocks: ClockSettings | None = KUEUE_CLOCKS
) -> dict[str, Any]:
    """Run ``cycles`` cycles (None: until stable, or until the state repeats) over the objects
    in ``sources``, on Kueue's clocks unless ``clocks`` is None."""
    spec = parse_cluster(sources)
    try:
        twin = Twin(spec, clocks=clocks)
    except InputError as exc:  # a problem across objects: name where the object was written
        raise located(exc, spec) from None
    origin = twin.clock.now if twin.clock is not None else 0
    settings = twin.clock.settings if twin.clock is not None else None  # the gates may change the batch
    out_cycles = [cycle_json(result, twin, origin) for result in twin.run(cycles, loops=cycles is None)]
    report = {
        "version": REPORT_VERSION,
        "fairSharing": twin.fair is not None,
        "clocks": None
        if settings is None
        else {"releaseDelayMs": settings.release_delay_ms, "requeueBatchMs": settings.requeue_batch_ms},
        "cycles": out_cycles,
        "loop": loop_json(twin.loop) if twin.loop is not None else None,
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


def loop_json(loop: Loop) -> dict[str, Any]:
    return {
        "reason": loop.reason,
        "message": loop.message,
        "fromCycle": loop.from_cycle,
        "toCycle": loop.to_cycle,
        "periodMs": loop.period_ms,
        "preempted": [
            {"workload": p.workload, "clusterQueue": p.cluster_queue, "preemptor": p.preemptor, "reason": p.reason}
            for p in loop.preempted
        ],
    }


def cycle_json(result: CycleResult, twin: Twin, origin: int = 0) -> dict[str, Any]:
    """One cycle; ``atMs``: when it ran on Kueue's clock, from the run's start (0 without clocks).
    A pending row's ``reason`` is the twin's granular one; ``kueueReason`` (where Kueue writes the
    condition) and ``kueueStatus`` are what Kueue writes under the Configuration's gates."""
    observability = twin.spec.config.gate("UnadmittedWorkloadsObservability")
    return {
        "cycle": result.number,
        "atMs": twin.clock.now - origin if twin.clock is not None else 0,
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
                **({"kueueReason": written_reason(p.reason, observability)} if p.kueue_writes else {}),
                **(
                    {"kueueStatus": {"reason": written_reason(p.written[0], observability), "message": p.written[1]}}
                    if p.written
                    else {}
                ),
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
