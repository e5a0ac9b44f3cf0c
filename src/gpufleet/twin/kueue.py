"""Kueue v0.19.2: ``cmd/kueue/main.go``, ``pkg/scheduler/scheduler.go``.

The twin: Kueue's admission as a pure object, driven by values and returning values.

Kueue v0.19.2 wires its cache (``pkg/cache/scheduler``), queue manager (``pkg/cache/queue``) and
scheduler (``pkg/scheduler/scheduler.go``) together in ``cmd/kueue/main.go``; ``Twin`` is that
wiring, over ``cache/``, ``queue/``, ``scheduler/``, ``controller/`` and ``clocks.py``.

``Twin`` holds the quota tree, the queues and the admitted workloads. A caller (the CLI, the
event loop of the simulator, a benchmark) adds workloads, runs cycles, finishes workloads, and
reads per-ClusterQueue figures. Without ``clocks`` (Kueue's unit-test world) a cycle is a
function call and time is whatever integer the caller puts in ``WorkloadSpec.created``. With
``clocks`` (``clocks.py``, ``scheduling_loop.py``) cycles run on a virtual millisecond clock: Kueue's
backoff between cycles, a victim's quota held for a release delay, parked workloads woken one
requeue batch after a capacity change; reservations are stamped with the clock's second.

Evictions: by default a victim's quota frees the moment it is preempted (its pods vanish at once,
as Kueue's scheduler tests assume); on Kueue's clocks it frees one release delay later. With ``hold_evicted_quota`` the victim keeps its quota, marked
evicted, until the caller releases it (``evicted_gone``; the simulator: one release delay after the
eviction, when Kueue's job reconciler sees the Job stopped, while the pods may still terminate). Meanwhile Kueue's candidate
order puts evicted workloads first, so a waiting preemptor picks its own victims again and issues
no new evictions.

Two paths a reader can tell apart, by ONE switch: ``Twin(spec, fast=False)`` is the reference
path, Kueue's ``schedule()`` step by step (``scheduler/cycle.py``) with every verdict worked out
afresh; ``fast=True`` (the default) adds the twin's own shortcuts, all in ``fastpath/``: the
verdict memo, plain-Fit plans, the fair-sharing preemption bound, the share cache and, where the
caller also asks for them (``streaks=True``, what the simulator uses), quiet-cycle streaks. Both
give the same cycles, admissions, evictions and reasons (tests/twin/test_paths.py).
``equivalence_hashing`` is Kueue's SchedulingEquivalenceHashing gate (on by default in Kueue
v0.19.2; ``queue/equivalence.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufleet.errors import InputError
from gpufleet.twin import scheduling_loop
from gpufleet.twin.apis.reasons import (
    MISCONFIGURED,
    SUSPENDED,
    cluster_queue_not_found,
    local_queue_stopped,
    preempted_message,
)
from gpufleet.twin.apis.specs import ClusterSpec, WorkloadSpec
from gpufleet.twin.cache.cohort import ClusterQueue, CohortTree
from gpufleet.twin.cache.fair_sharing import FairShare
from gpufleet.twin.cache.resource_node import add_usage, remove_usage
from gpufleet.twin.clocks import Clock, ClockSettings, KueueTime
from gpufleet.twin.controller import pending
from gpufleet.twin.controller.cq_status import StatusWrites
from gpufleet.twin.fastpath.fit_plans import make_plan
from gpufleet.twin.fastpath.preemption_bound import FlatBound
from gpufleet.twin.fastpath.quiet_streaks import run_streak
from gpufleet.twin.fastpath.verdict_memo import VerdictMemo
from gpufleet.twin.loops import Loop
from gpufleet.twin.queue.admission_fairsharing import UsageLedger
from gpufleet.twin.queue.equivalence import EquivalenceClasses
from gpufleet.twin.queue.preemptors import PRIORITIZE_PREEMPTOR_WORKLOADS
from gpufleet.twin.queue.queues import Queues
from gpufleet.twin.results import (
    INADMISSIBLE,
    Admitted,
    ClusterQueueStatus,
    CycleResult,
    Pending,
    Preempted,
)
from gpufleet.twin.scheduler.assignments import Assignments, FreshVerdicts
from gpufleet.twin.scheduler.cycle import Verdict, schedule
from gpufleet.twin.scheduler.flavorassigner import Assignment
from gpufleet.twin.scheduler.preemption.preemption import Preemptor
from gpufleet.twin.workload import NO_USES, Admission, Workload, admission_from_status


class Twin:
    """A deterministic model of Kueue's scheduler over one configuration."""

    def __init__(
        self,
        spec: ClusterSpec,
        *,
        hold_evicted_quota: bool = False,
        fast: bool = True,
        streaks: bool = False,
        equivalence_hashing: bool = True,
        reservations_per_cycle: bool = False,
        clocks: ClockSettings | None = None,
    ) -> None:

        self.spec = spec
        self.hold_evicted_quota = hold_evicted_quota
        self.equivalence_hashing = equivalence_hashing  # Kueue's SchedulingEquivalenceHashing gate
        self.classes = EquivalenceClasses()
        self.fast = fast  # the one switch of every shortcut in fastpath/ (off: the reference path)
        self.streaks = streaks and fast  # fastpath/quiet_streaks.py: one result for a streak of quiet cycles
        self.tree = CohortTree(spec)
        resource_of = [k.resource for k in self.tree.frs.keys]
        self.fair = FairShare(resource_of, cache=fast) if spec.config.fair_sharing else None
        self.preemptor = Preemptor(
            self.tree, self.fair, spec.config.preemption_strategies,
            prioritize_preemptors=spec.config.gate(PRIORITIZE_PREEMPTOR_WORKLOADS), bounded=fast,
            bound=FlatBound if fast else None,
        )  # fmt: skip
        self.assignments = Assignments(
            self.tree,
            spec.flavors,
            self.preemptor,
            fair_sharing=spec.config.fair_sharing,
            plans=make_plan if fast else None,
        )
        self.queues = Queues()
        for name in sorted(self.tree.cluster_queues):
            cq = self.tree.cluster_queues[name]
            self.queues.add_cluster_queue(name, cq.spec.queueing_strategy, _root_key(cq))
        self.queues.set_active([name for name, cq in self.tree.cluster_queues.items() if cq.active])
        self.workloads: dict[str, Workload] = {}
        self.last_status: dict[str, Pending] = {}
        self.held: dict[str, Workload] = {}
        self._ns_match: dict[tuple[str, str], bool] = {}
        self._uses: dict[tuple[tuple[int, int], ...], frozenset[int]] = {}  # Workload.uses by usage, interned
        self.memo: VerdictMemo | FreshVerdicts = (VerdictMemo if fast else FreshVerdicts)(
            self.assignments.assign, also=self.preemptor.forget
        )
        self.cycle = 0
        # Admissions made by the twin happen "after" everything in the input. Kueue writes
        # QuotaReserved's lastTransitionTime in whole seconds and runs its cycles milliseconds apart,
        # so the reservations of one settling share one second and "admitted more recently" falls to
        # the UID among them (CandidatesOrdering): by default the twin stamps its reservations at the
        # second after the latest input timestamp, one second later for each later input (a
        # workload added, finished or gone after construction). The simulator, whose instants are
        # far apart, asks for one millisecond per cycle instead.
        latest = max((max(w.created, w.reserved_at) for w in spec.workloads), default=0)
        self._per_cycle = reservations_per_cycle
        self._epoch = latest if reservations_per_cycle else (latest // 1000 + 1) * 1000
        # Kueue's clocks (clocks.py): None is the unit-test world, where a cycle is a function call,
        # victims free at the end of their cycle and parked workloads wake before the next one.
        if clocks is not None:
            clocks = clocks.for_gates(spec.config.gate("SchedulerLongRequeueInterval"))
        self.clock = Clock((latest // 1000 + 1) * 1000, clocks) if clocks is not None else None
        self.time = (
            KueueTime(self.clock, self.has_heads, self._release_evicted, self.queues.capacity_changed)
            if self.clock is not None
            else None
        )
        self.loop: Loop | None = None  # what ``run(loops=True)`` found repeating
        # AdmissionFairSharing's usage as of the newest timestamp of the input; on Kueue's clocks it
        # is sampled again as the clock passes each sampling interval (``KueueTime.sample``)
        now = max([latest, *(lq.last_update or 0 for lq in spec.local_queues.values())])
        self.afs = self._admission_fair_sharing(now)
        if self.afs is not None and self.time is not None:
            self.time.sample = self.sample_usage
        self._built = False
        for wl in spec.workloads:
            self.add_workload(wl)
        self._built = True
        self.sample_usage(now)
        # On Kueue's clocks, a nested ClusterQueue's status writes wake its tree (controller/cq_status.py)
        self.status_writes = StatusWrites.of(self.tree, self.queues, self.time)

    def _admission_fair_sharing(self, now: int) -> UsageLedger | None:
        """AdmissionFairSharing's ledger, attached to the ClusterQueues it orders; None (nothing
        changes, nothing is computed) when no ClusterQueue uses it."""
        if self.spec.config.admission_fair_sharing is None:
            return None
        ledger = UsageLedger(self.spec, now, [k.resource for k in self.tree.frs.keys])
        return ledger.attach(self.queues, self.tree) if ledger else None

    def sample_usage(self, now: int) -> None:
        """AdmissionFairSharing's sampling up to ``now`` (epoch ms; the hook for a clock): each
        LocalQueue's usage decays towards its admitted usage once per ``usageSamplingInterval``
        elapsed since its last update, and the heaps of the changed ones are rebuilt."""
        if self.afs is not None and self.afs.sample(now):
            self.memo.clear()  # preemption's candidate order reads the usage
            for name in self.afs.cluster_queues:
                self.queues.by_cq[name].rekey()
                self.tree.cluster_queues[name].ordered.clear()

    def _later(self) -> None:
        """An input after construction is a later moment: later reservations get a later second."""
        if self._built and not self._per_cycle and self.clock is None:
            self._epoch += 1000  # with clocks, a later input happens at the clock's now

    # --- inputs ----------------------------------------------------------------------------------
    def add_workload(self, spec: WorkloadSpec) -> Workload:
        """Add a Workload: admitted ones (``spec.admission``) take quota now, others queue."""
        self._later()
        lq = self.spec.local_queues.get(f"{spec.namespace}/{spec.queue_name}")
        key = spec.key
        if key in self.workloads:
            raise InputError.one(f"Workload {key} is defined twice", path=f"Workload/{key}")
        if lq is None and spec.admission is None:
            raise InputError.one(
                f"Workload {key} points at LocalQueue {spec.namespace}/{spec.queue_name}, which does not exist",
                path=f"Workload/{key}.spec.queueName",
            )
        cq_name = spec.admission.cluster_queue if spec.admission else lq.cluster_queue if lq else ""
        equivalence = self.classes.of(spec) if self.equivalence_hashing else None
        if self.spec.config.excluded_prefixes:
            spec = spec.counted(self.spec.config.counts)
        wl = Workload(spec, cq_name)
        wl.equivalence = equivalence
        wl.looks = None if self.spec.config.excluded_prefixes else equivalence  # fastpath/verdict_memo.py's key
        self.workloads[key] = wl
        if spec.admission is not None:
            cq = self.tree.cluster_queues.get(cq_name)
            if cq is None:
                raise InputError.one(
                    f"Workload {spec.key} is admitted to ClusterQueue {cq_name}, which does not exist",
                    path=f"Workload/{spec.key}.status.admission.clusterQueue",
                )
            self._reserve(wl, cq, admission_from_status(wl, cq.name, self.tree.frs), spec.reserved_at)
            return wl
        queue = self.queues.by_cq.get(cq_name)
        if queue is None:
            self.last_status[wl.key] = Pending(
                wl.key, cq_name, MISCONFIGURED, cluster_queue_not_found(cq_name), INADMISSIBLE
            )
        elif spec.dra_error:
            # Kueue's workload controller refuses the claims before the workload reaches a queue (apis/claims.py)
            self.held[wl.key] = wl
            self.last_status[wl.key] = Pending(wl.key, cq_name, MISCONFIGURED, spec.dra_error, INADMISSIBLE)
        elif lq is not None and lq.stop_policy != "None":
            self.held[wl.key] = wl  # a stopped LocalQueue hands nothing to its ClusterQueue
            self.last_status[wl.key] = Pending(
                wl.key, cq_name, SUSPENDED, local_queue_stopped(lq.namespace + "/" + lq.name), INADMISSIBLE
            )
        elif spec.active:
            queue.push(wl)
            if self._built:
                self._status_event(cq_name)
        return wl

    def finish(self, key: str) -> None:
        """A workload completed: release its quota and let parked workloads of its tree retry."""
        self._later()
        wl = self.workloads.pop(key)
        if wl.admission is None:
            self.held.pop(key, None)
            queue = self.queues.by_cq.get(wl.cluster_queue)
            if queue is not None:
                queue.delete(key)
                self._status_event(wl.cluster_queue)
            self.last_status.pop(key, None)
            return
        cq = self.tree.cluster_queues[wl.cluster_queue]
        self._release(wl, cq)
        self._capacity_changed(cq)
        self._status_event(cq.name)

    # --- cycles ----------------------------------------------------------------------------------
    def run_cycle(self, previous: tuple[Pending, ...] | None = None) -> CycleResult:
        """One cycle (``cycle.schedule``), or with ``streaks`` a streak of quiet ones (fastpath/quiet_streaks.py)."""
        if self.streaks:
            return run_streak(self, previous)
        return schedule(self, previous)

    def run(
        self, cycles: int | None = None, *, limit: int = 1000, wait: bool = True,
        until: int | None = None, loops: bool = False,
    ) -> Iterator[CycleResult]:  # fmt: skip
        """Yield ``cycles`` cycles, or (None) cycles until stable: no heads left, or a cycle that
        admitted and preempted nothing, repeated the previous cycle's verdicts and put every head
        back into its heap (``cycle.stable``). The caller may
        read the twin's state between cycles.

        With clocks, a stable run waits for Kueue's timers (``wait``): the cycles that would only
        repeat the stable one until the next timer fires are counted but not run
        (``Clock.repeat_until``), and a loop without heads sleeps until the next timer. ``until``
        (ms): fire no timer due later, so a run that never settles still ends. ``loops``: stop at
        the first state that repeats an earlier one (``self.loop`` says what repeats)."""
        return scheduling_loop.run(self, cycles, limit=limit, wait=wait, until=until, loops=loops)

    def has_heads(self) -> bool:
        """Whether a cycle now would find work (parked workloads of changed trees count)."""
        queues = self.queues
        if queues.dirty_parked():
            return True
        return any(q.has_active() for q in queues.serving)

    # --- Kueue's clocks (clocks.py, scheduling_loop.py) --------------------------------------------------
    def begin_cycle(self) -> None:
        """Before a cycle takes heads: Kueue's timers due by its start fire (scheduling_loop.py)."""
        if self.time is not None:
            self.time.begin()

    def end_cycle(self, productive: bool) -> None:
        """The cycle is over: Kueue's backoff after it (``KeepGoing`` only when it admitted)."""
        if self.clock is not None:
            self.clock.end(productive)

    def quiet_next(self) -> bool:
        """Whether the next cycle starts before any timer fires (a streak may run it as quiet)."""
        return self.time is None or self.time.quiet_next()

    def advance_to(self, t: int) -> None:
        """The caller's time (ms) moved on, as the simulator's instants do; timers due by then
        fire before the next cycle."""
        if self.clock is not None:
            self.clock.advance_to(t)

    # --- what the cycle calls --------------------------------------------------------------------
    def get_assignments(self, wl: Workload, cq: ClusterQueue) -> Verdict:
        """Flavors and preemption targets for a head (``scheduler/assignments.py``; remembered until quota
        changes when the twin has its memo: fastpath/verdict_memo.py)."""
        return self.memo.get(wl, cq)

    def namespace_matches(self, cq: ClusterQueue, wl: Workload) -> bool:
        """The ClusterQueue's namespaceSelector against the namespace's labels (null matches none)."""
        key = (cq.name, wl.spec.namespace)
        found = self._ns_match.get(key)
        if found is None:
            selector = cq.spec.namespace_selector
            ns = self.spec.namespaces.get(wl.spec.namespace)
            labels = dict(ns.labels) if ns is not None else {}
            labels.setdefault("kubernetes.io/metadata.name", wl.spec.namespace)
            found = self._ns_match[key] = selector is not None and selector.matches(labels)
        return found

    def admit(self, wl: Workload, cq: ClusterQueue, assignment: Assignment) -> None:
        admission = assignment.admission
        if admission is None or admission.cluster_queue != cq.name:
            admission = Admission(cq.name, tuple(assignment.pod_sets), tuple(assignment.usage.items()))
            assignment.admission = admission  # an immutable value: the next head with it shares it
        if self._per_cycle:
            at = self._epoch + self.cycle + 1
        elif self.clock is not None:
            at = self.clock.now // 1000 * 1000  # QuotaReserved's lastTransitionTime: whole seconds
        else:
            at = self._epoch
        self._reserve(wl, cq, admission, at)
        self.last_status.pop(wl.key, None)
        self._status_event(cq.name)
        if self.afs is not None and self.afs.charge(wl, admission, at):  # the entry penalty
            self.queues.by_cq[cq.name].rekey()

    def evict(self, wl: Workload, reason: str, preemptor: Workload) -> Preempted | None:
        """Evict a victim: free its quota, requeue it, and wake parked workloads of its tree; or,
        holding evicted quota, only mark it evicted; or, on Kueue's clocks, mark it evicted and
        free it one release delay later (``Clock.release_later``). ``None``: it was already being evicted (Kueue's
        "preemption ongoing"), so nothing new is issued."""
        if wl.evicted:
            return None
        cq = self.tree.cluster_queues[wl.cluster_queue]
        who = f"UID: {preemptor.spec.uid or preemptor.key}"
        if preemptor.spec.job_uid:
            who += f", JobUID: {preemptor.spec.job_uid}"
        message = preempted_message(who, reason, self.path(preemptor.cluster_queue), self.path(cq.name))
        self._status_event(cq.name)  # Kueue writes the victim's Evicted and Preempted conditions now
        if self.hold_evicted_quota:
            cq.mark_evicted(wl, True)  # the caller says when its quota is released
            self.memo.clear()
        elif self.clock is not None:
            cq.mark_evicted(wl, True)
            self.memo.clear()
            self.clock.release_later(wl.key)
        else:
            self._requeue_evicted(wl, cq)
        return Preempted(wl.key, cq.name, preemptor.key, reason, message)

    def evicted_gone(self, key: str) -> None:
        """The caller releases an evicted workload's quota (its Job stopped): it queues again,
        keeping its creation timestamp (Kueue's queue order for preempted workloads)."""
        self._later()
        wl = self.workloads[key]
        if not wl.evicted:
            raise ValueError(f"Workload {key} is not being evicted")
        cq = self.tree.cluster_queues[wl.cluster_queue]
        cq.mark_evicted(wl, False)
        self._requeue_evicted(wl, cq)

    def _release_evicted(self, key: str) -> None:
        """The release timer of a victim fired: Kueue's job reconciler cleared QuotaReserved."""
        wl = self.workloads.get(key)
        if wl is None or not wl.evicted:
            return  # finished meanwhile
        cq = self.tree.cluster_queues[wl.cluster_queue]
        cq.mark_evicted(wl, False)
        self._requeue_evicted(wl, cq)

    def _requeue_evicted(self, wl: Workload, cq: ClusterQueue) -> None:
        self._release(wl, cq)
        self.queues.by_cq[cq.name].push(wl)
        self._capacity_changed(cq)
        self._status_event(cq.name)

    def admitted_record(self, wl: Workload) -> Admitted:
        assert wl.admission is not None
        return Admitted(wl.key, wl.admission.cluster_queue, wl.admission.pod_sets)

    # --- reading the state -----------------------------------------------------------------------
    def path(self, cq_name: str) -> str:
        cq = self.tree.cluster_queues[cq_name]
        return "/" + "/".join(n.name for n in reversed(cq.node.path))

    def status(self, name: str) -> ClusterQueueStatus:
        cq = self.tree.cluster_queues[name]
        node = cq.node
        keys = self.tree.frs.keys
        usage = {str(keys[fr]): node.usage[fr] for fr in node.defined}
        borrowed = {str(keys[fr]): max(0, node.usage[fr] - node.subtree[fr]) for fr in node.defined}
        share = self.fair.drs(node).weighted_share() if self.fair is not None else 0
        return ClusterQueueStatus(name, usage, borrowed, share, len(cq.workloads), len(self.queues.by_cq[name]))

    def statuses(self) -> list[ClusterQueueStatus]:
        return [self.status(name) for name in sorted(self.tree.cluster_queues)]

    def pending(self) -> list[Pending]:
        """Every workload without quota, with its latest verdict (``Pending`` if never considered)."""
        return pending.of(self.queues, self.tree, self.last_status, self.held)

    # --- internals -------------------------------------------------------------------------------
    def _reserve(self, wl: Workload, cq: ClusterQueue, admission: Admission, at: int) -> None:
        wl.admission = admission
        uses = self._uses.get(admission.usage)
        if uses is None:  # one set per usage: no new object per reservation for the collector
            uses = self._uses[admission.usage] = frozenset([fr for fr, _ in admission.usage])
        wl.uses = uses
        wl.cluster_queue = cq.name
        wl.reserved_at = at
        wl.victim_key = (wl.priority, -at, wl.order[2])
        cq.hold(wl)
        self.memo.clear()
        for fr, q in admission.usage:
            add_usage(cq.node, fr, q)
        if self.afs is not None:
            self.afs.admitted(wl, admission)

    def _release(self, wl: Workload, cq: ClusterQueue) -> None:
        assert wl.admission is not None
        for fr, q in wl.admission.usage:
            remove_usage(cq.node, fr, q)
        if self.afs is not None:
            self.afs.admitted(wl, wl.admission, -1)
        cq.drop(wl)
        wl.admission = None
        wl.uses = NO_USES
        self.memo.clear()

    def condition_written(self, wl: Workload) -> None:
        """Kueue wrote a new ``QuotaReserved`` condition on a pending workload: an event on its ClusterQueue."""
        self._status_event(wl.cluster_queue)

    def _status_event(self, name: str) -> None:
        """An event on a workload of ClusterQueue ``name``: a nested one reconciles later (controller/cq_status.py)."""
        if self.status_writes is not None:
            self.status_writes.event(name)

    def _capacity_changed(self, cq: ClusterQueue) -> None:
        """Parked workloads of the tree wake: before the next cycle, or with clocks one requeue
        batch later (``Clock.batch``)."""
        root = self.queues.root_of[cq.name]
        if self.clock is not None:
            self.clock.batch(root)
        else:
            self.queues.capacity_changed(root)


def _root_key(cq: ClusterQueue) -> str:
    """Names the cohort tree a ClusterQueue belongs to (a lone queue is its own tree)."""
    root = cq.node.root
    return f"cohort/{root.name}" if root.is_cohort else f"queue/{root.name}"
