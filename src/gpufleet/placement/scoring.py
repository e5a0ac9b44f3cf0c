"""Placement policies: how feasible nodes are ranked.

Each policy gives, for one feasible node, a sort key (lower is better; a pure function of the node's
capacity, its free state and the pod's requests, so the cluster may memoize it) and the devices the
pod would get there; the cluster appends the node name as the final tie-breaker, so every run is
reproducible (kube-scheduler itself breaks ties at random).

- ``LeastAllocated`` (kube-scheduler's default NodeResourcesFit strategy) and ``MostAllocated``
  (its bin-packing strategy) score 0..100 per resource with kube's integer arithmetic, over CPU,
  memory and the node's GPU resource (milli of its full cards, its time-slice replicas, or the
  pod's MIG profile), weight 1 each, a resource the node lacks left out. A fractional share goes to
  the fullest card that still fits it (best fit), then the lowest index.
- ``FragmentationAware``: the least increase in expected fragmentation (see ``fragmentation``),
  counted in bands of ``resolution`` milli (a tenth of a card by default: smaller differences are
  noise in an estimate built from a typical-pod mix), then the node with fewer cards (keep large
  nodes whole for large pods), then the least free GPU left on the node (pack), then the node name.
  A fractional share takes the card with the least increase, then the fullest such card, then the
  lowest index. Within a band the tie-breakers decide how nodes fill. On the FGD packing benchmark
  (openb default, seeds 42-51, GPU allocated at 130 % demand, typical shapes without memory; this
  key: 95.31 %) the alternatives did no better: the exact increase 94.3 %, bands of 50 or 200 milli
  95.0 and 95.2 %, FGD's own ``int(100 * sigmoid(-increase / 1000))`` score 95.25 %, no card-count
  key 95.3 %, MostAllocated's score as tie-breaker 95.0 %, preferring large nodes 87.9 % (seed 42),
  FGD's card pick (first card with the best band) 95.30 %. Two scored higher at 130 % only by
  turning large pods away early (85-88 % allocated at 90 % demand, where this key and FGD's
  published curve allocate all 90 %): LeastAllocated's score as tie-breaker (spreading, 95.5 %) and
  ranking by the fragment *after* placement instead of its increase (95.5 %).
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
    @property
    def name(self) -> str: ...

    def key(self, node: NodeState, pod: PodSpec) -> Key: ...

    def devices(self, node: NodeState, pod: PodSpec) -> tuple[DeviceSlot, ...]: ...


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

    def key(self, node: NodeState, pod: PodSpec) -> Key:
        dims = _usage_after(node, pod)
        score = sum((alloc - used) * MAX_NODE_SCORE // alloc for used, alloc in dims) // len(dims)
        return (float(-score),)

    def devices(self, node: NodeState, pod: PodSpec) -> tuple[DeviceSlot, ...]:
        return node.devices_for(pod, _best_fit_card(node, pod))


@dataclass(frozen=True, slots=True)
class MostAllocated:
    name: str = "MostAllocated"

    def key(self, node: NodeState, pod: PodSpec) -> Key:
        dims = _usage_after(node, pod)
        score = sum(used * MAX_NODE_SCORE // alloc for used, alloc in dims) // len(dims)
        return (float(-score),)

    def devices(self, node: NodeState, pod: PodSpec) -> tuple[DeviceSlot, ...]:
        return node.devices_for(pod, _best_fit_card(node, pod))


class FragmentationAware:
    """Places each pod where it raises the node's expected fragment the least."""

    name = "FragmentationAware"

    def __init__(self, mix: ShapeMix, resolution: int = 100) -> None:
        if resolution < 1:
            raise ValueError("resolution must be >= 1 milli")
        self.meter = FragmentMeter(mix)
        self.resolution = resolution

    def key(self, node: NodeState, pod: PodSpec) -> Key:
        return self._choose(node, pod)[0]

    def devices(self, node: NodeState, pod: PodSpec) -> tuple[DeviceSlot, ...]:
        return node.devices_for(pod, self._choose(node, pod)[1])

    def _choose(self, node: NodeState, pod: PodSpec) -> tuple[Key, int | None]:
        """The key and, for a fractional share, the card that gives it."""
        if pod.mig_profile or node.timesliced:
            # The measure is about shares of full cards; elsewhere pack like MostAllocated.
            return (0.0, *MostAllocated().key(node, pod)), None
        model = node.spec.gpu_model
        frees = node.free
        before = self.meter.fragment(model, node.cpu_free, node.mem_free, tuple(sorted(frees)))
        cpu_after = node.cpu_free - pod.cpu_milli
        mem_after = node.mem_free - pod.memory
        left = float(sum(frees) - pod.gpu_milli_total)
        if not pod.gpu_milli:
            after = list(frees)
            for d in node.devices_for(pod):
                after[d.gpu] -= d.milli
            grow = self.meter.fragment(model, cpu_after, mem_after, tuple(sorted(after))) - before
            return (float(round(grow / self.resolution)), float(node.spec.gpus), left), None
        best: tuple[float, float, int] | None = None
        for card in node.candidate_cards(pod):
            after = list(frees)
            after[card] -= pod.gpu_milli
            grow = self.meter.fragment(model, cpu_after, mem_after, tuple(sorted(after))) - before
            choice = (round(grow, 6), float(frees[card]), card)
            if best is None or choice < best:
                best = choice
        if best is None:
            raise ValueError(f"pod {pod.name} does not fit node {node.spec.name}")
        return (float(round(best[0] / self.resolution)), float(node.spec.gpus), left), best[2]
