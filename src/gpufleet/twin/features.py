"""Kueue v0.19.2: ``pkg/features/kube_features.go``.

Kueue v0.19.2's feature gates that change admission, with their defaults (``pkg/features/kube_features.go``).

A ``Configuration``'s ``featureGates`` map (the API's alternative to the manager's
``--feature-gates`` flag; Kueue refuses both at once) overrides these. The twin acts on the gates
it models (see the gate table in docs/twin.md); the others are read so that a configuration that
turns one away from its default can be told apart from one that does not.
"""

from __future__ import annotations

DEFAULTS: dict[str, bool] = {
    "AdmissionFairSharing": True,
    "FairSharingPreemptWithinNominal": True,
    "FairSharingPrioritizeNonBorrowing": True,
    "FlavorFungibility": True,
    "FlavorFungibilityPreserveScanProgress": True,
    "HierarchicalCohorts": True,
    "PartialAdmission": True,
    "PrioritizePreemptorWorkloads": False,
    "PrioritySortingWithinCohort": True,
    "QuotaCheckStrategy": True,
    "ReclaimablePods": True,
    "SchedulerLongRequeueInterval": False,
    "SchedulingEquivalenceHashing": True,
    "UnadmittedWorkloadsObservability": False,
}


# Gates the twin follows either way; the others it models only at Kueue's default.
FOLLOWED = frozenset(
    {
        "PrioritizePreemptorWorkloads",
        "QuotaCheckStrategy",
        "ReclaimablePods",
        "SchedulerLongRequeueInterval",  # on Kueue's clocks only (clocks.py)
        "SchedulingEquivalenceHashing",
        "AdmissionFairSharing",
        # the twin never keeps a flavor scan's progress across cycles: Kueue's behaviour with it off
        "FlavorFungibilityPreserveScanProgress",
        "UnadmittedWorkloadsObservability",  # only the reason Kueue writes (reasons.written_reason)
    }
)


def unmodelled(name: str, value: bool) -> bool:
    """A gate set away from its default that the twin does not follow."""
    return name in DEFAULTS and name not in FOLLOWED and value != DEFAULTS[name]


def enabled(overrides: tuple[tuple[str, bool], ...], name: str) -> bool:
    """The gate's value: the Configuration's override if it names it, else Kueue's default."""
    for gate, value in overrides:
        if gate == name:
            return value
    return DEFAULTS.get(name, False)
