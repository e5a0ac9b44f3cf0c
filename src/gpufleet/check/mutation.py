"""What the mutating webhook fills in before the rules judge: the queue name and a priority class.

Only top-level batch work in a team namespace is touched, and only where the user left a field out:
a queue name that is wrong is refused by the rules, never silently corrected. The result is a JSON
Patch (RFC 6902), the form AdmissionReview carries; ``apply`` replays it for ``gpufleet check``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from gpufleet.check.catalogue import Scope
from gpufleet.check.facts import PRIORITY_LABEL, QUEUE_LABEL, AdmissionFacts
from gpufleet.check.residency import residency_of
from gpufleet.check.rules import subject
from gpufleet.check.workloads import mapping, text

Patch = list[dict[str, Any]]


@dataclass(frozen=True)
class Filled:
    """One label the webhook sets, and why."""

    label: str
    value: str
    why: str


def fills(facts: AdmissionFacts, obj: dict[str, Any], namespace: str) -> list[Filled]:
    s = subject(facts, obj, namespace)
    if s is None or s.scope is not Scope.BATCH or s.team is None:
        return []
    out = []
    if not s.label(QUEUE_LABEL):
        out += _queue(facts, s.team.name, s.label(facts.data_class_label))
    uses_pod_priority = any(text(spec, "priorityClassName") is not None for spec in s.specs)
    if PRIORITY_LABEL not in s.labels and not uses_pod_priority and s.team.default_priority is not None:
        out.append(Filled(PRIORITY_LABEL, s.team.default_priority, f"the default priority class of team {s.team.name}"))
    return out


def _queue(facts: AdmissionFacts, team: str, data_class: str | None) -> list[Filled]:
    """The team's LocalQueue; in a federation the team's queue of the data class's residency zone, and
    nothing where the data class has no zone (the rules then refuse the missing queue)."""
    residency = residency_of(facts)
    if residency is None:
        return [Filled(QUEUE_LABEL, team, f"the LocalQueue of team {team}")]
    queue = residency.zone_queue(team, data_class)
    if queue is None:
        return []
    zone = residency.zone_of[data_class or ""]
    return [Filled(QUEUE_LABEL, queue, f"the LocalQueue of team {team} for data class {data_class}'s zone {zone}")]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def patch(facts: AdmissionFacts, obj: dict[str, Any], namespace: str) -> Patch:
    """The JSON Patch that sets every missing label (``[]`` when nothing is missing)."""
    filled = fills(facts, obj, namespace)
    if not filled:
        return []
    labels = mapping(obj.get("metadata"), "labels")
    if "labels" not in mapping(obj, "metadata") or not isinstance(obj["metadata"]["labels"], dict):
        return [{"op": "add", "path": "/metadata/labels", "value": {f.label: f.value for f in filled}}]
    return [
        {
            "op": "replace" if f.label in labels else "add",
            "path": f"/metadata/labels/{_escape(f.label)}",
            "value": f.value,
        }
        for f in filled
    ]


def apply(obj: dict[str, Any], ops: Patch) -> dict[str, Any]:
    """Replay a patch made by ``patch`` (add/replace into metadata) on a copy of ``obj``."""
    out = copy.deepcopy(obj)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = copy.deepcopy(op["value"])
    return out
