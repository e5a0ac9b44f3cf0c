"""Why a pending Workload's ClusterQueue does not preempt for it, in the words of its policy.

Kueue preempts within a ClusterQueue (``withinClusterQueue``: lower priority, or also newer of
equal priority) and reclaims quota lent to borrowers of its cohort (``reclaimWithinCohort``),
but reclaims only while the preemptor stays within its own nominal quota; borrowing to preempt
needs ``borrowWithinCohort``. The sentences below say which of these rules holds it back; the
twin's runs under other settings (``release.alternatives``) say what would change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.explain.release import Alternative
from gpufleet.twin.apis.specs import ANY, LOWER_OR_NEWER_EQUAL_PRIORITY, NEVER, ClusterQueueSpec


@dataclass(frozen=True)
class Candidate:
    """An admitted Workload seen from the pending one: where it runs, its priority, what it uses."""

    workload: str
    cluster_queue: str
    priority: int
    created: int
    borrowing: bool  # its ClusterQueue is above nominal quota on a flavor-resource the target needs


@dataclass(frozen=True)
class PreemptionView:
    policy: dict[str, str]
    reason: str
    message: str
    alternatives: tuple[Alternative, ...]


def policy_of(cq: ClusterQueueSpec) -> dict[str, str]:
    p = cq.preemption
    return {
        "withinClusterQueue": p.within_cluster_queue,
        "reclaimWithinCohort": p.reclaim_within_cohort,
        "borrowWithinCohort": p.borrow_within_cohort,
    }


def _within(cq: ClusterQueueSpec, priority: int, created: int, own: Sequence[Candidate]) -> tuple[str, str]:
    rule = cq.preemption.within_cluster_queue
    if rule == NEVER:
        return "WithinClusterQueueNever", f"withinClusterQueue: Never, so it never preempts inside {cq.name}"
    lower = [c for c in own if c.priority < priority]
    if rule == LOWER_OR_NEWER_EQUAL_PRIORITY:
        lower += [c for c in own if c.priority == priority and c.created > created]
    if not lower:
        return (
            "NoLowerPriorityInQueue",
            f"withinClusterQueue: {rule}, but no admitted Workload in {cq.name} qualifies (priority below {priority})",
        )
    names = ", ".join(c.workload for c in lower)
    return (
        "EvictionInQueueNotEnough",
        f"withinClusterQueue: {rule}; {names} qualify, but evicting them does not make room",
    )


def _reclaim(cq: ClusterQueueSpec, priority: int, others: Sequence[Candidate], beyond_nominal: bool) -> tuple[str, str]:
    rule = cq.preemption.reclaim_within_cohort
    borrowers = [c for c in others if c.borrowing]
    if cq.cohort is None:
        return "NotInCohort", f"{cq.name} is in no cohort, so there is nothing to reclaim"
    names = ", ".join(sorted({c.cluster_queue for c in borrowers}))
    if rule == NEVER:
        held = f" from the borrowers ({names})" if borrowers else ""
        return "ReclaimWithinCohortNever", f"reclaimWithinCohort: Never, so it never takes back lent quota{held}"
    if not borrowers:
        return (
            "NoBorrowers",
            f"reclaimWithinCohort: {rule}, but no other ClusterQueue in the cohort is borrowing what it needs",
        )
    if beyond_nominal:
        return (
            "ReclaimNeedsNominalRoom",
            f"reclaimWithinCohort: {rule}, but Kueue reclaims only for a Workload that fits in its own "
            f"nominal quota, and this one would take {cq.name} above it (borrowWithinCohort: "
            f"{cq.preemption.borrow_within_cohort})",
        )
    if rule != ANY and not [c for c in borrowers if c.priority < priority]:
        return (
            "NoLowerPriorityBorrower",
            f"reclaimWithinCohort: {rule}, but no borrowing Workload ({names}) has a priority below {priority}",
        )
    return (
        "ReclaimNotEnough",
        f"reclaimWithinCohort: {rule}; borrowers ({names}) qualify, but evicting them does not make room",
    )


def view(
    cq: ClusterQueueSpec,
    priority: int,
    created: int,
    candidates: Sequence[Candidate],
    *,
    beyond_nominal: bool,
    preempts: Sequence[str],
    alts: Sequence[Alternative],
) -> PreemptionView:
    """The policy, one PascalCase reason and the sentences that explain it."""
    policy = policy_of(cq)
    if preempts:
        return PreemptionView(
            policy, "PreemptsToAdmit", f"{cq.name}'s policy lets it preempt {', '.join(preempts)}", tuple(alts)
        )
    own = [c for c in candidates if c.cluster_queue == cq.name]
    others = [c for c in candidates if c.cluster_queue != cq.name]
    within = _within(cq, priority, created, own)
    reclaim = _reclaim(cq, priority, others, beyond_nominal)
    helpful = [a for a in alts if a.outcome.admitted_in is not None]
    if cq.preemption.within_cluster_queue == NEVER and cq.preemption.reclaim_within_cohort == NEVER:
        reason = "PreemptionNever"
    elif not candidates:
        reason = "NoPreemptionCandidates"
    else:  # the rule that stops it where the quota it needs is held
        reason = reclaim[0] if any(c.borrowing for c in others) or not own else within[0]
    message = f"{within[1]}; {reclaim[1]}."
    if helpful:
        best = helpful[0]
        change = ", ".join(f"{k}: {v}" for k, v in best.change.items())
        victims = ", ".join(best.outcome.preempts) or "nobody"
        message += f" With {change} the twin admits it (preempting {victims})."
    elif alts:
        message += " The twin admits it under no other preemption setting either."
    return PreemptionView(policy, reason, message, tuple(alts))
