"""One node's free resources and bound pods, kept so that fit checks and bind/unbind are O(1)-ish.

Device bookkeeping mirrors the NVIDIA device plugin: whole-card asks take fully free cards in index
order; time-slice replicas are handed out "distributed" (the least-used card first, as the plugin's
default ``--shared-devices-allocation-policy``); MIG asks take free instances of the profile in
(card, instance) order; a fractional share takes the card the policy chose.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.placement.node import GPU_MILLI, MILLI, NodeSpec, mig_resource
from gpufleet.placement.pod import PodSpec

Signature = tuple[int, int, tuple[int, ...], int, tuple[object, ...], tuple[int, int]]
DEFAULT_MILLI_CPU = 100  # kube-scheduler counts a missing cpu request as this (NonZeroRequested)
DEFAULT_MEMORY = 200 * 1024 * 1024  # and a missing memory request as this, in bytes


@dataclass(frozen=True, slots=True)
class DeviceSlot:
    """What a pod holds on one card: the card index, the MIG instance (profile and its position in
    the card's layout) or time-slice replica, and the milli-share of the card it takes."""

    gpu: int
    milli: int = MILLI
    profile: str = ""
    instance: int | None = None


class NodeState:
    """Mutable free capacity of one node. ``free`` is milli per full card (MIG cards hold 0 there);
    ``used_replicas`` counts time-slice replicas per card; ``mig_free`` lists free instances."""

    def __new__(cls, *_args: object, **_kwargs: object) -> NodeState:
        # Bare, as pickle makes it before setting its attributes: compiled, a class without its
        # own __new__ would run __init__ with no arguments there (gpufleet.picklable)
        return super().__new__(cls)

    __slots__ = (
        "bound",
        "class_id",
        "cpu_free",
        "cpu_nonzero",
        "free",
        "mem_free",
        "mem_nonzero",
        "mig_free",
        "spec",
        "used_replicas",
    )

    def __init__(self, spec: NodeSpec, class_id: int) -> None:
        self.spec = spec
        self.class_id = class_id
        self.cpu_free = spec.cpu_milli
        self.mem_free = spec.memory
        # cpu and memory requested as kube-scheduler's NodeResourcesFit scores them: 0 counts as a default
        self.cpu_nonzero = 0
        self.mem_nonzero = 0
        full = set(spec.full_cards)
        self.free = [MILLI if i in full else 0 for i in range(spec.gpus)]
        self.used_replicas = [0] * spec.gpus
        self.mig_free: dict[str, list[tuple[int, int]]] = {}
        for card in range(spec.gpus):
            for pos, profile in enumerate(spec.card_profiles(card)):
                self.mig_free.setdefault(profile, []).append((card, pos))
        self.bound: dict[str, tuple[PodSpec, tuple[DeviceSlot, ...]]] = {}

    @property
    def timesliced(self) -> bool:
        return self.spec.timeslice_replicas > 1

    @property
    def plain(self) -> bool:
        """Only full cards, not time-sliced: fit is decided by the signature's numbers alone."""
        return not self.timesliced and not self.mig_free

    def signature(self) -> Signature:
        """The free state that fit and scores depend on: CPU, memory, the card frees as a multiset,
        the count of fully free cards, (time-sliced or MIG nodes) replica use and free instances, and
        the cpu and memory requested as the scheduler's scoring counts them."""
        frees = tuple(sorted(self.free))
        extra: tuple[object, ...] = ()
        if not self.plain:
            extra = (
                tuple(sorted(self.used_replicas)),
                tuple(sorted((p, len(v)) for p, v in self.mig_free.items())),
            )
        return (self.cpu_free, self.mem_free, frees, frees.count(MILLI), extra, (self.cpu_nonzero, self.mem_nonzero))

    def insufficient(self, pod: PodSpec) -> list[str]:
        """The resources this node lacks for the pod, each as kube-scheduler names it."""
        out = []
        if pod.cpu_milli > self.cpu_free:
            out.append("cpu")
        if pod.memory > self.mem_free:
            out.append("memory")
        if pod.wants_gpu() and not self.gpu_fits(pod):
            out.append(pod.gpu_resource)
        return out

    def gpu_fits(self, pod: PodSpec) -> bool:
        spec = self.spec
        if pod.gpu_milli:
            return not self.timesliced and any(f >= pod.gpu_milli for f in self.free)
        if pod.mig_profile:
            return len(self.mig_free.get(pod.mig_profile, ())) >= pod.gpus
        if pod.gpu_resource != spec.shared_resource:
            return False
        if self.timesliced:
            capacity = len(spec.full_cards) * spec.timeslice_replicas
            return capacity - sum(self.used_replicas) >= pod.gpus
        return sum(1 for f in self.free if f == MILLI) >= pod.gpus

    def candidate_cards(self, pod: PodSpec) -> list[int]:
        """Cards a fractional share may take (the policy picks one); whole asks need no choice."""
        return [i for i, f in enumerate(self.free) if f >= pod.gpu_milli]

    def devices_for(self, pod: PodSpec, card: int | None = None) -> tuple[DeviceSlot, ...]:
        """The devices the pod would get here; ``card`` is the policy's pick for a fractional share."""
        if not pod.wants_gpu():
            return ()
        if pod.gpu_milli:
            chosen = card if card is not None else self.candidate_cards(pod)[0]
            return (DeviceSlot(chosen, pod.gpu_milli, GPU_MILLI),)
        if pod.mig_profile:
            slots = self.mig_free[pod.mig_profile][: pod.gpus]
            return tuple(DeviceSlot(c, MILLI, mig_resource(pod.mig_profile), pos) for c, pos in slots)
        if self.timesliced:
            used = list(self.used_replicas)
            picks = []
            full = self.spec.full_cards
            for _ in range(pod.gpus):
                c = min(full, key=lambda i: (used[i], i))
                picks.append(DeviceSlot(c, MILLI // self.spec.timeslice_replicas, pod.gpu_resource, used[c]))
                used[c] += 1
            return tuple(picks)
        cards = [i for i, f in enumerate(self.free) if f == MILLI][: pod.gpus]
        return tuple(DeviceSlot(c) for c in cards)

    def take(self, pod: PodSpec, devices: tuple[DeviceSlot, ...]) -> None:
        self.cpu_free -= pod.cpu_milli
        self.mem_free -= pod.memory
        self.cpu_nonzero += pod.cpu_milli or DEFAULT_MILLI_CPU
        self.mem_nonzero += pod.memory or DEFAULT_MEMORY
        for d in devices:
            if pod.mig_profile:
                self.mig_free[pod.mig_profile].remove((d.gpu, d.instance or 0))
            elif self.timesliced:
                self.used_replicas[d.gpu] += 1
            else:
                self.free[d.gpu] -= d.milli
        self.bound[pod.name] = (pod, devices)

    def give_back(self, name: str) -> tuple[PodSpec, tuple[DeviceSlot, ...]]:
        pod, devices = self.bound.pop(name)
        self.cpu_free += pod.cpu_milli
        self.mem_free += pod.memory
        self.cpu_nonzero -= pod.cpu_milli or DEFAULT_MILLI_CPU
        self.mem_nonzero -= pod.memory or DEFAULT_MEMORY
        for d in devices:
            if pod.mig_profile:
                free = self.mig_free[pod.mig_profile]
                free.append((d.gpu, d.instance or 0))
                free.sort()
            elif self.timesliced:
                self.used_replicas[d.gpu] -= 1
            else:
                self.free[d.gpu] += d.milli
        return pod, devices

    def gpu_milli_used(self) -> int:
        """Milli-cards held on full cards (fractional shares and whole cards)."""
        if self.timesliced:
            return 0
        return sum(MILLI - self.free[i] for i in self.spec.full_cards)
