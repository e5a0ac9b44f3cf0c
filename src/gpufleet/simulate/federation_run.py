"""A federated simulation as one run: every Job once, where it ran, so the one-cluster measures apply.

``tune`` judges a policy by ``measures.measure`` (goodput, each team's waits, Jain, starvation,
preemptions) and ``pathologies.diagnose``; both read one ``RunResult``. A federation is one Kueue per
worker behind the manager's dispatch (``federation``), so this module folds the workers' worlds into
one outcome:

- each Job is the run of the copy that won (the worker that admitted it first); a Job no worker
  admitted is its first live copy (where it still waits), or, while the manager still holds it back,
  a run that waited from its submission with no attempt on any worker;
- a Job's wait starts at its submission to the manager, not at its copy's creation (the manager's
  quota and the Incremental rounds are part of the wait a team sees);
- a Job is never admissible when no cluster of its residency zone could ever admit it (each worker's
  own reach, ``Reaches`` on the policy narrowed to that worker): the federation's ``NeverAdmissible``;
- the pools are every worker's (a pool name is unique in the policy), and the meters are summed
  series by series, each worker's held to the federation's end. The measures read GPU series
  (goodput, usable idle, serving), which only the copy that runs adds to; the queue-length series of
  the report's charts count every worker's copies, so a Job waiting on two workers counts twice there.

Every figure is the simulator's; nothing here is measured on a cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpufleet.policy import Fleet
from gpufleet.policy.fleet import resolve
from gpufleet.policy.residency import Zone, project, zones
from gpufleet.simulate.config import Mode, SimulationConfig, for_policy
from gpufleet.simulate.federation import REMOVED, FederationResult, WorkerWorld, run_federation
from gpufleet.simulate.jobs import RUN_ATTRIBUTES, JobRun
from gpufleet.simulate.meter import Meter, Series
from gpufleet.simulate.metrics import summarize
from gpufleet.simulate.outcome import Outcome
from gpufleet.simulate.reach import Reaches
from gpufleet.simulate.records import job_rows, ledger_records
from gpufleet.simulate.requests import Catalog
from gpufleet.simulate.result import RunResult
from gpufleet.trace.job import Job


class ZoneReach:
    """Whether any cluster of a Job's residency zone could ever admit it (static: quota, limits, layouts)."""

    def __init__(self, fleet: Fleet) -> None:
        policy = fleet.policy
        self.zone_of = {dc: z for z in zones(policy) for dc in z.data_classes}
        self.workers: dict[str, tuple[Reaches, Catalog]] = {}
        for c in policy.clusters:
            worker = resolve(project(policy, {c.name}))
            self.workers[c.name] = (Reaches(worker), Catalog.of(worker))

    def zone(self, job: Job) -> Zone | None:
        return self.zone_of.get(job.data_class)

    def views(self, job: Job) -> list[tuple[str, Reaches, Catalog]]:
        """Each cluster of the Job's zone, with its worker's reach and requests, in the zone's order."""
        zone = self.zone(job)
        return [(c, *self.workers[c]) for c in (zone.clusters if zone is not None else ())]

    def admissible_on(self, job: Job) -> list[str]:
        """The zone's clusters that could ever admit the Job, in the zone's order."""
        out = []
        for cluster, reaches, catalog in self.views(job):
            ask = catalog.ask_of(job)
            if ask is not None and not reaches.never_admissible(job, ask):
                out.append(cluster)
        return out


def merge_meters(meters: Sequence[Meter], end: int) -> Meter:
    """One meter whose every series is the sum of the workers' (each advanced to ``end`` first)."""
    merged = Meter(meters[0].bucket_s if meters else 3600)
    for m in meters:
        m.advance(end)
    merged.now = end
    for name in sorted({n for m in meters for n in m.series}):
        s = Series()
        for m in meters:
            if name in m.series:
                mine = m.series[name]
                s.rate += mine.rate
                s.total += mine.total
                for b, v in mine.buckets.items():
                    s.buckets[b] += v
        merged.series[name] = s
    for name in sorted({n for m in meters for n in m.steps}):
        logged = [m.steps[name] for m in meters if name in m.steps]
        times = sorted({t for steps in logged for t, _ in steps})
        merged.steps[name] = [(t, sum(_rate_at(steps, t) for steps in logged)) for t in times]
    return merged


