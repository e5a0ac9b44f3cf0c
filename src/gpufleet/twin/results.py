"""Ours, not Kueue's: the values a cycle returns (Kueue writes them as Workload conditions and
ClusterQueue status).

What a scheduling cycle decided: plain frozen values, ready to print or serialise."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.twin.apis.reasons import PENDING
from gpufleet.twin.workload import PodSetAdmission

ACTIVE = "active"
INADMISSIBLE = "inadmissible"


@dataclass(frozen=True, slots=True)
class Admitted:
    """A quota reservation made this cycle; the per-pod-set views are built only when read."""

    workload: str
    cluster_queue: str
    pod_sets: tuple[PodSetAdmission, ...]

    @property
    def flavors(self) -> dict[str, dict[str, str]]:
        """Pod set -> resource -> flavor."""
        return {ps.name: dict(ps.flavors) for ps in self.pod_sets}

    @property
    def counts(self) -> dict[str, int]:
        """Pod set -> admitted pod count (smaller than requested under partial admission)."""
        return {ps.name: ps.count for ps in self.pod_sets}


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
    # Whether Kueue itself writes this reason and message (a QuotaReserved=False condition) or
    # it is the twin's own explanation of a workload Kueue leaves untouched: one never handed
    # to the scheduler (behind a blocked StrictFIFO head, deeper in a heap), or an equivalent
    # moved in bulk by the scheduling hash (Kueue writes no condition on those).
    kueue_writes: bool = True
    # Where the twin's own explanation stands in for a condition Kueue wrote earlier and leaves
    # in place (an equivalent that failed on its own, then was moved in bulk with a look-alike's
    # failure): that condition's reason and message, Kueue's status-to-be. None otherwise.
    written: tuple[str, str] | None = None


def waiting_position(
    workload: str, cluster_queue: str, position: int, state: str, strict_head: str | None = None
) -> Pending:
    """The twin's own word for a workload the scheduler has not popped yet: Kueue writes no
    condition on it (``requeueAndUpdate`` only updates the heads of a cycle), so it is marked."""
    message = f"waiting in ClusterQueue {cluster_queue}, position {position}"
    if strict_head is not None:
        message += f", behind StrictFIFO head {strict_head}"
    return Pending(workload, cluster_queue, PENDING, message, state, kueue_writes=False)


@dataclass(frozen=True, slots=True)
class CycleResult:
    """One cycle: admissions, evictions it issued, and the heads it could not admit (with why).

    A batched result (``Twin(spec, streaks=True)``) covers a streak of quiet cycles and the one that
    ended it: ``pending`` holds all their verdicts in cycle order, ``last`` the final cycle's.
    ``stable``: the final cycle changed nothing, repeated the verdicts of the cycle before and put
    every head back into its heap (``cycle.stable``).
    """

    number: int
    admitted: tuple[Admitted, ...]
    preempted: tuple[Preempted, ...]
    pending: tuple[Pending, ...]
    stable: bool = False
    last: tuple[Pending, ...] = ()

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
