"""The rules compiled to CEL: the variables, match conditions and validations of a ValidatingAdmissionPolicy.

The policy's facts become CEL literals (which namespace belongs to which team, what each team may
use, what each pool offers per node), so the API server needs no parameter objects and no webhook to
enforce them. Each catalogue rule becomes one validation whose ``expression`` holds when the rule is
satisfied and whose ``messageExpression`` fills the rule's message template with CEL expressions.

The expressions keep to standard CEL, the strings extension and the Kubernetes lists library
(``sum``, ``max``), all of which the API server offers, so the offline evaluation in tests matches it.
"""

from __future__ import annotations

import string
from typing import Any

from gpufleet.check.catalogue import FEDERATED_OUT, RULES, Rule, Scope
from gpufleet.check.facts import CLAIM_PREFIX, GPU_PREFIX, PRIORITY_LABEL, QUEUE_LABEL, AdmissionFacts, join_or_none
from gpufleet.check.residency import residency_of
from gpufleet.check.workloads import KINDS, MAX_DIGITS, Path


def _char(c: str) -> str:
    """One character of a CEL string literal: printable ASCII as itself, the rest as code-point escapes."""
    if c in '"\\':
        return "\\" + c
    if " " <= c <= "~":
        return c
    return f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"


def lit(value: Any) -> str:
    """A Python value as a CEL literal that the API server's type checker accepts."""
    return _literal(value)[0]


def _uniform(parts: list[tuple[str, str]]) -> tuple[list[str], str]:
    """cel-go types a list or map literal by its elements and refuses mixed ones: mixed become ``dyn``."""
    types = {t for _, t in parts}
    if len(types) <= 1:
        return [text for text, _ in parts], types.pop() if types else "dyn"
    return [f"dyn({text})" for text, _ in parts], "dyn"


def _literal(value: Any) -> tuple[str, str]:
    """The literal and its CEL type, so an enclosing literal can tell whether its elements agree."""
    if isinstance(value, bool):
        return ("true" if value else "false"), "bool"
    if isinstance(value, int):
        return str(value), "int"
    if isinstance(value, str):
        return '"' + "".join(_char(c) for c in value) + '"', "string"
    if isinstance(value, list | tuple):
        items, item_type = _uniform([_literal(v) for v in value])
        return "[" + ", ".join(items) + "]", f"list({item_type})"
    if isinstance(value, dict):
        keys = [_literal(k)[0] for k in value]
        values, value_type = _uniform([_literal(v) for v in value.values()])
        return "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, values, strict=True)) + "}", f"map({value_type})"
    raise TypeError(f"no CEL literal for {type(value).__name__}")


def _has_chain(base: str, path: Path) -> str:
    tests = [f"has({base}.{'.'.join(path[: i + 1])})" for i in range(len(path))]
    return " && ".join(tests) or "true"


def _dotted(base: str, path: Path) -> str:
    return ".".join((base, *path))


def specs_of(path: Path) -> str:
    """A list of the pod specs at ``path`` under ``object`` (paths hold at most one collection step)."""
    steps = [i for i, step in enumerate(path) if step in ("[]", "{}")]
    if not steps:
        return f"({_has_chain('object', path)} ? [{_dotted('object', path)}] : [])"
    i = steps[0]
    pre, post = path[:i], path[i + 1 :]
    collection = _dotted("object", pre)
    if path[i] == "[]":
        body = f"{collection}.filter(x, {_has_chain('x', post)}).map(x, {_dotted('x', post)})"
    else:
        item = f"{collection}[k]"
        body = f"{collection}.filter(k, {_has_chain(item, post)}).map(k, {_dotted(item, post)})"
    return f"({_has_chain('object', pre)} ? {body} : [])"


def _kind_switch() -> str:
    out = "[]"
    for kind in reversed(KINDS):
        specs = " + ".join(specs_of(p) for p in kind.templates)
        out = f"variables.kind == {lit(kind.key)} ? ({specs}) : ({out})"
    return out


