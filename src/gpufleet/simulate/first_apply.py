"""The first-apply world: the fleet before gpufleet.

No Kueue, no taints, no quotas, no PriorityClass: every pod of a job goes straight to the scheduler
in arrival order onto any GPU node, serving nodes included, and a job starts when all its pods are
bound (the pods bound before their siblings hold their GPUs idle). Nothing preempts. With only
waiting jobs left, a day of serving changes still passes (a scale-down can free a node).
"""

from __future__ import annotations

from gpufleet.placement import Unschedulable
from gpufleet.simulate.engine import Simulation
from gpufleet.simulate.jobs import JobRun
from gpufleet.simulate.requests import pod_spec


class FirstApplyWorld(Simulation):
    def enter(self, t: int, run: JobRun) -> None:
        self.set_pods(run, [pod_spec(f"{run.job.job_id}/{i}", run.job, run.ask) for i in range(run.job.pods)])
        self.placing[run.key] = run
        self.place_dirty = True

    def cannot_place(self, run: JobRun, last: Unschedulable) -> None:
        run.attempt.reason, run.attempt.message = last.reason, last.message
