"""The admission rules in Python: one object in, every reason it is refused out.

Pure: the facts and the object are all it reads. The webhook and ``gpufleet check`` call ``judge``;
``gpufleet.check.cel`` compiles the same catalogue into CEL, and the differential test holds the two
to the same answers, message for message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpufleet.check.catalogue import FEDERATED_OUT, RULES, Rule, Scope
from gpufleet.check.facts import PRIORITY_LABEL, QUEUE_LABEL, AdmissionFacts, PoolOffer, TeamFacts, join_or_none
from gpufleet.check.residency import residency_denials, residency_of
from gpufleet.check.workloads import (
    WorkloadKind,
    claim_needs,
    containers,
    gpu_ask,
    gpu_entries,
    is_controlled,
    kind_of,
    mapping,
    pod_specs,
    sequence,
    text,
)


@dataclass(frozen=True)
class Denial:
    reason: str
    message: str  # starts with the reason: "MissingLabel: label ... is required ..."

    def as_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class Subject:
    """One object as the rules see it, with what several rules read worked out once.

    The per-pod-spec figures (GPU needs, unknown GPUs, the team's candidate pools) are computed in
    ``subject`` for batch work only, the one scope whose rules read them. The webhook judges every
    review with a new Subject, and ``functools.cached_property`` takes a lock on each first read
    (Python 3.11), so plain fields filled once cost less.
    """

    obj: dict[str, Any]
    kind: WorkloadKind
    namespace: str
    scope: Scope
    team: TeamFacts | None
    specs: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, Any] = field(default_factory=dict)
    invalid_counts: bool = False
    needs: list[dict[str, int]] = field(default_factory=list)  # per pod spec, the GPUs it needs of each known resource
    unknown: list[bool] = field(default_factory=list)  # per pod spec, asks for a GPU resource no pool yields
    pools: list[list[PoolOffer]] = field(default_factory=list)  # per pod spec, the team's pools it can land on

    def label(self, key: str) -> str | None:
        value = self.labels.get(key)
        return value if isinstance(value, str) else None

    @property
    def kinds(self) -> str:
        return f"{self.kind.kind}s"

    @property
    def my_team(self) -> TeamFacts:
        if self.team is None:
            raise ValueError("team rules run in team namespaces only")
        return self.team


def requests_gpus(specs: list[dict[str, Any]]) -> bool:
    """An ``nvidia.com/*`` quantity, or any pod resource claim: a claim can hand out a GPU as well as the
    device plugin can, and which device a claim outside gpufleet's templates asks for is not in the pod."""
    return any(gpu_entries(c) for spec in specs for part in containers(spec) for c in part) or any(
        sequence(spec, "resourceClaims") for spec in specs
    )


def subject(facts: AdmissionFacts, obj: dict[str, Any], namespace: str) -> Subject | None:
    """Which rules see this object, if any: the governing decision shared with the CEL match conditions."""
    kind = kind_of(obj)
    if kind is None or "deletionTimestamp" in mapping(obj, "metadata"):
        return None  # an object on its way out only sheds finalizers: refusing that would leave it stuck
    specs = pod_specs(obj, kind)
    labels = mapping(obj.get("metadata"), "labels")
    team = facts.team_of(namespace)
    if team is not None:
        batch = kind.batch and not is_controlled(obj) and (kind.kind != "Pod" or requests_gpus(specs))
        if not batch:
            return Subject(obj, kind, namespace, Scope.PODS, team, specs, labels)
        asks = [gpu_ask(spec, facts.gpu_resources) for spec in specs]
        return Subject(
            obj,
            kind,
            namespace,
            Scope.BATCH,
            team,
            specs,
            labels,
            invalid_counts=any(a.invalid for a in asks),
            needs=[a.needs | claim_needs(spec, facts.claim_resources) for a, spec in zip(asks, specs, strict=True)],
            unknown=[a.unknown for a in asks],
            pools=[candidates(team, spec) for spec in specs],
        )
    if facts.serving is not None and namespace == facts.serving.namespace and not kind.batch:
        return Subject(obj, kind, namespace, Scope.SERVING, None, specs, labels)
    return None


Check = Callable[[AdmissionFacts, Subject], dict[str, str] | None]


def _required(label_of: Callable[[AdmissionFacts], str], purpose: Callable[[AdmissionFacts, Subject], str]) -> Check:
    def check(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
        if s.label(label_of(facts)):
            return None
        return {"label": label_of(facts), "kinds": s.kinds, "namespace": s.namespace, "purpose": purpose(facts, s)}

    return check


def _team_matches(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    value = s.label(facts.team_label)
    if not value or value == s.my_team.name:
        return None
    return {"label": facts.team_label, "value": value, "namespace": s.namespace, "team": s.my_team.name}


def _data_class_allowed(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    value = s.label(facts.data_class_label)
    if not value or value in s.my_team.data_classes:
        return None
    allowed = join_or_none(s.my_team.data_classes)
    return {"label": facts.data_class_label, "value": value, "team": s.my_team.name, "allowed": allowed}


def _queue_name(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    if s.label(QUEUE_LABEL):
        return None
    return {"label": QUEUE_LABEL, "kinds": s.kinds, "namespace": s.namespace, "team": s.my_team.name}


def _queue_matches(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    value = s.label(QUEUE_LABEL)
    if not value or value == s.my_team.name:
        return None
    return {"label": QUEUE_LABEL, "value": value, "team": s.my_team.name}


def tolerates(toleration: Any, taint: tuple[str, str, str]) -> bool:
    """Kubernetes' toleration matching: an empty key with Exists tolerates every taint."""
    key, value, effect = taint
    operator = text(toleration, "operator") or "Equal"
    own_key = text(toleration, "key") or ""
    key_ok = own_key == key or (own_key == "" and operator == "Exists")
    value_ok = operator == "Exists" or (text(toleration, "value") or "") == value
    return key_ok and value_ok and (text(toleration, "effect") or "") in ("", effect)


def _serving_toleration(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    """Tolerating every taint of the serving pool lets a pod land there (its own taint is unique to it)."""
    serving = facts.serving
    if serving is None:
        return None
    hit = any(
        all(any(tolerates(t, taint) for t in sequence(spec, "tolerations")) for taint in serving.taints)
        for spec in s.specs
    )
    return {"kinds": s.kinds, "namespace": s.namespace, "taint": serving.taint_text} if hit else None


def _selects_serving(spec: dict[str, Any], selector: dict[str, str], nodes: tuple[str, ...]) -> bool:
    """A node selector or a required affinity term that pins every label of the serving pool, or a serving node."""
    node_selector = mapping(spec, "nodeSelector")
    if all(node_selector.get(k) == v for k, v in selector.items()):
        return True
    if text(spec, "nodeName") in nodes:
        return True
    required = mapping(
        mapping(mapping(spec, "affinity"), "nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return any(
        all(
            any(
                text(e, "key") == k and text(e, "operator") == "In" and v in sequence(e, "values")
                for e in sequence(term, "matchExpressions")
            )
            for k, v in selector.items()
        )
        for term in sequence(required, "nodeSelectorTerms")
    )


def _serving_nodes(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    serving = facts.serving
    if serving is None or not any(_selects_serving(spec, serving.selector, serving.nodes) for spec in s.specs):
        return None
    return {"kinds": s.kinds, "namespace": s.namespace, "selector": serving.selector_text}


def _serving_priority(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    serving = facts.serving
    if serving is None:
        return None
    used = [s.label(PRIORITY_LABEL)] + [text(spec, "priorityClassName") for spec in s.specs]
    if serving.priority_class not in used:
        return None
    allowed = join_or_none(s.my_team.priority_classes)
    return {"value": serving.priority_class, "kinds": s.kinds, "namespace": s.namespace, "allowed": allowed}


def _not_serving(facts: AdmissionFacts, value: str) -> bool:
    return facts.serving is None or value != facts.serving.priority_class


def _priority_label_allowed(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    value = s.label(PRIORITY_LABEL)
    if value is None or value in s.my_team.priority_classes or not _not_serving(facts, value):
        return None
    allowed = join_or_none(s.my_team.priority_classes)
    return {"value": value, "team": s.my_team.name, "label": PRIORITY_LABEL, "allowed": allowed}


def _pod_priority_allowed(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    names = [text(spec, "priorityClassName") for spec in s.specs]
    if not any(n is not None and n not in s.my_team.priority_classes and _not_serving(facts, n) for n in names):
        return None
    return {"team": s.my_team.name, "allowed": join_or_none(s.my_team.priority_classes)}


def _checkpoint_location(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    value = text(mapping(s.obj.get("metadata"), "annotations"), facts.checkpoint_annotation)
    data_class = s.label(facts.data_class_label)
    if value is None or not data_class or data_class not in s.my_team.data_classes:
        return None
    locations = facts.checkpoint_locations.get(data_class, ())
    if any(value.startswith(loc) for loc in locations):
        return None
    return {"value": value, "data_class": data_class, "allowed": join_or_none(locations)}


def _gpu_count(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    return {"kind": s.kind.kind} if s.invalid_counts else None


def candidates(team: TeamFacts, spec: dict[str, Any]) -> list[PoolOffer]:
    """The team's pools whose node labels agree with the pod's node selector (Kueue's flavor filter)."""
    node_selector = mapping(spec, "nodeSelector")
    return [p for p in team.pools if all(node_selector.get(k, v) == v for k, v in p.selector.items())]


def _claim_required(s: Subject, index: int) -> bool:
    """An extended resource no candidate pool advertises, but a DRA pool among them hands out as a claim."""
    pools = s.pools[index]
    return any(not any(r in p.per_node for p in pools) and any(r in p.claims for p in pools) for r in s.needs[index])


def _claim_pool_open(facts: AdmissionFacts, s: Subject, index: int) -> bool:
    """A claim some candidate pool hands out, while another candidate holds its quota resource without it:
    Kueue's flavor assignment sees only the resource (deviceClassMappings), not the DeviceClass."""
    pools = s.pools[index]
    for key in s.needs[index]:
        resource = facts.claim_quota.get(key)
        if resource is None or not any(key in p.per_node for p in pools):
            continue
        if any(key not in p.per_node and (resource in p.per_node or resource in p.claims) for p in pools):
            return True
    return False


def _not_offered(s: Subject, index: int) -> bool:
    pools = s.pools[index]
    return s.unknown[index] or any(not any(r in p.per_node or r in p.claims for p in pools) for r in s.needs[index])


def fits(offer: PoolOffer, needs: dict[str, int]) -> bool:
    return all(r in offer.per_node and n <= offer.per_node[r] for r, n in needs.items())


def _gpu_claim_required(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    if s.invalid_counts or not any(_claim_required(s, i) for i in range(len(s.specs))):
        return None
    return {"team": s.my_team.name, "claims": s.my_team.claims_text}


def _gpu_claim_pool(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    if s.invalid_counts or not any(_claim_pool_open(facts, s, i) for i in range(len(s.specs))):
        return None
    return {"team": s.my_team.name, "pins": s.my_team.pins_text(facts.claim_quota)}


def _gpu_offered(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    if s.invalid_counts or not any(_not_offered(s, i) for i in range(len(s.specs))):
        return None
    return {"team": s.my_team.name, "offers": s.my_team.offers_text}


def _gpu_fits(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    if s.invalid_counts:
        return None
    for i, needs in enumerate(s.needs):
        offered = bool(needs) and not _not_offered(s, i) and not _claim_required(s, i)
        if offered and not any(fits(p, needs) for p in s.pools[i]):
            return {"team": s.my_team.name, "offers": s.my_team.offers_text}
    return None


def _serving_queue_name(facts: AdmissionFacts, s: Subject) -> dict[str, str] | None:
    template_labels = mapping(mapping(mapping(s.obj.get("spec"), "template"), "metadata"), "labels")
    if QUEUE_LABEL not in s.labels and QUEUE_LABEL not in template_labels:
        return None
    return {"kinds": s.kinds, "label": QUEUE_LABEL}


CHECKS: dict[str, Check] = {
    "team-label": _required(lambda f: f.team_label, lambda f, s: f"the team that owns this work: {s.my_team.name}"),
    "model-label": _required(lambda f: f.model_label, lambda f, s: "the model this job trains or serves"),
    "data-class-label": _required(
        lambda f: f.data_class_label,
        lambda f, s: f"the class of the data it uses, one of: {join_or_none(s.my_team.data_classes)}",
    ),
    "team-matches": _team_matches,
    "data-class-allowed": _data_class_allowed,
    "queue-name": _queue_name,
    "queue-matches": _queue_matches,
    "serving-toleration": _serving_toleration,
    "serving-nodes": _serving_nodes,
    "serving-priority": _serving_priority,
    "priority-label-allowed": _priority_label_allowed,
    "pod-priority-allowed": _pod_priority_allowed,
    "checkpoint-location": _checkpoint_location,
    "gpu-count": _gpu_count,
    "gpu-claim-required": _gpu_claim_required,
    "gpu-claim-pool": _gpu_claim_pool,
    "gpu-offered": _gpu_offered,
    "gpu-fits": _gpu_fits,
    "serving-queue-name": _serving_queue_name,
}


def applies(rule_scope: Scope, scope: Scope) -> bool:
    return rule_scope is scope or (rule_scope is Scope.PODS and scope is Scope.BATCH)


# per scope, its rules in catalogue order with their checks: the same for every object, so chosen once
_BY_SCOPE: dict[Scope, tuple[tuple[Rule, Check], ...]] = {
    scope: tuple((rule, CHECKS[rule.id]) for rule in RULES if applies(rule.scope, scope)) for scope in Scope
}


def judge(facts: AdmissionFacts, obj: dict[str, Any], namespace: str) -> list[Denial]:
    """Every reason ``obj`` in ``namespace`` is refused, in catalogue order, then a federated cluster's
    residency reasons (its second policy); empty means admitted."""
    residency = [Denial(reason, message) for reason, message in residency_denials(facts, obj, namespace)]
    s = subject(facts, obj, namespace)
    if s is None:
        return residency
    federated = residency_of(facts) is not None
    denials = []
    for rule, check in _BY_SCOPE[s.scope]:
        if federated and rule.id in FEDERATED_OUT:
            continue  # a federation's queues are named after team and zone: residency judges them
        values = check(facts, s)
        if values is not None:
            denials.append(Denial(rule.reason, rule.message(values)))
    return denials + residency