# --- per-pod-spec snippets; ``sp`` is the spec, ``c`` a container ---
_APP = "(has(sp.containers) ? sp.containers : [])"
_INIT = "(has(sp.initContainers) ? sp.initContainers : [])"
_ALL = f"({_APP} + {_INIT})"
_REQ = "(has(c.resources) && has(c.resources.requests) ? c.resources.requests : {})"
_LIM = "(has(c.resources) && has(c.resources.limits) ? c.resources.limits : {})"
_NODE_SELECTOR = "(has(sp.nodeSelector) ? sp.nodeSelector : {})"


def _valid(v: str) -> str:
    return (
        f"(type({v}) == int ? ({v} >= 0 && {v} < {10**MAX_DIGITS}) : "
        f"(type({v}) == string && {v}.matches('^[0-9]{{1,{MAX_DIGITS}}}$')))"
    )


def _num(v: str) -> str:
    return f"(type({v}) == int ? {v} : int({v}))"


def _count(resource: str) -> str:
    return f"({resource} in {_REQ} ? {_num(f'{_REQ}[{resource}]')} : ({resource} in {_LIM} ? {_num(f'{_LIM}[{resource}]')} : 0))"


_CLAIMS = "(has(sp.resourceClaims) ? sp.resourceClaims : [])"


def _claims(key: str) -> str:
    """How many of the pod's claim entries are made from the template ``key`` names (workloads.claim_needs)."""
    template = "rc.resourceClaimTemplateName"
    return (
        f"{_CLAIMS}.filter(rc, has({template}) && type({template}) == string && "
        f"{lit(CLAIM_PREFIX)} + {template} == {key}).size()"
    )


def _gpu_keys(part: str, test: str) -> str:
    return f"{part}.exists(k, k.startsWith({lit(GPU_PREFIX)}) && {test})"


def _total(resource: str) -> str:
    return f"([{_APP}.map(c, {_count(resource)}).sum()] + {_INIT}.map(c, {_count(resource)})).max()"


def _per_spec(facts: AdmissionFacts) -> dict[str, str]:
    """Boolean snippets over one pod spec ``sp`` in a team namespace."""
    universe = lit(list(facts.gpu_resources))
    invalid = f"{_ALL}.exists(c, {_gpu_keys(_REQ, '!' + _valid(f'{_REQ}[k]'))} || {_gpu_keys(_LIM, '!' + _valid(f'{_LIM}[k]'))})"
    unknown_test = f"!(k in {universe}) && {_count('k')} > 0"
    unknown = f"{_ALL}.exists(c, {_gpu_keys(_REQ, unknown_test)} || {_gpu_keys(_LIM, unknown_test)})"
    needs = f"{universe}.filter(r, {_total('r')} > 0)"
    candidates = (
        f"variables.team.pools.filter(p, p.sel.all(k, !(k in {_NODE_SELECTOR}) || {_NODE_SELECTOR}[k] == p.sel[k]))"
    )
    if not facts.claim_resources:
        not_offered = f"({unknown} || {needs}.exists(r, !{candidates}.exists(p, r in p.units)))"
        fits_none = (
            f"({needs}.size() > 0 && !{not_offered} && "
            f"!{candidates}.exists(p, {needs}.all(r, r in p.units && {_total('r')} <= p.units[r])))"
        )
        return {
            "invalid": invalid,
            "not_offered": not_offered,
            "fits_none": fits_none,
            "claim_required": "false",
            "claim_pool_open": "false",
        }
    # DRA: a claim from gpufleet's template T needs one unit of CLAIM_PREFIX + T (facts.PoolOffer); a DRA
    # pool advertises no extended resource, only hands it out as a claim (p.claims: resource -> template)
    claims = lit(list(facts.claim_resources))
    claim_needs = f"{claims}.filter(r, {_claims('r')} > 0)"
    claim_required = (
        f"{needs}.exists(r, !{candidates}.exists(p, r in p.units) && {candidates}.exists(p, r in p.claims))"
    )
    not_offered = (
        f"({unknown} || {needs}.exists(r, !{candidates}.exists(p, r in p.units || r in p.claims)) || "
        f"{claim_needs}.exists(r, !{candidates}.exists(p, r in p.units)))"
    )
    fits_none = (
        f"(({needs}.size() > 0 || {claim_needs}.size() > 0) && !{not_offered} && !({claim_required}) && "
        f"!{candidates}.exists(p, {needs}.all(r, r in p.units && {_total('r')} <= p.units[r]) && "
        f"{claim_needs}.all(r, r in p.units && {_claims('r')} <= p.units[r])))"
    )
    quota = lit(facts.claim_quota)
    claim_pool_open = (
        f"{claim_needs}.exists(k, {candidates}.exists(p, k in p.units) && {candidates}.exists(p, !(k in p.units) && "
        f"({quota}[k] in p.units || {quota}[k] in p.claims)))"
    )
    return {
        "invalid": invalid,
        "not_offered": not_offered,
        "fits_none": fits_none,
        "claim_required": claim_required,
        "claim_pool_open": claim_pool_open,
    }


