"""The simulator across clusters: one Kueue world per worker, and the MultiKueue manager's dispatch.

Each worker runs the one-cluster queue world (``QueueWorld``) on the policy narrowed to its pools, as
its bundle is rendered (``policy.residency.project``): its own flavors, cohort, quotas and nodes. The
manager is Kueue v0.19.2's MultiKueue (``pkg/controller/admissionchecks/multikueue/workload.go`` and
``pkg/controller/workloaddispatcher/incrementaldispatcher.go``):

- a Job of data class D is dispatched only to the clusters of D's residency zone, in the zone's
  (policy) order;
- **AllAtOnce**: every cluster of the zone gets a copy when the Job arrives; **Incremental**: the
  first ``STEP`` clusters (Kueue's DefaultStepSize 3), and ``STEP`` more each ``ROUND_S`` (5 min)
  while no copy has been admitted (config order: MultiKueueIncrementalDispatcherRespectConfigOrder is
  on by default in v0.19);
- the first copy a worker admits wins (Kueue picks the remote whose Admitted condition is oldest; at
  the same second this module picks the zone's first cluster); the others' copies are removed, and a
  copy whose round comes after that is never created.

The worlds run in lockstep: every world runs to the next instant any of them has, then the
dispatcher settles the instant. Not modelled (each a figure the testbed differential can show): the
manager's own quota (its ``<team>-<zone>`` ClusterQueue holds the team's quota on all the zone's
pools, a gate that a copy admitted on a worker passes in the rendered bundles except where cohort
borrowing differs), the seconds between the manager's reservation and a copy's creation, and a copy
preempted on its worker being re-dispatched to the zone (here it requeues on its worker).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpufleet.errors import InputError, Problem
from gpufleet.policy import Fleet
from gpufleet.policy.fleet import resolve
from gpufleet.policy.residency import Zone, project, zones
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.engine import KUEUE
from gpufleet.simulate.jobs import JobRun, State
from gpufleet.simulate.queue_world import QueueWorld
from gpufleet.trace.job import Job

STEP = 3  # Kueue's incremental dispatcher DefaultStepSize
ROUND_S = 300  # incrementalDispatcherRoundTimeout: 5 minutes per nomination round
REMOVED = "RemovedByMultiKueue"


class WorkerWorld(QueueWorld):
    """One worker's queue world, whose copies the manager may remove before or after they arrive."""

    def prepare(self, fleet: Fleet) -> Any:
        self.cancelled: set[str] = set()  # copies removed before their creation instant
        return super().prepare(fleet)

    def arrive(self, t: int, run: JobRun) -> None:
        if run.key in self.cancelled:
            return  # another worker admitted the Job before this copy's round: Kueue never creates it
        super().arrive(t, run)

    def withdraw(self, t: int, key: str, winner: str) -> None:
        """The manager removes this copy: another worker admitted the Job (at ``t`` or earlier)."""
        run = self.by_key.get(key)
        if run is None:
            return  # this worker has no flavor for the Job: its copy never reached the queue
        if not run.attempts:
            self.cancelled.add(key)
            return
        if run.state in (State.FINISHED, State.DEACTIVATED):
            return
        if run.state is not State.RUNNING:
            self.waiting -= 1
            self.watch.waiting(run, -1)
        self.release(t, run)
        self.free_quota(run, run.attempt, t)
        self.queue.finish(key)
        self.end_attempt(t, run, "Finished", REMOVED, f"admitted on worker cluster {winner!r}; this copy is removed")
        run.state = State.FINISHED
        self.kueue_dirty = True
        self.push(t + 1, KUEUE, None)  # its quota frees: Kueue's requeue batch wakes the parked a second later


@dataclass(frozen=True)
class Dispatch:
    """Where one Job of the trace went (simulated)."""

    key: str
    team: str
    data_class: str
    zone: str
    copies: tuple[str, ...]  # the clusters that got a copy, in creation order
    cluster: str | None  # the worker whose copy was admitted first (None: no copy admitted)
    submitted: int
    admitted: int | None  # when the winning copy reserved quota on its worker
    started: int | None
    finished: int | None
    waited_s: int  # from the Job's submission to its start (or to the end of the run)
    gpu_seconds: float


@dataclass(frozen=True)
class FederationResult:
    dispatcher: str
    clusters: tuple[str, ...]
    zones: tuple[Zone, ...]
    dispatches: tuple[Dispatch, ...]
    admission_order: dict[str, tuple[str, ...]]  # cluster -> Job keys in the order their copies won there
    end: int


