"""Kueue v0.19.2: ``pkg/workload/workload.go``.

A Workload as the scheduler sees it: its spec plus the little state admission changes."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.errors import InputError
from gpufleet.twin.apis.specs import PodSetSpec, WorkloadSpec
from gpufleet.twin.resources import FlavorResources


@dataclass(frozen=True, slots=True)
class PodSetAdmission:
    """What one pod set got: a flavor per resource and the (possibly reduced) pod count."""

    name: str
    count: int
    flavors: tuple[tuple[str, str], ...]  # (resource, flavor), in request order


@dataclass(frozen=True, slots=True)
class Admission:
    """A quota reservation: the ClusterQueue, per-pod-set flavors, and usage per flavor-resource."""

    cluster_queue: str
    pod_sets: tuple[PodSetAdmission, ...]
    usage: tuple[tuple[int, int], ...]  # (flavor-resource index, quantity)


NO_USES: frozenset[int] = frozenset()  # shared by every workload without quota


class Workload:
    """Runtime record of one Workload; ``order`` is the heap key Kueue uses inside a ClusterQueue.

    ``order`` = (-priority, queue-order timestamp, uid or ns/name): higher priority first, then
    older first, then an arbitrary but fixed tie-breaker so every run is reproducible.
    """

    __slots__ = (
        "admission",
        "cluster_queue",
        "equivalence",
        "evicted",
        "heaped",
        "key",
        "looks",
        "order",
        "pod_sets",
        "priority",
        "reserved_at",
        "shape",
        "spec",
        "uses",
        "victim_key",
    )

    def __init__(self, spec: WorkloadSpec, cluster_queue: str) -> None:
        self.spec = spec
        self.key = key = spec.key
        self.priority = spec.priority
        self.cluster_queue = cluster_queue
        self.pod_sets: tuple[PodSetSpec, ...] = spec.pod_sets
        self.order: tuple[int, int, str] = (-spec.priority, spec.created, spec.uid or key)
        self.admission: Admission | None = None
        self.reserved_at = 0  # when quota was reserved; "admitted more recently" orders victims
        self.evicted = False  # Kueue's Evicted condition while the quota is still reserved
        self.uses: frozenset[int] = NO_USES  # flavor-resources its admission holds
        # Preemption's candidate order after the evicted and same-queue parts: lower priority,
        # then admitted more recently, then the tie-breaker (set when quota is reserved).
        self.victim_key: tuple[int, int, str] = (self.priority, 0, self.order[2])
        self.shape: tuple[str, int] | None = None  # (ClusterQueue, look-alike class): the twin's memo key
        # Kueue's scheduling hash as a number (see queue/equivalence.py); None: unknown, never bulk-moved.
        self.equivalence: int | None = None
        # A number for (priority, pod sets) as scheduling reads them, when the twin knows one (its
        # scheduling hash, where no request is excluded): the memo's key then hashes no pod sets.
        self.looks: int | None = None
        self.heaped = False  # its ClusterQueue's heap holds an entry for it (queue/queues.py)

    @property
    def created(self) -> int:
        return self.spec.created

    def __repr__(self) -> str:
        return f"<Workload {self.key} prio={self.priority}>"

    def can_be_partially_admitted(self) -> bool:
        return any(ps.min_count is not None and ps.min_count < ps.count for ps in self.pod_sets)


def admission_from_status(wl: Workload, cluster_queue: str, frs: FlavorResources) -> Admission:
    """The Admission a Workload already holds in the input (``status.admission``), in the twin's
    flavor-resource indices; a pod set or flavor the ClusterQueue cannot account for is an input error."""
    assert wl.spec.admission is not None
    usage: dict[int, int] = {}
    pod_sets = []
    assigned = {a.name: a for a in wl.spec.admission.pod_set_assignments}
    for ps in wl.pod_sets:
        a = assigned.get(ps.name)
        if a is None:
            raise InputError.one(
                f"Workload {wl.key} is admitted without an assignment for pod set {ps.name}",
                path=f"Workload/{wl.key}.status.admission.podSetAssignments",
            )
        flavors = dict(a.flavors)
        for resource, per_pod in ps.requests:
            flavor = flavors.get(resource)
            fr = frs.get(flavor, resource) if flavor else None
            if fr is None:
                if per_pod:
                    raise InputError.one(
                        f"Workload {wl.key} is admitted with {resource} in flavor {flavor}, "
                        f"which ClusterQueue {cluster_queue} does not define",
                        path=f"Workload/{wl.key}.status.admission.podSetAssignments",
                    )
                continue
            usage[fr] = usage.get(fr, 0) + per_pod * a.count
        pod_sets.append(PodSetAdmission(ps.name, a.count, a.flavors))
    return Admission(cluster_queue, tuple(pod_sets), tuple(usage.items()))
