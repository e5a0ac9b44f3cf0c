"""Kueue v0.19.2: ``pkg/cache/queue/afs/usage_ledger.go``,
``pkg/util/admissionfairsharing/admission_fair_sharing.go``, ``pkg/cache/queue/cluster_queue.go``.

Kueue's AdmissionFairSharing: each LocalQueue's decayed usage, which orders its ClusterQueue's heap.

A ClusterQueue with ``spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing``, under a
Configuration with ``admissionFairSharing`` and the gate on (``pkg/util/admissionfairsharing``
``ResourceWeights``), orders its pending workloads by their LocalQueue's usage first, lower
first, then by the usual key (``pkg/cache/queue/cluster_queue.go`` ``queueOrderingFunc``):

    usage = sum over resources (sorted) of resourceWeight * (consumed + pending penalty) / LocalQueue weight

with a resource's weight 1 unless ``resourceWeights`` names it, and +Inf for a LocalQueue weight
of 0 (``CalculateUsage``). ``consumed`` is Kueue's in-memory ledger (``pkg/cache/queue/afs``),
seeded from ``status.fairSharing.admissionFairSharingStatus.consumedResources``:

* **sampling** (``localqueue_controller.go`` ``reconcileConsumedUsage``): every
  ``usageSamplingInterval`` the LocalQueue controller moves consumed towards the LocalQueue's live
  admitted usage, ``consumed * (1 - a) + live * a`` with ``a = 1 - 0.5^(elapsed / usageHalfLifeTime)``
  (``CalculateDecayedConsumed``); a half-life of 0 resets consumed to nothing;
* **entry penalty** (``scheduler.go`` ``updateEntryPenalty``, ``CalculateEntryPenalty``): when a
  workload is admitted, ``a(usageSamplingInterval)`` times its total requests is pushed for its
  LocalQueue and counts at once; the workload controller folds it into consumed when the
  workload turns Admitted (``updateAfsConsumedUsage``), decaying consumed towards live usage over
  the time since the ledger's last update first. The twin does both at the admission.

Quantities are integers of nano-units (10**-9 of a resource's base unit, so 1 cpu is 10**9):
Kueue scales with ``resource.MulByFloat``, which rounds down at nine decimals, and so does
``scaled`` here, exactly. Usage is a float, as in Kueue.

The twin has no clock (docs/twin.md, "Admission fair sharing"): "now" is the twin's reservation
time, the second after the newest timestamp of its input; ``UsageLedger.sample`` is the hook a
clock calls.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from gpufleet.twin.apis.specs import AdmissionFairSharingSpec, ClusterSpec
from gpufleet.twin.cache.cohort import CohortTree
from gpufleet.twin.queue.queues import Queues
from gpufleet.twin.resources import MILLI_RESOURCES
from gpufleet.twin.workload import Admission, Workload

NANO = 10**9
SECOND_NS = 10**9
MILLISECOND_NS = 10**6


def seconds(duration_ns: int) -> float:
    """Go's ``time.Duration.Seconds()``: whole seconds plus the rest, as Kueue reads its durations."""
    whole, rest = divmod(duration_ns, SECOND_NS)
    return float(whole) + rest / 1e9


def alpha(elapsed_s: float, half_life_s: float) -> float:
    """``calculateAlphaRate``: the share of the new value after ``elapsed_s`` (0 with no half-life)."""
    if half_life_s == 0:
        return 0.0
    return 1.0 - float(0.5 ** (elapsed_s / half_life_s))


def scaled(amount: int, factor: float) -> int:
    """``resource.MulByFloat`` on nano-units: the factor as its shortest decimal, rounded down."""
    return math.floor(amount * Fraction(repr(factor)))


def to_nano(amount: int, resource: str) -> int:
    """A twin quantity (milli-cpu, bytes, counts) in nano-units of the resource's base unit."""
    return amount * (MILLISECOND_NS if resource in MILLI_RESOURCES else NANO)


