"""The submissions a live cluster has seen, as the jobs the arrival model reads (``arrivals``).

On a simulated run the trace says when each job was submitted; on a live cluster the ledger does:
each workload it recorded once, at its Workload's creation (every attempt carries it), with its team
(the policy's team of its namespace), priority (the policy's class of that value), GPU resource and
count. The Workloads on the cluster now are submissions too (one waiting since before it was first
admitted is in no ledger yet), added where the ledger lacks their UID.

The model's seconds start at the UTC Monday midnight ``PROFILE_WEEKS`` whole weeks before *now*, so
its hour-of-day profile is the clock's (a forecast made in the evening expects the quiet night) and
its days of the week the calendar's (one made on a Friday expects the weekend, where the ledger holds
a whole week: ``arrivals.weekly_factors``), and are shifted to the replay's (``ArrivalModel.shift_s``).
The rates themselves are read from the last week only (``arrivals.WINDOW_S``). The ledger records no
pod count: a job is split into the fewest equal pods that fit the policy's largest node, as its
owner had to (one pod of more cards than any node carries would hold quota and never run in the
replay).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from gpufleet.forecast.arrivals import ArrivalModel
from gpufleet.ledger.records import Allocation, Record
from gpufleet.policy import Fleet
from gpufleet.trace.job import Job, JobKind

PROFILE_WEEKS = 3  # whole weeks the hour and day profiles are read from (the rhythm, not the year)
GPU_SHARED = "nvidia.com/gpu.shared"
MIG = "nvidia.com/mig-"


def _pods(count: int, per_node: int) -> tuple[int, int]:
    """(pods, GPUs per pod): the fewest equal pods of at most ``per_node`` cards."""
    pods = next(p for p in range(1, count + 1) if count % p == 0 and count // p <= per_node)
    return pods, count // pods


def ledger_jobs(records: Sequence[Record], fleet: Fleet, zero: datetime, before: datetime) -> dict[str, Job]:
    """Each workload the ledger saw created from ``zero`` to ``before``, by UID, as a job submitted
    then (seconds from ``zero``; its runtime is drawn afresh when sampled)."""
    team_of = {ns: t.name for t in fleet.policy.teams for ns in t.namespaces}
    # a value two classes share maps to the first of them by name (the later key of the dict wins)
    priority_of = {p.value: p.name for p in sorted(fleet.policy.priorityClasses, key=lambda p: p.name, reverse=True)}
    per_node = max(p.gpusPerNode for p in fleet.policy.pools)
    first: dict[str, Allocation] = {}
    for r in records:
        if (
            isinstance(r, Allocation)
            and zero <= r.created < before
            and r.namespace in team_of
            and r.name
            and r.gpu_count > 0
            and (r.workload_uid not in first or r.attempt < first[r.workload_uid].attempt)
        ):
            first[r.workload_uid] = r
    out: dict[str, Job] = {}
    for uid, r in first.items():
        shape: dict[str, object]
        if r.gpu_resource == GPU_SHARED:
            shape = {"pods": r.gpu_count, "gpu_milli": 500}  # one replica per pod, as the live path models it
        else:
            pods, gpus = _pods(r.gpu_count, per_node)
            shape = {"pods": pods, "gpus": gpus}
            if r.gpu_resource.startswith(MIG):
                shape["mig_profile"] = r.gpu_resource.removeprefix(MIG)
        out[uid] = Job(
            job_id=r.name,
            team=team_of[r.namespace],
            namespace=r.namespace,
            submit_s=int((r.created - zero).total_seconds()),
            duration_s=1,  # drawn afresh for each sampled copy
            kind=JobKind.TRAINING,  # the ledger records none; the draw reads the history without kinds
            priority_class=priority_of.get(r.priority, ""),
            model=r.model or "",
            **shape,  # type: ignore[arg-type]
        )
    return out


def live_arrivals(
    now: datetime, at: int, live: Sequence[tuple[str, datetime | None, Job]], fleet: Fleet, records: Sequence[Record]
) -> ArrivalModel:
    """The arrival model of the ledger's and the cluster's submissions (``live``: each Workload's UID,
    creation and job) before ``now``, shifted to the replay's seconds (``now`` is its ``at``)."""
    now = now.astimezone(UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    zero = midnight - timedelta(days=midnight.weekday(), weeks=PROFILE_WEEKS)  # a Monday: day 0 of the week
    seen = ledger_jobs(records, fleet, zero, now)
    for uid, born, job in live:
        key = uid or f"{job.namespace}/{job.job_id}"  # a Workload the API server gave no UID (never in the ledger)
        if key not in seen and born is not None and zero <= born <= now:
            seen[key] = replace(job, submit_s=int((born - zero).total_seconds()))
    model_at = int((now - zero).total_seconds())
    model = ArrivalModel.of(list(seen.values()), model_at)
    return replace(model, shift_s=at - model_at)
