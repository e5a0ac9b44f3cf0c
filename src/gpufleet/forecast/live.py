"""The live cluster's state as a paused simulation: the forecast's input on a real cluster.

The simulator runs a fleet policy's rendered Kueue objects and node pools, so the live path runs
the policy the cluster was rendered from (``--policy``), and takes from the live objects (plain
dicts, as the API server returns them) what only the cluster knows: which Workloads hold quota and
since when, which wait and since when, what each asks for and at which priority. Each becomes a
job of a trace whose runtime is unknown (``simulated.UNKNOWN_S``, drawn afresh by the forecast), and
the trace is replayed to *now* through the queue world, as ``simulated`` replays a simulated run:

- a Workload holding quota enters at its admission (``QuotaReserved``'s transition time), so at
  *now* it has run as long as it has on the cluster, and the admissions come in the cluster's order;
  where its pods started later than that (Kueue's ``PodsReady``: ``pods_started_late``), its runtime
  is drawn from its pods' start, and the replay runs it that much longer;
- the waiting Workloads all enter together at *now* (or a second after the last admission, if that
  is later), so the replay cannot hand them quota that finished Workloads, absent from the listing,
  held when they arrived, and one it admits at once has run nothing by *now*;
  each keeps its place in Kueue's queue (its creation, or its eviction for a readiness timeout:
  ``queue_order``), which the replay's queue orders by, not by the entry. Quota freed just before
  *now* then goes where the real Kueue gives it, by priority and queue order: entered one a second
  in queue order, the first (a low-priority Workload on the testbed) took it ahead of two
  high-priority ones. Their wait so far is the cluster's, not the replay's;
- a waiting Workload Kueue keeps out of its queue while it waits out a requeue backoff (evicted for
  its pods' readiness or by an admission check: ``Requeued`` False) enters at its
  ``status.requeueState.requeueAt``, as Kueue's workload controller requeues it then
  (``requeue_entry``); one kept out for another reason (a stopped or missing queue) is left out,
  with Kueue's reason, since nothing in the listing says when it returns;
- every Workload keeps Kueue's count of its evictions for its pods' readiness
  (``status.requeueState.count``: ``requeue_count``), so where the replay evicts it again it backs off
  as Kueue does after that many, ``base · 2^count``, not as after a first eviction.

The replay is then checked against the cluster: a waiting Workload the replay admits at once, or
one holding quota the replay does not admit, means the policy and the cluster disagree, and that
Workload's answer says so instead of a figure.

Beside the Workloads the forecast reads what their owners declared of their runtimes (the owners among
the objects, ``declared``), the submissions the ledger and the cluster saw (arrivals, ``submissions``),
and *now* from the API server, against which the ledger's clock is checked (``clock``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from gpufleet.explain.live import condition, is_true, owner
from gpufleet.forecast.answer import document
from gpufleet.forecast.clock import LOCAL, ledger_skew
from gpufleet.forecast.declared import MALFORMED, declared_of
from gpufleet.forecast.estimate import DONE, WAITING, Forecast, Moment, Report, Settings, forecast, ran_at_least
from gpufleet.forecast.estimate import shape_of as sim_shape
from gpufleet.forecast.runtimes import Declared, RuntimeHistory
from gpufleet.forecast.simulated import UNKNOWN_S
from gpufleet.forecast.submissions import GPU_SHARED, MIG, live_arrivals
from gpufleet.ledger.records import Record
from gpufleet.policy import Fleet
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.queue_world import QueueWorld
from gpufleet.trace.job import Job, JobKind

Obj = dict[str, Any]
GPU = "nvidia.com/gpu"
#: Seconds from a Workload's pods' start to Kueue's ``PodsReady=True``: measured on the testbed (the
#: ledger's ``started``, the first pod's start, against the condition's time: docs/forecast-notebook.md, "On
#: the testbed, as it was measured"), as ``FINISH_LATENCY_S`` is Kueue's second after the pods' end.
PODS_READY_LATENCY_S = 1
#: Evicted reasons after which Kueue queues a Workload by its eviction time, not its creation
#: (``workloadevict.IsEvictedByPodsReadyTimeout``, ``IsEvictedByAdmissionCheck``). A Workload evicted
#: for one of them has ``Requeued`` False and waits out a backoff: Kueue's queue keeps it among the
#: inadmissible (``backoffWaitingTimeExpired``) until the workload controller sets ``Requeued`` True at
#: ``status.requeueState.requeueAt`` (v0.19.2's ``workload_controller.go``)
EVICTED_REQUEUED = ("PodsReadyTimeout", "AdmissionCheck")
NO_LEDGER = "too little history: no ledger given (--ledger), so no runtime is known"
#: Seconds within which a Workload's end may not have reached Kueue's queues yet: its requeue batch
#: (a second) and a scheduling cycle, with room for the API server's and the controllers' latency
FRESH_S = 5


@dataclass(frozen=True)
class LiveWorkload:
    """One Workload of the cluster as a job of the replay: ``job.submit_s`` is its entry into the
    replay (seconds from ``LiveState.origin``); ``since`` its admission (holding) or creation (waiting)."""

    workload: str  # namespace/name of the Workload
    job: Job
    holding: bool
    since: datetime
    uid: str = ""
    created: datetime | None = None  # the Workload's creation: its submission
    declared: Declared | None = None  # what its owner declared of its runtime (``declared``)
    malformed: str = ""  # a declaration that does not parse: what and where
    late_start_s: int = 0  # holding: seconds from its admission to its pods' start (``pods_started_late``)
    order_s: int = 0  # its place in Kueue's queue, in the replay's seconds (waiting: not its entry, ``job.submit_s``)
    requeue_at: datetime | None = None  # waiting out Kueue's requeue backoff until then (``requeue_entry``)
    requeues: int = 0  # Kueue's count of its evictions for its pods' readiness (``requeue_count``)

    @property
    def key(self) -> str:
        return f"{self.job.namespace}/{self.job.job_id}"


@dataclass(frozen=True)
class LiveState:
    """The replay's input: the workloads, the replay's origin and *now* in its seconds, and the
    Workloads left out (key, PascalCase reason, message)."""

    workloads: tuple[LiveWorkload, ...]
    origin: datetime
    now: datetime
    at: int
    skipped: tuple[tuple[str, str, str], ...]
    now_from: str = LOCAL  # whose clock *now* is (``clock.cluster_now``)
    finished: tuple[datetime, str] | None = None  # the latest Workload to finish: when, and which


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _count(value: object) -> int:
    text = str(value)
    return int(text) if text.isdigit() else 0


def _ask(pod_set: Obj) -> tuple[str, int]:
    """The GPU resource and count one pod of the pod set asks for ("", 0: none)."""
    containers = ((pod_set.get("template") or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in sorted(asked.items()):
            if name in (GPU, GPU_SHARED) or name.startswith(MIG):
                return name, _count(value)
    return "", 0


def _gpu_pods(pod_sets: list[Obj]) -> tuple[str, int, int, str]:
    """The GPU pods of a Workload's pod sets as the replay's one kind of pod: the resource, the count
    per pod and the pods; or why they are not (the last field). Pod sets that ask alike per pod (a
    PyTorchJob's master and workers, a JobSet's replicated jobs) are one: Kueue's quota sums them, and
    the replay places the policy's nodes, not a pod set's own selectors. Pod sets asking differently
    are not modelled, nor a Workload asking for no GPU."""
    asking = [(p, *_ask(p)) for p in pod_sets]
    asking = [(p, resource, count) for p, resource, count in asking if count]
    asks = sorted({(resource, count) for _, resource, count in asking})
    if not asks:
        return "", 0, 0, "no pod set asks for GPUs; the replay models GPU workloads"
    if len(asks) > 1:
        alike = ", ".join(f"{count} {resource}" for resource, count in asks)
        return "", 0, 0, f"its {len(asking)} GPU pod sets ask differently per pod ({alike}); the replay models one ask"
    ((resource, count),) = asks
    return resource, count, sum(_count(p.get("count", 1)) for p, _, _ in asking), ""


def pods_started_late(wl: Obj, reserved: datetime, now: datetime) -> int:
    """Seconds from a holding Workload's admission to its pods' start, by Kueue's ``PodsReady``
    condition: its transition to True, less ``PODS_READY_LATENCY_S``; while it is False, the pods have
    not all started, so no earlier than *now*. The replay starts the pods at the admission, where the
    cluster may have kept them pending (a preempted Workload's pods hold their nodes for their grace
    period; a gang placed in steps): counted from the admission, a running job's elapsed time was too
    long, and its draw conditioned on it (``beyond history`` past its level's runs) too long as well.
    0 where Kueue sets no such condition (without waitForPodsReady): from the admission, as before."""
    ready = condition(wl, "PodsReady")
    if ready is None:
        return 0
    if ready.get("status") != "True":
        return max(int((now - reserved).total_seconds()), 0)
    started = parse_time(ready.get("lastTransitionTime"))
    if started is None:
        return 0
    return max(int((started - reserved).total_seconds()) - PODS_READY_LATENCY_S, 0)


def queue_order(wl: Obj, created: datetime) -> datetime:
    """Where a waiting Workload stands in its queue among those of its priority: Kueue v0.19.2's
    ``Ordering.GetQueueOrderTimestamp`` with its default requeuing timestamp (Eviction; the policy
    renders no other): the eviction's time where the Workload was evicted for its pods' readiness
    timeout or by an admission check, else its creation. A Workload preempted keeps its creation's
    place: it waits ahead of those created after it, though it was requeued after them (the ``Requeued``
    condition's time, which the replay ordered by before: on the testbed it put a preempted Workload
    behind a younger one the real Kueue admitted after it, one forecast too late and the other too
    early at every probe while both waited)."""
    evicted = condition(wl, "Evicted")
    if evicted is not None and evicted.get("status") == "True" and evicted.get("reason") in EVICTED_REQUEUED:
        return parse_time(evicted.get("lastTransitionTime")) or created
    return created


def requeue_count(wl: Obj) -> int:
    """How many times Kueue evicted the Workload for its pods' readiness: ``status.requeueState.count``,
    which v0.19.2's ``workload.UpdateRequeueState`` raises at each such eviction and sizes the next
    backoff by (``60 s · 2^(count-1)``, capped), and which stays while the Workload is admitted again.
    An admission check's retry sets ``requeueAt`` without raising it. Absent or not a count: 0."""
    count = ((wl.get("status") or {}).get("requeueState") or {}).get("count")
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0


def requeue_entry(wl: Obj, now: datetime) -> tuple[datetime | None, str, str]:
    """When a waiting Workload is in Kueue's queue: *now* where its ``Requeued`` condition is absent
    or True; where it is False after an eviction for its pods' readiness or by an admission check,
    its ``status.requeueState.requeueAt`` (*now* once that has passed, or without one: the controller
    requeues it at once). Entered at *now*, a Workload in its backoff could be admitted in the replay
    before Kueue even looks at it again, taking quota the real Kueue gives to others meanwhile. None
    where Kueue keeps it out for another reason (its queue stopped or missing: ``Inadmissible``), with
    Kueue's reason and a message: nothing in the listing says when it returns."""
    requeued = condition(wl, "Requeued")
    if requeued is None or requeued.get("status") != "False":
        return now, "", ""
    reason = str(requeued.get("reason") or "")
    if reason in EVICTED_REQUEUED:
        due = parse_time(((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt"))
        return max(due or now, now), "", ""
    said = f" ({requeued.get('message')})" if requeued.get("message") else ""
    return (
        None,
        reason or "NotRequeued",
        (
            f"Kueue keeps it out of its queue (Requeued is False: {reason or 'no reason'}{said}) until that changes, "
            "which the listing does not tell"
        ),
    )


def job_name(wl: Obj) -> str:
    """The replay's job name: the Workload's owner's (a Job, a JobSet...), else the Workload's own."""
    found = owner(wl)
    return found[1] if found is not None else str((wl.get("metadata") or {}).get("name"))


def priority_class(spec: Obj, fleet: Fleet) -> str:
    """The policy's priority class of a Workload's ``spec``: the class it names (v1beta2's
    ``priorityClassRef``, v1beta1's ``priorityClassName``) where the policy gives it the Workload's
    ``priority``, else the policy's class of that value (first by name), else none (the replay's
    default). Kueue orders by the value, and the API server serves v1beta2, where the v1beta1 field
    is absent: read from there alone, every live Workload lost its priority, and the forecast put a
    low-priority Workload first that the real Kueue admitted last."""
    ref = spec.get("priorityClassRef")
    name = str((ref.get("name") if isinstance(ref, dict) else None) or spec.get("priorityClassName") or "")
    value = spec.get("priority")
    values = {p.name: p.value for p in fleet.policy.priorityClasses}
    if not isinstance(value, int) or isinstance(value, bool):
        return name if name in values else ""
    if values.get(name) == value:
        return name
    return next((n for n in sorted(values) if values[n] == value), "")


def _job(wl: Obj, fleet: Fleet, submit_s: int) -> tuple[Job | None, str, str]:
    """The Workload as a trace job (runtime unknown), or None with a reason and a message."""
    meta, spec = wl.get("metadata") or {}, wl.get("spec") or {}
    namespace = str(meta.get("namespace"))
    team = next((t.name for t in fleet.policy.teams if namespace in t.namespaces), None)
    if team is None:
        return None, "NamespaceNotInPolicy", f"namespace {namespace} belongs to no team of the policy"
    resource, count, pods, why = _gpu_pods(spec.get("podSets") or [])
    if why:
        return None, "PodSetsNotModelled", why
    shape: dict[str, Any] = {"gpus": count}
    if resource.startswith(MIG):
        shape["mig_profile"] = resource.removeprefix(MIG)
    elif resource == GPU_SHARED:
        if count != 1:
            return None, "PodSetsNotModelled", f"{count} time-slice replicas per pod; the policy renders one"
        shape = {"gpu_milli": 500}  # one replica: the replay asks what a fraction of a card asks
    job = Job(
        job_id=job_name(wl),
        team=team,
        namespace=namespace,
        submit_s=submit_s,
        duration_s=UNKNOWN_S,
        kind=JobKind.TRAINING,  # the cluster does not say; the history is read without kinds (``Moment.kinds``)
        pods=pods,
        priority_class=priority_class(spec, fleet),
        model=str((meta.get("labels") or {}).get("gpufleet.io/model", "")),
        **shape,
    )
    return job, "", ""


@dataclass(frozen=True)
class _Listed:
    """A Workload of the listing as the replay orders it."""

    order: datetime  # holding: its admission; waiting: its place in Kueue's queue (``queue_order``)
    key: str
    wl: Obj
    since: datetime  # since when it holds quota, or waits (since it last entered the queue)
    enters: datetime  # when it is in Kueue's queue (``requeue_entry``); holding: its admission


def _listing(
    objects: Sequence[Obj], now: datetime
) -> tuple[list[_Listed], list[_Listed], list[tuple[str, str, str]], tuple[datetime, str] | None]:
    """The Workloads holding quota in admission order, those waiting in queue order (the key breaks
    ties: a Job's first Workload is the one replayed), those Kueue keeps out of its queue (key, reason,
    message), and the latest to finish (when, which)."""
    holding: list[_Listed] = []
    waiting: list[_Listed] = []
    skipped: list[tuple[str, str, str]] = []
    finished: tuple[datetime, str] | None = None
    for wl in objects:
        if wl.get("kind") != "Workload":
            continue
        meta = wl.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if is_true(wl, "Finished"):
            ended = parse_time((condition(wl, "Finished") or {}).get("lastTransitionTime"))
            if ended is not None and (finished is None or (ended, key) > finished):
                finished = (ended, key)
            continue
        if (wl.get("spec") or {}).get("active") is False:
            continue
        created = parse_time(meta.get("creationTimestamp")) or now
        if is_true(wl, "QuotaReserved") and (wl.get("status") or {}).get("admission"):
            reserved = parse_time((condition(wl, "QuotaReserved") or {}).get("lastTransitionTime"))
            admitted = min(reserved or created, now)
            holding.append(_Listed(admitted, key, wl, admitted, admitted))
            continue
        enters, reason, message = requeue_entry(wl, now)
        if enters is None:
            skipped.append((key, reason, message))
            continue
        requeued = parse_time((condition(wl, "Requeued") or {}).get("lastTransitionTime"))
        since = min(max(created, requeued or created), now)
        waiting.append(_Listed(min(queue_order(wl, created), now), key, wl, since, enters))
    holding.sort(key=lambda x: (x.order, x.key))
    waiting.sort(key=lambda x: (x.order, x.key))
    return holding, waiting, skipped, finished


def live_state(objects: Sequence[Obj], fleet: Fleet, now: datetime, now_from: str = LOCAL) -> LiveState:
    """The Workloads holding quota and waiting, as the replay's jobs (see the module's docstring);
    their owners among ``objects`` (Jobs, JobSets...) give what they declared (``declared``)."""
    by_name = {
        (o.get("kind"), (o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name")): o
        for o in objects
    }
    holding, waiting, skipped, finished = _listing(objects, now)
    origin = min((x.order for x in holding + waiting), default=now).replace(microsecond=0)
    # the waiting enter at *now* (after the last admission): one the replay admits at once has run
    # nothing; one in Kueue's requeue backoff at its requeue
    now_s = int((now - origin).total_seconds())
    together = max(max((int((x.order - origin).total_seconds()) for x in holding), default=-1) + 1, now_s)
    out: list[LiveWorkload] = []
    replayed: set[str] = set()
    for rank, x in enumerate(holding + waiting):
        is_holding = rank < len(holding)
        at = int((x.order - origin).total_seconds())
        entry = at if is_holding else max(together, math.ceil((x.enters - origin).total_seconds()))
        job, reason, message = _job(x.wl, fleet, entry)
        kind = (owner(x.wl) or (None,))[0]  # the job is named by its owner, else the Workload (``job_name``)
        if job is not None and f"{job.namespace}/{job.job_id}" in replayed:
            reason, message = (
                "JobOwnsSeveral",
                f"{kind or 'Workload'} {job.job_id} owns another Workload already replayed",
            )
            job = None
        if job is None:
            skipped.append((x.key, reason, message))
            continue
        meta = x.wl.get("metadata") or {}
        declared, malformed = declared_of(x.wl, by_name.get((kind, job.namespace, job.job_id)) if kind else None)
        uid, born = str(meta.get("uid", "")), parse_time(meta.get("creationTimestamp"))
        late = pods_started_late(x.wl, x.since, now) if is_holding else 0
        backoff = x.enters if not is_holding and x.enters > now else None
        out.append(
            LiveWorkload(
                x.key, job, is_holding, x.since, uid, born, declared, malformed, late, at, backoff, requeue_count(x.wl)
            )
        )
        replayed.add(f"{job.namespace}/{job.job_id}")
    return LiveState(tuple(out), origin, now, together, tuple(skipped), now_from, finished)


def live_moment(
    state: LiveState, fleet: Fleet, records: Sequence[Record], config: SimulationConfig
) -> tuple[Moment, dict[str, str]]:
    """The replay paused at *now*, the history as of now, and the Workloads the replay does not
    reproduce (key -> why: the policy and the cluster disagree on them)."""
    world = QueueWorld(fleet, [w.job for w in state.workloads], config)
    world.queue_order = {w.key: w.order_s for w in state.workloads if not w.holding}
    for w in state.workloads:  # Kueue's count carries into the replay's next eviction (``requeue_count``)
        if w.requeues and w.key in world.by_key:
            world.by_key[w.key].requeues = w.requeues
    world.advance(state.at)
    differs: dict[str, str] = {}
    for w in state.workloads:
        run = world.by_key.get(w.key)
        if run is None:
            differs[w.key] = "the policy's pools offer nothing it asks for"
        elif w.holding and (run.state in WAITING or run.state in DONE):
            differs[w.key] = "it holds quota on the cluster, but the policy's queues do not admit it in the replay"
        elif not w.holding and run.state not in WAITING:
            admitted = "it waits on the cluster, but the policy's queues admit it at once in the replay"
            differs[w.key] = admitted + _freed(state)
    late = {w.key: w.late_start_s for w in state.workloads if w.late_start_s}
    elapsed = {r.key: ran_at_least(r, state.at) - late.get(r.key, 0) for r in world.runs if r.state not in DONE}
    running = [(sim_shape(r, kinds=False), elapsed[r.key]) for r in world.runs if elapsed.get(r.key, 0) > 0]
    history = RuntimeHistory.from_records(records, state.now, running)
    declared = {w.key: w.declared for w in state.workloads if w.declared is not None}
    return Moment(
        world,
        state.at,
        history,
        live_arrivals(state.now, state.at, [(w.uid, w.created, w.job) for w in state.workloads], fleet, records),
        declared,
        kinds=False,
        late_starts=late,
    ), differs


def _stamp(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def _freed(state: LiveState) -> str:
    """Why the replay may be right to admit a waiting Workload at once: quota freed as the cluster
    was read (a Workload finished within ``FRESH_S``), which Kueue hands out a cycle later; the listing
    cannot tell that from a policy the cluster does not run, so the answer still gives no figure."""
    if state.finished is None:
        return ""
    ended, key = state.finished
    ago = int((state.now - ended).total_seconds())
    if not 0 <= ago <= FRESH_S:
        return ""
    return f" ({key} finished {ago} s before now: Kueue may be admitting it as the cluster was read)"


def forecast_live(
    state: LiveState, fleet: Fleet, records: Sequence[Record], settings: Settings, config: SimulationConfig
) -> Report:
    """Every waiting Workload's forecast, its wait the cluster's; a Workload the replay does not
    reproduce gets no figure and the reason."""
    moment, differs = live_moment(state, fleet, records, config)
    report = forecast(moment, settings)
    skew = ledger_skew(state.now, [(w.uid, w.created) for w in state.workloads], records)
    by_key = {w.key: w for w in state.workloads}
    out: list[Forecast] = []
    for f in report.forecasts:
        live = by_key[f.workload]
        waited = int((state.now - live.since).total_seconds())
        if skew:
            out.append(Forecast(f.workload, f.team, waited, {}, 0, 0, (), skew))
        elif live.malformed:
            out.append(Forecast(f.workload, f.team, waited, {}, 0, 0, (), f"{MALFORMED}: {live.malformed}"))
        elif f.workload in differs:
            out.append(Forecast(f.workload, f.team, waited, {}, 0, 0, (), "the replay differs: " + differs[f.workload]))
        else:
            out.append(replace(f, waited_s=waited))
    for w in state.workloads:
        if not w.holding and w.key in differs and all(f.workload != w.key for f in out):
            reason = "the replay differs: " + differs[w.key]
            waited = int((state.now - w.since).total_seconds())
            out.append(Forecast(w.key, w.job.team, waited, {}, 0, 0, (), reason))
    basis = replace(report.basis, declined=skew) if skew else report.basis
    return Report(basis, tuple(sorted(out, key=lambda f: f.workload)))


def live_document(report: Report, state: LiveState, policy: str, ledger: str | None) -> dict[str, Any]:
    """``--json`` of the live path: the trace path's document, with *now* and the cluster's side."""
    doc = document(report, "", policy, report.forecasts)
    del doc["trace"]
    doc["source"] = "the live cluster"
    doc["now"] = _stamp(state.now)
    doc["nowFrom"] = state.now_from
    doc["ledger"] = ledger
    doc["skipped"] = [{"workload": k, "reason": r, "message": m} for k, r, m in state.skipped]
    doc["malformed"] = [
        {"workload": w.workload, "reason": MALFORMED, "message": w.malformed} for w in state.workloads if w.malformed
    ]  # a waiting one declines; one holding quota is drawn from history instead
    if ledger is None:
        doc["basis"]["declined"] = NO_LEDGER
        for w in doc["workloads"]:
            if (w["declined"] or "").startswith("too little history"):
                w["declined"], w["text"] = NO_LEDGER, f"no estimate: {NO_LEDGER}"
    live = {w.key: w for w in state.workloads}
    for w in doc["workloads"]:
        own = live.get(w["workload"])
        due = own.requeue_at if own is not None else None  # not in Kueue's queue until then (``requeue_entry``)
        w["requeueAt"] = None if due is None else _stamp(due)
        w["requeues"] = own.requeues if own is not None else 0
        notes = [f"waiting out Kueue's requeue backoff until {_stamp(due)}: it re-enters the queue then"] if due else []
        if w["requeues"]:  # why it waited: its pods did not all start in time, once or more
            times = "once" if w["requeues"] == 1 else f"{w['requeues']} times"
            notes.append(f"Kueue evicted it {times} because its pods were not all ready in time: PodsReadyTimeout")
        if notes:
            w["text"] += f" ({'; '.join(notes)})"
    return doc
