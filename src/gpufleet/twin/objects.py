"""Reading real Kueue objects (what ``kubectl get ... -o yaml`` prints) into frozen specs.

Accepted: ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass (and core
PriorityClass), Workload, Namespace, Kueue's ``Configuration`` and ``kind: List`` wrappers, in
``kueue.x-k8s.io/v1beta2`` or ``v1beta1``. The v1beta1 spellings are mapped onto v1beta2:
``spec.cohort`` → ``spec.cohortName``, ``priorityClassName``/``priorityClassSource`` →
``priorityClassRef``, fungibility ``Borrow``/``Preempt`` → ``MayStopSearch``, Configuration
``fairSharing.enable``. Every mistake is collected with the object, field path and line, and
raised together as one ``InputError``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import yaml

from gpufleet.errors import InputError, Problem
from gpufleet.twin import specs as s
from gpufleet.twin.resources import QuantityError, parse_decimal, parse_quantity

KUEUE_GROUP = "kueue.x-k8s.io"
PRIORITY_BOOST = "kueue.x-k8s.io/priority-boost"
_FUNGIBILITY_V1BETA1 = {"Borrow": s.MAY_STOP_SEARCH, "Preempt": s.MAY_STOP_SEARCH}


@dataclass
class _Doc:
    """Where one object came from, so every problem names it."""

    file: str
    line: int
    kind: str
    name: str
    problems: list[Problem]

    def fail(self, path: str, message: str) -> None:
        self.problems.append(Problem(f"{self.kind} {self.name}: {message}", self.file, path, self.line))


@dataclass
class _Stream:
    problems: list[Problem] = field(default_factory=list)
    flavors: dict[str, s.ResourceFlavorSpec] = field(default_factory=dict)
    cohorts: dict[str, s.CohortSpec] = field(default_factory=dict)
    cluster_queues: dict[str, s.ClusterQueueSpec] = field(default_factory=dict)
    local_queues: dict[str, s.LocalQueueSpec] = field(default_factory=dict)
    namespaces: dict[str, s.NamespaceSpec] = field(default_factory=dict)
    priority_classes: dict[tuple[str, str], int] = field(default_factory=dict)
    workloads: list[tuple[_Doc, dict[str, Any], int]] = field(default_factory=list)
    config: s.ConfigSpec = field(default_factory=s.ConfigSpec)


def load_documents(text: str, file: str) -> list[tuple[Any, int]]:
    """YAML documents with their 1-based start lines; a syntax error is an InputError."""
    loader = yaml.SafeLoader(text)
    docs: list[tuple[Any, int]] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                docs.append((loader.construct_document(node), node.start_mark.line + 1))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError([Problem(f"not valid YAML: {problem}", file, "", line)]) from None
    finally:
        loader.dispose()
    return docs


def parse_cluster(sources: Iterable[tuple[str, str]]) -> s.ClusterSpec:
    """Parse ``(file name, YAML text)`` pairs into one ``ClusterSpec``; raises InputError."""
    st = _Stream()
    index = 0
    for file, text in sources:
        for obj, line in load_documents(text, file):
            for item in _flatten(obj):
                _parse_object(st, item, file, line, index)
                index += 1
    workloads = tuple(w for w in (_workload(st, doc, obj, idx) for doc, obj, idx in st.workloads) if w is not None)
    if st.problems:
        raise InputError(st.problems)
    return s.ClusterSpec(
        st.flavors, st.cohorts, st.cluster_queues, st.local_queues, st.namespaces, workloads, st.config
    )


def _flatten(obj: Any) -> list[Any]:
    if isinstance(obj, dict) and obj.get("kind") == "List":
        return list(obj.get("items") or [])
    return [] if obj is None else [obj]


def _parse_object(st: _Stream, obj: Any, file: str, line: int, index: int) -> None:
    if not isinstance(obj, dict):
        st.problems.append(Problem("expected a Kubernetes object (a mapping)", file, "", line))
        return
    kind = str(obj.get("kind", ""))
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", "")) if isinstance(meta, dict) else ""
    doc = _Doc(file, line, kind or "<no kind>", name or "<unnamed>", st.problems)
    if not name and kind != "Configuration":
        doc.fail("metadata.name", "metadata.name is required")
        return
    api = str(obj.get("apiVersion", ""))
    spec = obj.get("spec") or {}
    if kind == "ResourceFlavor":
        st.flavors[name] = _flavor(doc, spec)
    elif kind == "Cohort":
        st.cohorts[name] = s.CohortSpec(
            name,
            spec.get("parentName") or spec.get("parent") or None,
            _groups(doc, spec.get("resourceGroups") or []),
            _weight(doc, spec),
        )
    elif kind == "ClusterQueue":
        st.cluster_queues[name] = _cluster_queue(doc, spec, api)
    elif kind == "LocalQueue":
        ns = str(meta.get("namespace") or "default")
        cq = spec.get("clusterQueue")
        if not cq:
            doc.fail("spec.clusterQueue", "spec.clusterQueue is required")
            return
        st.local_queues[f"{ns}/{name}"] = s.LocalQueueSpec(ns, name, str(cq), str(spec.get("stopPolicy", "None")))
    elif kind in ("WorkloadPriorityClass", "PriorityClass"):
        group = KUEUE_GROUP if kind == "WorkloadPriorityClass" else "scheduling.k8s.io"
        st.priority_classes[(group, name)] = _int(doc, "value", obj.get("value", 0))
    elif kind == "Workload":
        st.workloads.append((doc, obj, index))
    elif kind == "Namespace":
        labels = meta.get("labels") or {}
        st.namespaces[name] = s.NamespaceSpec(name, tuple(sorted((str(k), str(v)) for k, v in labels.items())))
    elif kind == "Configuration":
        st.config = _config(doc, obj)
    else:
        doc.fail("kind", f"unknown kind {kind!r} (the twin reads Kueue objects, Namespaces and Configuration)")


def _flavor(doc: _Doc, spec: dict[str, Any]) -> s.ResourceFlavorSpec:
    labels = spec.get("nodeLabels") or {}
    taints = tuple(
        s.Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "NoSchedule")))
        for t in spec.get("nodeTaints") or []
    )
    return s.ResourceFlavorSpec(
        doc.name,
        tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        taints,
        _tolerations(spec.get("tolerations")),
    )


def _tolerations(raw: Any) -> tuple[s.Toleration, ...]:
    return tuple(
        s.Toleration(
            str(t.get("key", "")),
            str(t.get("operator", "Equal")),
            str(t.get("value", "")),
            str(t.get("effect", "")),
        )
        for t in raw or []
    )


def _groups(doc: _Doc, raw: list[Any]) -> tuple[s.ResourceGroupSpec, ...]:
    groups = []
    for gi, group in enumerate(raw):
        covered = tuple(str(r) for r in group.get("coveredResources") or [])
        flavors = []
        for fi, flavor in enumerate(group.get("flavors") or []):
            quotas = []
            for ri, res in enumerate(flavor.get("resources") or []):
                path = f"spec.resourceGroups[{gi}].flavors[{fi}].resources[{ri}]"
                rname = str(res.get("name", ""))
                if rname not in covered:
                    doc.fail(path + ".name", f"resource {rname!r} is not in coveredResources")
                quotas.append(
                    s.ResourceQuotaSpec(
                        rname,
                        _quantity(doc, path + ".nominalQuota", res.get("nominalQuota", 0), rname) or 0,
                        _quantity(doc, path + ".borrowingLimit", res.get("borrowingLimit"), rname),
                        _quantity(doc, path + ".lendingLimit", res.get("lendingLimit"), rname),
                    )
                )
            flavors.append(s.FlavorQuotasSpec(str(flavor.get("name", "")), tuple(quotas)))
        groups.append(s.ResourceGroupSpec(covered, tuple(flavors)))
    return tuple(groups)


def _cluster_queue(doc: _Doc, spec: dict[str, Any], api: str) -> s.ClusterQueueSpec:
    cohort = spec.get("cohortName") if api.endswith("v1beta2") else spec.get("cohort", spec.get("cohortName"))
    fung = spec.get("flavorFungibility") or {}
    pre = spec.get("preemption") or {}
    bwc = pre.get("borrowWithinCohort") or {}
    threshold = bwc.get("maxPriorityThreshold")
    selector = spec.get("namespaceSelector")
    return s.ClusterQueueSpec(
        name=doc.name,
        cohort=str(cohort) if cohort else None,
        resource_groups=_groups(doc, spec.get("resourceGroups") or []),
        namespace_selector=None if selector is None else _selector(selector),
        queueing_strategy=str(spec.get("queueingStrategy", s.BEST_EFFORT_FIFO)),
        flavor_fungibility=s.FlavorFungibilitySpec(
            _FUNGIBILITY_V1BETA1.get(fung.get("whenCanBorrow", ""), fung.get("whenCanBorrow", s.MAY_STOP_SEARCH)),
            _FUNGIBILITY_V1BETA1.get(fung.get("whenCanPreempt", ""), fung.get("whenCanPreempt", s.TRY_NEXT_FLAVOR)),
            fung.get("preference"),
        ),
        preemption=s.PreemptionSpec(
            str(pre.get("withinClusterQueue", s.NEVER)),
            str(pre.get("reclaimWithinCohort", s.NEVER)),
            str(bwc.get("policy", s.NEVER)),
            None
            if threshold is None
            else _int(doc, "spec.preemption.borrowWithinCohort.maxPriorityThreshold", threshold),
        ),
        fair_weight=_weight(doc, spec),
        stop_policy=str(spec.get("stopPolicy", "None")),
    )


def _selector(raw: dict[str, Any]) -> s.LabelSelector:
    reqs = [s.Requirement(str(k), "In", (str(v),)) for k, v in (raw.get("matchLabels") or {}).items()]
    reqs += [
        s.Requirement(str(e.get("key", "")), str(e.get("operator", "In")), tuple(str(v) for v in e.get("values") or []))
        for e in raw.get("matchExpressions") or []
    ]
    return s.LabelSelector(tuple(reqs))


def _weight(doc: _Doc, spec: dict[str, Any]) -> float:
    raw = (spec.get("fairSharing") or {}).get("weight")
    if raw is None:
        return 1.0
    try:
        return float(parse_decimal(raw))
    except QuantityError as exc:
        doc.fail("spec.fairSharing.weight", str(exc))
        return 1.0


def _config(doc: _Doc, obj: dict[str, Any]) -> s.ConfigSpec:
    excluded = tuple(str(p) for p in ((obj.get("resources") or {}).get("excludeResourcePrefixes") or ()))
    fs = obj.get("fairSharing")
    if fs is None:
        return s.ConfigSpec(fair_sharing=False, excluded_prefixes=excluded)
    enabled = bool(fs.get("enable", True)) if str(obj.get("apiVersion", "")).endswith("v1beta1") else True
    strategies = tuple(str(x) for x in fs.get("preemptionStrategies") or ())
    allowed = {
        (s.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
        (s.LESS_THAN_INITIAL_SHARE,),
        (s.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, s.LESS_THAN_INITIAL_SHARE),
    }
    if strategies and strategies not in allowed:
        doc.fail("fairSharing.preemptionStrategies", f"unsupported strategy list {list(strategies)}")
    return s.ConfigSpec(enabled, strategies or s.ConfigSpec().preemption_strategies, excluded)


def _workload(st: _Stream, doc: _Doc, obj: dict[str, Any], index: int) -> s.WorkloadSpec | None:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    ns = str(meta.get("namespace") or "default")
    doc.name = f"{ns}/{doc.name}"
    queue = spec.get("queueName")
    status = obj.get("status") or {}
    admission_raw = status.get("admission")
    if not queue and not admission_raw:
        doc.fail("spec.queueName", "spec.queueName is required")
        return None
    pod_sets = tuple(_pod_set(doc, ps, i) for i, ps in enumerate(spec.get("podSets") or []))
    if not pod_sets:
        doc.fail("spec.podSets", "at least one pod set is required")
        return None
    priority = _priority(st, doc, spec, meta)
    created = _timestamp(doc, meta.get("creationTimestamp"), index)
    admission = None
    if admission_raw:
        admission = s.AdmissionSpec(
            str(admission_raw.get("clusterQueue", "")),
            tuple(
                s.PodSetAssignmentSpec(
                    str(a.get("name", "main")),
                    tuple((str(r), str(f)) for r, f in (a.get("flavors") or {}).items()),
                    _int(
                        doc,
                        "status.admission.podSetAssignments.count",
                        a.get("count", _count_of(pod_sets, a)),
                    ),
                )
                for a in admission_raw.get("podSetAssignments") or []
            ),
        )
    return s.WorkloadSpec(
        ns, str(meta.get("name")), str(queue or ""), pod_sets, priority, created,
        str(meta.get("uid", "")), admission, bool(spec.get("active", True)),
        _reserved_at(doc, status) if admission else 0,
        str((meta.get("labels") or {}).get("kueue.x-k8s.io/job-uid", "")),
    )  # fmt: skip


def _reserved_at(doc: _Doc, status: dict[str, Any]) -> int:
    """QuotaReserved's lastTransitionTime: orders victims by \"admitted more recently\"."""
    for cond in status.get("conditions") or []:
        if cond.get("type") == "QuotaReserved" and cond.get("status") == "True":
            return _timestamp(doc, cond.get("lastTransitionTime"), 0)
    return 0


