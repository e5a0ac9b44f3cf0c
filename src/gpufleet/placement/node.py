"""Nodes as the Kubernetes scheduler sees them: allocatable resources, GPU devices, labels, taints.

A node's GPUs are exposed the way the NVIDIA device plugin exposes them, because that decides which
pods can land where: a full card is one ``nvidia.com/gpu``; a MIG-partitioned card advertises one
``nvidia.com/mig-<profile>`` per instance (mixed strategy, so full and MIG cards may share a node);
a time-sliced node advertises ``replicas`` references per card as ``nvidia.com/gpu`` (or
``nvidia.com/gpu.shared`` when renamed), and time-slicing applies to every full card of the node.
A full card can also hold fractional shares (``gpu_milli``), the GPU-sharing model of the FGD paper.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpufleet.vocabulary import GPU, GPU_SHARED, MIG_PREFIX, Taint, TaintEffect, mig_resource

GPU_MILLI = "gpu-milli"  # the fractional-share resource of the FGD simulator's GPU-share plugin
MILLI = 1000  # one full card, in milli

__all__ = ["GPU", "GPU_MILLI", "GPU_SHARED", "MIG_PREFIX", "MILLI", "NodeSpec", "Taint", "TaintEffect", "mig_resource"]


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node. ``mig`` holds one tuple of instance profiles per card (empty tuple: a full card);
    an empty ``mig`` means every card is full. ``timeslice_replicas`` > 1 time-slices the full cards."""

    name: str
    cpu_milli: int
    memory: int  # bytes
    gpus: int = 0
    gpu_model: str = ""
    mig: tuple[tuple[str, ...], ...] = ()
    timeslice_replicas: int = 1
    rename_shared: bool = False
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    full_cards: tuple[int, ...] = field(init=False, repr=False, compare=False)
    """Indices of the cards that are not MIG-partitioned (derived)."""

    def __post_init__(self) -> None:
        if self.mig and len(self.mig) != self.gpus:
            raise ValueError(f"node {self.name}: mig lists {len(self.mig)} cards, node has {self.gpus}")
        if self.timeslice_replicas < 1:
            raise ValueError(f"node {self.name}: timeslice_replicas must be >= 1")
        if min(self.cpu_milli, self.memory, self.gpus) < 0:
            raise ValueError(f"node {self.name}: negative capacity")
        object.__setattr__(self, "full_cards", tuple(i for i in range(self.gpus) if not self.card_profiles(i)))

    def card_profiles(self, index: int) -> tuple[str, ...]:
        return self.mig[index] if self.mig else ()

    @property
    def shared_resource(self) -> str:
        """The name under which the full cards are advertised."""
        return GPU_SHARED if self.timeslice_replicas > 1 and self.rename_shared else GPU

    def allocatable(self) -> dict[str, int]:
        """Extended and core resources as ``kubectl describe node`` would list them."""
        out = {"cpu": self.cpu_milli, "memory": self.memory}
        full = len(self.full_cards)
        if full:
            out[self.shared_resource] = full * self.timeslice_replicas
        for i in range(self.gpus):
            for profile in self.card_profiles(i):
                name = mig_resource(profile)
                out[name] = out.get(name, 0) + 1
        return out

    def label_map(self) -> dict[str, str]:
        return dict(self.labels)
