"""The scheduler's round: pods without a node are bound, serving replicas first, then the jobs placing.

A part of ``Simulation`` (``gpufleet.simulate.engine``), kept apart because it is its own concept:
kube-scheduler's queue over the pods of the instant, and what binding and unbinding a pod changes (the
cluster's devices, the metered GPUs per team and pool, the idle watch). The loop decides *when* a
round runs (``place_dirty`` at a settled instant); this decides what binds.
"""

from __future__ import annotations

from gpufleet.placement import Cluster, Placement, PodSpec, Unschedulable
from gpufleet.simulate.idle import IdleWatch
from gpufleet.simulate.jobs import Hold, JobRun
from gpufleet.simulate.meter import Meter
from gpufleet.simulate.nodes import PoolNodes
from gpufleet.simulate.serving import SERVING


class Scheduler:
    """The scheduler's half of ``Simulation``: the state it reads is the loop's (set in its ``__init__``)."""

    cluster: Cluster
    pool_of_node: dict[str, PoolNodes]
    worths: dict[tuple[str, int, str], float]
    shape_ids: dict[tuple[object, ...], int]
    meter: Meter
    watch: IdleWatch
    placing: dict[str, JobRun]
    replica_waiting: dict[str, tuple[PodSpec, int]]
    replica_worth: dict[str, float]
    recording: bool

    def start(self, t: int, run: JobRun) -> None:
        """Every pod of the job is bound: it runs (the loop's)."""
        raise NotImplementedError

    def cannot_place(self, run: JobRun, last: Unschedulable) -> None:
        """The scheduler found no node for one of the job's pods in this round (the world's)."""

    def bind(self, pod: PodSpec, placement: Placement, team: str) -> float:
        self.cluster.bind(pod, placement)
        pool = self.pool_of_node[placement.node]
        held = (pool.name, len(placement.devices), pod.mig_profile)
        worth = self.worths.get(held)
        if worth is None:  # fixed by the pool: kept
            worth = self.worths[held] = float(pool.worth(len(placement.devices), pod.mig_profile))
        self.meter.add("alloc", worth)
        self.meter.add(f"team:{team}", worth)
        self.meter.add(f"pool:{pool.name}", worth)
        self.watch.touch(pool.name, placement.node)
        return worth

    def unbind_pod(self, name: str, team: str, worth: float) -> None:
        placement = self.cluster.unbind(name)
        pool = self.pool_of_node[placement.node]
        self.meter.add("alloc", -worth)
        self.meter.add(f"team:{team}", -worth)
        self.meter.add(f"pool:{pool.name}", -worth)
        self.watch.touch(pool.name, placement.node)

    def unbind(self, run: JobRun, pod: str, t: int) -> None:
        worth, since = run.bound.pop(pod)
        run.holding.pop(pod).released = t
        run.gpu_worth -= worth
        run.gpu_seconds += worth * (t - since)
        self.unbind_pod(pod, run.team, worth)

    def shape_id(self, pod: PodSpec) -> int:
        """The id of the pod's shape: equal shapes get one id, for the whole run."""
        return self.shape_ids.setdefault(pod.shape, len(self.shape_ids))

    def set_pods(self, run: JobRun, pods: list[PodSpec]) -> None:
        """The current attempt's pods, none bound yet: a job's pods are identical but for their
        names (``Job``), so they share one shape (``run.shape_id``)."""
        run.pods = pods
        run.placed = 0
        run.shape_id = self.shape_id(pods[0]) if pods else None
        if any(pod.shape != pods[0].shape for pod in pods[1:]):
            raise ValueError(f"job {run.key}: its pods differ in more than their names")

    def place_round(self, t: int) -> None:
        """Replicas, then the placing jobs in order; a shape that found no node is not tried again.

        A job binds its pods in order until one finds no node; the others, of the same shape, are
        then skipped. So its bound pods are always its first ``run.placed`` (nothing unbinds a pod
        of the current attempt while the job places), and the round starts from there."""
        failed: set[int | None] = set()  # shape ids unschedulable this round
        if self.replica_waiting:
            for name, (pod, shape) in list(self.replica_waiting.items()):
                if shape in failed:
                    continue
                decision = self.cluster.schedule(pod, self.recording)
                if isinstance(decision, Unschedulable):
                    failed.add(shape)
                else:
                    del self.replica_waiting[name]
                    self.replica_worth[name] = self.bind(pod, decision, SERVING)
        for run in list(self.placing.values()):
            if run.shape_id in failed:
                continue
            pods = run.pods
            last: Unschedulable | None = None
            while run.placed < len(pods):
                pod = pods[run.placed]
                decision = self.cluster.schedule(pod, self.recording)
                if isinstance(decision, Unschedulable):
                    failed.add(run.shape_id)
                    last = decision
                    break
                self._bind_run_pod(t, run, pod, decision)
            if run.placed == len(pods):
                self.start(t, run)
            elif last is not None:
                self.cannot_place(run, last)

    def _bind_run_pod(self, t: int, run: JobRun, pod: PodSpec, decision: Placement) -> None:
        worth = self.bind(pod, decision, run.team)
        run.bound[pod.name] = (worth, t)
        hold = Hold(worth, t)
        run.attempt.holds.append(hold)
        run.holding[pod.name] = hold
        run.gpu_worth += worth
        run.attempt.placements[pod.name] = (decision.node, decision.devices)
        run.placed += 1