def _label(key: str) -> str:
    return f"({lit(key)} in variables.labels ? variables.labels[{lit(key)}] : '')"


def _tolerates(taint: tuple[str, str, str]) -> str:
    key, value, effect = taint
    op = "(has(t.operator) && t.operator != '' ? t.operator : 'Equal')"
    own_key = "(has(t.key) ? t.key : '')"
    return (
        f"(({own_key} == {lit(key)} || ({own_key} == '' && {op} == 'Exists')) && "
        f"({op} == 'Exists' || (has(t.value) ? t.value : '') == {lit(value)}) && "
        f"((has(t.effect) ? t.effect : '') in ['', {lit(effect)}]))"
    )


def _conditions(facts: AdmissionFacts) -> dict[str, tuple[str, dict[str, str]]]:
    """For each rule id: the CEL condition under which it refuses, and its message fields as CEL."""
    labels = {"team": facts.team_label, "model": facts.model_label, "dc": facts.data_class_label}
    team, ns, kinds = "variables.team.name", "request.namespace", "object.kind + 's'"
    spec = _per_spec(facts)
    specs = "variables.specs"
    serving = facts.serving
    out: dict[str, tuple[str, dict[str, str]]] = {}
    purposes = {
        "team": f"'the team that owns this work: ' + {team}",
        "model": lit("the model this job trains or serves"),
        "dc": "'the class of the data it uses, one of: ' + variables.team.dataClassesText",
    }
    for rule_id, key in (("team-label", "team"), ("model-label", "model"), ("data-class-label", "dc")):
        fields = {"label": lit(labels[key]), "kinds": kinds, "namespace": ns, "purpose": purposes[key]}
        out[rule_id] = (f"{_label(labels[key])} == ''", fields)
    team_value, dc_value, queue_value = _label(labels["team"]), _label(labels["dc"]), _label(QUEUE_LABEL)
    out["team-matches"] = (
        f"{team_value} != '' && {team_value} != {team}",
        {"label": lit(labels["team"]), "value": team_value, "namespace": ns, "team": team},
    )
    out["data-class-allowed"] = (
        f"{dc_value} != '' && !({dc_value} in variables.team.dataClasses)",
        {"label": lit(labels["dc"]), "value": dc_value, "team": team, "allowed": "variables.team.dataClassesText"},
    )
    out["queue-name"] = (
        f"{queue_value} == ''",
        {"label": lit(QUEUE_LABEL), "kinds": kinds, "namespace": ns, "team": team},
    )
    out["queue-matches"] = (
        f"{queue_value} != '' && {queue_value} != {team}",
        {"label": lit(QUEUE_LABEL), "value": queue_value, "team": team},
    )
    priority = f"variables.labels[{lit(PRIORITY_LABEL)}]"
    has_priority = f"{lit(PRIORITY_LABEL)} in variables.labels"
    allowed_priority = "variables.team.priorityClassesText"
    if serving is not None:
        tolerations = "(has(sp.tolerations) ? sp.tolerations : [])"
        tolerates_all = " && ".join(f"{tolerations}.exists(t, {_tolerates(t)})" for t in serving.taints)
        selector, nodes = lit(serving.selector), lit(list(serving.nodes))
        required = "sp.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        has_terms = _has_chain(
            "sp", ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
        )
        pins = (
            f"has(term.matchExpressions) && {selector}.all(k, term.matchExpressions.exists(e, has(e.key) && e.key == k"
            f" && has(e.operator) && e.operator == 'In' && has(e.values) && {selector}[k] in e.values))"
        )
        selects = (
            f"{selector}.all(k, k in {_NODE_SELECTOR} && {_NODE_SELECTOR}[k] == {selector}[k]) || "
            f"(has(sp.nodeName) && sp.nodeName in {nodes}) || "
            f"({has_terms} && {required}.nodeSelectorTerms.exists(term, {pins}))"
        )
        pc = lit(serving.priority_class)
        out["serving-toleration"] = (
            f"{specs}.exists(sp, {tolerates_all})",
            {"kinds": kinds, "namespace": ns, "taint": lit(serving.taint_text)},
        )
        out["serving-nodes"] = (
            f"{specs}.exists(sp, {selects})",
            {"kinds": kinds, "namespace": ns, "selector": lit(serving.selector_text)},
        )
        out["serving-priority"] = (
            f"({has_priority} && {priority} == {pc}) || {specs}.exists(sp, has(sp.priorityClassName) && sp.priorityClassName == {pc})",
            {"value": pc, "kinds": kinds, "namespace": ns, "allowed": allowed_priority},
        )
        not_serving = f" && {priority} != {pc}"
        pod_not_serving = f" && sp.priorityClassName != {pc}"
    else:
        for rule_id in ("serving-toleration", "serving-nodes", "serving-priority"):
            out[rule_id] = ("false", {})
        not_serving = pod_not_serving = ""
    out["priority-label-allowed"] = (
        f"{has_priority} && !({priority} in variables.team.priorityClasses){not_serving}",
        {"value": priority, "team": team, "label": lit(PRIORITY_LABEL), "allowed": allowed_priority},
    )
    out["pod-priority-allowed"] = (
        f"{specs}.exists(sp, has(sp.priorityClassName) && !(sp.priorityClassName in variables.team.priorityClasses){pod_not_serving})",
        {"team": team, "allowed": allowed_priority},
    )
    annotation = f"object.metadata.annotations[{lit(facts.checkpoint_annotation)}]"
    locations = {dc: list(locs) for dc, locs in facts.checkpoint_locations.items()}
    location_text = {dc: join_or_none(locs) for dc, locs in facts.checkpoint_locations.items()}
    out["checkpoint-location"] = (
        f"has(object.metadata.annotations) && {lit(facts.checkpoint_annotation)} in object.metadata.annotations && "
        f"{dc_value} != '' && {dc_value} in variables.team.dataClasses && "
        f"!(({dc_value} in {lit(locations)}) ? {lit(locations)}[{dc_value}] : []).exists(l, {annotation}.startsWith(l))",
        {
            "value": annotation,
            "data_class": dc_value,
            "allowed": f"({dc_value} in {lit(location_text)} ? {lit(location_text)}[{dc_value}] : 'none')",
        },
    )
    out |= _gpu_conditions(specs, spec, team)
    template_labels = "object.spec.template.metadata.labels"
    out["serving-queue-name"] = (
        f"{lit(QUEUE_LABEL)} in variables.labels || ({_has_chain('object', ('spec', 'template', 'metadata', 'labels'))}"
        f" && {lit(QUEUE_LABEL)} in {template_labels})",
        {"kinds": kinds, "label": lit(QUEUE_LABEL)},
    )
    return out


