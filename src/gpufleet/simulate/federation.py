"""The simulator across clusters: the MultiKueue manager's Kueue and dispatch, one Kueue world per worker.

Each worker runs the one-cluster queue world (``QueueWorld``) on the policy narrowed to its pools, as
its bundle is rendered (``policy.residency.project``): its own flavors, cohort, quotas and nodes. The
manager (``simulate.federation_manager``) is a twin over the manager bundle's ClusterQueues: a Job
first reserves its team's quota in its ``<team>-<zone>`` queue there, and only then is dispatched as
Kueue v0.19.2 does it (``pkg/controller/admissionchecks/multikueue/workload.go``,
``pkg/controller/workloaddispatcher/incrementaldispatcher.go``):

- a Job of data class D goes only to the clusters of D's residency zone, in the zone's (policy) order;
- **AllAtOnce**: every cluster of the zone gets a copy at the manager's reservation; **Incremental**:
  the first ``stepSize`` clusters (the policy's, else Kueue's DefaultStepSize 3), and as many more each
  ``ROUND_S`` (5 min)
  while no copy has been admitted (config order: MultiKueueIncrementalDispatcherRespectConfigOrder is
  on by default in v0.19);
- the first copy a worker admits wins (Kueue picks the remote whose Admitted condition is oldest; at
  the same second this module picks the zone's first cluster); the others' copies are removed;
- the manager keeps its reservation until the Job finishes on its worker, and sees the finish a
  second later;
- a winning copy evicted on its worker (preempted there) is dispatched again: the check turns Retry,
  the manager evicts its Workload and requeues it, removes every copy, and once its quota is reserved
  anew dispatches it from the first round (``workload.go``, "Workload evicted on worker cluster").

The worlds run in lockstep: at each instant any of them has, the manager first (arrivals, rounds, its
cycles and the copies they create), then every worker, then the dispatch settles. Not modelled: the
seconds between the manager's reservation and a copy's creation; preemption on the manager (counted
as ``manager_evictions``, its copies left as they are); the manager's requeue backoff after the
eviction; a re-dispatched copy on the worker that evicted it keeps its place in that worker's queue
(Kueue deletes it and creates a new one); a lost worker.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpufleet.errors import InputError, Problem
from gpufleet.policy import Fleet
from gpufleet.policy.fleet import resolve
from gpufleet.policy.residency import Zone, project, zones
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.engine import KUEUE
from gpufleet.simulate.federation_manager import ManagerQueue
from gpufleet.simulate.jobs import Attempt, JobRun, State
from gpufleet.simulate.queue_world import QueueWorld
from gpufleet.simulate.requests import Catalog
from gpufleet.trace.job import Job

STEP = 3  # Kueue's incremental dispatcher DefaultStepSize
ROUND_S = 300  # incrementalDispatcherRoundTimeout: 5 minutes per nomination round
REMOVED = "RemovedByMultiKueue"


class WorkerWorld(QueueWorld):
    """One worker's queue world, whose copies the manager may remove before or after they arrive."""

    def prepare(self, fleet: Fleet) -> Any:
        self.cancelled: set[str] = set()  # copies removed before their creation instant
        self.never_created: set[str] = set()  # cancelled copies whose creation instant has passed
        return super().prepare(fleet)

    def arrive(self, t: int, run: JobRun) -> None:
        if run.key in self.cancelled:
            self.never_created.add(run.key)
            return  # another worker admitted the Job before this copy's round: Kueue never creates it
        super().arrive(t, run)

    def dispatch(self, t: int, job: Job) -> None:
        """The manager creates a copy of ``job`` here at ``t``: the first, or again after a re-dispatch."""
        run = self.by_key.get(f"{job.namespace}/{job.job_id}")
        if run is None:
            self.join([job])
        elif not run.attempts:  # its earlier copy was cancelled before its creation
            self.cancelled.discard(run.key)
            if run.key in self.never_created:
                self.never_created.discard(run.key)
                super().arrive(t, run)
        elif run.state is State.FINISHED and run.attempt.end_detail == REMOVED:
            run.state = State.PENDING
            super().arrive(t, run)  # a new attempt, queued as created now
        # else: the copy evicted here is still queued here (Kueue deletes and re-creates it; it keeps its place)

    def requeue(self, t: int, run: JobRun, created: int) -> None:
        """The backoff after the waitForPodsReady eviction at ``created`` is over, unless this copy was
        removed meanwhile (another worker admitted the Job), and maybe created again since: then this
        requeue is void, as Kueue deletes the evicted copy with its backoff."""
        if run.state is not State.BACKOFF or run.attempt.queued != created:
            return
        super().requeue(t, run, created)

    def quota_released(self, t: int, run: JobRun, ended: Attempt) -> None:
        if run.state is State.FINISHED:  # removed while its evicted pods were still terminating
            self.free_quota(run, ended, t)
            return
        super().quota_released(t, run, ended)

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
        if run.state is not State.BACKOFF:  # one evicted by waitForPodsReady already left the queue and
            self.release(t, run)  # freed its quota; its bound pods terminate on their own clock
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
    manager_evictions: int = 0  # preemptions on the manager: not modelled (the copies stay), counted
    redispatches: int = 0  # winning copies evicted on their worker and dispatched again to the zone


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


