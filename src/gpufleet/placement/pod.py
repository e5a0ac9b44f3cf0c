"""What a pod asks of the scheduler: resources, one kind of GPU device, and where it may run."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpufleet.placement.node import GPU_MILLI, MILLI
from gpufleet.vocabulary import GPU, MIG_PREFIX, Operator, Requirement, Toleration, mig_resource

__all__ = ["Operator", "PodSpec", "Requirement", "Toleration"]


@dataclass(frozen=True, slots=True)
class PodSpec:
    """One pod. GPU ask, at most one of: ``gpus`` devices of ``gpu_resource`` (full cards,
    time-slice replicas, or MIG instances when ``mig_profile`` is set) or ``gpu_milli`` (a share of
    one full card, 1..999). ``affinity`` holds required node-selector terms: any term may match,
    every requirement of that term must."""

    name: str
    cpu_milli: int = 0
    memory: int = 0
    gpus: int = 0
    gpu_milli: int = 0
    mig_profile: str = ""
    shared_name: bool = False  # ask for nvidia.com/gpu.shared rather than nvidia.com/gpu
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    # Everything but the name: pods with equal shapes get the same answer from the same nodes
    shape: tuple[object, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if min(self.cpu_milli, self.memory, self.gpus, self.gpu_milli) < 0:
            raise ValueError(f"pod {self.name}: negative request")
        if self.gpu_milli and (self.gpus or self.mig_profile or self.gpu_milli >= MILLI):
            raise ValueError(f"pod {self.name}: gpu_milli is a share of one card (1..999), alone")
        if self.mig_profile and not self.gpus:
            raise ValueError(f"pod {self.name}: a MIG profile needs gpus >= 1 instances")
        shape = (
            self.cpu_milli, self.memory, self.gpus, self.gpu_milli, self.mig_profile, self.shared_name,
            self.node_selector, self.affinity, self.tolerations,
        )  # fmt: skip
        object.__setattr__(self, "shape", shape)

    @property
    def gpu_resource(self) -> str:
        """The resource name the GPU ask is made in (what an ``Insufficient …`` message names)."""
        if self.gpu_milli:
            return GPU_MILLI
        if self.mig_profile:
            return mig_resource(self.mig_profile)
        return f"{GPU}.shared" if self.shared_name else GPU

    @property
    def gpu_milli_total(self) -> int:
        """GPU demand in milli-cards (a MIG instance or a time-slice replica counts as one card)."""
        return self.gpu_milli or self.gpus * MILLI

    def wants_gpu(self) -> bool:
        return bool(self.gpus or self.gpu_milli)

    def is_mig(self) -> bool:
        return self.gpu_resource.startswith(MIG_PREFIX)
