"""A job of a trace: who submitted what, when, for how long, asking for which GPU devices."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MILLI = 1000
# Kubernetes' default terminationGracePeriodSeconds (the API server fills it into every pod spec)
DEFAULT_TERMINATION_GRACE_S = 30


class JobKind(StrEnum):
    TRAINING = "training"
    BATCH_EVAL = "batch-eval"
    DEV = "dev"
    INFERENCE = "inference"


@dataclass(frozen=True, slots=True)
class Job:
    """One job: ``pods`` identical pods, each asking for ``gpus`` devices (whole cards, time-slice
    replicas, or MIG instances of ``mig_profile``) or ``gpu_milli`` (a share of one card).
    Times are integer seconds from the trace's start; memory is in bytes. ``termination_grace_s`` is
    the pods' ``terminationGracePeriodSeconds``: a preempted pod holds its GPUs this long."""

    job_id: str
    team: str
    namespace: str
    submit_s: int
    duration_s: int
    kind: JobKind
    pods: int = 1
    gpus: int = 0
    gpu_milli: int = 0
    mig_profile: str = ""
    gpu_models: tuple[str, ...] = ()  # allowed GPU models; empty: any
    cpu_milli: int = 0
    memory: int = 0
    priority_class: str = ""
    model: str = ""
    data_class: str = ""
    checkpoint: str = ""
    termination_grace_s: int = DEFAULT_TERMINATION_GRACE_S

    def __post_init__(self) -> None:
        problems = job_problems(self)
        if problems:
            raise ValueError(f"job {self.job_id}: " + "; ".join(problems))

    def lasting(self, duration_s: int) -> Job:
        """The same job running ``duration_s``: a forecast gives every running and waiting job a
        sampled runtime, 1,500 per sample on the speed bench, where ``dataclasses.replace`` walked
        the fields by name at twice the cost. Checked as any job is (``__post_init__``)."""
        return Job(
            self.job_id, self.team, self.namespace, self.submit_s, duration_s, self.kind, self.pods, self.gpus,
            self.gpu_milli, self.mig_profile, self.gpu_models, self.cpu_milli, self.memory, self.priority_class,
            self.model, self.data_class, self.checkpoint, self.termination_grace_s,
        )  # fmt: skip

    @property
    def gpu_milli_per_pod(self) -> int:
        """GPU demand of one pod in milli-cards (a MIG instance or replica counts as a card)."""
        return self.gpu_milli or self.gpus * MILLI

    @property
    def gpu_seconds(self) -> float:
        return self.pods * self.gpu_milli_per_pod / MILLI * self.duration_s


def job_problems(job: Job) -> list[str]:
    """Every rule a job breaks (the trace reader turns these into located InputErrors)."""
    out = []
    if not job.job_id:
        out.append("job_id is empty")
    if not job.team:
        out.append("team is empty")
    if job.submit_s < 0:
        out.append("submit_s must be >= 0")
    if job.duration_s < 0:
        out.append("duration_s must be >= 0")
    if job.pods < 1:
        out.append("pods must be >= 1")
    if job.termination_grace_s < 0:
        out.append("termination_grace_s must be >= 0")
    if min(job.gpus, job.gpu_milli, job.cpu_milli, job.memory) < 0:
        out.append("requests must be >= 0")
    if job.gpu_milli and (job.gpus or job.mig_profile or job.gpu_milli >= MILLI):
        out.append("gpu_milli is a share of one card (1..999) and excludes gpus and mig_profile")
    if job.mig_profile and job.gpus < 1:
        out.append("mig_profile needs gpus >= 1 (instances per pod)")
    return out
