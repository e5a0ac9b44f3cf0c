"""The admission rules by name: each one's machine reason, the objects it applies to, and its message.

This catalogue is the single list both implementations follow: ``rules`` decides in Python, ``cel``
compiles the same rules into a ValidatingAdmissionPolicy. Each message is a template whose fields the
two fill in their own way (Python values, CEL expressions), so the words cannot differ. The order of
the catalogue is the order denials are reported in.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from enum import StrEnum


class Scope(StrEnum):
    """Which objects a rule judges."""

    BATCH = "batch"  # top-level batch work in a team namespace (Pods only when they request GPUs)
    PODS = "pods"  # anything with pod templates in a team namespace, batch work included
    SERVING = "serving"  # Deployments and StatefulSets in the serving namespace


@dataclass(frozen=True)
class Rule:
    id: str
    reason: str  # PascalCase machine reason
    scope: Scope
    template: str  # str.format fields, filled by each implementation

    def fields(self) -> list[str]:
        return [name for _, name, _, _ in string.Formatter().parse(self.template) if name]

    def message(self, values: dict[str, str]) -> str:
        return f"{self.reason}: " + self.template.format(**values)


_REQUIRED = "label {label} is required on {kinds} in namespace {namespace} ({purpose})"

RULES: tuple[Rule, ...] = (
    Rule("team-label", "MissingLabel", Scope.BATCH, _REQUIRED),
    Rule("model-label", "MissingLabel", Scope.BATCH, _REQUIRED),
    Rule("data-class-label", "MissingLabel", Scope.BATCH, _REQUIRED),
    Rule(
        "team-matches",
        "WrongTeam",
        Scope.BATCH,
        "label {label} is '{value}' but namespace {namespace} belongs to team {team}; set it to {team}",
    ),
    Rule(
        "data-class-allowed",
        "DataClassNotAllowed",
        Scope.BATCH,
        "data class '{value}' is not one team {team} may use; set {label} to one of: {allowed}",
    ),
    Rule(
        "queue-name",
        "MissingQueueName",
        Scope.BATCH,
        "label {label} is required on {kinds} in namespace {namespace}; set it to {team}, "
        "the team's LocalQueue (the gpufleet mutating webhook fills it in)",
    ),
    Rule(
        "queue-matches",
        "WrongQueueName",
        Scope.BATCH,
        "queue '{value}' is not the LocalQueue of team {team}; set {label} to {team}",
    ),
    Rule(
        "serving-toleration",
        "ServingPoolToleration",
        Scope.PODS,
        "{kinds} in namespace {namespace} may not tolerate the serving pool's taint {taint}; "
        "remove that toleration (batch work reaches the GPUs through the queue)",
    ),
    Rule(
        "serving-nodes",
        "ServingPoolNodeSelection",
        Scope.PODS,
        "{kinds} in namespace {namespace} may not select the serving pool's nodes ({selector}); "
        "remove that node selector, node affinity or nodeName (Kueue chooses the pool)",
    ),
    Rule(
        "serving-priority",
        "ServingPriorityClass",
        Scope.PODS,
        "priority class {value} is reserved for serving; {kinds} in namespace {namespace} may use one of: {allowed}",
    ),
    Rule(
        "priority-label-allowed",
        "PriorityClassNotAllowed",
        Scope.BATCH,
        "priority class '{value}' is not one team {team} may use; set {label} to one of: {allowed}",
    ),
    Rule(
        "pod-priority-allowed",
        "PriorityClassNotAllowed",
        Scope.BATCH,
        "a pod template's priorityClassName is not one team {team} may use; use one of: {allowed}",
    ),
    Rule(
        "checkpoint-location",
        "CheckpointLocationNotAllowed",
        Scope.BATCH,
        "checkpoint '{value}' is not in a location data class {data_class} allows; "
        "write checkpoints under one of: {allowed}",
    ),
    Rule(
        "gpu-count",
        "InvalidGPUCount",
        Scope.BATCH,
        "GPU requests and limits must be whole numbers (e.g. nvidia.com/gpu: 1); fix the pod templates of this {kind}",
    ),
    Rule(
        "gpu-claim-required",
        "GPUClaimRequired",
        Scope.BATCH,
        "a pod requests a GPU as an extended resource that team {team}'s pools (with its node selector) hand out "
        "through DRA only: their nodes advertise no nvidia.com/* resource, so Kueue would admit the pod and no "
        "node would ever run it; drop the nvidia.com/* request and claim the GPU with a pod resourceClaims entry "
        "whose resourceClaimTemplateName is one of: {claims}",
    ),
    Rule(
        "gpu-claim-pool",
        "GPUClaimPoolNotSelected",
        Scope.BATCH,
        "a pod claims a device whose quota resource other pools of team {team} also hold (with its node "
        "selector): Kueue picks a flavor by that resource alone and may place the pod on a pool without the "
        "claim's device, where it never runs; give the pod the nodeSelector of the template's pool: {pins}",
    ),
    Rule(
        "gpu-offered",
        "GPUResourceNotOffered",
        Scope.BATCH,
        "a pod requests a GPU resource that no pool team {team} can use offers (with its node selector); "
        "request one of: {offers}",
    ),
    Rule(
        "gpu-fits",
        "GPURequestTooLarge",
        Scope.BATCH,
        "a pod's GPU request fits no single node of the pools team {team} can use (with its node selector); "
        "offered: {offers}; use fewer GPUs per pod and more pods",
    ),
    Rule(
        "serving-queue-name",
        "ServingQueueName",
        Scope.SERVING,
        "serving {kinds} must not carry label {label} (serving stays outside the queue); remove it "
        "from the object and its pod template",
    ),
)
BY_ID = {rule.id: rule for rule in RULES}
#: rules a federated fleet's clusters do not apply: its queues are named ``<team>-<zone>``, and the
#: residency rules (``gpufleet.check.residency``, ``render.residency``) judge them instead
FEDERATED_OUT = frozenset({"queue-matches"})
