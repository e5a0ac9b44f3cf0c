"""Kueue v0.19.2: the quota objects' fields (``apis/kueue/v1beta2``: ResourceFlavor, Cohort and
ClusterQueue, with the tolerations and node requirements pod sets share), read into frozen specs.

Apart from ``objects``, which walks the stream of documents and reads Workloads: these are the fields
a ClusterQueue's admission rules rest on, with the v1beta1 spellings they map. Every mistake is
recorded on the object's ``Doc`` with its field path.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpufleet.twin.apis import specs as s
from gpufleet.twin.apis.admission_fairsharing_fields import admission_mode
from gpufleet.twin.apis.fields import (
    MAX_INT32,
    MAX_QUANTITY,
    PRIORITY,
    Doc,
    choice,
    integer,
    quantity,
    reference,
    shown,
)
from gpufleet.twin.resources import QuantityError, parse_decimal
from gpufleet.vocabulary import Operator, TaintEffect, TolerationOperator

_FUNGIBILITY_V1BETA1 = {"Borrow": s.MAY_STOP_SEARCH, "Preempt": s.MAY_STOP_SEARCH}


def flavor(doc: Doc, spec: dict[str, Any]) -> s.ResourceFlavorSpec:
    taints = tuple(
        s.Taint(
            str(t.get("key", "")),
            str(t.get("value", "")),
            TaintEffect(choice(doc, f"{tpath}.effect", t.get("effect"), _EFFECTS, TaintEffect.NO_SCHEDULE)),
        )
        for tpath, t in doc.mappings("spec.nodeTaints", spec.get("nodeTaints"))
    )
    return s.ResourceFlavorSpec(
        doc.name,
        doc.pairs("spec.nodeLabels", spec.get("nodeLabels")),
        taints,
        tolerations(doc, "spec.tolerations", spec.get("tolerations")),
    )


def tolerations(doc: Doc, path: str, raw: Any) -> tuple[s.Toleration, ...]:
    out = []
    for tpath, t in doc.mappings(path, raw):
        operator = choice(doc, f"{tpath}.operator", t.get("operator"), _TOLERATION_OPERATORS, "Equal")
        effect = t.get("effect") or None  # empty: every effect
        if effect is not None:
            effect = choice(doc, f"{tpath}.effect", effect, _EFFECTS, TaintEffect.NO_SCHEDULE)
        out.append(
            s.Toleration(
                str(t.get("key", "")),
                str(t.get("value", "")),
                TolerationOperator(operator),
                None if effect is None else TaintEffect(effect),
            )
        )
    return tuple(out)


_EFFECTS = tuple(TaintEffect)
_TOLERATION_OPERATORS = tuple(TolerationOperator)
NODE_OPERATORS = tuple(Operator)  # NodeSelectorRequirement: Gt and Lt too
_LABEL_OPERATORS = (Operator.IN, Operator.NOT_IN, Operator.EXISTS, Operator.DOES_NOT_EXIST)


def requirement(doc: Doc, path: str, raw: dict[str, Any], operators: tuple[Operator, ...]) -> s.Requirement:
    operator = choice(doc, f"{path}.operator", raw.get("operator", "In"), operators, Operator.IN)
    return s.Requirement(str(raw.get("key", "")), Operator(operator), doc.strings(f"{path}.values", raw.get("values")))


def groups(doc: Doc, raw: Any) -> tuple[s.ResourceGroupSpec, ...]:
    groups = []
    for gpath, group in doc.mappings("spec.resourceGroups", raw):
        covered = doc.strings(f"{gpath}.coveredResources", group.get("coveredResources"))
        flavors = []
        for fpath, flavor in doc.mappings(f"{gpath}.flavors", group.get("flavors")):
            quotas = []
            for path, res in doc.mappings(f"{fpath}.resources", flavor.get("resources")):
                rname = str(res.get("name", ""))
                if rname not in covered:
                    doc.fail(path + ".name", f"resource {rname!r} is not in coveredResources")
                quotas.append(
                    s.ResourceQuotaSpec(
                        rname,
                        quantity(doc, path + ".nominalQuota", res.get("nominalQuota", 0), rname) or 0,
                        quantity(doc, path + ".borrowingLimit", res.get("borrowingLimit"), rname),
                        quantity(doc, path + ".lendingLimit", res.get("lendingLimit"), rname),
                    )
                )
            flavors.append(s.FlavorQuotasSpec(str(flavor.get("name", "")), tuple(quotas)))
        groups.append(s.ResourceGroupSpec(covered, tuple(flavors)))
    return tuple(groups)


def _fungibility(doc: Doc, path: str, value: Any, default: str) -> str:
    text = str(value) if value is not None else default
    return choice(doc, path, _FUNGIBILITY_V1BETA1.get(text, text), (s.MAY_STOP_SEARCH, s.TRY_NEXT_FLAVOR), default)


_STRATEGIES = (s.BEST_EFFORT_FIFO, s.STRICT_FIFO)
STOP_POLICIES = ("None", "Hold", "HoldAndDrain")
_WITHIN = (s.NEVER, s.LOWER_PRIORITY, s.LOWER_OR_NEWER_EQUAL_PRIORITY)
_RECLAIM = (s.NEVER, s.LOWER_PRIORITY, s.ANY)
_BORROW = (s.NEVER, s.LOWER_PRIORITY)
_PREFERENCE = (s.BORROWING_OVER_PREEMPTION, s.PREEMPTION_OVER_BORROWING)


def cluster_queue(doc: Doc, spec: dict[str, Any], api: str) -> s.ClusterQueueSpec:
    # v1beta1 names it spec.cohort (read from there where given), v1beta2 spec.cohortName
    field = "cohort" if not api.endswith("v1beta2") and "cohort" in spec else "cohortName"
    fung = doc.mapping("spec.flavorFungibility", spec.get("flavorFungibility"))
    pre = doc.mapping("spec.preemption", spec.get("preemption"))
    bwc = doc.mapping("spec.preemption.borrowWithinCohort", pre.get("borrowWithinCohort"))
    threshold = bwc.get("maxPriorityThreshold")
    selector = spec.get("namespaceSelector")
    preference = fung.get("preference")
    return s.ClusterQueueSpec(
        name=doc.name,
        cohort=reference(doc, f"spec.{field}", spec.get(field)),
        resource_groups=groups(doc, spec.get("resourceGroups")),
        namespace_selector=None if selector is None else _selector(doc, "spec.namespaceSelector", selector),
        queueing_strategy=choice(
            doc, "spec.queueingStrategy", spec.get("queueingStrategy"), _STRATEGIES, s.BEST_EFFORT_FIFO
        ),
        flavor_fungibility=s.FlavorFungibilitySpec(
            _fungibility(doc, "spec.flavorFungibility.whenCanBorrow", fung.get("whenCanBorrow"), s.MAY_STOP_SEARCH),
            _fungibility(doc, "spec.flavorFungibility.whenCanPreempt", fung.get("whenCanPreempt"), s.TRY_NEXT_FLAVOR),
            None
            if preference is None
            else choice(doc, "spec.flavorFungibility.preference", preference, _PREFERENCE, ""),
        ),
        preemption=s.PreemptionSpec(
            choice(doc, "spec.preemption.withinClusterQueue", pre.get("withinClusterQueue"), _WITHIN, s.NEVER),
            choice(doc, "spec.preemption.reclaimWithinCohort", pre.get("reclaimWithinCohort"), _RECLAIM, s.NEVER),
            choice(doc, "spec.preemption.borrowWithinCohort.policy", bwc.get("policy"), _BORROW, s.NEVER),
            None
            if threshold is None
            else integer(
                doc,
                "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
                threshold,
                low=-MAX_INT32 - 1,
                high=MAX_INT32,
                expected=PRIORITY,
            ),
        ),
        fair_weight=weight(doc, spec),
        stop_policy=choice(doc, "spec.stopPolicy", spec.get("stopPolicy"), STOP_POLICIES, "None"),
        admission_mode=admission_mode(doc, spec),
    )


def _selector(doc: Doc, path: str, value: Any) -> s.LabelSelector:
    raw = doc.mapping(path, value)
    reqs = [s.Requirement(k, Operator.IN, (v,)) for k, v in doc.pairs(f"{path}.matchLabels", raw.get("matchLabels"))]
    reqs += [
        requirement(doc, epath, e, _LABEL_OPERATORS)
        for epath, e in doc.mappings(f"{path}.matchExpressions", raw.get("matchExpressions"))
    ]
    return s.LabelSelector(tuple(reqs))


def weight(doc: Doc, spec: dict[str, Any]) -> float:
    raw = doc.mapping("spec.fairSharing", spec.get("fairSharing")).get("weight")
    if raw is None:
        return 1.0
    try:
        weight = parse_decimal(raw)
    except QuantityError as exc:
        doc.fail("spec.fairSharing.weight", str(exc))
        return 1.0
    if not 0 <= weight <= MAX_QUANTITY:
        doc.fail("spec.fairSharing.weight", f"weight {shown(raw)} must be between 0 and {MAX_QUANTITY}")
        return 1.0
    if 0 < weight <= Decimal("1e-9"):  # Kueue's validateFairSharing: it would collapse to 0
        doc.fail("spec.fairSharing.weight", f"weight {shown(raw)}: when not 0, a weight must be greater than 10^-9")
        return 1.0
    return float(weight)
