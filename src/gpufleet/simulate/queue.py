"""The queue world's Kueue: the twin over exactly the objects ``gpufleet render`` writes.

Render's Kueue objects (``render.kueue_objects``: the teams' Namespaces, ResourceFlavors, Cohort,
ClusterQueues, LocalQueues, WorkloadPriorityClasses and the Kueue Configuration) go to the twin's
own object parser as they are, so the simulated queue is the one a cluster would get, without
rendering the rest of the bundle (admission policy, webhook, monitoring) or a trip through YAML.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufleet.errors import InputError, Problem
from gpufleet.policy import Fleet
from gpufleet.render import kueue_objects
from gpufleet.simulate.requests import Ask, workload_spec
from gpufleet.trace.job import Job
from gpufleet.twin import CycleResult, Twin
from gpufleet.twin.apis.objects import parse_objects
from gpufleet.twin.apis.specs import ClusterSpec, ResourceFlavorSpec
from gpufleet.twin.clocks import ClockSettings

MAX_CYCLES_PER_INSTANT = 10_000  # a guard: Kueue's loop settles long before this


def cluster_spec(fleet: Fleet) -> ClusterSpec:
    return parse_objects(kueue_objects(fleet), "rendered Kueue objects")


class Queue:
    """Kueue for one run: submit, requeue and finish workloads; run cycles until nothing changes."""

    def __init__(self, fleet: Fleet, *, fast: bool = True) -> None:
        """``fast``: the twin's verdict memo and quiet-cycle streaks; off, its reference path."""
        self.spec = cluster_spec(fleet)
        # Kueue's clocks (twin/clocks.py): the backoff between cycles and the 1 s inadmissible
        # requeue batch. The victims' quota is the simulator's to release (hold_evicted_quota), a
        # release delay after the eviction (SimulationConfig.release_delay_s, the twin's
        # RELEASE_DELAY_MS in whole seconds): the twin's own release timer would fall between the
        # simulator's instants (its cycles move the clock by milliseconds) and be seen a second late.
        self.twin = Twin(
            self.spec, hold_evicted_quota=True, fast=fast, streaks=fast, reservations_per_cycle=True,
            clocks=ClockSettings(),
        )  # fmt: skip
        self.priorities = {pc.name: pc.value for pc in fleet.policy.priorityClasses}
        self.queues = {lq.namespace: lq.name for _, lq in sorted(self.spec.local_queues.items())}

    def check(self, jobs: list[tuple[Job, Ask]]) -> None:
        """Every job must point at a LocalQueue and a priority class the policy renders."""
        problems: list[Problem] = []
        seen: set[str] = set()
        for job, _ in jobs:
            if job.namespace not in self.queues and job.namespace not in seen:
                seen.add(job.namespace)
                problems.append(
                    Problem(
                        f"job {job.job_id}: namespace {job.namespace!r} (team {job.team!r}) has no LocalQueue "
                        "in the policy; add the namespace to a team",
                        path="namespace",
                    )
                )
            if job.priority_class and job.priority_class not in self.priorities and job.priority_class not in seen:
                seen.add(job.priority_class)
                problems.append(
                    Problem(
                        f"job {job.job_id}: priority class {job.priority_class!r} is not in the policy's priorityClasses",
                        path="priority_class",
                    )
                )
        if problems:
            raise InputError(problems)

    def queue_name(self, job: Job) -> str:
        """The LocalQueue of the job's namespace (the rendered one is named after the team)."""
        return self.queues[job.namespace]

    def flavor(self, name: str) -> ResourceFlavorSpec:
        return self.spec.flavors[name]

    def submit(self, job: Job, ask: Ask, created: int) -> None:
        priority = self.priorities.get(job.priority_class, 0)
        spec = workload_spec(job, ask, queue=self.queue_name(job), priority=priority, created=created)
        self.twin.add_workload(spec)

    def finish(self, key: str) -> None:
        self.twin.finish(key)

    def released(self, key: str) -> None:
        """Kueue cleared a preempted workload's reservation: its quota frees and it queues again.
        (The twin calls it ``evicted_gone``: with ``hold_evicted_quota`` the caller says when.)"""
        self.twin.evicted_gone(key)

    def at(self, t: int) -> None:
        """The simulation reached instant ``t`` (seconds): Kueue's clock (ms) moves with it."""
        self.twin.advance_to(t * 1000)

    def cycles(self, t: int) -> Iterator[CycleResult]:
        """Kueue's scheduling loop at instant ``t`` (seconds): Kueue's timers due by then fire,
        then cycles while active heads remain, until a cycle changes nothing and repeats the
        previous verdicts (the twin's "until stable"). Timers due later wait for their own
        instant (``wake``). Each result is yielded before the next cycle runs, so the caller can
        act on it first."""
        self.twin.advance_to(t * 1000)
        return self.twin.run(None, limit=MAX_CYCLES_PER_INSTANT, wait=False)

    def due(self) -> int | None:
        """When (ms) Kueue's next timer fires, if any."""
        clock = self.twin.clock
        return clock.due() if clock is not None else None

    def wake(self) -> int | None:
        """The instant (whole seconds, rounded down) within which Kueue's next timer fires, if any: a
        requeue batch that wakes parked workloads a second after a capacity change. Parking
        happens only in cycles, which run only at instants, so a batch with nothing parked at the
        end of an instant is left to fire unseen at a later one."""
        clock = self.twin.clock
        due = clock.due() if clock is not None else None
        if due is None or not self.twin.queues.parked():
            return None  # nothing parked: the batch wakes no one, so no instant is booked for it
        return due // 1000


def next_wake(twin: Twin) -> int | None:
    """The instant (whole seconds, rounded up) at which ``twin``'s next Kueue timer fires, if a
    workload is parked. The manager's twin (``simulate.federation_manager``) advances in whole
    seconds, so it rounds up; a worker's ``Queue.wake`` rounds down, its world firing the timer
    within the second (``queue_world``)."""
    clock = twin.clock
    due = clock.due() if clock is not None else None
    if due is None or not twin.queues.parked():
        return None  # nothing parked: the batch wakes no one, so no instant is booked for it
    return -(-due // 1000)
