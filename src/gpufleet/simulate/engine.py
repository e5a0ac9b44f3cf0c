"""The discrete-event loop: arrivals, Kueue's cycles, the scheduler, waitForPodsReady and serving.

``Simulation`` is the loop both worlds share; each world is a subclass: ``QueueWorld``
(``gpufleet.simulate.queue_world``: Kueue, preemption, waitForPodsReady) and ``FirstApplyWorld``
(``gpufleet.simulate.first_apply``: pods straight to the scheduler). ``run.WORLDS`` maps a mode to it.

One heap of ``(time, sequence, kind, subject)`` events on integer seconds; the sequence counter
breaks ties, so events at the same second run in the order they were scheduled. After every event
of one second has run, the instant *settles*, in this order:

1. (queue world) Kueue's cycles until one admits and preempts nothing: preempted victims' pods
   start terminating, admitted workloads get pods carrying their flavor's node labels and
   tolerations, and those pods bind before the next cycle (on a cluster they are created and bound
   well within a second, so a workload preempted again within the instant holds its nodes);
2. the scheduler's round over every pod without a node: serving replicas first (their
   PriorityClass puts them ahead in kube-scheduler's queue), then jobs in admission order (queue
   world) or arrival order (first-apply); a pod shape that found no node is not tried again in the
   same round, since binding only takes room away;
3. a job whose every pod is bound starts, and finishes ``duration`` seconds later (in the queue
   world its pods free their node then, and Kueue frees its quota a finish delay later:
   ``SimulationConfig.finish_delay_s``, measured on the testbed).

waitForPodsReady: an admitted job not running ``timeout`` seconds after its admission is evicted
(its quota released, its bound pods terminating) and requeued after Kueue's backoff, with the eviction time as its new
queue-order timestamp. Pods are ready the moment they are bound (no image pulls, no failures).

Kueue's own clocks (the queue world): a parked workload wakes one requeue batch (1 s) after the
capacity change that frees it, at an instant booked for it (``KUEUE``).

Preemption is Kueue's graceful eviction: the victim's pods terminate for their grace period (the
job's ``termination_grace_s``, Kubernetes' 30 s by default), holding their GPUs until they are gone (``GONE``). Its quota
frees sooner, ``release_delay_s`` after the eviction (``RELEASE``): Kueue's job reconciler clears a
Workload's reservation once its Job has no active pod, and pods being deleted are not active. Until
then the victim is marked evicted, and the waiting preemptor picks it again (Kueue orders the evicted
first) and issues nothing new; from then it queues again with its creation timestamp. A workload
admitted into that quota (the preemptor, or the victim itself elsewhere) gets pods that wait for the
node until the terminating pods are gone; its waitForPodsReady timeout counts from its admission, as
Kueue's does. A job's pods are named after their attempt, so a readmitted victim's new pods and its
old terminating ones are told apart. Workloads elsewhere are admitted as usual meanwhile.
The victim loses its work since its start (no checkpoint is assumed), the grace period included.
A waitForPodsReady eviction frees the quota at once and the pods that found no node; the bound ones
terminate for their grace period like a preempted victim's.
The first-apply world has no PriorityClass either, so serving replicas wait for GPUs like any pod;
kube-scheduler's pod preemption is not modelled.

The run ends when no arrival, completion, timeout or requeue is left and no job waits. In the
first-apply world, jobs that still wait then get one more day of serving changes (the curve repeats
daily; a scale-down can free a serving node) before the run stops; in the queue world nothing but
those events can free quota, so it stops at once.
It stops in any case ``horizon_after_last_s`` after the last arrival (or at ``until_s``): a
preemption cycle that never settles (a borrower re-admitted into quota its lender reclaimed,
while the lender's head is a job that cannot fit) must not run forever; what still waits then is
reported as unfinished.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from gpufleet.errors import InputError
from gpufleet.placement import (
    Cluster,
    FragmentationAware,
    LeastAllocated,
    MostAllocated,
    PodSpec,
    Policy,
    Shape,
    ShapeMix,
    Unschedulable,
)
from gpufleet.policy import Fleet
from gpufleet.simulate.config import DAY, HOUR, PlacementPolicy, SimulationConfig, for_policy
from gpufleet.simulate.idle import IdleWatch
from gpufleet.simulate.jobs import JobRun, State
from gpufleet.simulate.meter import Meter
from gpufleet.simulate.nodes import fleet_nodes
from gpufleet.simulate.outcome import Outcome
from gpufleet.simulate.reach import Reaches
from gpufleet.simulate.requests import Catalog
from gpufleet.simulate.scheduler import Scheduler
from gpufleet.simulate.serving import SERVING, deployments
from gpufleet.trace.job import Job

# GONE: a preempted attempt's pods are gone; RELEASE: Kueue released a victim's quota; KUEUE: a
# timer of Kueue's fires; PODS: an admitted job's pods reach the scheduler; DONE: Kueue sees a job
# whose pods succeeded finished (its quota frees)
ARRIVE, FINISH, TIMEOUT, REQUEUE, GONE, SCALE, KUEUE, RELEASE, PODS, DONE = range(10)
REFRESHED = ("waiting", "idle_waiting", "unplaced", "serving_wanted", "serving_starved")  # ``refresh`` sets them

Progress = Callable[[int, int], None]


def placement_policy(choice: PlacementPolicy | None, jobs: Sequence[Job]) -> Policy:
    """The scorer for ``choice``; None (a configuration not yet given its policy's) is kube-scheduler's default."""
    if choice is PlacementPolicy.MOST_ALLOCATED:
        return MostAllocated()
    if choice is PlacementPolicy.FRAGMENTATION_AWARE:
        shapes = [Shape(j.cpu_milli, j.gpus if not j.mig_profile else 0, j.gpu_milli, j.memory) for j in jobs]
        return FragmentationAware(ShapeMix.of(shapes or [Shape(0, 1)]))
    return LeastAllocated()


class Simulation(Scheduler):
    """The loop both worlds share: arrivals, completions, the scheduler and serving. A world is a
    subclass (``QueueWorld`` in ``gpufleet.simulate.queue_world``, ``FirstApplyWorld`` in
    ``gpufleet.simulate.first_apply``) that says how a job enters, what its end frees, what settles
    before the scheduler's round, and whether waiting jobs outlast the last event."""

    tainted = False  # nodes carry the pools' taints (the queue world renders them)
    waits_out_serving = True  # with nothing left but waiting jobs, let a day of serving changes pass
    # the jobs placing hold quota (Admitted) until they start or leave: the queue world's do, the
    # first-apply world's wait Pending; so ``unplaced`` is the count of placing jobs, or none
    placing_admitted = False

    def __init__(
        self, fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig, progress: Progress | None = None
    ) -> None:
        # the policy's node scoring and timeout, whoever built the configuration (simulate does too)
        self.config = config = for_policy(config, fleet.policy)
        self.progress = progress
        self.pools = fleet_nodes(fleet, tainted=self.tainted)
        self.pool_of_node = {n.name: p for p in self.pools.values() for n in p.nodes}
        seed = config.jitter_seed  # None: no draw anywhere, the same input gives the same run
        self.jitter = None if seed is None else random.Random(f"{seed}:delays")
        self.cluster = Cluster(
            [n for p in self.pools.values() for n in p.nodes],
            placement_policy(config.placement, jobs),
            tie_break=None if seed is None else random.Random(f"{seed}:nodes"),
        )
        self.capacity = float(sum(p.gpus for p in self.pools.values()))
        self.meter = Meter(config.bucket_s)
        for logged in ("serving_starved", f"team:{SERVING}"):  # the measures integrate them over a window
            self.meter.log(logged)
        self.catalog = catalog = Catalog.of(fleet)
        self.runs: list[JobRun] = []
        self.skipped: list[Job] = []
        for job in sorted(jobs, key=lambda j: (j.submit_s, j.job_id)):  # arrival order; the id breaks ties
            ask = catalog.ask_of(job)
            if ask is None:
                self.skipped.append(job)
            else:
                self.runs.append(JobRun(job, ask, len(self.runs)))
        self.by_key = {r.key: r for r in self.runs}
        if len(self.by_key) != len(self.runs):
            raise InputError.one("the trace has two jobs with the same namespace and job id", path="job_id")
        self.reaches = self.prepare(fleet)
        self.watch = IdleWatch(fleet, self.pools, self.cluster, self.meter, self.reaches)
        self.teams = sorted({t.name for t in fleet.policy.teams} | {r.team for r in self.runs})
        self.weights = {t.name: float(t.weight) for t in fleet.policy.teams}
        self.deployments = deployments(fleet)
        self.replicas: dict[str, list[str]] = {d.name: [] for d in self.deployments}
        # replicas not bound yet, oldest first, with their shape's id; a replica leaves at its bind
        # or its removal (nothing unbinds a replica that stays)
        self.replica_waiting: dict[str, tuple[PodSpec, int]] = {}
        self.replica_worth: dict[str, float] = {}  # bound replicas
        # pod shape -> a small id, cheap to hash; ids are never reused or dropped within the run
        self.shape_ids: dict[tuple[object, ...], int] = {}
        # (pool, devices, MIG profile) -> GPUs held: the pool's worths never change, so never stale
        self.worths: dict[tuple[str, int, str], float] = {}
        self.replica_serial = 0
        self.heap: list[tuple[int, int, int, Any]] = []
        self.seq = 0
        self.active = 0  # events other than the periodic serving scale
        self.placing: dict[str, JobRun] = {}
        self.waiting = 0
        self.arrived = 0
        self.place_dirty = False
        self.rates: tuple[float, ...] | None = None  # what ``refresh`` last set
        # the loop's own state (``advance``): begun, over, quiet since (serving only), stopped at
        self.begun = self.over = False
        self.quiet_since: int | None = None
        self.stopped_at: int | None = None
        # what only the run's report reads: the metered series, the idle watch's rates and the
        # scheduler's reasons for a pod it could not place. No decision reads them, so a forecast's
        # sample, which reads admissions and ends only, turns them off (``unrecorded``)
        self.recording = True
        # the runs whose quota was reserved, in order, while a caller listens (a list; None: nobody)
        self.reservations: list[JobRun] | None = None
        # later arrivals read one at a time (``stream``): the jobs to come, and the run of the one
        # whose arrival is booked (the next is read when it arrives); None: no stream
        self.feed: Iterator[Job] | None = None
        self.fed: JobRun | None = None

    # --- what a world says -----------------------------------------------------------------------
    def prepare(self, fleet: Fleet) -> Reaches | None:
        """Check the jobs against the world and return the quota reaches (None: no quota)."""
        return None

    def enter(self, t: int, run: JobRun) -> None:
        """A job arrived (its attempt begun, counted waiting): hand it to the world."""
        raise NotImplementedError

    def ended(self, run: JobRun) -> None:
        """A job finished and its pods are released: what else its end frees."""

    def settle_world(self, t: int) -> None:
        """What runs at an instant before the scheduler's round (Kueue's cycles)."""

    def handle_world(self, t: int, kind: int, subject: Any) -> None:
        """An event only this world schedules."""
        raise NotImplementedError(kind)

    def cannot_place(self, run: JobRun, last: Unschedulable) -> None:
        """The scheduler found no node for one of the job's pods in this round."""

    def facts(self) -> tuple[dict[str, int], dict[str, str], int]:
        """Priority values, LocalQueues per namespace and Kueue cycles, for the outcome."""
        return {}, {}, 0

    def delay(self, seconds: int, late: float) -> int:
        """A control-plane delay (``SimulationConfig``): as configured, or with a jitter seed a second
        longer with probability ``late``, as a loaded control plane is now and then."""
        if self.jitter is None:
            return seconds
        return seconds + (self.jitter.random() < late)

    # --- the loop --------------------------------------------------------------------------------
    def push(self, t: int, kind: int, subject: Any) -> None:
        self.seq += 1
        if kind != SCALE:
            self.active += 1
        heapq.heappush(self.heap, (t, self.seq, kind, subject))

    def run(self) -> Outcome:
        self.advance()
        return self.outcome()

    def unrecorded(self) -> None:
        """From now on, record nothing only the report reads (``recording``): the run's decisions
        are the same, its metrics and the scheduler's reasons are not kept."""
        self.recording = False

    def advance(self, through: int | None = None, stop: Callable[[], bool] | None = None) -> bool:
        """Run every instant up to ``through`` (None: to the end) and pause there; False once the run
        is over. A paused simulation is a state to branch from (``gpufleet.forecast`` copies it and
        runs each copy on with its own sampled runtimes): the loop's own variables live on ``self``.
        ``stop``, asked once each instant has settled, pauses the run right after that instant (True
        returned, as at ``through``): a forecast's sample stops once what it watches was admitted."""
        if not self.begun:
            self.begun = True
            if self.deployments:
                self.push(0, SCALE, None)
            for r in self.runs:
                self.push(r.job.submit_s, ARRIVE, r)
        until = self.config.until_s
        if until is None and self.runs:
            until = self.runs[-1].job.submit_s + self.config.horizon_after_last_s
        while self.heap and not self.over:
            t = self.heap[0][0]
            if through is not None and t > through:
                return True
            if until is not None and t > until:
                self.stopped_at = until
                break
            if self.active == 0:
                if self.waiting == 0 or not self.waits_out_serving:
                    break
                self.quiet_since = t if self.quiet_since is None else self.quiet_since
                if t >= self.quiet_since + DAY:
                    break
            else:
                self.quiet_since = None
            if self.recording:
                self.meter.advance(t)
            while self.heap and self.heap[0][0] == t:
                _, _, kind, subject = heapq.heappop(self.heap)
                if kind != SCALE:
                    self.active -= 1
                self.handle(t, kind, subject)
            self.settle(t)
            if self.recording:
                self.refresh()
            if stop is not None and stop():
                return True
        self.over = True
        return False

    def retime(self, at: int, durations: dict[str, int]) -> None:
        """At a pause at ``at``, give jobs (by key) new durations: a forecast's sampled runtimes. A
        running job then finishes its new duration after its start, at the earliest the next instant."""
        running = {}
        for key, duration in durations.items():
            run = self.by_key[key]
            run.job = run.job.lasting(duration)
            if run.state is State.RUNNING:
                running[key] = run
        if not running:
            return
        kept = [e for e in self.heap if not (e[2] == FINISH and e[3][0].key in running)]
        self.active -= len(self.heap) - len(kept)
        self.heap = kept
        heapq.heapify(self.heap)
        for run in running.values():
            started = run.attempt.started
            assert started is not None
            self.push(max(started + run.job.duration_s, at + 1), FINISH, (run, run.attempt.number))

    def join(self, jobs: Sequence[Job]) -> None:
        """At a pause, jobs arriving later than it (a forecast's sampled arrivals), in arrival order."""
        for job in sorted(jobs, key=lambda j: (j.submit_s, j.job_id)):
            self._book(job)

    def stream(self, jobs: Iterator[Job]) -> None:
        """At a pause, jobs arriving later than it, read one at a time in arrival order: each is
        read when the one before it arrives, so a run paused early (a forecast's sample, stopped
        once what it watches was admitted) reads only the jobs up to there. Like ``join``, but the
        jobs need not exist beyond what the run reaches."""
        self.feed = jobs
        self._read()

    def _read(self) -> None:
        """Book the next streamed job's arrival (a job the catalog cannot run, or named twice, is skipped)."""
        assert self.feed is not None
        self.fed = None
        for job in self.feed:
            self.fed = self._book(job)
            if self.fed is not None:
                return

    def _book(self, job: Job) -> JobRun | None:
        """A later job's run and its arrival booked; None: the catalog cannot run it, or it is named twice."""
        ask = self.catalog.ask_of(job)
        run = None if ask is None else JobRun(job, ask, len(self.runs))
        if run is None or run.key in self.by_key:
            return None
        if self.reaches is not None:
            run.never = self.reaches.never_admissible(job, run.ask)
        self.runs.append(run)
        self.by_key[run.key] = run
        self.push(job.submit_s, ARRIVE, run)
        return run

    def outcome(self) -> Outcome:
        """What the finished run leaves behind."""
        if self.stopped_at is not None:
            self.meter.advance(self.stopped_at)
        if self.progress is not None:
            self.progress(len(self.runs), len(self.runs))
        priorities, local_queues, cycles = self.facts()
        return Outcome(
            self.config,
            self.runs,
            self.skipped,
            self.pools,
            self.meter,
            self.meter.now,
            self.teams,
            self.weights,
            priorities,
            local_queues,
            cycles,
            self.watch,
        )

    def handle(self, t: int, kind: int, subject: Any) -> None:
        if kind == ARRIVE:
            self.arrive(t, subject)
            if subject is self.fed:
                self._read()
        elif kind == FINISH:
            run, number = subject
            if run.state is State.RUNNING and run.attempt.number == number:
                self.finish(t, run)
        elif kind == SCALE:
            self.scale(t)
        else:
            self.handle_world(t, kind, subject)

    def settle(self, t: int) -> None:
        self.settle_world(t)
        if self.place_dirty:
            self.place_dirty = False
            self.place_round(t)

    def refresh(self) -> None:
        """Rates that depend on several counters, set once the instant has settled."""
        m = self.meter
        wanted = sum(len(v) for v in self.replicas.values())
        rates = (
            self.waiting,
            max(self.capacity - m.rate("alloc"), 0.0) if self.waiting else 0.0,
            len(self.placing) if self.placing_admitted else 0,
            wanted,
            wanted - len(self.replica_worth),
        )
        if rates != self.rates:  # these series are set only here: the same rates again change nothing
            self.rates = rates
            for name, rate in zip(REFRESHED, rates, strict=True):
                m.set(name, rate)
        self.watch.refresh()

    # --- jobs ------------------------------------------------------------------------------------
    def arrive(self, t: int, run: JobRun) -> None:
        run.begin(t)
        self.waiting += 1
        self.watch.waiting(run, 1)
        self.arrived += 1
        if self.progress is not None and (self.arrived % 500 == 0):
            self.progress(self.arrived, len(self.runs))
        self.enter(t, run)

    def start(self, t: int, run: JobRun) -> None:
        run.state = State.RUNNING
        run.attempt.started = t
        del self.placing[run.key]
        self.waiting -= 1
        self.watch.waiting(run, -1)
        self.push(t + run.job.duration_s, FINISH, (run, run.attempt.number))

    def release(self, t: int, run: JobRun) -> None:
        """The current attempt's pods go (a preempted attempt's, still terminating, keep their GPUs)."""
        self.release_pods(t, run, [pod.name for pod in run.pods])
        self.placing.pop(run.key, None)

    def release_pods(self, t: int, run: JobRun, pods: Sequence[str]) -> None:
        """These pods of the job free their GPUs (those never bound hold nothing)."""
        for pod in pods:
            if pod in run.bound:
                self.unbind(run, pod, t)
        self.place_dirty = True

    def end_attempt(self, t: int, run: JobRun, reason: str, detail: str, message: str) -> None:
        attempt = run.attempt
        attempt.ended, attempt.end_reason, attempt.end_detail, attempt.end_message = t, reason, detail, message

    def finish(self, t: int, run: JobRun) -> None:
        self.release(t, run)
        self.end_attempt(t, run, "Finished", "Succeeded", f"Job {run.key} finished")
        run.state = State.FINISHED
        self.ended(run)

    # --- serving ---------------------------------------------------------------------------------
    def scale(self, t: int) -> None:
        """The demand curve's replica count for this hour; scale-down removes the newest first."""
        for dep in self.deployments:
            names = self.replicas[dep.name]
            wanted = self.config.serving.wanted(dep.replicas, t)
            while len(names) < wanted:
                self.replica_serial += 1
                name = f"{SERVING}/{dep.name}-{self.replica_serial}"
                names.append(name)
                pod = PodSpec(
                    name=name,
                    gpus=dep.template.gpus,
                    mig_profile=dep.template.mig_profile,
                    node_selector=dep.template.node_selector,
                    tolerations=dep.template.tolerations,
                )
                self.replica_waiting[name] = (pod, self.shape_id(pod))
                self.place_dirty = True
            while len(names) > wanted:
                name = names.pop()
                if self.replica_waiting.pop(name, None) is None:
                    self.unbind_pod(name, SERVING, self.replica_worth.pop(name))
                    self.place_dirty = True
        self.push(t + HOUR - t % HOUR, SCALE, None)
