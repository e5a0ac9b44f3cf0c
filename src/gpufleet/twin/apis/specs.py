"""Kueue v0.19.2: ``apis/kueue/v1beta2/*_types.go``, ``apis/config/v1beta2/configuration_types.go``.

Frozen specs of the Kueue objects the twin reads: values in, never mutated.

Field names follow Kueue's ``v1beta2`` API; ``None`` on a limit means "not set" (unlimited), as in
the API. Quantities are already integers (see ``resources``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gpufleet.twin import features
from gpufleet.vocabulary import LabelSelector, Requirement, Taint, Toleration

__all__ = ["LabelSelector", "Requirement", "Taint", "Toleration"]  # the shared vocabulary, re-exported

NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
ANY = "Any"
MAY_STOP_SEARCH = "MayStopSearch"
TRY_NEXT_FLAVOR = "TryNextFlavor"
BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"
BEST_EFFORT_FIFO = "BestEffortFIFO"
STRICT_FIFO = "StrictFIFO"
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
USAGE_BASED_ADMISSION_FAIR_SHARING = "UsageBasedAdmissionFairSharing"
NO_ADMISSION_FAIR_SHARING = "NoAdmissionFairSharing"
BLOCK_UNDECLARED = "BlockUndeclared"
IGNORE_UNDECLARED = "IgnoreUndeclared"


@dataclass(frozen=True, slots=True)
class ResourceFlavorSpec:
    name: str
    node_labels: tuple[tuple[str, str], ...] = ()
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceQuotaSpec:
    resource: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotasSpec:
    flavor: str
    resources: tuple[ResourceQuotaSpec, ...]


@dataclass(frozen=True, slots=True)
class ResourceGroupSpec:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotasSpec, ...]


@dataclass(frozen=True, slots=True)
class PreemptionSpec:
    within_cluster_queue: str = NEVER
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort: str = NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorFungibilitySpec:
    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR
    preference: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueueSpec:
    name: str
    cohort: str | None = None
    resource_groups: tuple[ResourceGroupSpec, ...] = ()
    namespace_selector: LabelSelector | None = field(default_factory=LabelSelector)
    queueing_strategy: str = BEST_EFFORT_FIFO
    flavor_fungibility: FlavorFungibilitySpec = field(default_factory=FlavorFungibilitySpec)
    preemption: PreemptionSpec = field(default_factory=PreemptionSpec)
    fair_weight: float = 1.0
    stop_policy: str = "None"
    # spec.admissionScope.admissionMode (None: no admissionScope, which Kueue treats as NoAdmissionFairSharing)
    admission_mode: str | None = None


@dataclass(frozen=True, slots=True)
class CohortSpec:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroupSpec, ...] = ()
    fair_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class LocalQueueSpec:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = "None"
    # AdmissionFairSharing: spec.fairSharing.weight, and status.fairSharing.admissionFairSharingStatus as
    # Kueue last wrote it: consumedResources in nano-units of each resource's base unit (cpu in
    # nano-cores, so 1 core is 10**9), lastUpdate in epoch milliseconds (None: no status yet).
    fair_weight: float = 1.0
    consumed: tuple[tuple[str, int], ...] = ()
    last_update: int | None = None


@dataclass(frozen=True, slots=True)
class PodSetSpec:
    """One pod set: ``count`` pods each requesting ``requests`` (integers, Kueue units)."""

    name: str
    count: int
    requests: tuple[tuple[str, int], ...]
    min_count: int | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    affinity_terms: tuple[tuple[Requirement, ...], ...] = ()  # required node affinity, ORed terms


@dataclass(frozen=True, slots=True)
class PodSetAssignmentSpec:
    name: str
    flavors: tuple[tuple[str, str], ...]  # resource -> flavor
    count: int


@dataclass(frozen=True, slots=True)
class AdmissionSpec:
    cluster_queue: str
    pod_set_assignments: tuple[PodSetAssignmentSpec, ...]


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """A Workload; ``created`` is its queue-order timestamp (any integer clock, e.g. epoch ms)."""

    namespace: str
    name: str
    queue_name: str
    pod_sets: tuple[PodSetSpec, ...]
    priority: int = 0
    created: int = 0
    uid: str = ""
    admission: AdmissionSpec | None = None
    active: bool = True
    reserved_at: int = 0  # QuotaReserved's lastTransitionTime (epoch ms) for admitted ones
    job_uid: str = ""  # the kueue.x-k8s.io/job-uid label, quoted in preemption messages
    # Kueue's QuotaReserved message when its DRA accounting refuses the workload (apis/claims.py); such a
    # workload never reaches a queue
    dra_error: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def counted(self, counts: Callable[[str], bool]) -> WorkloadSpec:
        """The requests quota counts: Kueue's ``excludeResourcePrefixes`` drops the others. The spec
        itself where it asks for none of those (most do: a copy per workload was 5 % of a forecast sample)."""
        if all(counts(r) for ps in self.pod_sets for r, _ in ps.requests):
            return self
        pod_sets = tuple(
            replace(ps, requests=tuple((r, q) for r, q in ps.requests if counts(r))) for ps in self.pod_sets
        )
        return replace(self, pod_sets=pod_sets)


@dataclass(frozen=True, slots=True)
class NamespaceSpec:
    name: str
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class AdmissionFairSharingSpec:
    """The Configuration's ``admissionFairSharing``: durations in integer nanoseconds, as Go's
    ``time.Duration`` holds them; ``resource_weights`` sorted by resource (unlisted ones weigh 1)."""

    usage_half_life_ns: int = 0
    usage_sampling_interval_ns: int = 300 * 10**9  # Kueue's default: 5 minutes
    resource_weights: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigSpec:
    """The parts of Kueue's ``Configuration`` the twin models."""

    fair_sharing: bool = False
    preemption_strategies: tuple[str, ...] = (
        LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        LESS_THAN_INITIAL_SHARE,
    )
    # resources.excludeResourcePrefixes: requests Kueue ignores for quota (e.g. cpu where only GPUs are budgeted)
    excluded_prefixes: tuple[str, ...] = ()
    # featureGates: (gate, enabled) overrides of Kueue's defaults, sorted by gate (see features.py)
    feature_gates: tuple[tuple[str, bool], ...] = ()

    # resources.quotaCheckStrategy: BlockUndeclared (Kueue's default) or IgnoreUndeclared
    quota_check_strategy: str = BLOCK_UNDECLARED

    # resources.deviceClassMappings as sorted (DeviceClass, logical resource) pairs (apis/claims.py)
    device_class_mappings: tuple[tuple[str, str], ...] = ()

    # admissionFairSharing (None: absent, so no ClusterQueue orders by LocalQueue usage)
    admission_fair_sharing: AdmissionFairSharingSpec | None = None

    def gate(self, name: str) -> bool:
        return features.enabled(self.feature_gates, name)

    def ignores_undeclared(self) -> bool:
        """Kueue's ``IgnoreUndeclaredResources``: the strategy, and its gate (on by default)."""
        return self.quota_check_strategy == IGNORE_UNDECLARED and self.gate("QuotaCheckStrategy")

    def admission_fair_sharing_for(self, cq: ClusterQueueSpec) -> AdmissionFairSharingSpec | None:
        """Kueue's ``afs.ResourceWeights``: the configuration when AdmissionFairSharing applies to
        ``cq`` (the gate on, the Configuration's section present, the ClusterQueue usage-based)."""
        afs = self.admission_fair_sharing
        if afs is None or cq.admission_mode != USAGE_BASED_ADMISSION_FAIR_SHARING:
            return None
        return afs if self.gate("AdmissionFairSharing") else None

    def counts(self, resource: str) -> bool:
        return not resource.startswith(self.excluded_prefixes) if self.excluded_prefixes else True


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """Everything one input stream declares, keyed the way Kueue keys it."""

    flavors: dict[str, ResourceFlavorSpec]
    cohorts: dict[str, CohortSpec]
    cluster_queues: dict[str, ClusterQueueSpec]
    local_queues: dict[str, LocalQueueSpec]  # "namespace/name"
    namespaces: dict[str, NamespaceSpec]
    workloads: tuple[WorkloadSpec, ...]
    config: ConfigSpec = field(default_factory=ConfigSpec)
    # "Kind/key" -> (file, line) of the object, so a problem the twin finds across objects names its place
    origins: dict[str, tuple[str, int]] = field(default_factory=dict, compare=False, repr=False)
