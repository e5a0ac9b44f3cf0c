"""Data residency at admission, in Python: the ``gpufleet-residency`` policy's two rules.

A federated fleet's Jobs are judged on the MultiKueue manager and again on each worker by a
ValidatingAdmissionPolicy (``render.residency``). ``gpufleet check`` and the webhook must give the
same answers, so this module decides exactly what that policy's CEL decides, over the same table
(``AdmissionFacts.residency``), with the same reasons and words; the tests run both on the same
objects. The policy matches Kueue's batch kinds other than bare Pods, in the team namespaces, and
leaves alone an object on its way out (as gpufleet's own policy does).
"""

from __future__ import annotations

from typing import Any

from gpufleet.check.facts import QUEUE_LABEL, AdmissionFacts
from gpufleet.check.workloads import KINDS, kind_of, mapping

#: the kinds the residency policy matches: Kueue-managed batch kinds whose own labels carry the queue
#: and the data class (a bare Pod's are judged by gpufleet's own policy)
MATCHED = tuple(k for k in KINDS if k.batch and k.kind != "Pod")
ZONE_QUEUE, FORBIDDEN = "ResidencyZoneQueue", "ResidencyForbidden"


def _label(labels: dict[str, Any], key: str) -> str:
    value = labels.get(key)
    return value if isinstance(value, str) else ""


def residency_denials(facts: AdmissionFacts, obj: dict[str, Any], namespace: str) -> list[tuple[str, str]]:
    """(reason, message) for each residency rule ``obj`` breaks on this cluster; empty without residency."""
    residency = facts.residency
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
