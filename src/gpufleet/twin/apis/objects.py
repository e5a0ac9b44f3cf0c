"""Kueue v0.19.2: ``apis/kueue/v1beta2``, ``apis/kueue/v1beta1``, ``pkg/webhooks/``.

Reading real Kueue objects (what ``kubectl get ... -o yaml`` prints) into frozen specs.

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
from dataclasses import dataclass, field, replace
from typing import Any

from gpufleet.errors import InputError, Problem
from gpufleet.twin.apis import claims
from gpufleet.twin.apis import quota_objects as q
from gpufleet.twin.apis import specs as s
from gpufleet.twin.apis.admission_fairsharing_fields import consumed_resources
from gpufleet.twin.apis.configuration import read_configuration
from gpufleet.twin.apis.fields import (
    MAX_INT32,
    POD_COUNT,
    PRIORITY,
    Doc,
    boolean,
    choice,
    integer,
    quantity,
    reference,
    timestamp,
)
from gpufleet.yamldoc import iter_documents

KUEUE_GROUP = "kueue.x-k8s.io"
PRIORITY_BOOST = "kueue.x-k8s.io/priority-boost"


@dataclass
class _Stream:
    problems: list[Problem] = field(default_factory=list)
    flavors: dict[str, s.ResourceFlavorSpec] = field(default_factory=dict)
    cohorts: dict[str, s.CohortSpec] = field(default_factory=dict)
    cluster_queues: dict[str, s.ClusterQueueSpec] = field(default_factory=dict)
    local_queues: dict[str, s.LocalQueueSpec] = field(default_factory=dict)
    namespaces: dict[str, s.NamespaceSpec] = field(default_factory=dict)
    priority_classes: dict[tuple[str, str], int] = field(default_factory=dict)
    workloads: list[tuple[Doc, dict[str, Any], int]] = field(default_factory=list)
    config: s.ConfigSpec = field(default_factory=s.ConfigSpec)
    claim_templates: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (ns, name) -> spec.spec


def load_documents(text: str, file: str) -> list[tuple[Any, int]]:
    """YAML documents with their 1-based start lines; a syntax error, duplicate key or alias bomb is an InputError."""
    return [(d.data, d.line) for d in iter_documents(text, file)]


def parse_cluster(sources: Iterable[tuple[str, str]]) -> s.ClusterSpec:
    """Parse ``(file name, YAML text)`` pairs into one ``ClusterSpec``; raises InputError."""
    st = _Stream()
    index = 0
    for file, text in sources:
        for obj, line in load_documents(text, file):
            for item in _flatten(st, obj, file, line):
                _parse_object(st, item, file, line, index)
                index += 1
    return _cluster(st)


def _cluster(st: _Stream) -> s.ClusterSpec:
    """The stream's objects as one ``ClusterSpec``, or every problem found in them."""
    workloads = tuple(w for w in (_workload(st, doc, obj, idx) for doc, obj, idx in st.workloads) if w is not None)
    if st.problems:
        raise InputError(st.problems)
    origins = {f"Workload/{doc.name}": (doc.file, doc.line) for doc, _, _ in st.workloads}
    return s.ClusterSpec(
        st.flavors, st.cohorts, st.cluster_queues, st.local_queues, st.namespaces, workloads, st.config, origins
    )


def located(error: InputError, spec: s.ClusterSpec) -> InputError:
    """``error`` with file and line filled in for each problem whose path starts at an object of ``spec``.

    The twin checks what no single object shows (a Workload defined twice, admitted to a queue that
    does not exist) and names the object by its path; the stream knows where that object was written.
    """
    problems = []
    for problem in error.problems:
        keys = [k for k in spec.origins if problem.path == k or problem.path.startswith(k + ".")]
        if problem.file or not keys:
            problems.append(problem)
            continue
        file, line = spec.origins[max(keys, key=len)]
        problems.append(replace(problem, file=file, line=line))
    return InputError(problems)


def _flatten(st: _Stream, obj: Any, file: str, line: int) -> list[Any]:
    if isinstance(obj, dict) and obj.get("kind") == "List":
        return Doc(file, line, "List", "", st.problems).sequence("items", obj.get("items"))
    return [] if obj is None else [obj]


