"""Compact cohort trees for hand-worked tests: one flavor, one resource (GPUs, counted as integers).

``tree(cohorts, queues, running, pending)`` builds the ``ClusterSpec`` a real stream of Kueue
objects would give: each running workload admitted with one pod on the flavor, each pending one
queued in its ClusterQueue's LocalQueue. Every queue reclaims from any borrower of its tree
(``reclaimWithinCohort: Any``) unless told otherwise. Cohorts have no quota of their own unless
``cohort_quota`` gives them some.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.twin.apis import specs as s

GPU = "nvidia.com/gpu"
FLAVOR = "default"


Amounts = int | dict[str, int]  # GPUs, or amounts per resource (Kueue units)


@dataclass(frozen=True)
class Queue:
    cohort: str | None
    nominal: Amounts
    weight: float = 1.0
    reclaim: str = s.ANY
    within: str = s.NEVER
    strategy: str = s.BEST_EFFORT_FIFO
    borrow: str = s.NEVER  # borrowWithinCohort.policy
    threshold: int | None = None  # borrowWithinCohort.maxPriorityThreshold
    lending: Amounts | None = None  # lendingLimit (per resource, as nominal)


@dataclass(frozen=True)
class Job:
    """A workload of ``gpus`` GPUs in one pod; ``at`` is its creation (or reservation) time."""

    name: str
    queue: str
    gpus: Amounts
    priority: int = 0
    at: int = 0


def _amounts(amounts: Amounts) -> dict[str, int]:
    return {GPU: amounts} if isinstance(amounts, int) else dict(sorted(amounts.items()))


def _groups(nominal: Amounts, lending: Amounts | None = None) -> tuple[s.ResourceGroupSpec, ...]:
    lend = _amounts(lending) if lending is not None else {}
    quotas = tuple(s.ResourceQuotaSpec(r, q, lending_limit=lend.get(r)) for r, q in _amounts(nominal).items())
    return (s.ResourceGroupSpec(tuple(r.resource for r in quotas), (s.FlavorQuotasSpec(FLAVOR, quotas),)),)


def _workload(job: Job, *, admitted: bool) -> s.WorkloadSpec:
    requests = _amounts(job.gpus)
    pod_sets = (s.PodSetSpec("main", 1, tuple(requests.items())),)
    admission = None
    if admitted:
        assignment = s.PodSetAssignmentSpec("main", tuple((r, FLAVOR) for r in requests), 1)
        admission = s.AdmissionSpec(job.queue, (assignment,))
    return s.WorkloadSpec(
        "ns", job.name, f"lq-{job.queue}", pod_sets, job.priority, job.at, job.name, admission,
        reserved_at=job.at if admitted else 0,
    )  # fmt: skip


def tree(
    cohorts: dict[str, tuple[str | None, float]],
    queues: dict[str, Queue],
    running: list[Job],
    pending: list[Job],
    config: s.ConfigSpec | None = None,
    cohort_quota: dict[str, Amounts] | None = None,
) -> s.ClusterSpec:
    """``cohorts``: name -> (parent, weight); ``cohort_quota``: name -> a cohort's own nominal quota."""
    quota = cohort_quota or {}
    return s.ClusterSpec(
        flavors={FLAVOR: s.ResourceFlavorSpec(FLAVOR)},
        cohorts={
            name: s.CohortSpec(name, parent, _groups(quota[name]) if name in quota else (), weight)
            for name, (parent, weight) in cohorts.items()
        },
        cluster_queues={
            name: s.ClusterQueueSpec(
                name,
                q.cohort,
                _groups(q.nominal, q.lending),
                queueing_strategy=q.strategy,
                preemption=s.PreemptionSpec(q.within, q.reclaim, q.borrow, q.threshold),
                fair_weight=q.weight,
            )
            for name, q in queues.items()
        },
        local_queues={f"ns/lq-{name}": s.LocalQueueSpec("ns", f"lq-{name}", name) for name in queues},
        namespaces={"ns": s.NamespaceSpec("ns")},
        workloads=tuple(_workload(j, admitted=True) for j in running)
        + tuple(_workload(j, admitted=False) for j in pending),
        config=config or s.ConfigSpec(fair_sharing=True),
    )


def jobs(queue: str, count: int, gpus: int, *, priority: int = 0, first: int = 1) -> list[Job]:
    """``count`` admitted jobs ``queue-1`` ... of ``gpus`` each, reserved at ``first``, ``first + 1``, ..."""
    return [Job(f"{queue}-{i}", queue, gpus, priority, first + i - 1) for i in range(1, count + 1)]


def pending_spec(job: Job) -> s.WorkloadSpec:
    """A pending workload to add to a running twin (``Twin.add_workload``)."""
    return _workload(job, admitted=False)
