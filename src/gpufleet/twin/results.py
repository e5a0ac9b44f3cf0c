"""What a scheduling cycle decided: plain frozen values, ready to print or serialise."""

from __future__ import annotations

from dataclasses import dataclass

ACTIVE = "active"
INADMISSIBLE = "inadmissible"


@dataclass(frozen=True, slots=True)
class Admitted:
    workload: str
    cluster_queue: str
    flavors: dict[str, dict[str, str]]  # pod set -> resource -> flavor
    counts: dict[str, int]  # pod set -> admitted pod count (smaller under partial admission)


@dataclass(frozen=True, slots=True)
class Preempted:
    workload: str
    cluster_queue: str
    preemptor: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Pending:
    workload: str
    cluster_queue: str
    reason: str
    message: str
    queue: str  # "active" (in the heap) or "inadmissible" (parked until capacity changes)


@dataclass(frozen=True, slots=True)
class CycleResult:
    """One cycle: admissions, evictions it issued, and the heads it could not admit (with why)."""

    number: int
    admitted: tuple[Admitted, ...]
    preempted: tuple[Preempted, ...]
    pending: tuple[Pending, ...]

    @property
    def changed(self) -> bool:
        return bool(self.admitted or self.preempted)


@dataclass(frozen=True, slots=True)
class ClusterQueueStatus:
    """Per-ClusterQueue figures after a cycle; keys are ``flavor/resource``, values Kueue units."""

    name: str
    usage: dict[str, int]
    borrowed: dict[str, int]
    weighted_share: int
    admitted: int
    pending: int