def _parse_object(st: _Stream, obj: Any, file: str, line: int, index: int) -> None:
    if not isinstance(obj, dict):
        st.problems.append(Problem("expected a Kubernetes object (a mapping)", file, "", line))
        return
    kind = str(obj.get("kind", ""))
    raw_meta = obj.get("metadata")
    name = str(raw_meta.get("name", "")) if isinstance(raw_meta, dict) else ""
    unnamed = "" if kind == "Configuration" else "<unnamed>"  # a Configuration has no name to give
    doc = Doc(file, line, kind or "<no kind>", name or unnamed, st.problems)
    meta = doc.mapping("metadata", raw_meta)
    if not name and kind != "Configuration":
        doc.fail("metadata.name", "metadata.name is required")
        return
    api = str(obj.get("apiVersion", ""))
    spec = doc.mapping("spec", obj.get("spec"))
    if kind == "ResourceFlavor":
        st.flavors[name] = q.flavor(doc, spec)
    elif kind == "Cohort":
        if "parent" in spec:  # no Kueue version has it: the API server refuses it (kubectl's strict validation)
            doc.fail("spec.parent", 'unknown field "spec.parent": a Cohort names its parent in spec.parentName')
        st.cohorts[name] = s.CohortSpec(
            name,
            reference(doc, "spec.parentName", spec.get("parentName")),
            q.groups(doc, spec.get("resourceGroups")),
            q.weight(doc, spec),
        )
    elif kind == "ClusterQueue":
        st.cluster_queues[name] = q.cluster_queue(doc, spec, api)
    elif kind == "LocalQueue":
        ns = str(meta.get("namespace") or "default")
        cq = spec.get("clusterQueue")
        if not cq:
            doc.fail("spec.clusterQueue", "spec.clusterQueue is required")
            return
        consumed, last_update = consumed_resources(doc, doc.mapping("status", obj.get("status")))
        st.local_queues[f"{ns}/{name}"] = s.LocalQueueSpec(
            ns, name, str(cq), choice(doc, "spec.stopPolicy", spec.get("stopPolicy"), q.STOP_POLICIES, "None"),
            q.weight(doc, spec), consumed, last_update,
        )  # fmt: skip
    elif kind in ("WorkloadPriorityClass", "PriorityClass"):
        group = KUEUE_GROUP if kind == "WorkloadPriorityClass" else "scheduling.k8s.io"
        st.priority_classes[(group, name)] = integer(
            doc, "value", obj.get("value", 0), low=-MAX_INT32 - 1, high=MAX_INT32, expected=PRIORITY
        )
    elif kind == "Workload":
        st.workloads.append((doc, obj, index))
    elif kind == "Namespace":
        st.namespaces[name] = s.NamespaceSpec(name, doc.pairs("metadata.labels", meta.get("labels")))
    elif kind == "Configuration":
        st.config = read_configuration(doc, obj)
    elif kind == "ResourceClaimTemplate":
        st.claim_templates[(str(meta.get("namespace") or "default"), name)] = doc.mapping("spec.spec", spec.get("spec"))
    elif kind in _DRA_CONTEXT:
        pass  # what the scheduler allocates from; Kueue's quota reads templates and the mappings only
    else:
        doc.fail("kind", f"unknown kind {kind!r} (the twin reads Kueue objects, Namespaces and Configuration)")


_DRA_CONTEXT = ("DeviceClass", "ResourceClaim", "ResourceSlice")


def _dra(
    st: _Stream, doc: Doc, ns: str, raw: list[tuple[str, dict[str, Any]]], pod_sets: tuple[s.PodSetSpec, ...]
) -> tuple[tuple[s.PodSetSpec, ...], str]:
    """The pod sets with their claims counted as Kueue counts them, or Kueue's refusal (apis/claims.py)."""
    raw_sets = [ps for _, ps in raw]
    if claims.uses_named_claims(raw_sets):
        return pod_sets, claims.NAMED_CLAIMS
    mappings = dict(st.config.device_class_mappings)
    out = []
    for i, (ps, spec) in enumerate(zip(raw_sets, pod_sets, strict=True)):
        counted = claims.claim_requests(
            doc, i, pod_set=ps, namespace=ns, templates=st.claim_templates, mappings=mappings
        )
        if counted.error:
            return pod_sets, counted.error
        requests = dict(spec.requests)
        for resource, qty in counted.requests:
            requests[resource] = requests.get(resource, 0) + qty
        out.append(replace(spec, requests=tuple(sorted(requests.items()))))
    return tuple(out), ""


