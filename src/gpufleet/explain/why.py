"""``gpufleet why``'s core: why a live Workload waits, what holds its quota, and what would let it in.

Values in (the objects the API server returned, Kueue's Configuration), one ``Why`` out. Kueue's own
reason and message come verbatim from the Workload's ``QuotaReserved`` condition; everything else is
the twin's, run on the same objects: the holders of the quota the Workload needs (by ClusterQueue,
borrowed or not), the shortfall, the running Workloads whose ends would admit it, why its
ClusterQueue's preemption policy does not make room, and where the twin and Kueue disagree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpufleet.explain import preemption as pre
from gpufleet.explain.dispatch import Dispatch, dispatch_of
from gpufleet.explain.live import (
    Obj,
    build_twin,
    cluster_queue_of,
    condition,
    find_workload,
    key_of,
    of_kind,
    owner,
    quotas,
    requests,
    root_of,
    team_of,
    usage,
    workload_spec,
    workload_state,
)
from gpufleet.explain.release import EndsSearch, Outcome, alternatives, outcome, search_ends
from gpufleet.explain.verdicts import Disagreement, compare
from gpufleet.twin.apis.specs import ClusterSpec, WorkloadSpec
from gpufleet.twin.results import ClusterQueueStatus

SHORTFALL = re.compile(r"insufficient unused quota for (\S+) in flavor (\S+), (\S+) more needed")


@dataclass(frozen=True)
class Holder:
    """An admitted Workload using quota the pending one needs."""

    workload: str
    cluster_queue: str
    team: str
    priority: int
    uses: dict[str, int]  # flavor/resource -> amount
    borrowing: bool  # its ClusterQueue is above nominal on one of those flavor-resources


@dataclass(frozen=True)
class QueueUse:
    """A ClusterQueue of the cohort tree on the flavor-resources the Workload needs."""

    name: str
    team: str
    nominal: dict[str, int]
    borrowing_limit: dict[str, int | None]
    usage: dict[str, int]
    borrowed: dict[str, int]


@dataclass(frozen=True)
class Shortfall:
    flavor: str
    resource: str
    needed: str  # as Kueue writes the quantity ("2", "500m")


@dataclass(frozen=True)
class Why:
    workload: str
    job: str | None  # the name of its owner (a Job, a JobSet...: ``owner_kind``), where one owns it
    state: str
    cluster_queue: str
    kueue_reason: str
    kueue_message: str
    reason: str  # the answer's PascalCase verdict
    message: str
    priority: int = 0
    requests: dict[str, int] = field(default_factory=dict)
    twin_reason: str = ""
    twin_message: str = ""
    twin_admits_in: int | None = None
    twin_preempts: tuple[str, ...] = ()
    shortfall: tuple[Shortfall, ...] = ()
    holders: tuple[Holder, ...] = ()
    queues: tuple[QueueUse, ...] = ()
    ahead: tuple[str, ...] = ()
    ends: EndsSearch | None = None
    preemption: pre.PreemptionView | None = None
    disagreements: tuple[Disagreement, ...] = ()
    skipped: tuple[str, ...] = ()
    dispatch: Dispatch | None = None  # on a MultiKueue manager: which worker holds it (explain.dispatch)
    owner_kind: str | None = None


def explain(objects: Sequence[Obj], namespace: str, name: str, configuration: Obj | None = None) -> Why:
    """Answer for the Workload ``namespace/name`` (or the one a Job, JobSet... of that name owns)."""
    wl_obj = find_workload(objects, namespace, name)
    key, state = key_of(wl_obj), workload_state(wl_obj)
    kind, job = owner(wl_obj) or (None, None)
    reserved = condition(wl_obj, "QuotaReserved") or {}
    k_reason, k_message = str(reserved.get("reason", "")), str(reserved.get("message", ""))

    def short(cluster_queue: str, reason: str, message: str) -> Why:
        return Why(
            key, job, state, cluster_queue, k_reason, k_message, reason, message, dispatch=dispatch_of(wl_obj),
            owner_kind=kind,
        )  # fmt: skip

    status = wl_obj.get("status") or {}
    if state != "Pending":
        admitted_to = str((status.get("admission") or {}).get("clusterQueue", ""))
        return short(admitted_to, "NotPending", _not_pending(state, admitted_to))
    built = build_twin(objects, configuration)
    skipped = tuple(f"{s.workload}: {s.message}" for s in built.skipped)
    mine = next((s for s in built.skipped if s.workload == key), None)
    wl = workload_spec(built.spec, key)
    if mine is not None or wl is None:
        message = mine.message if mine else "the twin could not read it"
        return short("", mine.reason if mine else "Unreadable", message)
    spec, cq_name = built.spec, cluster_queue_of(built.spec, wl)
    if cq_name not in spec.cluster_queues:
        message = f"its LocalQueue points at ClusterQueue {cq_name}, which does not exist"
        return short(cq_name, "ClusterQueueNotFound", message)
    before = {st.name: st for st in built.twin.statuses()}
    now = outcome(built.twin, key)
    last = next((p for p in built.twin.pending() if p.workload == key), None)
    needed = requests(spec, wl)
    frs = [fr for fr in quotas(spec.cluster_queues[cq_name]) if fr.split("/", 1)[1] in needed]
    holders = _holders(objects, spec, cq_name, frs, before)
    queues = _queues(objects, spec, cq_name, frs, before)
    # the twin's message where it agrees the Workload waits (Kueue's may predate the latest change)
    shortfall = tuple(Shortfall(f, r, n) for r, f, n in SHORTFALL.findall(last.message if last else ""))
    waits = now.admitted_in is None and (last is None or last.reason in ("WaitingForQuota", "Pending"))
    ends = search_ends(spec, key, [h.workload for h in holders]) if waits else None
    cq = spec.cluster_queues[cq_name]
    candidates = [
        pre.Candidate(h.workload, h.cluster_queue, h.priority, _created(spec, h.workload), h.borrowing) for h in holders
    ]
    view = pre.view(
        cq, wl.priority, wl.created, candidates,
        beyond_nominal=_beyond_nominal(cq_name, needed, frs, queues), preempts=now.preempts,
        alts=alternatives(spec, key, cq_name) if waits else [],
    )  # fmt: skip
    disagreements = compare(
        objects, key, kueue=(k_reason, k_message), now=now, last=last, before=before, cluster_queues=list(before)
    )
    reason, message = _verdict(cq_name, now, last, holders, shortfall)
    return Why(
        key, job, state, cq_name, k_reason, k_message, reason, message, priority=wl.priority, requests=needed,
        twin_reason=last.reason if last else "", twin_message=last.message if last else "",
        twin_admits_in=now.admitted_in, twin_preempts=now.preempts, shortfall=shortfall, holders=holders,
        queues=queues, ahead=_ahead(spec, wl, cq_name), ends=ends, preemption=view,
        disagreements=tuple(disagreements), skipped=skipped, dispatch=dispatch_of(wl_obj), owner_kind=kind,
    )  # fmt: skip


def _not_pending(state: str, cq: str) -> str:
    if state == "Finished":
        return "it has finished: it holds no quota and waits for nothing"
    if state == "Deactivated":
        return "spec.active is false: Kueue will not admit it until it is reactivated"
    if state == "QuotaReserved":
        return f"it holds quota in ClusterQueue {cq} and waits for its admission checks"
    return f"it is admitted to ClusterQueue {cq}: it waits for nothing"


def _created(spec: ClusterSpec, key: str) -> int:
    return next((w.created for w in spec.workloads if w.key == key), 0)


def _members(spec: ClusterSpec, cq_name: str) -> list[str]:
    root = root_of(spec, cq_name)
    return sorted(n for n in spec.cluster_queues if root_of(spec, n) == root)


def _holders(
    objects: Sequence[Obj], spec: ClusterSpec, cq_name: str, frs: list[str], before: dict[str, ClusterQueueStatus]
) -> tuple[Holder, ...]:
    members = set(_members(spec, cq_name))
    out = []
    for w in spec.workloads:
        if w.admission is None or w.admission.cluster_queue not in members:
            continue
        held = {fr: n for fr, n in usage(spec, w).items() if fr in frs}
        if not held:
            continue
        owner = w.admission.cluster_queue
        borrowed = before[owner].borrowed if owner in before else {}
        borrowing = any(borrowed.get(fr, 0) > 0 for fr in held)
        out.append(Holder(w.key, owner, team_of(objects, owner), w.priority, held, borrowing))
    # Kueue's own preference among victims: other queues first, lower priority, admitted more recently
    return tuple(sorted(out, key=lambda h: (h.cluster_queue == cq_name, not h.borrowing, h.priority, h.workload)))


def _queues(
    objects: Sequence[Obj], spec: ClusterSpec, cq_name: str, frs: list[str], before: dict[str, ClusterQueueStatus]
) -> tuple[QueueUse, ...]:
    out = []
    for name in _members(spec, cq_name):
        q = quotas(spec.cluster_queues[name])
        st = before.get(name)
        if st is None:
            continue
        mine = [fr for fr in frs if fr in q]
        out.append(
            QueueUse(
                name,
                team_of(objects, name),
                {fr: q[fr][0] for fr in mine},
                {fr: q[fr][1] for fr in mine},
                {fr: st.usage.get(fr, 0) for fr in mine},
                {fr: st.borrowed.get(fr, 0) for fr in mine},
            )
        )
    return tuple(out)


def _beyond_nominal(cq_name: str, needed: dict[str, int], frs: list[str], queues: Sequence[QueueUse]) -> bool:
    """Would the Workload take its ClusterQueue above nominal on every flavor it could use?"""
    own = next((q for q in queues if q.name == cq_name), None)
    if own is None or not frs:
        return False
    return all(own.usage.get(fr, 0) + needed[fr.split("/", 1)[1]] > own.nominal.get(fr, 0) for fr in frs)


def _ahead(spec: ClusterSpec, wl: WorkloadSpec, cq_name: str) -> tuple[str, ...]:
    """Pending Workloads of the same ClusterQueue that Kueue orders first (priority, then age)."""
    out = [
        w.key
        for w in spec.workloads
        if w.admission is None
        and w.key != wl.key
        and w.active
        and cluster_queue_of(spec, w) == cq_name
        and (-w.priority, w.created, w.uid or w.key) < (-wl.priority, wl.created, wl.uid or wl.key)
    ]
    return tuple(out)


def _verdict(
    cq_name: str, now: Outcome, last: object, holders: Sequence[Holder], shortfall: Sequence[Shortfall]
) -> tuple[str, str]:
    if now.admitted_in is not None and now.preempts:
        return (
            "WaitsForPreemptedWorkloads",
            f"its ClusterQueue preempts {', '.join(now.preempts)} for it; the twin admits it in cycle {now.admitted_in}",
        )
    if now.admitted_in is not None:
        return "TwinWouldAdmit", f"on these objects the twin admits it in cycle {now.admitted_in}"
    reason = str(getattr(last, "reason", ""))
    if reason in ("ExceedsMaxQuota", "NoMatchingFlavor", "Misconfigured", "Suspended"):
        return reason, str(getattr(last, "message", ""))
    borrowers = sorted({h.cluster_queue for h in holders if h.borrowing and h.cluster_queue != cq_name})
    short = ", ".join(f"{s.needed} more {s.resource} in flavor {s.flavor}" for s in shortfall)
    need = f"; it needs {short}" if short else ""
    if borrowers:
        return "WaitsBehindBorrowing", f"the quota it needs is borrowed by {', '.join(borrowers)}{need}"
    if holders:
        return "WaitsForQuota", f"the quota it needs is in use{need}"
    return "WaitsInQueue", "nothing holds the quota it needs; it waits for its turn in the queue"


__all__ = ["Holder", "QueueUse", "Shortfall", "Why", "explain", "of_kind"]