def _count_of(pod_sets: tuple[s.PodSetSpec, ...], assignment: dict[str, Any]) -> int:
    name = assignment.get("name", "main")
    return next((ps.count for ps in pod_sets if ps.name == name), 1)


def _priority(st: _Stream, doc: _Doc, spec: dict[str, Any], meta: dict[str, Any]) -> int:
    if spec.get("priority") is not None:
        value = _int(doc, "spec.priority", spec["priority"])
    else:
        ref = spec.get("priorityClassRef") or {}
        name, group = ref.get("name"), ref.get("group", KUEUE_GROUP)
        if not name and spec.get("priorityClassName"):  # v1beta1
            name = spec["priorityClassName"]
            source = str(spec.get("priorityClassSource", ""))
            group = "scheduling.k8s.io" if source.startswith("scheduling.k8s.io") else KUEUE_GROUP
        value = st.priority_classes.get((str(group), str(name)), 0) if name else 0
    boost = (meta.get("annotations") or {}).get(PRIORITY_BOOST)
    return value + (_int(doc, f"metadata.annotations[{PRIORITY_BOOST}]", boost) if boost is not None else 0)


def _pod_set(doc: _Doc, raw: dict[str, Any], i: int) -> s.PodSetSpec:
    path = f"spec.podSets[{i}]"
    pod = (raw.get("template") or {}).get("spec") or {}
    requests: dict[str, int] = {}
    for c, container in enumerate(pod.get("containers") or []):
        for res, qty in _container_requests(doc, f"{path}.template.spec.containers[{c}]", container).items():
            requests[res] = requests.get(res, 0) + qty
    for c, container in enumerate(pod.get("initContainers") or []):
        for res, qty in _container_requests(doc, f"{path}.template.spec.initContainers[{c}]", container).items():
            requests[res] = max(requests.get(res, 0), qty)
    for res, qty in (pod.get("overhead") or {}).items():
        requests[res] = requests.get(res, 0) + (_quantity(doc, f"{path}.template.spec.overhead", qty, res) or 0)
    terms = []
    affinity = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in affinity.get("nodeSelectorTerms") or []:
        terms.append(
            tuple(
                s.Requirement(
                    str(e.get("key", "")),
                    str(e.get("operator", "In")),
                    tuple(str(v) for v in e.get("values") or []),
                )
                for e in term.get("matchExpressions") or []
            )
        )
    count = _int(doc, f"{path}.count", raw.get("count", 1))
    min_count = raw.get("minCount")
    return s.PodSetSpec(
        name=str(raw.get("name", "main")),
        count=count,
        requests=tuple(sorted(requests.items())),
        min_count=None if min_count is None else _int(doc, f"{path}.minCount", min_count),
        node_selector=tuple(sorted((str(k), str(v)) for k, v in (pod.get("nodeSelector") or {}).items())),
        tolerations=_tolerations(pod.get("tolerations")),
        affinity_terms=tuple(terms),
    )