def _zone_of(fleet: Fleet, jobs: Sequence[Job]) -> dict[str, Zone]:
    """Each job's residency zone; a job with no zone, or of a class its team may not use, is an error."""
    by_class = {dc: z for z in zones(fleet.policy) for dc in z.data_classes}
    problems, out = [], {}
    for job in jobs:
        team = fleet.policy.team(job.team)
        zone = by_class.get(job.data_class)
        if zone is None:
            known = ", ".join(sorted(by_class))
            problems.append(
                Problem(
                    f"job {job.job_id}: data class {job.data_class!r} has no residency zone; a federated "
                    f"fleet dispatches by data class, one of: {known}",
                    path="data_class",
                )
            )
        elif team is not None and job.data_class not in team.dataClasses:
            problems.append(
                Problem(
                    f"job {job.job_id}: team {job.team!r} may not use data class {job.data_class!r} "
                    f"(its classes: {', '.join(team.dataClasses)}); admission would refuse it",
                    path="data_class",
                )
            )
        else:
            out[f"{job.namespace}/{job.job_id}"] = zone
    if problems:
        raise InputError(problems)
    return out


def _copies(job: Job, zone: Zone, dispatcher: str) -> list[tuple[str, Job]]:
    """The copies the dispatcher creates, each with its creation instant as its submission."""
    if dispatcher == "AllAtOnce":
        return [(c, job) for c in zone.clusters]
    return [(c, replace(job, submit_s=job.submit_s + ROUND_S * (i // STEP))) for i, c in enumerate(zone.clusters)]


def simulate_federation(fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig) -> FederationResult:
    """Run the trace through the manager's dispatch and every worker's Kueue, in lockstep."""
    policy = fleet.policy
    if not policy.clusters:
        raise InputError.one("the policy declares no clusters: simulate it as one cluster", path="clusters")
    zone_of = _zone_of(fleet, jobs)
    dispatcher = policy.multiKueue.dispatcher
    order = [c.name for c in policy.clusters]
    per_world: dict[str, list[Job]] = {c: [] for c in order}
    copies: dict[str, list[str]] = {}
    for job in jobs:
        key = f"{job.namespace}/{job.job_id}"
        for cluster, copy in _copies(job, zone_of[key], dispatcher):
            per_world[cluster].append(copy)
            copies.setdefault(key, []).append(cluster)
    worlds = {c: WorkerWorld(resolve(project(policy, {c})), per_world[c], config) for c in order}
    winner: dict[str, str] = {}
    won_order: dict[str, list[str]] = {c: [] for c in order}
    for w in worlds.values():
        w.advance(-1)  # books every arrival; nothing happens before instant 0
    while True:
        live = [w for w in worlds.values() if not w.over and w.heap]
        if not live:
            break
        t = min(w.heap[0][0] for w in live)
        for w in live:
            w.advance(t)
        _settle_dispatch(t, worlds, order, winner, won_order)
    for w in worlds.values():
        w.advance()  # a world paused with only its stop left ends here
    end = max((w.meter.now for w in worlds.values()), default=0)
    by_key = {f"{j.namespace}/{j.job_id}": j for j in jobs}
    out = [_dispatch(by_key[k], zone_of[k], tuple(copies[k]), winner.get(k), worlds=worlds, end=end) for k in by_key]
    return FederationResult(
        dispatcher, tuple(order), tuple(zones(policy)), tuple(out), {c: tuple(v) for c, v in won_order.items()}, end
    )


def _settle_dispatch(
    t: int, worlds: dict[str, WorkerWorld], order: list[str], winner: dict[str, str], won: dict[str, list[str]]
) -> None:
    """After instant ``t``: each Job admitted on a worker for the first time wins there (the zone's
    first cluster among those admitting at ``t``); its other copies are removed."""
    fresh: dict[str, str] = {}
    for cluster in order:  # policy order: the tie-breaker at one second
        for run in worlds[cluster].runs:
            if run.key in winner or run.key in fresh or not run.attempts or run.attempt.end_detail == REMOVED:
                continue
            if any(a.reserved is not None for a in run.attempts):
                fresh[run.key] = cluster
    for key in sorted(fresh, key=lambda k: (_reserved(worlds[fresh[k]].by_key[k]), k)):
        cluster = fresh[key]
        winner[key] = cluster
        won[cluster].append(key)
        for other, world in worlds.items():
            if other != cluster:
                world.withdraw(t, key, cluster)


def _reserved(run: JobRun) -> int:
    return min(a.reserved for a in run.attempts if a.reserved is not None)


def _dispatch(
    job: Job, zone: Zone, copies: tuple[str, ...], cluster: str | None, *, worlds: dict[str, WorkerWorld], end: int
) -> Dispatch:
    key = f"{job.namespace}/{job.job_id}"
    created = tuple(c for c in copies if key in worlds[c].by_key and worlds[c].by_key[key].attempts)
    if cluster is None:
        return Dispatch(
            key, job.team, job.data_class, zone.name, created, None, job.submit_s, None, None, None,
            end - job.submit_s, 0.0,
        )  # fmt: skip
    run = worlds[cluster].by_key[key]
    first = run.attempts[0]
    started = next((a.started for a in run.attempts if a.started is not None), None)
    last = run.attempt
    finished = last.ended if last.end_reason == "Finished" else None
    waited = run.waited(end) + (run.job.submit_s - job.submit_s)  # an Incremental copy was created later
    return Dispatch(
        key, job.team, job.data_class, zone.name, created, cluster, job.submit_s, first.reserved, started,
        finished, waited, run.held(end),
    )  # fmt: skip
