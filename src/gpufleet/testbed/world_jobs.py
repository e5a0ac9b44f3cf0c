"""A trace job as the real batch/v1 Job the world differential creates on the testbed.

The Job is what the simulator assumes a user submits (``simulate.requests``): ``pods`` pods at once
(parallelism = completions), never retried, each container limited to the job's GPU ask on the
resource the fleet advertises (the simulator's ``Catalog``), labelled with the policy's team, model
and data-class labels, its LocalQueue (named after the team, as ``render`` writes it) and its
WorkloadPriorityClass. Kueue injects the flavor's node labels and tolerations at admission, as the
simulator does. A job pinned to GPU models gets required node affinity on GFD's
``nvidia.com/gpu.product`` with each model's product name (and its ``-SHARED`` form), which the testbed's nodes carry
(``testbed.nodes``). Each pod runs for the job's duration (kwok's ``RUN_FOR_ANNOTATION``).
"""

from __future__ import annotations

from typing import Any

from gpufleet.gpus import catalogue
from gpufleet.policy import Fleet
from gpufleet.simulate.requests import Catalog
from gpufleet.testbed.kwok import RUN_FOR_ANNOTATION
from gpufleet.trace.job import Job

RUN_LABEL = "world.gpufleet.io/run"  # every Job of one world run carries it (listing, cleaning up)
PRODUCT_LABEL = "nvidia.com/gpu.product"
MODEL = "world-differential"


def products(model: str) -> tuple[str, ...]:
    """GFD's product values for a catalogue model: as named, and as GFD marks it on time-sliced cards."""
    gpu = catalogue.lookup(model)
    name = gpu.product if gpu is not None and gpu.product else model
    return (name, f"{name}-SHARED")


def job_manifest(job: Job, fleet: Fleet, run: str) -> dict[str, Any]:
    """The Job for ``job`` in run ``run`` (a label value); ``ValueError`` for a job that asks no GPU."""
    ask = Catalog.of(fleet).ask_of(job)
    if ask is None:
        raise ValueError(f"job {job.job_id}: asks for no GPU, which the world differential does not replay")
    policy = fleet.policy
    team = next(t for t in policy.teams if t.name == job.team)
    names = policy.cluster.labels
    labels = {
        "kueue.x-k8s.io/queue-name": team.name,
        names.team: team.name,
        names.model: job.model or MODEL,
        names.dataClass: job.data_class or team.dataClasses[0],
        RUN_LABEL: run,
    }
    if job.priority_class:
        labels["kueue.x-k8s.io/priority-class"] = job.priority_class
    requests = {ask.resource: str(ask.count)}
    if job.cpu_milli:
        requests["cpu"] = f"{job.cpu_milli}m"
    if job.memory:
        requests["memory"] = str(job.memory)
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": job.termination_grace_s,
        "containers": [{"name": "main", "image": "world:differential", "resources": {"limits": requests}}],
    }
    if job.gpu_models:
        values = sorted({p for m in job.gpu_models for p in products(m)})
        term = {"matchExpressions": [{"key": PRODUCT_LABEL, "operator": "In", "values": values}]}
        pod["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job.job_id, "namespace": job.namespace, "labels": labels},
        "spec": {
            "parallelism": job.pods,
            "completions": job.pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {RUN_LABEL: run}, "annotations": {RUN_FOR_ANNOTATION: f"{job.duration_s}s"}},
                "spec": pod,
            },
        },
    }