def _workload(st: _Stream, doc: Doc, obj: dict[str, Any], index: int) -> s.WorkloadSpec | None:
    meta = doc.mapping("metadata", obj.get("metadata"))
    spec = doc.mapping("spec", obj.get("spec"))
    ns = str(meta.get("namespace") or "default")
    doc.name = f"{ns}/{doc.name}"
    queue = spec.get("queueName")
    status = doc.mapping("status", obj.get("status"))
    admission_raw = doc.mapping("status.admission", status.get("admission"))
    if not queue and not admission_raw:
        doc.fail("spec.queueName", "spec.queueName is required")
        return None
    raw_sets = doc.mappings("spec.podSets", spec.get("podSets"))
    pod_sets = tuple(_pod_set(doc, path, ps) for path, ps in raw_sets)
    if not pod_sets:
        doc.fail("spec.podSets", "at least one pod set is required")
        return None
    pod_sets, dra_error = _dra(st, doc, ns, raw_sets, pod_sets)
    priority = _priority(st, doc, spec, meta)
    created = timestamp(doc, "metadata.creationTimestamp", meta.get("creationTimestamp"), index)
    admission = None
    if admission_raw:
        path = "status.admission.podSetAssignments"
        admission = s.AdmissionSpec(
            str(admission_raw.get("clusterQueue", "")),
            tuple(
                s.PodSetAssignmentSpec(
                    str(a.get("name", "main")),
                    doc.pairs(f"{apath}.flavors", a.get("flavors")),
                    integer(doc, f"{apath}.count", a.get("count", _count_of(pod_sets, a)), **POD_COUNT),
                )
                for apath, a in doc.mappings(path, admission_raw.get("podSetAssignments"))
            ),
        )
    if st.config.gate("ReclaimablePods"):
        pod_sets, admission = _after_reclaim(doc, status, pod_sets, admission)
    labels = doc.mapping("metadata.labels", meta.get("labels"))
    return s.WorkloadSpec(
        ns, str(meta.get("name")), str(queue or ""), pod_sets, priority, created,
        str(meta.get("uid", "")), admission, boolean(doc, "spec.active", spec.get("active", True)),
        _reserved_at(doc, status) if admission else 0,
        str(labels.get("kueue.x-k8s.io/job-uid", "")), dra_error,
    )  # fmt: skip


def _after_reclaim(
    doc: Doc, status: dict[str, Any], pod_sets: tuple[s.PodSetSpec, ...], admission: s.AdmissionSpec | None
) -> tuple[tuple[s.PodSetSpec, ...], s.AdmissionSpec | None]:
    """``status.reclaimablePods`` (ReclaimablePods gate): pods that finished for good no longer
    count, pending or admitted (Kueue's ``podSetsCountsAfterReclaim``; an admitted pod set is
    scaled down only when fewer pods are left than were admitted)."""
    reclaim: dict[str, int] = {}
    for rpath, item in doc.mappings("status.reclaimablePods", status.get("reclaimablePods")):
        reclaim[str(item.get("name", ""))] = integer(doc, f"{rpath}.count", item.get("count", 0), **POD_COUNT)
    if not reclaim:
        return pod_sets, admission
    left = {ps.name: ps.count - min(reclaim.get(ps.name, 0), ps.count) for ps in pod_sets}
    if admission is not None:
        assignments = tuple(
            replace(a, count=min(a.count, left.get(a.name, a.count))) for a in admission.pod_set_assignments
        )
        admission = replace(admission, pod_set_assignments=assignments)
    reduced = []
    for ps in pod_sets:
        count = left[ps.name]
        min_count = None if ps.min_count is None or count == 0 else min(ps.min_count, count)
        reduced.append(replace(ps, count=count, min_count=min_count))
    return tuple(reduced), admission


def _reserved_at(doc: Doc, status: dict[str, Any]) -> int:
    """QuotaReserved's lastTransitionTime: orders victims by \"admitted more recently\"."""
    for path, cond in doc.mappings("status.conditions", status.get("conditions")):
        if cond.get("type") == "QuotaReserved" and cond.get("status") == "True":
            return timestamp(doc, f"{path}.lastTransitionTime", cond.get("lastTransitionTime"), 0)
    return 0


def _count_of(pod_sets: tuple[s.PodSetSpec, ...], assignment: dict[str, Any]) -> int:
    name = assignment.get("name", "main")
    return next((ps.count for ps in pod_sets if ps.name == name), 1)