def _rounds(zone: Zone, dispatcher: str, step: int = STEP) -> list[tuple[str, ...]]:
    """The clusters nominated in each round: all at once, or ``step`` per round in the zone's order."""
    if dispatcher == "AllAtOnce":
        return [zone.clusters]
    return [zone.clusters[i : i + step] for i in range(0, len(zone.clusters), step)]


class _Federation:
    """The lockstep run: the manager's queue and dispatcher, and the worker worlds."""

    def __init__(self, fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig) -> None:
        policy = fleet.policy
        self.zone_of = _zone_of(fleet, jobs)
        self.dispatcher = policy.multiKueue.dispatcher
        self.step = policy.multiKueue.stepSize or STEP
        self.order = [c.name for c in policy.clusters]
        self.manager = ManagerQueue(fleet)
        self.catalog = Catalog.of(fleet)
        self.jobs = {f"{j.namespace}/{j.job_id}": j for j in jobs}
        self.worlds = {c: WorkerWorld(resolve(project(policy, {c})), [], config) for c in self.order}
        for w in self.worlds.values():
            w.advance(-1)  # books the serving scale at 0; an empty world would end at once ...
            w.over = False  # ... so it is kept open: copies join it as the manager creates them
        # the manager's events: (instant, sequence, what, key): arrivals, later rounds, Kueue's timer
        self.events: list[tuple[int, int, str, str]] = []
        self.seq = 0
        for key, job in sorted(self.jobs.items(), key=lambda kv: (kv[1].submit_s, kv[0])):
            self._push(job.submit_s, "arrive", key)
        self.copies: dict[str, list[str]] = {}
        self.reserved: dict[str, int] = {}  # manager quota reserved, by Job
        self.winner: dict[str, str] = {}
        self.won: dict[str, list[str]] = {c: [] for c in self.order}
        self.running: set[str] = set()  # won on a worker, not finished there yet
        self.manager_dirty = False
        self.manager_evictions = 0
        self.evictions_at_win: dict[str, int] = {}  # the winning copy's evictions when it won
        self.generation: dict[str, int] = {}  # dispatches of each Job: a later round of an earlier one is void
        self.redispatches = 0

    def _push(self, t: int, what: str, key: str) -> None:
        self.seq += 1  # events at one instant run in the order they were booked
        heapq.heappush(self.events, (t, self.seq, what, key))

    def run(self) -> None:
        while True:
            times = [w.heap[0][0] for w in self.worlds.values() if w.heap and not w.over]
            if self.events:
                times.append(self.events[0][0])
            if not times:
                return
            t = min(times)
            self._manager_at(t)
            for w in self.worlds.values():
                if w.heap and not w.over:
                    w.advance(t)
            self._settle(t)

    def _manager_at(self, t: int) -> None:
        while self.events and self.events[0][0] == t:
            _, _, what, key = heapq.heappop(self.events)
            if what == "arrive":
                job = self.jobs[key]
                ask = self.catalog.ask_of(job)
                if ask is not None:
                    self.manager.submit(job, ask, self.zone_of[key].name, t)
                    self.manager_dirty = True
            elif what.startswith("round:") and key not in self.winner:
                _, index, generation = what.split(":")
                if int(generation) == self.generation.get(key, 0):
                    self._nominate(t, key, int(index))
            elif what == "kueue":
                self.manager_dirty = True
        if not self.manager_dirty:
            return
        self.manager_dirty = False
        for result in self.manager.cycles(t):
            self.manager_evictions += len(result.preempted)  # not modelled: see the module's docstring
            for admitted in result.admitted:
                if admitted.workload not in self.reserved:
                    self.reserved[admitted.workload] = t
                    self._nominate(t, admitted.workload, 0)
        wake = self.manager.wake()
        if wake is not None:
            self._push(max(wake, t + 1), "kueue", "")

    def _nominate(self, t: int, key: str, index: int) -> None:
        """Round ``index`` of the dispatcher: its clusters get a copy created at ``t``."""
        rounds = _rounds(self.zone_of[key], self.dispatcher, self.step)
        job = replace(self.jobs[key], submit_s=t)  # the copy's creation is its queue-order timestamp
        for cluster in rounds[index]:
            self.worlds[cluster].over = False
            self.worlds[cluster].dispatch(t, job)
            self.copies.setdefault(key, []).append(cluster)
        if index + 1 < len(rounds):
            self._push(t + ROUND_S, f"round:{index + 1}:{self.generation.get(key, 0)}", key)

    def _redispatch(self, t: int, key: str) -> None:
        """The winning copy was evicted on its worker (preempted there): Kueue's MultiKueue check turns
        Retry, the manager evicts its Workload (its quota frees) and requeues it, removes every copy,
        and dispatches it again from the first round once its quota is reserved anew."""
        del self.winner[key]
        self.running.discard(key)
        self.reserved.pop(key, None)
        self.generation[key] = self.generation.get(key, 0) + 1
        self.redispatches += 1
        job = self.jobs[key]
        ask = self.catalog.ask_of(job)
        assert ask is not None  # it was dispatched, so it has an ask
        self.manager.finish(key)
        self.manager.submit(job, ask, self.zone_of[key].name, job.submit_s)  # queue order: its creation
        self.manager_dirty = True

    def _settle(self, t: int) -> None:
        """After instant ``t``: each Job admitted on a worker for the first time wins there (the zone's
        first cluster among those admitting at ``t``), its other copies are removed; a Job that
        finished on its worker releases its quota on the manager."""
        fresh: dict[str, str] = {}
        for cluster in self.order:  # policy order: the tie-breaker at one second
            for run in self.worlds[cluster].runs:
                key = run.key
                if key in self.winner or key in fresh or not run.attempts or run.attempt.end_detail == REMOVED:
                    continue
                if run.attempt.reserved is not None:  # this copy's current attempt holds quota there
                    fresh[key] = cluster
        for key in sorted(fresh, key=lambda k: (_reserved(self.worlds[fresh[k]].by_key[k]), k)):
            cluster = fresh[key]
            self.winner[key] = cluster
            self.won[cluster].append(key)
            self.running.add(key)
            run = self.worlds[cluster].by_key[key]
            self.evictions_at_win[key] = run.preemptions + run.requeues
            for other, world in self.worlds.items():
                if other != cluster:
                    world.withdraw(t, key, cluster)
        for key in sorted(self.running):
            run = self.worlds[self.winner[key]].by_key[key]
            if run.preemptions + run.requeues > self.evictions_at_win[key]:
                self._redispatch(t, key)
            elif run.state is State.FINISHED:
                self.running.discard(key)
                self.manager.finish(key)
                self.manager_dirty = True
        if self.manager_dirty:
            self._push(t + 1, "kueue", "")  # the manager sees the finish and re-runs its cycles


