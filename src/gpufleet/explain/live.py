"""The live cluster's objects as the twin's input, and the small facts read straight off them.

Kueue's objects come as the API server returns them (plain dicts). Not all of them are admission
state: a Finished Workload still carries ``status.admission`` but holds no quota, and a pending
Workload whose LocalQueue is gone cannot queue. Those are left out of the twin's input and named,
so one odd object elsewhere in the cluster never stops an answer about another.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpufleet.errors import InputError
from gpufleet.twin import Twin
from gpufleet.twin.apis.objects import parse_objects
from gpufleet.twin.apis.specs import ClusterQueueSpec, ClusterSpec, WorkloadSpec

Obj = dict[str, Any]
SOURCE = "the live cluster"
TEAM_LABEL = "gpufleet.io/team"
MAX_RETRIES = 64


@dataclass(frozen=True)
class Skipped:
    """An object left out of the twin's input, and why (PascalCase reason, human message)."""

    workload: str
    reason: str
    message: str


@dataclass(frozen=True)
class TwinInput:
    """The twin built on the live objects, the specs it read, and what was left out."""

    twin: Twin
    spec: ClusterSpec
    skipped: tuple[Skipped, ...] = field(default=())


def key_of(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def condition(obj: Obj, kind: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def is_true(obj: Obj, kind: str) -> bool:
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def workload_state(wl: Obj) -> str:
    """Finished, Admitted, QuotaReserved (waiting for admission checks), Deactivated or Pending."""
    if is_true(wl, "Finished"):
        return "Finished"
    if is_true(wl, "QuotaReserved") and (wl.get("status") or {}).get("admission"):
        return "Admitted" if is_true(wl, "Admitted") else "QuotaReserved"
    if (wl.get("spec") or {}).get("active") is False:
        return "Deactivated"
    return "Pending"


def owner(wl: Obj) -> tuple[str, str] | None:
    """The kind and name of the object Kueue made the Workload for: its first ownerReference that is
    not a Pod. A job integration (a Job, a JobSet, a RayJob...) sets one reference, its controller; a
    pod group's Workload is owned by each of its pods, none of them the job; one written directly has
    none."""
    for ref in (wl.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") and ref.get("name") and ref.get("kind") != "Pod":
            return str(ref["kind"]), str(ref["name"])
    return None


def of_kind(objects: Iterable[Obj], kind: str) -> list[Obj]:
    return [o for o in objects if o.get("kind") == kind]


def find_workload(objects: Sequence[Obj], namespace: str, name: str) -> Obj:
    """The Workload ``namespace/name``, or the one an owner of that name owns (a Job, a JobSet...);
    an InputError otherwise."""
    workloads = [w for w in of_kind(objects, "Workload") if (w.get("metadata") or {}).get("namespace") == namespace]
    for wl in workloads:
        if wl["metadata"].get("name") == name:
            return wl
    owned = [(w, o[0]) for w in workloads if (o := owner(w)) is not None and o[1] == name]
    if len(owned) == 1:
        return owned[0][0]
    if owned:
        names = ", ".join(sorted(str(w["metadata"]["name"]) for w, _ in owned))
        kinds = " or ".join(sorted({k for _, k in owned}))
        raise InputError.one(f"{kinds} {namespace}/{name} owns several Workloads ({names}); name one", path=name)
    raise InputError.one(
        f"no Workload {namespace}/{name} and no Job of that name owning one, nor a JobSet, RayJob or other "
        "owner (Kueue creates a Workload only for an object with a kueue.x-k8s.io/queue-name label)",
        path=f"{namespace}/{name}",
    )


def _twin_objects(objects: Sequence[Obj]) -> tuple[list[Obj], list[Skipped]]:
    """Drop what holds no quota and cannot queue: Finished Workloads, pending ones without a LocalQueue."""
    queues = {key_of(q) for q in of_kind(objects, "LocalQueue")}
    kept: list[Obj] = []
    skipped: list[Skipped] = []
    for obj in objects:
        if obj.get("kind") != "Workload":
            kept.append(obj)
            continue
        key, state = key_of(obj), workload_state(obj)
        queue = f"{obj['metadata'].get('namespace')}/{(obj.get('spec') or {}).get('queueName')}"
        if state == "Finished":
            continue  # its quota is released; it is history, not admission state
        if state in ("Pending", "Deactivated") and queue not in queues:
            skipped.append(Skipped(key, "LocalQueueNotFound", f"its LocalQueue {queue} does not exist"))
            continue
        kept.append(obj)
    return kept, skipped


def build_twin(objects: Sequence[Obj], configuration: Obj | None = None) -> TwinInput:
    """The twin on the live objects. A Workload the twin refuses across objects (admitted to a flavor
    its ClusterQueue no longer defines, say) is left out and named instead of failing the answer."""
    kept, skipped = _twin_objects(objects)
    extra = [configuration] if configuration else []
    for _ in range(MAX_RETRIES):
        spec = parse_objects([*kept, *extra], SOURCE)
        try:
            return TwinInput(Twin(spec), spec, tuple(skipped))
        except InputError as exc:
            bad = {p.path.removeprefix("Workload/").split(".", 1)[0]: p.message for p in exc.problems}
            bad = {k: m for k, m in bad.items() if k and any(key_of(o) == k for o in of_kind(kept, "Workload"))}
            if not bad:
                raise
            skipped += [Skipped(k, "TwinCannotAdmit", m) for k, m in sorted(bad.items())]
            kept = [o for o in kept if not (o.get("kind") == "Workload" and key_of(o) in bad)]
    raise InputError.one("too many Workloads the twin cannot read; see the problems above", file=SOURCE)


def fresh_twin(spec: ClusterSpec) -> Twin:
    """Another twin on the same specs (each what-if trial starts from the cluster as it is)."""
    return Twin(spec)


def with_cluster_queue(spec: ClusterSpec, cq: ClusterQueueSpec) -> ClusterSpec:
    return replace(spec, cluster_queues={**spec.cluster_queues, cq.name: cq})


def workload_spec(spec: ClusterSpec, key: str) -> WorkloadSpec | None:
    return next((w for w in spec.workloads if w.key == key), None)


def cluster_queue_of(spec: ClusterSpec, wl: WorkloadSpec) -> str:
    if wl.admission is not None:
        return wl.admission.cluster_queue
    lq = spec.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
    return lq.cluster_queue if lq else ""


def root_of(spec: ClusterSpec, cq_name: str) -> str:
    """The top of a ClusterQueue's cohort tree (the queue itself when it has no cohort)."""
    cq = spec.cluster_queues.get(cq_name)
    node = cq.cohort if cq else None
    if node is None:
        return f"queue/{cq_name}"
    seen: set[str] = set()
    while node not in seen:
        seen.add(node)
        parent = spec.cohorts[node].parent if node in spec.cohorts else None
        if parent is None:
            break
        node = parent
    return f"cohort/{node}"


def requests(spec: ClusterSpec, wl: WorkloadSpec) -> dict[str, int]:
    """What a Workload asks for in all (pod count × per-pod request), for the resources quota counts."""
    out: dict[str, int] = {}
    for ps in wl.pod_sets:
        for resource, per_pod in ps.requests:
            if per_pod and spec.config.counts(resource):
                out[resource] = out.get(resource, 0) + per_pod * ps.count
    return out


def usage(spec: ClusterSpec, wl: WorkloadSpec) -> dict[str, int]:
    """What an admitted Workload holds, as ``flavor/resource`` → amount (Kueue's integer units)."""
    out: dict[str, int] = {}
    if wl.admission is None:
        return out
    assigned = {a.name: a for a in wl.admission.pod_set_assignments}
    for ps in wl.pod_sets:
        a = assigned.get(ps.name)
        if a is None:
            continue
        flavors = dict(a.flavors)
        for resource, per_pod in ps.requests:
            if per_pod and resource in flavors and spec.config.counts(resource):
                fr = f"{flavors[resource]}/{resource}"
                out[fr] = out.get(fr, 0) + per_pod * a.count
    return out


def quotas(cq: ClusterQueueSpec) -> dict[str, tuple[int, int | None]]:
    """``flavor/resource`` → (nominal quota, borrowing limit or None for unlimited)."""
    return {
        f"{fq.flavor}/{rq.resource}": (rq.nominal, rq.borrowing_limit)
        for group in cq.resource_groups
        for fq in group.flavors
        for rq in fq.resources
    }


def team_of(objects: Sequence[Obj], cq_name: str) -> str:
    """The team a ClusterQueue serves: gpufleet's team label, else the queue's own name."""
    for cq in of_kind(objects, "ClusterQueue"):
        if cq["metadata"].get("name") == cq_name:
            return str(((cq["metadata"].get("labels") or {}).get(TEAM_LABEL)) or cq_name)
    return cq_name