def decayed(old: Mapping[str, int], live: Mapping[str, int], elapsed_s: float, half_life_s: float) -> dict[str, int]:
    """``CalculateDecayedConsumed``: ``old`` moved towards ``live`` by ``alpha(elapsed)``."""
    a = alpha(elapsed_s, half_life_s)
    out = {r: scaled(q, 1 - a) for r, q in old.items()}
    for r, q in live.items():
        out[r] = out.get(r, 0) + scaled(q, a)
    return out


def entry_penalty(requests: Mapping[str, int], config: AdmissionFairSharingSpec) -> dict[str, int]:
    """``CalculateEntryPenalty``: ``alpha(usageSamplingInterval)`` of what a workload requests."""
    a = alpha(seconds(config.usage_sampling_interval_ns), seconds(config.usage_half_life_ns))
    return {r: scaled(q, a) for r, q in requests.items()}


def as_float(amount: int) -> float:
    """``Quantity.AsApproximateFloat64`` of a nano-unit amount (whole units exactly)."""
    whole, rest = divmod(amount, NANO)
    return float(whole) if rest == 0 else float(amount) * 1e-9


def usage(consumed: Mapping[str, int], weight: float, resource_weights: Mapping[str, float]) -> float:
    """``CalculateUsage``: weighted consumption over the LocalQueue's weight; +Inf for weight 0."""
    total = 0.0
    for resource in sorted(consumed):
        total += resource_weights.get(resource, 1.0) * as_float(consumed[resource])
    if weight <= 0:
        return math.inf
    return total / weight


def local_queue_of(wl: Workload) -> str:
    """The ``namespace/name`` of a workload's LocalQueue, the ledger's key."""
    return f"{wl.spec.namespace}/{wl.spec.queue_name}"


