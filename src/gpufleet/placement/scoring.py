"""Placement policies: how feasible nodes are ranked.

Each policy returns, for one feasible node, a sort key (lower is better) and the devices the pod
would get there; the cluster appends the node name as the final tie-breaker, so every run is
reproducible (kube-scheduler itself breaks ties at random).

- ``LeastAllocated`` (kube-scheduler's default NodeResourcesFit strategy) and ``MostAllocated``
  (its bin-packing strategy) score 0..100 per resource with kube's integer arithmetic, over CPU,
  memory and the node's GPU resource (milli of its full cards, its time-slice replicas, or the
  pod's MIG profile), weight 1 each, a resource the node lacks left out. A fractional share goes to
  the fullest card that still fits it (best fit), then the lowest index.
- ``FragmentationAware``: the least increase in expected fragmentation (see ``fragmentation``), then
  the least free GPU left on the node (pack what the measure cannot tell apart), then best fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gpufleet.placement.fragmentation import FragmentMeter, ShapeMix
from gpufleet.placement.node import MILLI
from gpufleet.placement.pod import PodSpec
from gpufleet.placement.state import DeviceSlot, NodeState

MAX_NODE_SCORE = 100

Key = tuple[float, ...]


class Policy(Protocol):
    name: str

    def rank(self, node: NodeState, pod: PodSpec) -> tuple[Key, tuple[DeviceSlot, ...]]: ...


def _usage_after(node: NodeState, pod: PodSpec) -> list[tuple[int, int]]:
    """(requested after placing the pod, allocatable) per scored resource."""
    spec = node.spec
    dims = [
        (spec.cpu_milli - node.cpu_free + pod.cpu_milli, spec.cpu_milli),
        (spec.memory - node.mem_free + pod.memory, spec.memory),
    ]
    if pod.mig_profile:
        alloc = sum(p == pod.mig_profile for c in range(spec.gpus) for p in spec.card_profiles(c))
        dims.append((alloc - len(node.mig_free.get(pod.mig_profile, ())) + pod.gpus, alloc))
    elif node.timesliced:
        alloc = len(spec.full_cards) * spec.timeslice_replicas
        dims.append((sum(node.used_replicas) + pod.gpus, alloc))
    else:
        alloc = len(spec.full_cards) * MILLI
        dims.append((node.gpu_milli_used() + pod.gpu_milli_total, alloc))
    return [(used, alloc) for used, alloc in dims if alloc > 0]


def _best_fit_card(node: NodeState, pod: PodSpec) -> int | None:
    if not pod.gpu_milli:
        return None
    return min(node.candidate_cards(pod), key=lambda i: (node.free[i], i))


@dataclass(frozen=True, slots=True)
class LeastAllocated:
    name: str = "LeastAllocated"

    def rank(self, node: NodeState, pod: PodSpec) -> tuple[Key, tuple[DeviceSlot, ...]]:
        dims = _usage_after(node, pod)
        score = sum((alloc - used) * MAX_NODE_SCORE // alloc for used, alloc in dims) // len(dims)
        return (float(-score),), node.devices_for(pod, _best_fit_card(node, pod))


@dataclass(frozen=True, slots=True)
class MostAllocated:
    name: str = "MostAllocated"

    def rank(self, node: NodeState, pod: PodSpec) -> tuple[Key, tuple[DeviceSlot, ...]]:
        dims = _usage_after(node, pod)
        score = sum(used * MAX_NODE_SCORE // alloc for used, alloc in dims) // len(dims)
        return (float(-score),), node.devices_for(pod, _best_fit_card(node, pod))


class FragmentationAware:
    """Places each pod where it raises the node's expected fragment the least."""

    name = "FragmentationAware"

    def __init__(self, mix: ShapeMix) -> None:
        self.meter = FragmentMeter(mix)

    def rank(self, node: NodeState, pod: PodSpec) -> tuple[Key, tuple[DeviceSlot, ...]]:
        if pod.mig_profile or node.timesliced:
            # The measure is about shares of full cards; elsewhere pack like MostAllocated.
            return (0.0, *MostAllocated().rank(node, pod)[0]), node.devices_for(pod)
        model = node.spec.gpu_model
        frees = node.free
        before = self.meter.fragment(model, node.cpu_free, node.mem_free, tuple(sorted(frees)))
        cpu_after = node.cpu_free - pod.cpu_milli
        mem_after = node.mem_free - pod.memory
        left = sum(frees) - pod.gpu_milli_total
        if not pod.gpu_milli:
            devices = node.devices_for(pod)
            after = list(frees)
            for d in devices:
                after[d.gpu] -= d.milli
            grow = self.meter.fragment(model, cpu_after, mem_after, tuple(sorted(after))) - before
            return (round(grow, 6), float(left)), devices
        best: tuple[float, ...] | None = None
        best_card = 0
        tried: set[int] = set()
        for card in node.candidate_cards(pod):
            if frees[card] in tried:  # cards with equal free give the same state: keep the lowest
                continue
            tried.add(frees[card])
            after = list(frees)
            after[card] -= pod.gpu_milli
            grow = self.meter.fragment(model, cpu_after, mem_after, tuple(sorted(after))) - before
            key = (round(grow, 6), float(left), float(frees[card]))
            if best is None or key < best:
                best, best_card = key, card
        assert best is not None
        return best[:2], node.devices_for(pod, best_card)
