"""Kueue v0.19.2: ``apis/kueue/v1beta2/workload_types.go``, ``pkg/scheduler/scheduler.go``,
``pkg/scheduler/flavorassigner/flavorassigner.go``.

Kueue's machine reasons and the shapes of its human messages, in one place.

Pending reasons are the ``QuotaReserved=False`` reasons of ``apis/kueue/v1beta2/workload_types.go``
(granular since Kueue 0.19, ``UnadmittedWorkloadsObservability``); preemption reasons are the
``Preempted`` condition's. Messages are shaped like the ones Kueue writes, so the twin's "why is
it pending?" reads like ``kubectl describe workload`` on a real cluster.
"""

from __future__ import annotations

from gpufleet.twin.resources import format_quantity

# Pending (QuotaReserved=False) reasons.
PENDING = "Pending"
WAITING_FOR_QUOTA = "WaitingForQuota"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
MISCONFIGURED = "Misconfigured"
SUSPENDED = "Suspended"
WAITING_FOR_PREEMPTED_WORKLOADS = "WaitingForPreemptedWorkloads"

# What Kueue v0.19.2 writes for those while its ``UnadmittedWorkloadsObservability`` gate (Beta) is
# off, the default: the scheduler falls back to ``Pending`` (``UnadmittedWorkloadReasonWithFallback``
# in ``pkg/workload/workload.go``), the workload controller to the legacy reasons below (the mapping
# Kueue's own tests apply: ``pkg/util/testing/observability.go``).
LEGACY_REASONS = {MISCONFIGURED: "Inadmissible", SUSPENDED: "Inadmissible", "WaitingForPodsReady": "Waiting"}


def written_reason(granular: str, observability: bool) -> str:
    """The ``QuotaReserved=False`` reason Kueue writes where the twin's is ``granular``: the same
    with ``UnadmittedWorkloadsObservability`` on, else its legacy form."""
    return granular if observability else LEGACY_REASONS.get(granular, PENDING)


# Preemption reasons.
IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

HUMAN_PREEMPTION_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",  # capitalised as Kueue v0.19.2 writes it
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}

# When a pod set fails on several flavors for different reasons, the reported reason is the most
# hopeful one: quota that may free up beats a request no quota can hold, which beats no flavor.
REASON_PRECEDENCE = (WAITING_FOR_QUOTA, EXCEEDS_MAX_QUOTA, NO_MATCHING_FLAVOR)

NO_LONGER_FITS = "Workload no longer fits after processing another workload"
OVERLAPPING_TARGETS = "Workload has overlapping preemption targets with another workload"
NAMESPACE_MISMATCH = "Workload namespace doesn't match ClusterQueue selector"


def insufficient_unused_quota(resource: str, flavor: str, missing: int) -> str:
    return (
        f"insufficient unused quota for {resource} in flavor {flavor}, {format_quantity(missing, resource)} more needed"
    )


def insufficient_quota(resource: str, flavor: str, previous: int, request: int, capacity: int) -> str:
    return (
        f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
        f"({format_quantity(previous, resource)}) + current podset request "
        f"({format_quantity(request, resource)}) > maximum capacity ({format_quantity(capacity, resource)})"
    )


def resource_unavailable(resource: str) -> str:
    return f"resource {resource} unavailable in ClusterQueue"


def untolerated_taint(key: str, value: str, effect: str, flavor: str) -> str:
    return f"untolerated taint {{{key} {value} {effect}}} in flavor {flavor}"


def flavor_selector_mismatch(flavor: str) -> str:
    return f"flavor {flavor} doesn't match node affinity"


def couldnt_assign(pod_set: str, reasons: list[str]) -> str:
    return f"couldn't assign flavors to pod set {pod_set}: {', '.join(sorted(reasons))}"


def pending_preemption(count: int) -> str:
    return f". Pending the preemption of {count} workload(s)"


def cluster_queue_inactive(name: str) -> str:
    return f"ClusterQueue {name} is inactive"


def cluster_queue_not_found(name: str) -> str:
    return f"ClusterQueue {name} not found"


def local_queue_stopped(key: str) -> str:
    return f"LocalQueue {key} is stopped"


def preempted_message(preemptor: str, reason: str, preemptor_path: str, preemptee_path: str) -> str:
    return (
        f"Preempted to accommodate a workload ({preemptor}) due to {HUMAN_PREEMPTION_REASONS[reason]}; "
        f"preemptor path: {preemptor_path}; preemptee path: {preemptee_path}"
    )


def most_hopeful(reasons: set[str]) -> str:
    """Pick the reported reason among a pod set's per-flavor failures (see REASON_PRECEDENCE)."""
    for reason in REASON_PRECEDENCE:
        if reason in reasons:
            return reason
    return WAITING_FOR_QUOTA