def merged(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """``MergeResourceListKeepSum``: per resource, the sum."""
    out = dict(a)
    for r, q in b.items():
        out[r] = out.get(r, 0) + q
    return out


@dataclass(slots=True)
class LedgerEntry:
    """One LocalQueue's ``UsageLedgerEntry``: consumed (nano-units) and when it was last decayed."""

    consumed: dict[str, int]
    last_update: int  # epoch ms
    live: dict[str, int] = field(default_factory=dict)  # admitted usage now, nano-units by resource


class UsageLedger:
    """Kueue's ``AfsUsageLedger`` for the LocalQueues whose ClusterQueue uses AdmissionFairSharing.

    ``usage(lq)`` leads the heap key of such a ClusterQueue's workloads (queues.py) and orders
    its preemption candidates. ``admitted`` keeps each LocalQueue's live admitted usage (what
    sampling moves towards), ``charge`` is an admission's entry penalty and ``sample`` the
    LocalQueue controller's decay; each changes the usage of the LocalQueues it names only.
    """

    def __init__(self, spec: ClusterSpec, now: int, resource_of: Sequence[str]) -> None:
        self.resource_of = resource_of  # flavor-resource index -> resource name
        self.config = spec.config.admission_fair_sharing or AdmissionFairSharingSpec()
        # the ClusterQueues it applies to; all share the Configuration's one section
        self.cluster_queues = frozenset(
            name for name, cq in spec.cluster_queues.items() if spec.config.admission_fair_sharing_for(cq)
        )
        self.resource_weights = dict(self.config.resource_weights)
        self.entries: dict[str, LedgerEntry] = {}
        self.weights: dict[str, float] = {}
        self._cached: dict[str, float] = {}
        for key, lq in spec.local_queues.items():
            if lq.cluster_queue not in self.cluster_queues:
                continue
            last = lq.last_update if lq.last_update is not None else now
            self.entries[key] = LedgerEntry(dict(lq.consumed), last)
            self.weights[key] = lq.fair_weight

    def __bool__(self) -> bool:
        return bool(self.cluster_queues)

    def usage(self, lq: str) -> float:
        """The LocalQueue's usage as its ClusterQueue's heap compares it (cached until it changes).
        A LocalQueue the ledger does not know (deleted) weighs 1 and has consumed nothing
        (``ResolveLQWeight``)."""
        found = self._cached.get(lq)
        if found is None:
            entry = self.entries.get(lq)
            consumed = entry.consumed if entry is not None else {}
            found = self._cached[lq] = usage(consumed, self.weights.get(lq, 1.0), self.resource_weights)
        return found

    def attach(self, queues: Queues, tree: CohortTree) -> UsageLedger:
        """Give each usage-based ClusterQueue's heap and preemption candidates the usage to order by."""
        for name in self.cluster_queues:
            queues.by_cq[name].usage_of = tree.cluster_queues[name].afs_usage = self.usage_of
        return self

    def usage_of(self, wl: Workload) -> float:
        return self.usage(local_queue_of(wl))

    def by_resource(self, admission: Admission) -> dict[str, int]:
        """An admission's usage per resource name in nano-units, flavors summed (``FlattenFlavors``)."""
        total: dict[str, int] = {}
        for fr, amount in admission.usage:
            resource = self.resource_of[fr]
            total[resource] = total.get(resource, 0) + to_nano(amount, resource)
        return total

    def admitted(self, wl: Workload, admission: Admission, sign: int = 1) -> None:
        """``wl`` took (sign 1) or released (-1) quota: its LocalQueue's live admitted usage."""
        entry = self.entries.get(local_queue_of(wl))
        if entry is not None:
            for resource, amount in self.by_resource(admission).items():
                entry.live[resource] = entry.live.get(resource, 0) + sign * amount

    def charge(self, wl: Workload, admission: Admission, at: int) -> bool:
        """``wl`` was admitted at ``at`` (epoch ms). In a usage-based ClusterQueue: decay its
        LocalQueue's consumed towards its live usage (which holds ``wl`` already) over the time since
        the last update, then add the entry penalty; True. Elsewhere nothing happens; False."""
        if admission.cluster_queue not in self.cluster_queues:
            return False
        config, lq = self.config, local_queue_of(wl)
        entry = self.entries.get(lq)
        if entry is None:  # a LocalQueue the input lacks (deleted): PushPenalty starts its entry
            entry = self.entries[lq] = LedgerEntry({}, at)
        total = self.by_resource(admission)
        elapsed = seconds(max(0, at - entry.last_update) * MILLISECOND_NS)
        half_life = seconds(config.usage_half_life_ns)
        entry.consumed = merged(decayed(entry.consumed, entry.live, elapsed, half_life), entry_penalty(total, config))
        entry.last_update = max(entry.last_update, at)
        self._cached.pop(lq, None)
        return True

    def sample(self, now: int) -> set[str]:
        """The LocalQueue controller's sampling up to ``now`` (epoch ms): every whole
        ``usageSamplingInterval`` since an entry's last update decays it towards its live usage (a
        half-life of 0 resets it). Returns the LocalQueues whose usage changed."""
        changed = set()
        config = self.config
        for lq, entry in self.entries.items():
            interval = config.usage_sampling_interval_ns // MILLISECOND_NS
            ticks = (now - entry.last_update) // interval if interval > 0 else 0
            if ticks <= 0:
                continue
            half_life = seconds(config.usage_half_life_ns)
            if half_life == 0:
                entry.consumed = {}
            else:
                step = seconds(interval * MILLISECOND_NS)
                for _ in range(min(ticks, 64)):
                    entry.consumed = decayed(entry.consumed, entry.live, step, half_life)
                if ticks > 64:  # the rest in one step: the same curve, rounded once
                    entry.consumed = decayed(entry.consumed, entry.live, step * (ticks - 64), half_life)
            entry.last_update += ticks * interval
            self._cached.pop(lq, None)
            changed.add(lq)
        return changed