def _container_requests(doc: _Doc, path: str, container: dict[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})  # limits stand in for missing requests
    return {str(r): _quantity(doc, f"{path}.resources.requests[{r}]", q, str(r)) or 0 for r, q in merged.items()}


def _quantity(doc: _Doc, path: str, value: Any, resource: str) -> int | None:
    if value is None:
        return None
    try:
        return parse_quantity(value, resource)
    except QuantityError as exc:
        doc.fail(path, str(exc))
        return 0


def _int(doc: _Doc, path: str, value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        doc.fail(path, f"expected an integer, got {value!r}")
        return 0


def _timestamp(doc: _Doc, value: Any, index: int) -> int:
    """Queue-order timestamp in epoch milliseconds; the stream position when none is given."""
    if value is None:
        return index
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    try:
        return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        doc.fail("metadata.creationTimestamp", f"not an RFC 3339 timestamp: {value!r}")
        return index


__all__ = ["load_documents", "parse_cluster"]


def parse_objects(objects: Iterable[Any], source: str) -> s.ClusterSpec:
    """Kubernetes objects already in memory (as ``gpufleet render`` builds them) into one
    ``ClusterSpec``, as ``parse_cluster`` reads them from YAML; problems name ``source`` and the
    object's position (1-based) instead of a line."""
    st = _Stream()
    index = 0
    for position, obj in enumerate(objects, start=1):
        for item in _flatten(obj):
            _parse_object(st, item, source, position, index)
            index += 1
    workloads = tuple(w for w in (_workload(st, doc, obj, idx) for doc, obj, idx in st.workloads) if w is not None)
    if st.problems:
        raise InputError(st.problems)
    return s.ClusterSpec(
        st.flavors, st.cohorts, st.cluster_queues, st.local_queues, st.namespaces, workloads, st.config
    )
