"""Data residency at admission: a Job's data class ties it to its zone's queue, on the manager and again
on each worker.

The manager's zone queue (``<team>-<zone>``) is what decides where MultiKueue may dispatch, so the
manager refuses a Job whose queue is not its data class's zone queue; a Job that reached a worker
anyway (applied there directly, or by a manager with another configuration) is refused there when its
data class may not run on that cluster. Both are one ValidatingAdmissionPolicy with the zones written
in as CEL literals, like the rest of gpufleet's admission rules, so nothing has to run for them to hold.

gpufleet's one-cluster rule ``queue-matches`` (the queue must be named after the team) cannot hold in
a federation, whose queues are named after team and zone; ``without_team_queue_rule`` drops exactly
that validation from the gpufleet policy, and the residency policy takes its place.
"""

from __future__ import annotations

import copy
from typing import Any

from gpufleet.check.catalogue import RULES
from gpufleet.check.cel import MATCH_CONDITIONS, lit
from gpufleet.check.facts import QUEUE_LABEL
from gpufleet.check.residency import MATCHED
from gpufleet.policy.model import FleetPolicy
from gpufleet.policy.residency import zones
from gpufleet.render.common import Obj, meta

NAME = "gpufleet-residency"
ADMISSION_API = "admissionregistration.k8s.io/v1"
QUEUE_RULE = next(r for r in RULES if r.id == "queue-matches")


def without_team_queue_rule(objects: list[Obj]) -> list[Obj]:
    """gpufleet's admission objects with the one-cluster ``queue-matches`` validation removed."""
    prefix = lit(f"{QUEUE_RULE.reason}: ")
    out = []
    for o in objects:
        kept = copy.deepcopy(o)
        if kept.get("kind") == "ValidatingAdmissionPolicy":
            spec = kept["spec"]
            spec["validations"] = [v for v in spec["validations"] if not v["messageExpression"].startswith(prefix)]
        out.append(kept)
    return out


def _rules() -> list[Obj]:
    by_group: dict[str, list[str]] = {}
    for kind in MATCHED:
        by_group.setdefault(kind.group, []).append(kind.plural)
    return [
        {"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": plurals}
        for group, plurals in by_group.items()
    ]


def residency_policy(policy: FleetPolicy, cluster: str | None = None) -> list[Obj]:
    """The residency ValidatingAdmissionPolicy and its binding: for the manager (``cluster`` None), the
    zone-queue rule; for a worker, also that the Job's data class may run on ``cluster``."""
    all_zones = zones(policy)
    zone_of = {dc: z.name for z in all_zones for dc in z.data_classes}
    clusters_of = {dc: ", ".join(z.clusters) for z in all_zones for dc in z.data_classes}
    team_of = {ns: t.name for t in policy.teams for ns in t.namespaces}
    label = policy.cluster.labels.dataClass
    variables = [
        {"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
        {"name": "dc", "expression": f"{lit(label)} in variables.labels ? variables.labels[{lit(label)}] : ''"},
        {
            "name": "queue",
            "expression": f"{lit(QUEUE_LABEL)} in variables.labels ? variables.labels[{lit(QUEUE_LABEL)}] : ''",
        },
        {"name": "team", "expression": f"request.namespace in {lit(team_of)} ? {lit(team_of)}[request.namespace] : ''"},
        {"name": "zoned", "expression": f"variables.dc in {lit(zone_of)}"},
        {"name": "zone", "expression": f"variables.zoned ? {lit(zone_of)}[variables.dc] : ''"},
    ]
    wanted = "variables.team + '-' + variables.zone"
    validations: list[dict[str, Any]] = [
        {
            "expression": f"!variables.zoned || variables.team == '' || variables.queue == '' || variables.queue == {wanted}",
            "messageExpression": (
                "'ResidencyZoneQueue: data class ' + variables.dc + ' runs only in residency zone ' + variables.zone"
                f" + ' (clusters ' + {lit(clusters_of)}[variables.dc] + '): set {QUEUE_LABEL} to ' + {wanted}"
                " + ', not ' + variables.queue"
            ),
            "reason": "Forbidden",
        }
    ]
    if cluster is not None:
        here = sorted(dc for z in all_zones if cluster in z.clusters for dc in z.data_classes)
        validations.append(
            {
                "expression": f"!variables.zoned || variables.dc in {lit(here)}",
                "messageExpression": (
                    f"'ResidencyForbidden: data class ' + variables.dc + ' may not run on cluster {cluster}; "
                    f"its zone ' + variables.zone + ' allows only ' + {lit(clusters_of)}[variables.dc]"
                ),
                "reason": "Forbidden",
            }
        )
    governed = sorted(team_of)
    vap = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": meta(NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _rules()},
            "matchConditions": MATCH_CONDITIONS,
            "variables": variables,
            "validations": validations,
        },
    }
    binding = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": meta(NAME),
        "spec": {
            "policyName": NAME,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": governed}]
                }
            },
        },
    }
    return [vap, binding]