def _priority(st: _Stream, doc: Doc, spec: dict[str, Any], meta: dict[str, Any]) -> int:
    if spec.get("priority") is not None:
        value = integer(doc, "spec.priority", spec["priority"], low=-MAX_INT32 - 1, high=MAX_INT32, expected=PRIORITY)
    else:
        ref = doc.mapping("spec.priorityClassRef", spec.get("priorityClassRef"))
        name, group = ref.get("name"), ref.get("group", KUEUE_GROUP)
        if not name and spec.get("priorityClassName"):  # v1beta1
            name = spec["priorityClassName"]
            source = str(spec.get("priorityClassSource", ""))
            group = "scheduling.k8s.io" if source.startswith("scheduling.k8s.io") else KUEUE_GROUP
        value = st.priority_classes.get((str(group), str(name)), 0) if name else 0
    boost = doc.mapping("metadata.annotations", meta.get("annotations")).get(PRIORITY_BOOST)
    return value + (integer(doc, f"metadata.annotations[{PRIORITY_BOOST}]", boost) if boost is not None else 0)


def _pod_set(doc: Doc, path: str, raw: dict[str, Any]) -> s.PodSetSpec:
    template = doc.mapping(f"{path}.template", raw.get("template"))
    pod = doc.mapping(f"{path}.template.spec", template.get("spec"))
    at = f"{path}.template.spec"
    requests: dict[str, int] = {}
    for cpath, container in doc.mappings(f"{at}.containers", pod.get("containers")):
        for res, qty in _container_requests(doc, cpath, container).items():
            requests[res] = requests.get(res, 0) + qty
    for cpath, container in doc.mappings(f"{at}.initContainers", pod.get("initContainers")):
        for res, qty in _container_requests(doc, cpath, container).items():
            requests[res] = max(requests.get(res, 0), qty)
    for res, qty in doc.mapping(f"{at}.overhead", pod.get("overhead")).items():
        requests[str(res)] = requests.get(str(res), 0) + (quantity(doc, f"{at}.overhead[{res}]", qty, str(res)) or 0)
    terms = []
    apath = f"{at}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    affinity = doc.mapping(f"{at}.affinity", pod.get("affinity"))
    node_affinity = doc.mapping(f"{at}.affinity.nodeAffinity", affinity.get("nodeAffinity"))
    required = doc.mapping(apath, node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    for tpath, term in doc.mappings(f"{apath}.nodeSelectorTerms", required.get("nodeSelectorTerms")):
        terms.append(
            tuple(
                q.requirement(doc, epath, e, q.NODE_OPERATORS)
                for epath, e in doc.mappings(f"{tpath}.matchExpressions", term.get("matchExpressions"))
            )
        )
    count = integer(doc, f"{path}.count", raw.get("count", 1), **POD_COUNT)
    min_count = raw.get("minCount")
    if min_count is not None:  # Kueue's CRD: 1 <= minCount <= count
        min_count = integer(
            doc, f"{path}.minCount", min_count, low=1, high=max(1, count),
            expected=f"a minCount between 1 and the pod set's count ({count})",
        )  # fmt: skip
    return s.PodSetSpec(
        name=str(raw.get("name", "main")),
        count=count,
        requests=tuple(sorted(requests.items())),
        min_count=min_count,
        node_selector=doc.pairs(f"{at}.nodeSelector", pod.get("nodeSelector")),
        tolerations=q.tolerations(doc, f"{at}.tolerations", pod.get("tolerations")),
        affinity_terms=tuple(terms),
    )


def _container_requests(doc: Doc, path: str, container: dict[str, Any]) -> dict[str, int]:
    resources = doc.mapping(f"{path}.resources", container.get("resources"))
    merged = dict(doc.mapping(f"{path}.resources.limits", resources.get("limits")))
    merged.update(doc.mapping(f"{path}.resources.requests", resources.get("requests")))  # limits stand in
    return {str(r): quantity(doc, f"{path}.resources.requests[{r}]", q, str(r)) or 0 for r, q in merged.items()}


__all__ = ["load_documents", "located", "parse_cluster", "parse_objects"]


def parse_objects(objects: Iterable[Any], source: str) -> s.ClusterSpec:
    """Kubernetes objects already in memory (as ``gpufleet render`` builds them) into one
    ``ClusterSpec``, as ``parse_cluster`` reads them from YAML; problems name ``source`` and the
    object's position (1-based) instead of a line."""
    st = _Stream()
    index = 0
    for position, obj in enumerate(objects, start=1):
        for item in _flatten(st, obj, source, position):
            _parse_object(st, item, source, position, index)
            index += 1
    return _cluster(st)
