"""Expected GPU fragmentation of a node against the workload's typical pods.

The idea is the FGD paper's (Weng et al., "Beware of Fragmentation", USENIX ATC'23): idle GPU
capacity is a *fragment* for a kind of pod when that pod cannot use it; weighting each typical pod
by how often it arrives gives the capacity a node is expected to waste. A placement that raises
this the least keeps the most usable room for what comes next.

For one typical pod ``m`` and a node with free card shares ``f_1..f_n``:

- the node cannot host ``m`` at all (wrong GPU model, too little CPU or memory, no card or too few
  whole cards free): every idle milli on the node is fragment for ``m``;
- ``m`` fits: the cards it could never use are fragment: cards with less free than its share, or,
  for a whole-card pod, cards that are partly taken.

Unlike FGD, CPU-only pods are left out: they never use GPUs, so no idle GPU is lost to them, and
memory is checked alongside CPU.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from gpufleet.placement.node import MILLI


@dataclass(frozen=True, slots=True, order=True)
class Shape:
    """A kind of pod, as the fragmentation measure sees it. ``models`` empty: any GPU model."""

    cpu_milli: int
    gpus: int = 0
    gpu_milli: int = 0  # a share of one card; 0 when the pod takes whole cards or none
    memory: int = 0
    models: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ShapeMix:
    """Typical pods with their arrival shares (summing to 1)."""

    shapes: tuple[tuple[Shape, float], ...]

    @classmethod
    def of(cls, shapes: Iterable[Shape], coverage: float = 0.95) -> ShapeMix:
        """The most frequent shapes until they cover ``coverage`` of all pods, renormalized.
        Ordered by count (most first), then by shape, so the cut is reproducible."""
        counts = Counter(shapes)
        total = sum(counts.values())
        if not total:
            return cls(())
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        kept: list[tuple[Shape, int]] = []
        covered = 0
        for shape, count in ranked:
            if covered >= coverage * total:
                break
            kept.append((shape, count))
            covered += count
        return cls(tuple((s, c / covered) for s, c in kept))


class FragmentMeter:
    """Computes a node's expected fragment, memoized by (GPU model, free CPU, free memory, card frees)."""

    def __new__(cls, *_args: object, **_kwargs: object) -> FragmentMeter:
        # Bare, as pickle makes it before setting its attributes: compiled, a class without its
        # own __new__ would run __init__ with no arguments there (gpufleet.picklable)
        return super().__new__(cls)

    def __init__(self, mix: ShapeMix) -> None:
        self.mix = mix
        self._per_model: dict[str, tuple[float, list[tuple[float, int, int, int, int]]]] = {}
        self._memo: dict[tuple[str, int, int, tuple[int, ...]], float] = {}

    def _compiled(self, model: str) -> tuple[float, list[tuple[float, int, int, int, int]]]:
        hit = self._per_model.get(model)
        if hit is None:
            blocked = 0.0
            usable = []
            for shape, share in self.mix.shapes:
                if not (shape.gpus or shape.gpu_milli):
                    continue
                if shape.models and model not in shape.models:
                    blocked += share
                    continue
                usable.append((share, shape.cpu_milli, shape.memory, shape.gpus, shape.gpu_milli))
            hit = self._per_model[model] = (blocked, usable)
        return hit

    def fragment(self, model: str, cpu_free: int, mem_free: int, frees: tuple[int, ...]) -> float:
        """Expected idle milli lost on a node whose card frees are ``frees`` (sorted ascending)."""
        key = (model, cpu_free, mem_free, frees)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        total = sum(frees)
        value = 0.0
        if total:
            blocked, usable = self._compiled(model)
            value = blocked * total
            whole_free = frees.count(MILLI)
            largest = frees[-1]
            for share, cpu, mem, gpus, milli in usable:
                if cpu > cpu_free or mem > mem_free:
                    value += share * total
                elif gpus:
                    value += share * (total - MILLI * whole_free if whole_free >= gpus else total)
                elif largest >= milli:
                    value += share * sum(f for f in frees if f < milli)
                else:
                    value += share * total
        self._memo[key] = value
        return value
