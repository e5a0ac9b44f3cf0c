"""What a trace job asks for, as Kueue counts it and as the scheduler places it.

A job's pods ask for one kind of GPU device, named the way the rendered fleet advertises it:

- ``mig_profile``: ``gpus`` instances of ``nvidia.com/mig-<profile>`` (the GPU Operator's mixed
  strategy);
- ``gpu_milli`` (a fraction of a card): one time-slice replica, ``nvidia.com/gpu.shared`` where the
  fleet renames shared cards (the rendered default), else ``nvidia.com/gpu``; the rendered
  time-slicing config fails requests of more than one replica, so a fraction is always one;
- ``gpus``: whole cards, ``nvidia.com/gpu``; but when the job's allowed GPU models are found only
  on time-sliced pools, it asks for ``gpus`` time-slice replicas (a trace names the card it ran on,
  and on those cards the device plugin hands out replicas).

A job that names its GPU models carries them as required node affinity on ``gpufleet.io/gpu``, the
way a user pins ``nvidia.com/gpu.product``.

CPU and memory go to the scheduler only: the rendered Kueue Configuration excludes them from quota.
In the queue world a pod carries what Kueue injects at admission: the flavor's node labels as its
``nodeSelector`` and the flavor's tolerations. In the first-apply world it carries neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.placement import Operator, PodSpec, Requirement, Toleration
from gpufleet.policy import Fleet, node_shape
from gpufleet.policy.slicing import SlicingMode
from gpufleet.trace.job import Job
from gpufleet.twin.apis.specs import PodSetSpec, ResourceFlavorSpec, WorkloadSpec

GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"
POD_SET = "main"
GPU_MODEL_LABEL = node_shape.GPU_MODEL_LABEL  # the label every node carries with its catalogue model


@dataclass(frozen=True, slots=True)
class Ask:
    """One pod's GPU ask: ``count`` devices of ``resource`` (``mig_profile`` set for MIG)."""

    resource: str
    count: int
    mig_profile: str = ""


@dataclass(frozen=True)
class Catalog:
    """What the fleet advertises: the time-slice resource name and the cards found only sliced."""

    shared: str
    timeslice_only: frozenset[str]

    @classmethod
    def of(cls, fleet: Fleet) -> Catalog:
        renamed = any(GPU_SHARED in cap.units for cap in fleet.pools.values())
        sliced = {cap.gpu.name for cap in fleet.pools.values() if cap.decision.mode is SlicingMode.TIMESLICE}
        other = {cap.gpu.name for cap in fleet.pools.values() if cap.decision.mode is not SlicingMode.TIMESLICE}
        return cls(GPU_SHARED if renamed else GPU, frozenset(sliced - other))

    def ask_of(self, job: Job) -> Ask | None:
        """The job's per-pod GPU ask, or None for a job that asks for no GPU."""
        if job.mig_profile:
            return Ask(f"nvidia.com/mig-{job.mig_profile}", job.gpus, job.mig_profile)
        if job.gpu_milli:
            return Ask(self.shared, 1)
        if job.gpus and job.gpu_models and set(job.gpu_models) <= self.timeslice_only:
            return Ask(self.shared, job.gpus)
        if job.gpus:
            return Ask(GPU, job.gpus)
        return None


def pod_spec(
    name: str,
    job: Job,
    ask: Ask,
    flavor: ResourceFlavorSpec | None = None,
) -> PodSpec:
    """One pod of the job, with what Kueue injects when ``flavor`` is given."""
    selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    if flavor is not None:
        selector = flavor.node_labels
        tolerations = flavor.tolerations  # one vocabulary: the flavor's tolerations are the pod's
    affinity = ((Requirement(GPU_MODEL_LABEL, Operator.IN, job.gpu_models),),) if job.gpu_models else ()
    return PodSpec(
        name=name,
        cpu_milli=job.cpu_milli,
        memory=job.memory,
        gpus=ask.count,
        mig_profile=ask.mig_profile,
        shared_name=ask.resource == GPU_SHARED,
        node_selector=selector,
        affinity=affinity,
        tolerations=tolerations,
    )


def workload_spec(job: Job, ask: Ask, *, queue: str, priority: int, created: int) -> WorkloadSpec:
    """The Workload Kueue's job integration would create: one pod set, the GPU ask only.

    The UID is the job id: a Workload requeued after an eviction is the same object, so it keeps
    its UID (the queue order's last tie-breaker); ``created`` is its queue-order timestamp."""
    return WorkloadSpec(
        namespace=job.namespace,
        name=job.job_id,
        queue_name=queue,
        pod_sets=(PodSetSpec(POD_SET, job.pods, ((ask.resource, ask.count),)),),
        priority=priority,
        created=created,
        uid=job.job_id,
    )