def message_expression(rule: Rule, fields: dict[str, str]) -> str:
    """``rule``'s message template as a CEL string concatenation of literals and field expressions."""
    parts = [lit(f"{rule.reason}: ")]
    for literal, name, _, _ in string.Formatter().parse(rule.template):
        if literal:
            parts.append(lit(literal))
        if name:
            parts.append(f"({fields[name]})")
    return " + ".join(parts)


def _gpu_conditions(specs: str, spec: dict[str, str], team: str) -> dict[str, tuple[str, dict[str, str]]]:
    """The GPU rules: whole counts first; each of the others judges only valid counts."""
    invalid_any = f"{specs}.exists(sp, {spec['invalid']})"

    def per_spec(key: str) -> str:
        return f"!{invalid_any} && {specs}.exists(sp, {spec[key]})"

    offers = {"team": team, "offers": "variables.team.offers"}
    return {
        "gpu-count": (invalid_any, {"kind": "object.kind"}),
        "gpu-claim-required": (per_spec("claim_required"), {"team": team, "claims": "variables.team.claims"}),
        "gpu-claim-pool": (per_spec("claim_pool_open"), {"team": team, "pins": "variables.team.pins"}),
        "gpu-offered": (per_spec("not_offered"), offers),
        "gpu-fits": (per_spec("fits_none"), offers),
    }


