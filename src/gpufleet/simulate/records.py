"""A run's jobs as the ledger records them, and as one row per job for the per-job table.

Each attempt becomes an ``Allocation`` (keyed ``sim:<run>:<namespace>/<job>``, attempt n) and its
wait a ``WaitInterval`` with the last reason Kueue (or, in the first-apply world, the scheduler)
gave; both are marked ``simulated``. Trace seconds become wall times from the run's ``start``.

The fields mean what the recorder writes from a live cluster: ``started`` is the first pod's start
(``first_start``; the simulator's own start of an attempt is when all its pods are bound, which the
world differential found apart for gangs bound in two steps), a preempted attempt's ``finished`` is
its eviction (Kueue's ``Evicted`` condition), and the wait that follows starts when Kueue released
its quota (``QuotaReserved=False``), a release delay later; its pods' GPUs are freed later still,
after the grace period (``Attempt.holds``, which the measures read, not the ledger).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from gpufleet.ledger.records import Allocation, EndReason, Placement, Record, WaitInterval
from gpufleet.simulate.jobs import Attempt, JobRun
from gpufleet.simulate.outcome import Outcome

_END = {"Finished": EndReason.FINISHED, "Preempted": EndReason.PREEMPTED, "Evicted": EndReason.EVICTED}


def _placements(run: JobRun, attempt: Attempt, models: dict[str, str]) -> tuple[Placement, ...]:
    per_node: dict[str, list[str]] = defaultdict(list)
    for _pod, (node, devices) in sorted(attempt.placements.items()):
        for d in devices:
            label = f"gpu{d.gpu}" + (
                f"/{d.profile.removeprefix('nvidia.com/')}#{d.instance}" if d.instance is not None else ""
            )
            per_node[node].append(label)
    return tuple(
        Placement(node, len(labels), tuple(labels), models.get(node, "")) for node, labels in sorted(per_node.items())
    )


def first_start(attempt: Attempt) -> int | None:
    """When the attempt's first pod started: the recorder's ``started`` (the first pod's start). A pod
    runs once bound (no image pulls); so for a gang whose pods were bound apart, before the attempt's
    own start (all pods bound); and for an attempt preempted with some pods bound, their first bind."""
    first = min((h.bound for h in attempt.holds), default=None)
    if attempt.started is None:
        return first
    return attempt.started if first is None else min(first, attempt.started)


def ledger_records(outcome: Outcome, run_name: str) -> list[Record]:
    start = outcome.config.start
    models = {n.name: p.gpu_model for p in outcome.pools.values() for n in p.nodes}

    def at(t: int | None) -> datetime | None:
        return None if t is None else start + timedelta(seconds=t)

    out: list[Record] = []
    for run in outcome.runs:
        job = run.job
        uid = f"sim:{run_name}:{run.key}"
        lq = outcome.local_queues.get(job.namespace)
        local_queue = f"{job.namespace}/{lq}" if lq else ""
        released: int | None = None  # when the previous attempt's quota was released
        for attempt in run.attempts:
            wait_end = attempt.reserved if attempt.reserved is not None else attempt.started
            if wait_end is None:
                wait_end = attempt.ended
            queued = at(attempt.queued)
            waits = at(attempt.queued if released is None else max(attempt.queued, released))
            released = attempt.released
            assert queued is not None and waits is not None
            out.append(
                WaitInterval(
                    workload_uid=uid,
                    index=attempt.number,
                    namespace=job.namespace,
                    name=job.job_id,
                    team=job.team,
                    local_queue=local_queue,
                    reason=attempt.reason,
                    message=attempt.message,
                    start=waits,
                    end=at(wait_end),
                    simulated=True,
                )
            )
            if attempt.reserved is None and attempt.started is None:
                continue
            out.append(
                Allocation(
                    workload_uid=uid,
                    attempt=attempt.number,
                    namespace=job.namespace,
                    name=job.job_id,
                    team=job.team,
                    model=job.model or None,
                    data_class=job.data_class or None,
                    checkpoint=job.checkpoint or None,
                    local_queue=local_queue,
                    cluster_queue=attempt.cluster_queue,
                    priority=outcome.priorities.get(job.priority_class, 0),
                    flavors=((run.ask.resource, attempt.flavor),) if attempt.flavor else (),
                    gpu_resource=run.ask.resource,
                    gpu_count=run.ask.count * len(run.pods),
                    placements=_placements(run, attempt, models),
                    created=queued,
                    quota_reserved=at(attempt.reserved),
                    admitted=at(attempt.reserved),
                    started=at(first_start(attempt)),
                    finished=at(attempt.ended),
                    end_reason=_END.get(attempt.end_reason),
                    end_detail=attempt.end_detail,
                    end_message=attempt.end_message,
                    borrowing=None,
                    simulated=True,
                )
            )
    return out


def job_rows(outcome: Outcome, run_name: str) -> list[dict[str, Any]]:
    """One row per job: what it asked, what happened, and the figures the metrics use."""
    end = outcome.end
    rows = []
    for run in outcome.runs:
        job, last = run.job, run.attempts[-1] if run.attempts else None
        nodes = sorted({node for a in run.attempts for node, _ in a.placements.values()})
        rows.append(
            {
                "run": run_name,
                "job_id": job.job_id,
                "team": job.team,
                "namespace": job.namespace,
                "kind": job.kind.value,
                "priority_class": job.priority_class,
                "pods": job.pods,
                "resource": run.ask.resource,
                "per_pod": run.ask.count,
                "submit_s": job.submit_s,
                "duration_s": job.duration_s,
                "state": run.state.value,
                "attempts": len(run.attempts),
                "start_s": last.started if last else None,
                "end_s": last.ended if last else None,
                "wait_s": run.waited(end),
                "gpu_hours": round(run.held(end) / 3600, 4),
                "preemptions": run.preemptions,
                "work_lost_gpu_hours": round(run.work_lost / 3600, 4),
                "pods_ready_evictions": run.requeues,
                "admitted_unplaced_s": run.unplaced(end),
                "flavor": last.flavor if last else "",
                "nodes": " ".join(nodes),
                "last_reason": last.reason if last else "",
            }
        )
    return rows