def _rate_at(steps: list[tuple[int, float]], t: int) -> float:
    rate = 0.0
    for since, r in steps:
        if since > t:
            break
        rate = r
    return rate


def _as_submitted(run: JobRun, job: Job, index: int, others: Sequence[JobRun] = ()) -> JobRun:
    """The copy's run under the Job as submitted: its first attempt queued at the submission. A Job
    that won on another worker before (evicted there, dispatched again) keeps those attempts, and
    their preemptions and GPU-seconds, ahead of this copy's; copies' removed attempts are left out."""
    out = JobRun(job, run.ask, index)
    for slot in RUN_ATTRIBUTES:
        if slot not in ("job", "index", "key"):
            setattr(out, slot, getattr(run, slot))
    earlier = [(o, a) for o in others for a in o.attempts if a.reserved is not None and a.end_detail != REMOVED]
    attempts = list(run.attempts)
    if earlier:
        mine = [a for a in attempts if a.end_detail != REMOVED]
        ordered = sorted([a for _, a in earlier] + mine, key=lambda a: (a.queued, a.reserved is None))
        attempts = [replace(a, number=i) for i, a in enumerate(ordered, start=1)]
        for o in {id(o): o for o, _ in earlier}.values():
            out.preemptions += o.preemptions
            out.requeues += o.requeues
            out.work_lost += o.work_lost
            out.gpu_seconds += o.gpu_seconds
    if attempts:
        attempts[0] = replace(attempts[0], queued=min(job.submit_s, attempts[0].queued))
    out.attempts = attempts
    return out


def _held_back(job: Job, catalog: Catalog, index: int) -> JobRun | None:
    """A Job the manager never dispatched: it waited from its submission, on no worker."""
    ask = catalog.ask_of(job)
    if ask is None:
        return None
    run = JobRun(job, ask, index)
    attempt = run.begin(job.submit_s)
    attempt.message = "waiting for the manager's quota in its residency zone; no worker has a copy"
    return run


def federated_run(
    fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig, name: str = "queue"
) -> tuple[RunResult, FederationResult]:
    """The federation's run as one ``RunResult`` (``name``), and the dispatch it came from."""
    config = for_policy(replace(config, mode=Mode.QUEUE), fleet.policy)
    result, worlds = run_federation(fleet, jobs, config)
    reach = ZoneReach(fleet)
    by_key = {d.key: d for d in result.dispatches}
    catalog = Catalog.of(fleet)
    runs: list[JobRun] = []
    skipped: list[Job] = []
    for job in sorted(jobs, key=lambda j: (j.submit_s, j.namespace, j.job_id)):
        d = by_key[f"{job.namespace}/{job.job_id}"]
        run = _source(d.key, d.cluster, d.copies, worlds)
        others = [o for c in dict.fromkeys(d.copies) if (o := worlds[c].by_key.get(d.key)) not in (None, run)]
        merged = _held_back(job, catalog, len(runs)) if run is None else _as_submitted(run, job, len(runs), others)
        if merged is None:
            skipped.append(job)
            continue
        merged.never = d.cluster is None and not reach.admissible_on(job)
        runs.append(merged)
    outcomes = [w.outcome() for w in worlds.values()]
    meter = merge_meters([o.meter for o in outcomes], result.end)
    first = outcomes[0]
    outcome = Outcome(
        config=first.config,
        runs=runs,
        skipped=skipped,
        pools={p: nodes for o in outcomes for p, nodes in o.pools.items()},
        meter=meter,
        end=result.end,
        teams=[t.name for t in fleet.policy.teams if any(t.name in o.teams for o in outcomes)],
        weights={k: v for o in outcomes for k, v in o.weights.items()},
        priorities=first.priorities,
        local_queues={k: v for o in outcomes for k, v in o.local_queues.items()},
        kueue_cycles=sum(o.kueue_cycles for o in outcomes),
    )
    run_result = RunResult(name, outcome, summarize(outcome), ledger_records(outcome, name), job_rows(outcome, name))
    return run_result, result


def _source(key: str, winner: str | None, copies: Sequence[str], worlds: dict[str, WorkerWorld]) -> JobRun | None:
    """The winning copy's run, else the first copy still waiting on a worker, else None."""
    if winner is not None:
        return worlds[winner].by_key[key]
    for cluster in copies:
        run = worlds[cluster].by_key.get(key)
        if run is not None and run.attempts and run.attempt.end_detail != REMOVED:
            return run
    return None