def _team_table(facts: AdmissionFacts) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for t in facts.teams:
        info = {
            "name": t.name,
            "dataClasses": list(t.data_classes),
            "dataClassesText": join_or_none(t.data_classes),
            "priorityClasses": list(t.priority_classes),
            "priorityClassesText": join_or_none(t.priority_classes),
            "offers": t.offers_text,
            "claims": t.claims_text,
            "pins": t.pins_text(facts.claim_quota),
            "pools": [{"sel": p.selector, "units": p.per_node, "claims": p.claims} for p in t.pools],
        }
        for ns in t.namespaces:
            table[ns] = info
    return table


def variables(facts: AdmissionFacts) -> list[dict[str, str]]:
    """The policy's variables, in the order they may refer to each other."""
    all_kinds = lit([k.key for k in KINDS])
    batch_kinds = lit([k.key for k in KINDS if k.batch])
    pod_kinds = lit([k.key for k in KINDS if not k.batch])
    gpu_pod = (
        f"variables.specs.exists(sp, {_ALL}.exists(c, {_gpu_keys(_REQ, 'true')} || {_gpu_keys(_LIM, 'true')})"
        " || (has(sp.resourceClaims) && sp.resourceClaims.size() > 0))"
    )
    controlled = "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller == true)"
    serving_ns = lit(facts.serving.namespace) if facts.serving else "''"
    scope = (
        f"!(variables.kind in {all_kinds}) ? '' : "
        f"variables.inTeam ? ((variables.kind in {batch_kinds} && !variables.controlled && "
        f"(variables.kind != '/Pod' || variables.gpuPod)) ? {lit(Scope.BATCH.value)} : {lit(Scope.PODS.value)}) : "
        f"(request.namespace == {serving_ns} && {serving_ns} != '' && variables.kind in {pod_kinds}) ? {lit(Scope.SERVING.value)} : ''"
    )
    return [
        {"name": "teams", "expression": lit(_team_table(facts))},
        {"name": "inTeam", "expression": "request.namespace in variables.teams"},
        {"name": "team", "expression": "variables.inTeam ? variables.teams[request.namespace] : {}"},
        {
            "name": "kind",
            "expression": "(object.apiVersion.contains('/') ? object.apiVersion.split('/')[0] : '') + '/' + object.kind",
        },
        {"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
        {"name": "specs", "expression": _kind_switch()},
        {"name": "controlled", "expression": controlled},
        {"name": "gpuPod", "expression": gpu_pod},
        {"name": "scope", "expression": scope},
    ]


MATCH_CONDITIONS = [
    # an object on its way out only sheds finalizers: refusing that would leave it stuck
    {"name": "not-being-deleted", "expression": "!has(object.metadata.deletionTimestamp)"},
]


def _in_scope(scope: Scope) -> str:
    if scope is Scope.PODS:
        return f"variables.scope in [{lit(Scope.PODS.value)}, {lit(Scope.BATCH.value)}]"
    return f"variables.scope == {lit(scope.value)}"


def validations(facts: AdmissionFacts) -> list[dict[str, str]]:
    conditions = _conditions(facts)
    out = []
    for rule in RULES:
        refuses, fields = conditions[rule.id]
        if refuses == "false":
            continue  # no serving pool: nothing to protect
        if rule.id in FEDERATED_OUT and residency_of(facts) is not None:
            continue  # a federation's queues are named after team and zone: the residency policy judges them
        out.append(
            {
                "expression": f"!({_in_scope(rule.scope)}) || !({refuses})",
                "messageExpression": message_expression(rule, fields),
                "reason": "Forbidden",
            }
        )
    return out
