"""Data residency at admission, in Python: the ``gpufleet-residency`` policy's two rules.

A federated fleet's Jobs are judged on the MultiKueue manager and again on each worker by a
ValidatingAdmissionPolicy (``render.residency``). ``gpufleet check`` and the webhook must give the
same answers, so this module decides exactly what that policy's CEL decides, over the same table
(``ResidencyFacts``), with the same reasons and words; the tests run both on the same
objects. The policy matches Kueue's batch kinds other than bare Pods, in the team namespaces, and
leaves alone an object on its way out (as gpufleet's own policy does).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from gpufleet.check.facts import QUEUE_LABEL, AdmissionFacts, admission_facts
from gpufleet.check.workloads import KINDS, kind_of, mapping
from gpufleet.policy.fleet import Fleet, resolve
from gpufleet.policy.residency import project, queue_name, zones

#: the kinds the residency policy matches: Kueue-managed batch kinds whose own labels carry the queue
#: and the data class (a bare Pod's are judged by gpufleet's own policy)
MATCHED = tuple(k for k in KINDS if k.batch and k.kind != "Pod")
ZONE_QUEUE, FORBIDDEN = "ResidencyZoneQueue", "ResidencyForbidden"


@dataclass(frozen=True)
class ResidencyFacts:
    """A federated fleet's residency as one cluster's admission sees it (the manager's, or a worker's).

    The same literals ``render.residency`` writes into the ``gpufleet-residency`` policy, so the Python
    judgement and the rendered CEL read one table."""

    cluster: str | None  # None: the MultiKueue manager; else the worker cluster judging
    zone_of: dict[str, str]  # data class -> its residency zone
    clusters_of: dict[str, str]  # data class -> its zone's clusters, as the messages quote them
    here: tuple[str, ...]  # the data classes that may run on ``cluster`` (every one on the manager)
    zone_pools: dict[str, tuple[str, ...]]  # zone -> the pools of its clusters, in policy order

    def zone_queue(self, team: str, data_class: str | None) -> str | None:
        """The LocalQueue a team's Job of ``data_class`` must use (None: the class has no zone)."""
        zone = self.zone_of.get(data_class or "")
        return queue_name(team, zone) if zone is not None else None


@dataclass(frozen=True)
class FederatedFacts(AdmissionFacts):
    """The admission facts of one cluster of a federation: with them the team-named queue rule gives way."""

    residency: ResidencyFacts | None = None


def residency_of(facts: AdmissionFacts) -> ResidencyFacts | None:
    """The residency the facts judge by (None: a one-cluster fleet)."""
    return facts.residency if isinstance(facts, FederatedFacts) else None


def residency_facts(fleet: Fleet, cluster: str | None) -> ResidencyFacts:
    policy = fleet.policy
    all_zones = zones(policy)
    pools = {z.name: tuple(p.name for p in policy.pools if p.cluster in z.clusters) for z in all_zones}
    return ResidencyFacts(
        cluster=cluster,
        zone_of={dc: z.name for z in all_zones for dc in z.data_classes},
        clusters_of={dc: ", ".join(z.clusters) for z in all_zones for dc in z.data_classes},
        here=tuple(sorted(dc for z in all_zones if cluster is None or cluster in z.clusters for dc in z.data_classes)),
        zone_pools=pools,
    )


def cluster_facts(fleet: Fleet, cluster: str | None = None) -> AdmissionFacts:
    """The facts of the cluster that judges: a one-cluster fleet's own; in a federation the manager's
    (``cluster`` None: the whole policy) or a worker's (the policy narrowed to its pools, as its bundle
    is rendered), each with the residency rules of its ``gpufleet-residency`` policy."""
    if not fleet.policy.clusters:
        return admission_facts(fleet)
    base = admission_facts(fleet if cluster is None else resolve(project(fleet.policy, {cluster})))
    values = {f.name: getattr(base, f.name) for f in fields(base)}
    return FederatedFacts(**values, residency=residency_facts(fleet, cluster))


def _label(labels: dict[str, Any], key: str) -> str:
    value = labels.get(key)
    return value if isinstance(value, str) else ""


def residency_denials(facts: AdmissionFacts, obj: dict[str, Any], namespace: str) -> list[tuple[str, str]]:
    """(reason, message) for each residency rule ``obj`` breaks on this cluster; empty without residency."""
    residency = residency_of(facts)
    if residency is None or kind_of(obj) not in MATCHED or "deletionTimestamp" in mapping(obj, "metadata"):
        return []
    team = facts.team_of(namespace)
    if team is None:
        return []
    labels = mapping(obj.get("metadata"), "labels")
    dc, queue = _label(labels, facts.data_class_label), _label(labels, QUEUE_LABEL)
    zone = residency.zone_of.get(dc)
    if zone is None:
        return []
    out = []
    wanted = f"{team.name}-{zone}"
    if queue not in ("", wanted):
        out.append(
            (
                ZONE_QUEUE,
                f"{ZONE_QUEUE}: data class {dc} runs only in residency zone {zone} (clusters "
                f"{residency.clusters_of[dc]}): set {QUEUE_LABEL} to {wanted}, not {queue}",
            )
        )
    if residency.cluster is not None and dc not in residency.here:
        out.append(
            (
                FORBIDDEN,
                f"{FORBIDDEN}: data class {dc} may not run on cluster {residency.cluster}; its zone {zone} "
                f"allows only {residency.clusters_of[dc]}",
            )
        )
    return out
