"""The MultiKueue manager's own Kueue: the zone ClusterQueues a Job reserves quota in before any copy.

On the manager a Job waits in its ``<team>-<zone>`` ClusterQueue until Kueue reserves the team's quota
on one of the zone's pools (the manager's flavors carry no nodes: quota only); only then does the
MultiKueue check create copies on the workers, and the reservation is held until the Job finishes on
its worker. That quota is a real gate: the manager counts a Job against the flavor its own Kueue picks,
which need not be the pool the Job runs on. The twin runs over exactly the manager bundle's Kueue
objects (``render.multikueue.manager_files``), less the AdmissionChecks it does not model: here a Job is
dispatched at reservation, as the check controller does, and admitted when a worker admits it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

from gpufleet.policy import Fleet
from gpufleet.policy.residency import queue_name
from gpufleet.render.common import Obj
from gpufleet.simulate.queue import MAX_CYCLES_PER_INSTANT, next_wake
from gpufleet.simulate.requests import Ask, workload_spec
from gpufleet.trace.job import Job
from gpufleet.twin import CycleResult, Twin
from gpufleet.twin.apis.objects import parse_objects
from gpufleet.twin.clocks import ClockSettings

KINDS = frozenset({"Namespace", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"})


def manager_objects(fleet: Fleet) -> list[Obj]:
    """The manager bundle's Kueue objects, without the admission check the twin does not run."""
    from gpufleet.render.multikueue import manager_files

    out = []
    for f in manager_files(fleet):
        for o in f.objects:
            if o.get("kind") in KINDS:
                kept = copy.deepcopy(o)
                kept.get("spec", {}).pop("admissionChecksStrategy", None)
                out.append(kept)
    return out


class ManagerQueue:
    """The manager's Kueue for one run: submit, cycle, finish."""

    def __init__(self, fleet: Fleet) -> None:
        self.twin = Twin(
            parse_objects(manager_objects(fleet), "the manager bundle"),
            fast=True, streaks=True, reservations_per_cycle=True, clocks=ClockSettings(),
        )  # fmt: skip
        self.priorities = {pc.name: pc.value for pc in fleet.policy.priorityClasses}

    def submit(self, job: Job, ask: Ask, zone: str, created: int) -> None:
        priority = self.priorities.get(job.priority_class, 0)
        queue = queue_name(job.team, zone)
        self.twin.add_workload(workload_spec(job, ask, queue=queue, priority=priority, created=created))

    def cycles(self, t: int) -> Iterator[CycleResult]:
        self.twin.advance_to(t * 1000)
        return self.twin.run(None, limit=MAX_CYCLES_PER_INSTANT, wait=False)

    def finish(self, key: str) -> None:
        self.twin.finish(key)

    def wake(self) -> int | None:
        """The instant Kueue's next requeue batch fires, when a workload is parked (as ``Queue.wake``)."""
        return next_wake(self.twin)