def simulate_federation(fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig) -> FederationResult:
    """Run the trace through the manager's Kueue and dispatch and every worker's Kueue, in lockstep."""
    return run_federation(fleet, jobs, config)[0]


def run_federation(
    fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig
) -> tuple[FederationResult, dict[str, WorkerWorld]]:
    """``simulate_federation``, with each worker's finished world (``federation_run`` measures them as one)."""
    if not fleet.policy.clusters:
        raise InputError.one("the policy declares no clusters: simulate it as one cluster", path="clusters")
    fed = _Federation(fleet, jobs, config)
    fed.run()
    worlds = fed.worlds
    for w in worlds.values():
        w.over = False
        w.advance()  # a world paused with only its stop left ends here
    end = max((w.meter.now for w in worlds.values()), default=0)
    out = [
        _dispatch(job, fed.zone_of[k], tuple(fed.copies.get(k, ())), fed.winner.get(k), worlds=worlds, end=end)
        for k, job in fed.jobs.items()
    ]
    result = FederationResult(
        fed.dispatcher,
        tuple(fed.order),
        tuple(zones(fleet.policy)),
        tuple(out),
        {c: tuple(v) for c, v in fed.won.items()},
        end,
        fed.manager_evictions,
        fed.redispatches,
    )
    return result, worlds


def _reserved(run: JobRun) -> int:
    reserved = run.attempt.reserved
    assert reserved is not None  # only a copy whose current attempt holds quota is a candidate
    return reserved


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
    first = next(a for a in run.attempts if a.reserved is not None)
    started = next((a.started for a in run.attempts if a.started is not None), None)
    last = run.attempt
    finished = last.ended if last.end_reason == "Finished" else None
    waited = run.waited(end) + (run.job.submit_s - job.submit_s)  # an Incremental copy was created later
    return Dispatch(
        key, job.team, job.data_class, zone.name, created, cluster, job.submit_s, first.reserved, started,
        finished, waited, run.held(end),
    )  # fmt: skip
